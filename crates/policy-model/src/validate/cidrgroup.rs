//! `CiliumCIDRGroup` validation: what the API server enforces with the
//! 1.19 CRD (`pkg/k8s/apis/cilium.io/client/crds/v2/ciliumcidrgroups.yaml`,
//! generated from `cidrgroups_types.go`): a name that is a DNS subdomain
//! (custom resources), `spec.externalCIDRs` present (serde: PM005) with
//! every item `format: cidr` (prefix notation; Go's `net.ParseCIDR`).
//!
//! The agent would skip an unparsable CIDR with a warning
//! (`applyCIDRGroup`, `pkg/policy/k8s/cidr_group.go`), but the API server
//! never stores one, so porin rejects it as the cluster would.

use crate::codes;
use crate::model::CiliumCidrGroup;
use crate::route::Route;
use crate::validate::Findings;
use crate::validate::cilium::validate_metadata;
use crate::validate::text::parse_prefix;

pub(crate) fn validate_cidr_group(findings: &mut Findings, group: &CiliumCidrGroup) {
    validate_metadata(findings, "CiliumCIDRGroup", &group.metadata, true);
    let at = Route::root().key("spec").key("externalCIDRs");
    for (index, cidr) in group.spec.external_cidrs.iter().enumerate() {
        if let Err(problem) = parse_prefix(cidr) {
            let finding = findings.report(
                codes::CIDR,
                at.index(index),
                format!("externalCIDRs[{index}] `{cidr}` is not a CIDR: {problem}"),
            );
            if !cidr.contains('/') {
                finding.help = Some("use prefix notation, e.g. `192.0.2.1/32`".to_owned());
            }
        }
    }
}

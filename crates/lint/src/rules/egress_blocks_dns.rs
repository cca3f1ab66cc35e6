//! PR014 `egress-blocks-dns`: an endpoint with enforced egress cannot reach
//! kube-dns on port 53.

use porin_model::diagnostic::{Diagnostic, Severity};
use porin_model::{CodeInfo, Doc, Stage};

use super::Rule;
use super::is_user_rule;
use crate::Context;
use porin_compiler::explain::passes;
use porin_compiler::identity::Identity;
use porin_compiler::mapstate::Direction;
use porin_compiler::resolve::rule::proto;

/// The rule: its registry entry (code, name, default severity,
/// documentation) and its check.
pub const RULE: Rule = Rule {
    check,
    info: CodeInfo {
        code: "PR014",
        name: "egress-blocks-dns",
        severity: Severity::Warning,
        stage: Stage::Lint,
        needs_inventory: true,
        summary: "An endpoint with enforced egress cannot reach kube-dns on UDP/53.",
        doc: Some(Doc {
            what: "For every endpoint whose egress is enforced, looks up egress to every kube-dns \
endpoint of the inventory (`k8s-app=kube-dns` in `kube-system`) on UDP/53 and TCP/53.",
            why: "Name resolution fails, and with it nearly everything else; FQDN policies also need \
DNS to be allowed (and proxied) to learn addresses.",
            example: "egress:\n- toEndpoints: [{matchLabels: {app: db}}]",
            instead: "egress:\n- toEndpoints: [{matchLabels: {k8s:io.kubernetes.pod.namespace: kube-system, k8s-app: kube-dns}}]\n  toPorts: [{ports: [{port: \"53\", protocol: ANY}]}]",
            references: "Cilium docs \"DNS-based policies\"; semantics.md §3.3.",
        }),
    },
};

/// The kube-dns label the check looks for (`k8s-app=kube-dns` in
/// `kube-system`, the CoreDNS / kube-dns default).
pub const KUBE_DNS_LABEL: (&str, &str) = ("k8s-app", "kube-dns");

/// Reports endpoints whose egress blocks DNS to every kube-dns endpoint.
pub fn check(cx: &Context<'_>, out: &mut Vec<Diagnostic>) {
    let dns: Vec<u32> = cx
        .inventory
        .endpoints
        .iter()
        .enumerate()
        .filter(|(_, e)| {
            e.namespace.as_deref() == Some("kube-system")
                && e.labels.get(KUBE_DNS_LABEL.0).map(String::as_str) == Some(KUBE_DNS_LABEL.1)
        })
        .filter_map(|(i, _)| cx.table.endpoint_identity.get(i).copied())
        .collect();
    if dns.is_empty() {
        return;
    }
    for unit in &cx.units {
        if !unit.policy.egress.enforced || dns.contains(&unit.identity) {
            continue;
        }
        let blocked = dns.iter().all(|id| {
            let Ok(peer) = Identity::new(*id) else {
                return true;
            };
            // An auth-required DNS rule passes where the cluster runs
            // mutual authentication (kube-dns is a workload).
            let verdict = unit.state.lookup(Direction::Egress, peer, proto::UDP, 53).verdict;
            !passes(
                cx.inventory.settings.mesh_auth_mutual_enabled,
                verdict,
                unit.identity,
                *id,
            )
        });
        if !blocked {
            continue;
        }
        let egress_rule = unit
            .rules
            .iter()
            .copied()
            .find(|r| is_user_rule(cx, *r) && cx.rules()[*r].direction == Direction::Egress);
        let mut d = Diagnostic::new(
            RULE.info,
            format!(
                "endpoint `{}` has egress policy but cannot reach kube-dns on UDP/53; name resolution will fail",
                cx.unit_name(unit)
            ),
        );
        if let Some(origin) = egress_rule.and_then(|r| cx.origin(r)) {
            d.primary = Some(cx.rule_location(origin));
            d.notes
                .push(format!("egress is enforced by {}", cx.describe(origin)));
        }
        out.push(d.help(
            "add `- toEndpoints: [{matchLabels: {k8s:io.kubernetes.pod.namespace: kube-system, k8s-app: kube-dns}}]` with `toPorts: [{ports: [{port: \"53\", protocol: ANY}]}]`",
        ));
    }
}

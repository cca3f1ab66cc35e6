//! PR014 `egress-blocks-dns`: an endpoint with enforced egress cannot reach
//! kube-dns on port 53.

use porin_model::diagnostic::{Diagnostic, Severity};

use super::is_user_rule;
use crate::{Context, codes};
use porin_compiler::identity::Identity;
use porin_compiler::mapstate::Direction;
use porin_compiler::resolve::rule::proto;

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
            !unit
                .state
                .lookup(Direction::Egress, peer, proto::UDP, 53)
                .verdict
                .is_allowed()
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
            codes::EGRESS_BLOCKS_DNS,
            Severity::Warning,
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

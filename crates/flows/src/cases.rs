//! `porin test --from-flows`: a PolicyTest file whose cases are the
//! distinct flows of a recording with the verdicts Cilium recorded (a
//! regression suite recorded from production).
//!
//! A case is one (source, destination, protocol, port, family) of the
//! recording, its peers as `porin test` names them (`namespace/name` for
//! an endpoint, the first address seen for an address outside the
//! inventory, the entity word for a reserved peer). Its verdict is
//! `deny` when Cilium dropped any of its events by policy (a packet
//! forwarded at the source's egress and dropped at the destination's
//! ingress did not get through), `allow` otherwise. Redirects to the L7
//! proxy are recorded as forwarded: a case of a flow porin redirects
//! expects `allow` and fails with `redirect`, which says so.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use porin_compiler::compile::Compiled;
use porin_compiler::explain::Family;
use porin_compiler::identity::Identity;

use crate::observe::Recording;
use crate::record::Recorded;
use crate::resolve::PeerKey;
use crate::time::Timestamp;

/// What the file names besides its cases.
#[derive(Debug, Clone, Default)]
pub struct Header {
    /// The file's `name`.
    pub name: String,
    /// `policies[].path` entries (relative to the file).
    pub policies: Vec<String>,
    /// `inventory` entries (relative to the file).
    pub inventory: Vec<String>,
}

fn peer_text(compiled: &Compiled, key: PeerKey, ip: std::net::IpAddr) -> String {
    match key {
        PeerKey::Endpoint(index) => compiled
            .endpoints
            .get(index)
            .map(|e| e.display_name())
            .unwrap_or_default(),
        PeerKey::Reserved(id) => Identity::new(id)
            .ok()
            .and_then(Identity::reserved_name)
            .unwrap_or("world")
            .to_owned(),
        PeerKey::Address(_) => ip.to_string(),
    }
}

fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("\"{text}\""))
}

#[derive(Debug, Default)]
struct Case {
    denied: bool,
    flows: u64,
    first: Option<Timestamp>,
}

/// The PolicyTest file (YAML) of a recording resolved against `compiled`.
/// Returns the text and the number of cases.
pub fn policy_test(recording: &Recording, compiled: &Compiled, header: &Header) -> (String, usize) {
    let mut cases: BTreeMap<(String, String, u8, u16, Family), Case> = BTreeMap::new();
    for (key, seen) in &recording.flows {
        let from = peer_text(compiled, key.from[0], seen.from_ip);
        let to = peer_text(compiled, key.to[0], seen.to_ip);
        let case = cases
            .entry((from, to, key.proto, key.port, key.family))
            .or_default();
        case.denied |= key.recorded == Recorded::Denied;
        case.flows += seen.count;
        case.first = match (case.first, seen.first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    let mut text = format!(
        "# Recorded by `porin test --from-flows` from {}: {} distinct flows with\n# the verdicts Cilium recorded for them.\nkind: PolicyTest\nname: {}\n",
        recording.files.join(", "),
        cases.len(),
        quote(&header.name)
    );
    if !header.inventory.is_empty() {
        text.push_str("inventory:\n");
        for path in &header.inventory {
            let _ = writeln!(text, "- {}", quote(path));
        }
    }
    text.push_str("policies:\n");
    for path in &header.policies {
        let _ = writeln!(text, "- path: {}", quote(path));
    }
    text.push_str("cases:\n");
    for ((from, to, proto, port, family), case) in &cases {
        let protocol = porin_compiler::resolve::rule::proto::static_name(*proto);
        let port_field = if matches!(proto, 1 | 58) {
            format!("icmpType: {port}")
        } else {
            format!("port: {port}")
        };
        let family = match family {
            Family::V4 => "ipv4",
            Family::V6 => "ipv6",
        };
        let when = case
            .first
            .map(|t| format!(", first {t}"))
            .unwrap_or_default();
        let name = format!("{} recorded flows{when}", case.flows);
        let _ = writeln!(
            text,
            "- {{name: {}, from: {}, to: {}, protocol: {protocol}, {port_field}, family: {family}, expect: {}}}",
            quote(&name),
            quote(from),
            quote(to),
            if case.denied { "deny" } else { "allow" }
        );
    }
    (text, cases.len())
}

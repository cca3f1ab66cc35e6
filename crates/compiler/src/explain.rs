//! The reference evaluator: decides a flow from compiled map state and
//! explains the decision.
//!
//! A flow from A to B is checked where Cilium checks it
//! (docs/policy-tests.md, `policy.LookupFlow` in `pkg/policy/lookup.go`):
//! at A's egress when A is an endpoint, and at B's ingress when B is an
//! endpoint, each with the datapath lookup of §5.4
//! ([`crate::mapstate::MapState::lookup`]). The flow is `deny` if either
//! check denies, `redirect` if no check denies and one redirects, `allow`
//! otherwise. A direction no policy selects holds the allow-all key, so it
//! allows.
//!
//! Authentication: a matched entry that requires authentication drops the
//! packet in the datapath until the auth map holds an entry; porin has no
//! auth map, so such a flow is `deny`, and the explanation says so.

use std::fmt;
use std::net::IpAddr;

use serde::Serialize;

use crate::compile::{Compiled, EndpointPolicy};
use crate::identity::Identity;
use crate::mapstate::{Decision, DenyReason, Direction, MatchedEntry, Verdict};
use crate::resolve::lower::{LOCALHOST_ORIGIN_NAME, Origin};
use crate::resolve::rule::proto;

/// A flow end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// An endpoint of the compilation (index into `Compiled::endpoints`).
    Endpoint(usize),
    /// An address outside the endpoints, with its ipcache identity.
    Address(IpAddr, u32),
    /// A reserved identity (entity word).
    Reserved(String, u32),
}

/// Why a peer could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown peer `{0}`: not an endpoint (namespace/name or name), an IP address or an entity (world, host, remote-node, kube-apiserver, health, init, ingress, unmanaged)"
)]
pub struct UnknownPeer(pub String);

impl Peer {
    /// Parses a peer of docs/policy-tests.md: `namespace/name`, `name`,
    /// an IP address, or an entity word.
    pub fn parse(text: &str, compiled: &Compiled) -> Result<Self, UnknownPeer> {
        let text = text.trim();
        if let Ok(ip) = text.parse::<IpAddr>() {
            if let Some(index) = compiled.endpoints.iter().position(|e| e.ips.contains(&ip)) {
                return Ok(Self::Endpoint(index));
            }
            return Ok(Self::Address(ip, compiled.identity_of_ip(ip)));
        }
        let (namespace, name) = match text.split_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, text),
        };
        if let Some(index) = compiled
            .endpoints
            .iter()
            .position(|e| e.namespace.as_deref() == namespace && e.name == name)
        {
            return Ok(Self::Endpoint(index));
        }
        if namespace.is_none()
            && let Some(identity) = Identity::from_reserved_name(text)
            && text != "overlay-to-encrypt"
        {
            return Ok(Self::Reserved(text.to_owned(), identity.get()));
        }
        Err(UnknownPeer(text.to_owned()))
    }

    /// The identity of the peer.
    pub fn identity(&self, compiled: &Compiled) -> u32 {
        match self {
            Self::Endpoint(index) => compiled.endpoints.get(*index).map_or(0, |e| e.identity),
            Self::Address(_, id) | Self::Reserved(_, id) => *id,
        }
    }

    /// A display name.
    pub fn describe(&self, compiled: &Compiled) -> String {
        match self {
            Self::Endpoint(index) => compiled
                .endpoints
                .get(*index)
                .map_or_else(String::new, EndpointPolicy::display_name),
            Self::Address(ip, id) => format!("{ip} (identity {id})"),
            Self::Reserved(name, id) => format!("{name} (identity {id})"),
        }
    }
}

/// The verdict of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowVerdict {
    /// Allowed.
    Allow,
    /// Denied.
    Deny,
    /// Allowed through an L7 proxy.
    Redirect,
}

impl fmt::Display for FlowVerdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Redirect => "redirect",
        })
    }
}

impl FlowVerdict {
    /// Parses `allow`, `deny` or `redirect`.
    pub fn parse(text: &str) -> Option<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "allow" => Some(Self::Allow),
            "deny" => Some(Self::Deny),
            "redirect" => Some(Self::Redirect),
            _ => None,
        }
    }
}

/// A flow to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    /// Source.
    pub from: Peer,
    /// Destination.
    pub to: Peer,
    /// IP protocol number.
    pub proto: u8,
    /// Destination port, or ICMP type for ICMP/ICMPv6.
    pub port: u16,
}

/// One check of a flow (one endpoint, one direction).
#[derive(Debug, Clone)]
pub struct Check {
    /// The endpoint checked.
    pub endpoint: String,
    /// The direction.
    pub direction: Direction,
    /// The peer identity looked up.
    pub peer_identity: u32,
    /// Whether the direction is enforced.
    pub enforced: bool,
    /// The datapath decision.
    pub decision: Decision,
    /// The verdict this check contributes.
    pub verdict: FlowVerdict,
}

/// The evaluation of a flow.
#[derive(Debug, Clone)]
pub struct Evaluation {
    /// The overall verdict.
    pub verdict: FlowVerdict,
    /// The checks made (zero, one or two).
    pub checks: Vec<Check>,
}

fn check_verdict(decision: &Decision) -> FlowVerdict {
    match decision.verdict {
        Verdict::Allow => FlowVerdict::Allow,
        Verdict::Redirect { .. } => FlowVerdict::Redirect,
        Verdict::Deny { .. } | Verdict::AuthRequired { .. } => FlowVerdict::Deny,
    }
}

/// Decides a flow.
pub fn evaluate(compiled: &Compiled, flow: &Flow) -> Evaluation {
    let mut checks = Vec::new();
    let mut sides = Vec::new();
    if let Peer::Endpoint(index) = flow.from {
        sides.push((index, Direction::Egress, flow.to.identity(compiled)));
    }
    if let Peer::Endpoint(index) = flow.to {
        sides.push((index, Direction::Ingress, flow.from.identity(compiled)));
    }
    for (index, direction, peer_identity) in sides {
        let Some(endpoint) = compiled.endpoints.get(index) else {
            continue;
        };
        let identity = Identity::new(peer_identity).unwrap_or(Identity::WORLD);
        let decision = endpoint
            .state
            .lookup(direction, identity, flow.proto, flow.port);
        let enforced = match direction {
            Direction::Ingress => endpoint.enforcement.ingress,
            Direction::Egress => endpoint.enforcement.egress,
        };
        checks.push(Check {
            endpoint: endpoint.display_name(),
            direction,
            peer_identity,
            enforced,
            verdict: check_verdict(&decision),
            decision,
        });
    }
    let verdict = if checks.iter().any(|c| c.verdict == FlowVerdict::Deny) {
        FlowVerdict::Deny
    } else if checks.iter().any(|c| c.verdict == FlowVerdict::Redirect) {
        FlowVerdict::Redirect
    } else {
        FlowVerdict::Allow
    };
    Evaluation { verdict, checks }
}

fn describe_key(matched: &MatchedEntry) -> String {
    let key = &matched.key;
    let peer = if key.identity().get() == 0 {
        "any peer".to_owned()
    } else {
        format!("identity {}", key.identity().get())
    };
    let ports = if key.proto() == 0 {
        "any protocol".to_owned()
    } else if key.port_prefix_len() == 0 {
        format!("{} any port", proto::name(key.proto()))
    } else if key.port_prefix_len() == 16 {
        format!("{}/{}", proto::name(key.proto()), key.port())
    } else {
        format!(
            "{}/{}-{}",
            proto::name(key.proto()),
            key.port(),
            key.end_port()
        )
    };
    format!("{} key ({peer}, {ports})", key.direction())
}

/// Explains one check in a sentence or two.
pub fn explain_check(compiled: &Compiled, check: &Check) -> String {
    let subject = format!("{} {}", check.endpoint, check.direction);
    if !check.enforced {
        return format!("{subject}: not enforced (no policy selects it), allowed");
    }
    let Some(chosen) = &check.decision.chosen else {
        return format!(
            "{subject}: no rule allows identity {} (default deny)",
            check.peer_identity
        );
    };
    let mut origins: Vec<String> = chosen
        .entry
        .origins
        .iter()
        .filter_map(|id| compiled.origin(*id))
        .map(|o| o.describe())
        .collect();
    if origins.is_empty() {
        origins.push("an unknown rule".to_owned());
    }
    let what = match check.decision.verdict {
        Verdict::Allow => "allowed".to_owned(),
        Verdict::Redirect { proxy_port } => format!("redirected to proxy port {proxy_port}"),
        Verdict::Deny {
            reason: DenyReason::Rule,
        } => "denied".to_owned(),
        Verdict::Deny {
            reason: DenyReason::NoEntry,
        } => "denied (no entry)".to_owned(),
        Verdict::AuthRequired { auth_type } => format!(
            "dropped: authentication type {} required (porin has no auth map)",
            auth_type.get()
        ),
    };
    let mut sentence = format!(
        "{subject}: {what} by {} from {}",
        describe_key(chosen),
        origins.join("; ")
    );
    if chosen
        .entry
        .origins
        .iter()
        .filter_map(|id| compiled.origin(*id))
        .any(is_localhost_origin)
    {
        sentence.push_str(" (");
        sentence.push_str(LOCALHOST_REASON);
        sentence.push(')');
    } else if check.direction == Direction::Ingress
        && check.peer_identity == Identity::HOST.get()
        && matches!(check.decision.verdict, Verdict::Redirect { .. })
        && has_localhost_entry(compiled, &check.endpoint)
    {
        sentence.push_str(" (");
        sentence.push_str(LOCALHOST_L7_NOTE);
        sentence.push(')');
    }
    sentence
}

/// Why the host is redirected although it may reach the endpoint: the
/// redirect outranks the host allow by precedence, and the agent gives the
/// host an L7 allow-all instead (`createL4IngressFilter`'s `hostWildcardL7`,
/// `pkg/policy/l4.go`; test `TestL7WithLocalHostWildcard`).
pub const LOCALHOST_L7_NOTE: &str = "allow-localhost: the proxy lets every request from the host through unless a rule names the host (reserved:host) at L7 itself; porin does not evaluate L7 requests";

/// Whether the endpoint's map state holds the host allow of
/// `allow-localhost` (possibly merged with policy origins).
fn has_localhost_entry(compiled: &Compiled, endpoint: &str) -> bool {
    compiled.endpoint(endpoint).is_some_and(|e| {
        e.state.iter().any(|(key, entry)| {
            key.direction() == Direction::Ingress
                && key.identity() == Identity::HOST
                && key.proto() == proto::ANY
                && entry
                    .origins
                    .iter()
                    .filter_map(|id| compiled.origin(*id))
                    .any(is_localhost_origin)
        })
    })
}

/// Why the host reaches an endpoint its ingress policy does not allow it
/// into (`determineAllowLocalhostIngress`, `pkg/policy/mapstate.go`;
/// `daemon/cmd/daemon.go` turns `allow-localhost=auto` into `always` in
/// Kubernetes mode).
pub const LOCALHOST_REASON: &str = "allow-localhost: Cilium in Kubernetes mode (allow-localhost=auto) or with allow-localhost=always lets the host reach local endpoints whatever their ingress policy; set `allowLocalhost: policy` in the inventory or test file if the agent runs with --allow-localhost=policy";

fn is_localhost_origin(origin: &Origin) -> bool {
    origin.kind == "Synthetic" && origin.name == LOCALHOST_ORIGIN_NAME
}

/// Explains an evaluation: one sentence per check.
pub fn explain(compiled: &Compiled, evaluation: &Evaluation) -> String {
    if evaluation.checks.is_empty() {
        return "neither end is an endpoint of the inventory: nothing checks this flow".to_owned();
    }
    evaluation
        .checks
        .iter()
        .map(|c| explain_check(compiled, c))
        .collect::<Vec<_>>()
        .join("; ")
}

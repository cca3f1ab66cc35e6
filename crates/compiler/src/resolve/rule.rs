//! The resolve stage's rule IR: one [`PolicyRule`] per ingress / egress /
//! ingressDeny / egressDeny item, like Cilium's `types.PolicyEntry`
//! (`pkg/policy/types/policyentry.go`, built by `utils.RulesToPolicyEntries`
//! and `k8s.ParseNetworkPolicy`).

use porin_model::model::{IcmpFamily, icmp_type_number};
use serde::Serialize;

use crate::mapstate::Direction;
use crate::selector::Selector;

/// IP protocol numbers.
pub mod proto {
    /// Any protocol (L3-only keys).
    pub const ANY: u8 = 0;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// IGMP.
    pub const IGMP: u8 = 2;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// VRRP.
    pub const VRRP: u8 = 112;
    /// SCTP.
    pub const SCTP: u8 = 132;

    /// `api.SupportedProtocols()`: what `ANY` in `toPorts` expands to.
    pub const ANY_EXPANSION: [u8; 3] = [TCP, UDP, SCTP];

    /// The name of a protocol number, without allocating (`?` for numbers
    /// porin never puts in a key).
    pub fn static_name(proto: u8) -> &'static str {
        match proto {
            ANY => "ANY",
            ICMP => "ICMP",
            IGMP => "IGMP",
            TCP => "TCP",
            UDP => "UDP",
            ICMPV6 => "ICMPv6",
            VRRP => "VRRP",
            SCTP => "SCTP",
            _ => "?",
        }
    }

    /// The name of a protocol number for output.
    pub fn name(proto: u8) -> String {
        match proto {
            ANY => "ANY".to_owned(),
            ICMP => "ICMP".to_owned(),
            IGMP => "IGMP".to_owned(),
            TCP => "TCP".to_owned(),
            UDP => "UDP".to_owned(),
            ICMPV6 => "ICMPv6".to_owned(),
            VRRP => "VRRP".to_owned(),
            SCTP => "SCTP".to_owned(),
            other => other.to_string(),
        }
    }

    /// Whether Cilium's conntrack tracks packets of IP protocol `proto`
    /// carried in IPv6 (`ipv6`) or IPv4, so that they reach policy: TCP,
    /// UDP, SCTP, ICMP in IPv4 and ICMPv6 in IPv6; VRRP and IGMP (looked up
    /// with port 0) only with `enable-extended-ip-protocols` (`extended`).
    /// Every other packet is dropped before policy with
    /// `DROP_CT_UNKNOWN_PROTO` (`bpf/lib/conntrack.h`; the host firewall's
    /// own test `bpf/tests/hostfw_igmp.c` expects the drop without the flag
    /// and a port-0 conntrack entry with it). porin's datapath drops them
    /// alike (DATAPATH.md §4).
    pub fn tracked(proto: u8, ipv6: bool, extended: bool) -> bool {
        match proto {
            TCP | UDP | SCTP => true,
            ICMP => !ipv6,
            ICMPV6 => ipv6,
            VRRP | IGMP => extended,
            _ => false,
        }
    }
}

/// The L7 parser of a port rule (`policy.L7ParserType`), in promotion
/// order where it applies (None → TLS → HTTP/Kafka/proxylib).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum L7Parser {
    /// No L7: plain allow.
    None,
    /// TLS interception / SNI only.
    Tls,
    /// HTTP rules.
    Http,
    /// Kafka rules.
    Kafka,
    /// A proxylib parser (`l7proto`).
    Proxylib(String),
    /// DNS rules.
    Dns,
    /// A custom Envoy listener (`listener`), `ParserTypeCRD`.
    Crd,
}

impl L7Parser {
    /// The listener priority of the parser (`ListenerPriority*` in
    /// `pkg/policy/types/entry.go`); `None` for no redirect.
    pub fn default_listener_priority(&self) -> Option<u8> {
        match self {
            Self::None => None,
            Self::Http => Some(101),
            Self::Kafka => Some(106),
            Self::Proxylib(_) => Some(111),
            Self::Tls => Some(116),
            Self::Dns => Some(121),
            Self::Crd => Some(126),
        }
    }

    /// A short name for output.
    pub fn name(&self) -> String {
        match self {
            Self::None => "none".to_owned(),
            Self::Tls => "tls".to_owned(),
            Self::Http => "http".to_owned(),
            Self::Kafka => "kafka".to_owned(),
            Self::Proxylib(name) => name.clone(),
            Self::Dns => "dns".to_owned(),
            Self::Crd => "crd".to_owned(),
        }
    }
}

/// The L7 side of a port rule, as far as the map state needs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct L7 {
    /// The parser.
    pub parser: L7Parser,
    /// Explicit listener priority (`listener.priority`, 1..=100), if any.
    pub listener_priority: Option<u8>,
    /// The listener reference `kind/name` of a CRD listener.
    pub listener: Option<String>,
    /// How many L7 rules the port rule lists (HTTP/Kafka/DNS/l7 items).
    pub rule_count: usize,
}

impl L7 {
    /// No L7.
    pub fn none() -> Self {
        Self {
            parser: L7Parser::None,
            listener_priority: None,
            listener: None,
            rule_count: 0,
        }
    }

    /// The effective listener priority of a redirect.
    pub fn listener_priority(&self) -> Option<u8> {
        self.listener_priority
            .or_else(|| self.parser.default_listener_priority())
    }
}

/// A port as a rule names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(untagged)]
pub enum PortRef {
    /// A number; 0 = all ports of the protocol.
    Number(u16),
    /// A named port (lower case).
    Named(String),
}

/// One `ports[]` item (or ICMP field), protocol still possibly `ANY`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct PortSpec {
    /// The port (or ICMP type).
    pub port: PortRef,
    /// Inclusive range end; 0 or ≤ port = single port.
    pub end_port: u16,
    /// Protocol number; [`proto::ANY`] expands to TCP, UDP and SCTP.
    pub proto: u8,
    /// The L7 side of the port rule.
    pub l7: L7,
}

/// Mutual-authentication requirement (`authentication.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AuthMode {
    /// `disabled`: explicit "no auth" (type 0, explicit).
    Disabled,
    /// `required`: SPIRE (type 1).
    Required,
    /// `test-always-fail` (type 2).
    TestAlwaysFail,
}

impl AuthMode {
    /// The auth type number (`AuthType`).
    pub fn auth_type(self) -> u8 {
        match self {
            Self::Disabled => 0,
            Self::Required => 1,
            Self::TestAlwaysFail => 2,
        }
    }
}

/// One direction item of a policy, ready for resolution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyRule {
    /// Origin id (index into the compilation's origin table).
    pub origin: u32,
    /// Subject selector (namespace pinned for namespaced policies).
    pub subject: Selector,
    /// A host policy (`nodeSelector`): the subject selects host endpoints
    /// only, and an endpoint rule never selects a host endpoint
    /// (`pkg/policy/repository.go`: "NodeSelector can only match nodes,
    /// EndpointSelector only pods").
    pub host: bool,
    /// Direction.
    pub direction: Direction,
    /// A deny rule.
    pub deny: bool,
    /// Whether the rule puts its subjects into default deny (§3.3).
    pub default_deny: bool,
    /// Peers: `None` selects nothing (Cilium's nil L3), `Some(list)` the
    /// union of the selectors (an empty list selects nothing).
    pub peers: Option<Vec<Selector>>,
    /// Whether the item has no L4 part at all (no `toPorts`, no `icmps`):
    /// then it is L3-only (any protocol, any port). An item with an L4 part
    /// whose ports are empty allows nothing.
    pub l3_only: bool,
    /// Ports (used unless `l3_only`).
    pub ports: Vec<PortSpec>,
    /// Authentication requirement.
    pub auth: Option<AuthMode>,
    /// Policy-log cookie (0 = none).
    pub cookie: u32,
    /// A ClusterNetworkPolicy rule's place among the tiers: such rules
    /// are left out of the ordinary resolution and decided by
    /// [`crate::tier`].
    pub tier: Option<crate::tier::place::TierRule>,
}

impl PolicyRule {
    /// Whether the rule's subject may select an identity of this number:
    /// host rules select the host identity (1) only, the other rules
    /// everything else ([`PolicyRule::host`]).
    pub fn may_select(&self, identity: u32) -> bool {
        self.host == (identity == crate::identity::Identity::HOST.get())
    }
}

/// The ICMP type number of a type name or number (`ICMPField.PortProtocol`).
/// Names come from porin-model's one table (`icmpIpv4TypeNameToCode` /
/// `icmpIpv6TypeNameToCode`, `pkg/policy/api/icmp.go`); any text Rust reads
/// as a `u8` is that number.
pub fn icmp_type(text: &str, ipv6: bool) -> Option<u8> {
    if let Ok(number) = text.parse::<u8>() {
        return Some(number);
    }
    let family = if ipv6 {
        IcmpFamily::IPv6
    } else {
        IcmpFamily::IPv4
    };
    icmp_type_number(family, text)
}

/// Parses a port string as Cilium does (`strconv.ParseUint(s, 0, 16)`):
/// decimal, `0x` hex, `0o`/leading-zero octal, `0b` binary. Returns `None`
/// for a name or an out-of-range value.
pub fn parse_port_number(text: &str) -> Option<u16> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let (digits, radix) = if let Some(rest) = text.strip_prefix("0x").or(text.strip_prefix("0X")) {
        (rest, 16)
    } else if let Some(rest) = text.strip_prefix("0o").or(text.strip_prefix("0O")) {
        (rest, 8)
    } else if let Some(rest) = text.strip_prefix("0b").or(text.strip_prefix("0B")) {
        (rest, 2)
    } else if text.len() > 1 && text.starts_with('0') {
        // (quirk) docs/semantics.md §2.2: a leading zero means octal.
        (&text[1..], 8)
    } else {
        (text, 10)
    };
    let digits = digits.replace('_', "");
    u16::from_str_radix(&digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icmp_names_follow_pkg_policy_api_icmp_go() {
        assert_eq!(icmp_type("EchoRequest", false), Some(8));
        assert_eq!(icmp_type("EchoRequest", true), Some(128));
        assert_eq!(icmp_type("8", false), Some(8));
        assert_eq!(icmp_type("PacketTooBig", false), None);
    }

    #[test]
    fn ports_parse_like_strconv_parse_uint_base_0() {
        assert_eq!(parse_port_number("80"), Some(80));
        assert_eq!(parse_port_number("010"), Some(8), "octal quirk");
        assert_eq!(parse_port_number("0"), Some(0));
        assert_eq!(parse_port_number("0x50"), Some(80));
        assert_eq!(parse_port_number("65536"), None);
        assert_eq!(parse_port_number("http"), None);
    }
}

//! The flow record porin keeps of one Hubble event: the fields of
//! `flow.Flow` (Cilium `api/v1/flow/flow.proto`) that deciding and
//! reporting a flow need, validated and owned. Everything else of the
//! event (Ethernet, TCP flags, L7 payloads, trace points) is dropped while
//! parsing, so a record is a few hundred bytes whatever the line held.

use std::fmt;
use std::net::IpAddr;

use crate::time::Timestamp;

/// What Cilium did with the packet (`flow.Verdict`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// `VERDICT_UNKNOWN` (0).
    Unknown,
    /// `FORWARDED` (1).
    Forwarded,
    /// `DROPPED` (2).
    Dropped,
    /// `ERROR` (3).
    Error,
    /// `AUDIT` (4): policy audit mode, would have been dropped.
    Audit,
    /// `REDIRECTED` (5): sent to the L7 proxy.
    Redirected,
    /// `TRACED` (6).
    Traced,
    /// `TRANSLATED` (7).
    Translated,
}

impl Verdict {
    /// The verdict of a proto enum name or number.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "VERDICT_UNKNOWN" => Self::Unknown,
            "FORWARDED" => Self::Forwarded,
            "DROPPED" => Self::Dropped,
            "ERROR" => Self::Error,
            "AUDIT" => Self::Audit,
            "REDIRECTED" => Self::Redirected,
            "TRACED" => Self::Traced,
            "TRANSLATED" => Self::Translated,
            _ => return None,
        })
    }

    /// The verdict of a proto enum number.
    pub fn from_number(n: i64) -> Option<Self> {
        Some(match n {
            0 => Self::Unknown,
            1 => Self::Forwarded,
            2 => Self::Dropped,
            3 => Self::Error,
            4 => Self::Audit,
            5 => Self::Redirected,
            6 => Self::Traced,
            7 => Self::Translated,
            _ => return None,
        })
    }

    /// The proto enum name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Unknown => "VERDICT_UNKNOWN",
            Self::Forwarded => "FORWARDED",
            Self::Dropped => "DROPPED",
            Self::Error => "ERROR",
            Self::Audit => "AUDIT",
            Self::Redirected => "REDIRECTED",
            Self::Traced => "TRACED",
            Self::Translated => "TRANSLATED",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `flow.TrafficDirection`: which endpoint's policy the event reports
/// (egress at the source, ingress at the destination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrafficDirection {
    /// `TRAFFIC_DIRECTION_UNKNOWN` (0).
    Unknown,
    /// `INGRESS` (1).
    Ingress,
    /// `EGRESS` (2).
    Egress,
}

/// One policy a flow cites (`flow.Policy` of `*_allowed_by`, `*_denied_by`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PolicyName {
    /// `CiliumNetworkPolicy`, `CiliumClusterwideNetworkPolicy`, `NetworkPolicy` (may be empty).
    pub kind: String,
    /// Namespace (empty for cluster-wide policies).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl fmt::Display for PolicyName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.kind.is_empty() {
            write!(f, "{} ", self.kind)?;
        }
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// One end of a flow (`flow.Endpoint` plus its address from `flow.IP`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowEnd {
    /// The address (`IP.source` or `IP.destination`).
    pub ip: Option<IpAddr>,
    /// Kubernetes namespace (empty outside a pod).
    pub namespace: Option<String>,
    /// Pod name.
    pub pod_name: Option<String>,
    /// The first workload's name (`workloads[0].name`: Deployment, ...).
    pub workload: Option<String>,
    /// Identity labels in `source:key=value` form (`k8s:app=web`, `reserved:world`).
    pub labels: Vec<String>,
    /// The security identity Cilium gave the end (0 when absent).
    pub identity: u32,
}

impl FlowEnd {
    /// `namespace/pod`, else the address, else `?`.
    pub fn describe(&self) -> String {
        match (&self.namespace, &self.pod_name, &self.ip) {
            (Some(ns), Some(pod), Some(ip)) => format!("{ns}/{pod} ({ip})"),
            (Some(ns), Some(pod), None) => format!("{ns}/{pod}"),
            (_, _, Some(ip)) => ip.to_string(),
            _ => "?".to_owned(),
        }
    }
}

/// The L4 part: protocol number and destination port (or ICMP type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L4 {
    /// IP protocol number (6 TCP, 17 UDP, 132 SCTP, 1 ICMP, 58 ICMPv6).
    pub proto: u8,
    /// Destination port; the ICMP type for ICMP.
    pub port: u16,
}

/// One recorded L3/L4 flow event, request direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRecord {
    /// When it was observed.
    pub time: Option<Timestamp>,
    /// Cilium's verdict.
    pub verdict: Verdict,
    /// The drop reason's name (`POLICY_DENIED`), for `DROPPED`.
    pub drop_reason: Option<String>,
    /// Source.
    pub source: FlowEnd,
    /// Destination.
    pub destination: FlowEnd,
    /// Protocol and port.
    pub l4: L4,
    /// Which endpoint's policy the event reports.
    pub direction: TrafficDirection,
    /// The policies that allowed it (`ingress_allowed_by`, `egress_allowed_by`).
    pub allowed_by: Vec<PolicyName>,
    /// The policies that denied it (`ingress_denied_by`, `egress_denied_by`).
    pub denied_by: Vec<PolicyName>,
}

/// What a recorded verdict says about policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Recorded {
    /// Policy let it through (`FORWARDED`, `REDIRECTED`).
    Allowed,
    /// Policy dropped it (`DROPPED` with a policy reason, or `AUDIT`).
    Denied,
}

/// The drop reasons that are policy decisions (`flow.DropReason`):
/// `POLICY_DENIED` (133, no allow), `POLICY_DENY` (181, a deny rule),
/// `AUTH_REQUIRED` (189, mutual authentication missing).
pub const POLICY_DROP_REASONS: [(&str, u32); 3] = [
    ("POLICY_DENIED", 133),
    ("POLICY_DENY", 181),
    ("AUTH_REQUIRED", 189),
];

impl FlowRecord {
    /// What the recording says policy decided, `None` when the event is no
    /// policy decision (a drop for another reason, `TRACED`, `ERROR`, ...).
    pub fn recorded(&self) -> Option<Recorded> {
        match self.verdict {
            Verdict::Forwarded | Verdict::Redirected => Some(Recorded::Allowed),
            Verdict::Audit => Some(Recorded::Denied),
            Verdict::Dropped => self
                .drop_reason
                .as_deref()
                .is_some_and(|r| POLICY_DROP_REASONS.iter().any(|(name, _)| *name == r))
                .then_some(Recorded::Denied),
            Verdict::Unknown | Verdict::Error | Verdict::Traced | Verdict::Translated => None,
        }
    }
}

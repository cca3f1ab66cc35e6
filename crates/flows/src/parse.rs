//! One line of `hubble observe -o json` / `-o jsonpb` (or a Hubble
//! exporter file) to a [`FlowRecord`], or the reason it is skipped.
//!
//! The line is a `flow.Flow` (`-o json`) or a `GetFlowsResponse` with
//! the flow under `flow` (`-o jsonpb`, the exporter), as protojson writes
//! them (Cilium `api/v1/flow/flow.proto`, `api/v1/observer/observer.proto`).
//! Field names are accepted as protojson accepts them: the proto name
//! (`pod_name`, what Hubble writes: `UseProtoNames`) or its lowerCamelCase
//! JSON name (`podName`); enums by name or number. Unknown fields are
//! ignored, as a newer Hubble adds fields.

use std::net::IpAddr;

use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::record::{
    FlowEnd, FlowRecord, L4, POLICY_DROP_REASONS, PolicyName, TrafficDirection, Verdict,
};
use crate::time::Timestamp;

/// Why a well-formed event is not replayed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Skip {
    /// A reply (`is_reply: true`): conntrack lets it through whatever the
    /// policy, so no policy decides it.
    Reply,
    /// An L7 (`Type: L7`) or socket (`SOCK`) event: the L3/L4 event of the
    /// same connection carries the policy verdict.
    NotL3L4,
    /// No L4 header porin decides (no `l4`, or no `IP`: ARP, fragments...).
    NoL4,
    /// A `GetFlowsResponse` that is no flow (`node_status`, `lost_events`,
    /// agent and debug events).
    NotAFlow,
}

impl Skip {
    /// Every reason, in report order.
    pub const ALL: [Skip; 4] = [Skip::Reply, Skip::NotL3L4, Skip::NoL4, Skip::NotAFlow];

    /// How the count of the reason is printed.
    pub const fn describe(self) -> &'static str {
        match self {
            Skip::Reply => "replies",
            Skip::NotL3L4 => "L7 and socket events",
            Skip::NoL4 => "events without an IP or L4 header",
            Skip::NotAFlow => "non-flow events (node status, lost events, agent events)",
        }
    }

    /// A stable key for JSON.
    pub const fn key(self) -> &'static str {
        match self {
            Skip::Reply => "replies",
            Skip::NotL3L4 => "notL3L4",
            Skip::NoL4 => "noL4",
            Skip::NotAFlow => "notAFlow",
        }
    }
}

/// What one line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A flow to replay.
    Flow(Box<FlowRecord>),
    /// A well-formed event that is not replayed.
    Skipped(Skip),
}

/// Why a line is not a Hubble event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based column in the line (1 when the whole line is wrong).
    pub column: usize,
    /// What is wrong, naming the field.
    pub message: String,
}

/// A proto enum as protojson writes it: its name, or its number.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum EnumValue {
    Name(String),
    Number(i64),
}

#[derive(Debug, Default, Deserialize)]
struct JsonPolicy {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    kind: String,
}

#[derive(Debug, Default, Deserialize)]
struct JsonWorkload {
    #[serde(default)]
    name: String,
}

#[derive(Debug, Default, Deserialize)]
struct JsonEndpoint {
    #[serde(default)]
    identity: u32,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    labels: Vec<String>,
    #[serde(default, alias = "podName")]
    pod_name: String,
    #[serde(default)]
    workloads: Vec<JsonWorkload>,
}

#[derive(Debug, Default, Deserialize)]
struct JsonIp {
    #[serde(default)]
    source: String,
    #[serde(default)]
    destination: String,
    #[serde(default, rename = "ipVersion", alias = "ip_version")]
    ip_version: Option<EnumValue>,
}

#[derive(Debug, Default, Deserialize)]
struct JsonPorts {
    #[serde(default, alias = "destinationPort")]
    destination_port: u32,
}

#[derive(Debug, Default, Deserialize)]
struct JsonIcmp {
    #[serde(default, rename = "type")]
    kind: u32,
}

#[derive(Debug, Default, Deserialize)]
struct JsonL4 {
    #[serde(rename = "TCP")]
    tcp: Option<JsonPorts>,
    #[serde(rename = "UDP")]
    udp: Option<JsonPorts>,
    #[serde(rename = "SCTP")]
    sctp: Option<JsonPorts>,
    #[serde(rename = "ICMPv4")]
    icmpv4: Option<JsonIcmp>,
    #[serde(rename = "ICMPv6")]
    icmpv6: Option<JsonIcmp>,
}

/// A flow.Flow, or a GetFlowsResponse (whose `flow` holds the flow; its
/// other fields are the response's own).
#[derive(Debug, Default, Deserialize)]
struct JsonFlow {
    flow: Option<Box<JsonFlow>>,
    node_status: Option<IgnoredAny>,
    lost_events: Option<IgnoredAny>,
    agent_event: Option<IgnoredAny>,
    debug_event: Option<IgnoredAny>,

    time: Option<String>,
    verdict: Option<EnumValue>,
    #[serde(alias = "dropReasonDesc")]
    drop_reason_desc: Option<EnumValue>,
    #[serde(alias = "dropReason")]
    drop_reason: Option<u32>,
    #[serde(rename = "IP")]
    ip: Option<JsonIp>,
    l4: Option<JsonL4>,
    source: Option<JsonEndpoint>,
    destination: Option<JsonEndpoint>,
    #[serde(rename = "Type", alias = "type")]
    kind: Option<EnumValue>,
    l7: Option<IgnoredAny>,
    #[serde(alias = "isReply")]
    is_reply: Option<bool>,
    reply: Option<bool>,
    #[serde(alias = "trafficDirection")]
    traffic_direction: Option<EnumValue>,
    #[serde(default, alias = "ingressAllowedBy")]
    ingress_allowed_by: Vec<JsonPolicy>,
    #[serde(default, alias = "egressAllowedBy")]
    egress_allowed_by: Vec<JsonPolicy>,
    #[serde(default, alias = "ingressDeniedBy")]
    ingress_denied_by: Vec<JsonPolicy>,
    #[serde(default, alias = "egressDeniedBy")]
    egress_denied_by: Vec<JsonPolicy>,
}

fn field_error(field: &str, message: impl std::fmt::Display) -> ParseError {
    ParseError {
        column: 1,
        message: format!("field `{field}`: {message}"),
    }
}

fn enum_name<'a>(
    value: &'a EnumValue,
    field: &str,
    names: &[(&'a str, i64)],
) -> Result<&'a str, ParseError> {
    match value {
        EnumValue::Name(name) => names
            .iter()
            .find(|(n, _)| n == name)
            .map(|(n, _)| *n)
            .ok_or_else(|| field_error(field, format!("`{name}` is not a value of the enum"))),
        EnumValue::Number(n) => names
            .iter()
            .find(|(_, v)| v == n)
            .map(|(name, _)| *name)
            .ok_or_else(|| field_error(field, format!("{n} is not a value of the enum"))),
    }
}

fn end(endpoint: Option<JsonEndpoint>, ip: Option<IpAddr>) -> FlowEnd {
    let endpoint = endpoint.unwrap_or_default();
    let some = |s: String| (!s.is_empty()).then_some(s);
    FlowEnd {
        ip,
        namespace: some(endpoint.namespace),
        pod_name: some(endpoint.pod_name),
        workload: endpoint
            .workloads
            .into_iter()
            .next()
            .and_then(|w| some(w.name)),
        labels: endpoint.labels,
        identity: endpoint.identity,
    }
}

fn address(text: &str, field: &str) -> Result<Option<IpAddr>, ParseError> {
    if text.is_empty() {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|_| field_error(field, format!("`{text}` is not an IP address")))
}

fn port(value: u32, field: &str) -> Result<u16, ParseError> {
    u16::try_from(value).map_err(|_| field_error(field, format!("{value} is not a port")))
}

fn policies(list: Vec<JsonPolicy>, out: &mut Vec<PolicyName>) {
    out.extend(list.into_iter().map(|p| PolicyName {
        kind: p.kind,
        namespace: p.namespace,
        name: p.name,
    }));
}

/// Parses one line (without its line terminator). Blank lines are the
/// caller's to skip.
pub fn parse_line(line: &str) -> Result<Event, ParseError> {
    let start = line.len() - line.trim_start().len();
    if !line[start..].starts_with('{') {
        return Err(ParseError {
            column: start + 1,
            message: "not a JSON object (a Hubble event is one JSON object a line)".to_owned(),
        });
    }
    let json: JsonFlow = serde_json::from_str(line).map_err(|e| {
        // serde_json ends its message with the position, which the
        // caller reports as line and column of the file.
        let text = e.to_string();
        let message = match text.rfind(" at line ") {
            Some(i) => text[..i].to_owned(),
            None => text,
        };
        ParseError {
            column: e.column().max(1),
            message,
        }
    })?;
    let flow = match json.flow {
        Some(inner) => *inner,
        None if json.node_status.is_some()
            || json.lost_events.is_some()
            || json.agent_event.is_some()
            || json.debug_event.is_some() =>
        {
            return Ok(Event::Skipped(Skip::NotAFlow));
        }
        None => json,
    };
    if flow.verdict.is_none() && flow.ip.is_none() && flow.source.is_none() {
        return Err(ParseError {
            column: 1,
            message:
                "neither a flow (no `verdict`, `IP` or `source`) nor a GetFlowsResponse (no `flow`)"
                    .to_owned(),
        });
    }
    let verdict = match &flow.verdict {
        None => Verdict::Unknown,
        Some(EnumValue::Name(name)) => Verdict::from_name(name)
            .ok_or_else(|| field_error("verdict", format!("`{name}` is not a flow.Verdict")))?,
        Some(EnumValue::Number(n)) => Verdict::from_number(*n)
            .ok_or_else(|| field_error("verdict", format!("{n} is not a flow.Verdict")))?,
    };
    let time = match &flow.time {
        None => None,
        Some(text) => Some(Timestamp::parse(text).ok_or_else(|| {
            field_error("time", format!("`{text}` is not an RFC 3339 timestamp"))
        })?),
    };
    if let Some(kind) = &flow.kind {
        let name = enum_name(
            kind,
            "Type",
            &[("UNKNOWN_TYPE", 0), ("L3_L4", 1), ("L7", 2), ("SOCK", 3)],
        )?;
        if matches!(name, "L7" | "SOCK") {
            return Ok(Event::Skipped(Skip::NotL3L4));
        }
    }
    if flow.l7.is_some() {
        return Ok(Event::Skipped(Skip::NotL3L4));
    }
    if flow.is_reply.or(flow.reply) == Some(true) {
        return Ok(Event::Skipped(Skip::Reply));
    }
    let direction = match &flow.traffic_direction {
        None => TrafficDirection::Unknown,
        Some(value) => match enum_name(
            value,
            "traffic_direction",
            &[
                ("TRAFFIC_DIRECTION_UNKNOWN", 0),
                ("INGRESS", 1),
                ("EGRESS", 2),
            ],
        )? {
            "INGRESS" => TrafficDirection::Ingress,
            "EGRESS" => TrafficDirection::Egress,
            _ => TrafficDirection::Unknown,
        },
    };
    let drop_reason = match (&flow.drop_reason_desc, flow.drop_reason) {
        (Some(EnumValue::Name(name)), _) => Some(name.clone()),
        (Some(EnumValue::Number(n)), _) => Some(
            POLICY_DROP_REASONS
                .iter()
                .find(|(_, v)| i64::from(*v) == *n)
                .map_or_else(|| n.to_string(), |(name, _)| (*name).to_owned()),
        ),
        (None, Some(n)) if n != 0 => Some(
            POLICY_DROP_REASONS
                .iter()
                .find(|(_, v)| *v == n)
                .map_or_else(|| n.to_string(), |(name, _)| (*name).to_owned()),
        ),
        (None, _) => None,
    };
    let Some(ip) = flow.ip else {
        return Ok(Event::Skipped(Skip::NoL4));
    };
    let source_ip = address(&ip.source, "IP.source")?;
    let destination_ip = address(&ip.destination, "IP.destination")?;
    if let Some(version) = &ip.ip_version {
        let name = enum_name(
            version,
            "IP.ipVersion",
            &[("IP_NOT_USED", 0), ("IPv4", 1), ("IPv6", 2)],
        )?;
        let expected = match name {
            "IPv4" => Some(false),
            "IPv6" => Some(true),
            _ => None,
        };
        for ip in [source_ip, destination_ip].into_iter().flatten() {
            if expected.is_some_and(|v6| v6 != ip.is_ipv6()) {
                return Err(field_error(
                    "IP.ipVersion",
                    format!("{name} but the address {ip} is of the other family"),
                ));
            }
        }
    }
    let (Some(source), Some(destination)) = (source_ip, destination_ip) else {
        return Ok(Event::Skipped(Skip::NoL4));
    };
    if source.is_ipv6() != destination.is_ipv6() {
        return Err(field_error(
            "IP",
            format!("source {source} and destination {destination} are of different families"),
        ));
    }
    let Some(l4) = flow.l4 else {
        return Ok(Event::Skipped(Skip::NoL4));
    };
    let l4 = match l4 {
        JsonL4 { tcp: Some(p), .. } => L4 {
            proto: 6,
            port: port(p.destination_port, "l4.TCP.destination_port")?,
        },
        JsonL4 { udp: Some(p), .. } => L4 {
            proto: 17,
            port: port(p.destination_port, "l4.UDP.destination_port")?,
        },
        JsonL4 { sctp: Some(p), .. } => L4 {
            proto: 132,
            port: port(p.destination_port, "l4.SCTP.destination_port")?,
        },
        JsonL4 {
            icmpv4: Some(i), ..
        } => L4 {
            proto: 1,
            port: u16::from(u8::try_from(i.kind).map_err(|_| {
                field_error("l4.ICMPv4.type", format!("{} is not an ICMP type", i.kind))
            })?),
        },
        JsonL4 {
            icmpv6: Some(i), ..
        } => L4 {
            proto: 58,
            port: u16::from(u8::try_from(i.kind).map_err(|_| {
                field_error("l4.ICMPv6.type", format!("{} is not an ICMP type", i.kind))
            })?),
        },
        _ => return Ok(Event::Skipped(Skip::NoL4)),
    };
    let (ipv6, icmp6) = (source_ip.is_some_and(|ip| ip.is_ipv6()), l4.proto == 58);
    if (l4.proto == 1 && ipv6) || (icmp6 && !ipv6) {
        return Err(field_error(
            "l4",
            "ICMPv4 over IPv6 or ICMPv6 over IPv4 cannot be carried",
        ));
    }
    let mut allowed_by = Vec::new();
    policies(flow.ingress_allowed_by, &mut allowed_by);
    policies(flow.egress_allowed_by, &mut allowed_by);
    let mut denied_by = Vec::new();
    policies(flow.ingress_denied_by, &mut denied_by);
    policies(flow.egress_denied_by, &mut denied_by);
    Ok(Event::Flow(Box::new(FlowRecord {
        time,
        verdict,
        drop_reason,
        source: end(flow.source, source_ip),
        destination: end(flow.destination, destination_ip),
        l4,
        direction,
        allowed_by,
        denied_by,
    })))
}

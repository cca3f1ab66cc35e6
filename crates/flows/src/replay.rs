//! Replaying a recording under policies: each distinct flow is decided by
//! the reference evaluator ([`porin_compiler::explain::evaluate`], a
//! lookup in the endpoints' compiled map states; nothing is recompiled
//! per flow) and compared with what Cilium recorded.
//!
//! What is compared is what the event saw. Hubble's `traffic_direction`
//! says which endpoint's policy the event reports: an `EGRESS` event is
//! the source's egress check (its packet may still meet the destination's
//! ingress later, in an event of its own); an `INGRESS` event, or one
//! without a direction (a trace to the endpoint), comes after both
//! checks, so both are compared. A flow is *allowed* when the checks
//! compared allow or redirect it.
//!
//! An egress event of a flow between endpoints that the recording also
//! shows dropped at the destination's ingress is no traffic a change can
//! break (the connection never carried any): it is not a newly denied
//! flow; the drops are compared end to end.
//!
//! - **newly denied**: Cilium forwarded it, the replayed policies deny it;
//! - **newly allowed**: Cilium dropped it by policy, they allow it;
//! - **fidelity disagreement**: with the policies in force when it was
//!   recorded (`current`), porin's verdict is not Cilium's.
//!
//! Findings are aggregated by (source workload, destination workload,
//! protocol, port), with counts, first and last time, and the rules
//! responsible: for a deny, the deny rule whose entry matched or the
//! policies that put the direction in default deny; for an allow, the
//! rules of the allowing entry.

use std::collections::{BTreeMap, BTreeSet};

use porin_compiler::compile::Compiled;
use porin_compiler::explain::{Evaluation, Flow, FlowVerdict, evaluate};
use porin_compiler::mapstate::Direction;
use porin_compiler::resolve::lower::Origin;

use crate::observe::{FlowKey, Recording};
use crate::record::{Recorded, TrafficDirection};
use crate::resolve::{PeerKey, Resolver};
use crate::time::Timestamp;

/// What a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Finding {
    /// Forwarded in the recording, denied by the replayed policies.
    NewlyDenied,
    /// Dropped by policy in the recording, allowed by the replayed policies.
    NewlyAllowed,
    /// porin's verdict under the current policies is not Cilium's.
    Disagreement,
}

impl Finding {
    /// Every kind, in report order.
    pub const ALL: [Finding; 3] = [
        Finding::NewlyDenied,
        Finding::NewlyAllowed,
        Finding::Disagreement,
    ];

    /// The registry entry of the kind.
    pub const fn code(self) -> porin_model::CodeInfo {
        match self {
            Finding::NewlyDenied => crate::codes::NEWLY_DENIED,
            Finding::NewlyAllowed => crate::codes::NEWLY_ALLOWED,
            Finding::Disagreement => crate::codes::FIDELITY,
        }
    }

    /// The section title.
    pub const fn title(self) -> &'static str {
        match self {
            Finding::NewlyDenied => "newly denied (forwarded in the recording)",
            Finding::NewlyAllowed => "newly allowed (dropped by policy in the recording)",
            Finding::Disagreement => "fidelity disagreements (current policies)",
        }
    }

    /// A stable key for JSON.
    pub const fn key(self) -> &'static str {
        match self {
            Finding::NewlyDenied => "newlyDenied",
            Finding::NewlyAllowed => "newlyAllowed",
            Finding::Disagreement => "disagreements",
        }
    }
}

/// The aggregation key: who talks to whom on which port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Edge {
    /// Source workload (`shop/frontend`, `world-ipv4`, `host`).
    pub from: String,
    /// Destination workload.
    pub to: String,
    /// IP protocol number.
    pub proto: u8,
    /// Destination port (ICMP type).
    pub port: u16,
}

impl Edge {
    /// `TCP/8080`, `ICMP type 8`.
    pub fn ports(&self) -> String {
        let name = porin_compiler::resolve::rule::proto::name(self.proto);
        if matches!(self.proto, 1 | 58) {
            format!("{name} type {}", self.port)
        } else {
            format!("{name}/{}", self.port)
        }
    }
}

/// A rule a finding names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rule {
    /// `CiliumNetworkPolicy shop/api spec.ingress[0] (api.yaml:9)`, or
    /// why there is no rule (`default deny`, `not enforced`).
    pub text: String,
    /// The rule's file (empty when none).
    pub file: String,
    /// Its line (0 when none).
    pub line: u32,
    /// Its field path.
    pub route: String,
    /// Its document in the file.
    pub document: usize,
}

/// One aggregated finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Aggregate {
    /// Flow events.
    pub flows: u64,
    /// First time.
    pub first: Option<Timestamp>,
    /// Last time.
    pub last: Option<Timestamp>,
    /// What Cilium recorded (`allowed`, `denied`).
    pub recorded: Recorded,
    /// The verdict porin gives (of the replayed or current policies).
    pub porin: FlowVerdict,
    /// The rules responsible on porin's side.
    pub rules: BTreeSet<Rule>,
    /// The policies Hubble cites.
    pub cited: BTreeSet<String>,
    /// The first event: file and line.
    pub example: (String, u64),
}

/// The result of a replay.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Findings by kind and edge.
    pub findings: BTreeMap<Finding, BTreeMap<Edge, Aggregate>>,
    /// Flow events decided.
    pub decided: u64,
    /// Flow events whose verdict is unchanged (vs the recording).
    pub unchanged: u64,
    /// Distinct edges decided.
    pub edges: usize,
    /// Whether a current policy set was given (the fidelity check ran).
    pub fidelity_checked: bool,
}

impl Report {
    /// Events of a kind.
    pub fn count(&self, finding: Finding) -> u64 {
        self.findings
            .get(&finding)
            .map_or(0, |m| m.values().map(|a| a.flows).sum())
    }

    /// Edges of a kind.
    pub fn edges_of(&self, finding: Finding) -> usize {
        self.findings.get(&finding).map_or(0, BTreeMap::len)
    }
}

/// A compilation's decision of one distinct flow, in the scope the
/// event saw.
struct Decision {
    verdict: FlowVerdict,
    rules: BTreeSet<Rule>,
}

fn rule_of(origin: &Origin) -> Rule {
    Rule {
        text: origin.describe(),
        file: origin.file.clone(),
        line: origin.line,
        route: origin.route.clone(),
        document: origin.document,
    }
}

fn decide(
    compiled: &Compiled,
    resolver: &Resolver<'_>,
    key: &FlowKey,
    side: usize,
    ips: (std::net::IpAddr, std::net::IpAddr),
) -> Decision {
    let flow = Flow {
        from: resolver.peer(key.from[side], ips.0),
        to: resolver.peer(key.to[side], ips.1),
        proto: key.proto,
        port: key.port,
        family: Some(key.family),
    };
    let evaluation = evaluate(compiled, &flow);
    scoped(compiled, &evaluation, key)
}

/// The checks an event saw (see the module documentation) and their
/// verdict; the rules of the checks that decided it.
fn scoped(compiled: &Compiled, evaluation: &Evaluation, key: &FlowKey) -> Decision {
    let egress_only = key.direction == TrafficDirection::Egress
        && matches!(key.from[0], PeerKey::Endpoint(_))
        && evaluation
            .checks
            .iter()
            .any(|c| c.direction == Direction::Egress);
    let checks: Vec<_> = evaluation
        .checks
        .iter()
        .filter(|c| !egress_only || c.direction == Direction::Egress)
        .collect();
    if evaluation.no_packet.is_some() {
        return Decision {
            verdict: FlowVerdict::Deny,
            rules: BTreeSet::new(),
        };
    }
    let verdict = FlowVerdict::of_checks(checks.iter().map(|c| c.verdict));
    let mut rules = BTreeSet::new();
    for check in checks.iter().filter(|c| {
        // The checks that decided: the denying ones for a deny, every one
        // otherwise.
        verdict != FlowVerdict::Deny || c.verdict == FlowVerdict::Deny
    }) {
        if !check.enforced {
            rules.insert(Rule {
                text: format!(
                    "{} {}: not enforced (no policy selects it)",
                    check.endpoint, check.direction
                ),
                file: String::new(),
                line: 0,
                route: String::new(),
                document: 0,
            });
            continue;
        }
        match &check.decision.chosen {
            Some(chosen) => {
                for origin in chosen
                    .entry
                    .origins
                    .iter()
                    .filter_map(|id| compiled.origin(*id))
                {
                    rules.insert(rule_of(origin));
                }
            }
            None => {
                let endpoint = compiled.endpoint(&check.endpoint);
                let selecting: Vec<&Origin> = endpoint
                    .map(|e| {
                        e.selected_by
                            .direction(check.direction)
                            .iter()
                            .filter_map(|id| compiled.origin(*id))
                            .collect()
                    })
                    .unwrap_or_default();
                if selecting.is_empty() {
                    rules.insert(Rule {
                        text: format!("{} {}: default deny", check.endpoint, check.direction),
                        file: String::new(),
                        line: 0,
                        route: String::new(),
                        document: 0,
                    });
                }
                let mut policies = BTreeSet::new();
                for origin in selecting {
                    // One cause per policy (its first default-deny rule),
                    // as explanations name them.
                    if !policies.insert((
                        origin.kind,
                        origin.namespace.clone(),
                        origin.name.clone(),
                    )) {
                        continue;
                    }
                    let mut rule = rule_of(origin);
                    rule.text = format!(
                        "{} (puts {} {} in default deny; no rule allows this flow)",
                        rule.text, check.endpoint, check.direction
                    );
                    rules.insert(rule);
                }
            }
        }
    }
    Decision { verdict, rules }
}

fn allows(verdict: FlowVerdict) -> bool {
    !matches!(verdict, FlowVerdict::Deny)
}

/// Replays a recording under `proposed` (index 0 of the recording's
/// compilations) and, when given, `current` (index 1): the fidelity check.
pub fn replay(recording: &Recording, proposed: &Compiled, current: Option<&Compiled>) -> Report {
    let resolvers = (Resolver::new(proposed), current.map(Resolver::new));
    let mut report = Report {
        fidelity_checked: current.is_some(),
        ..Report::default()
    };
    let mut edges = BTreeSet::new();
    // Flows between endpoints that the destination's ingress dropped: the
    // source's egress events of them say only that the packet left, and
    // the connection never carried traffic, so they are no traffic a
    // change could break (the drops themselves are compared end to end).
    let dropped_at_ingress: BTreeSet<_> = recording
        .flows
        .keys()
        .filter(|k| {
            k.recorded == Recorded::Denied
                && k.direction != TrafficDirection::Egress
                && matches!(
                    (k.from[0], k.to[0]),
                    (PeerKey::Endpoint(_), PeerKey::Endpoint(_))
                )
        })
        .map(|k| (k.from[0], k.to[0], k.proto, k.port, k.family))
        .collect();
    for (key, seen) in &recording.flows {
        let ips = (seen.from_ip, seen.to_ip);
        let superseded = key.recorded == Recorded::Allowed
            && key.direction == TrafficDirection::Egress
            && dropped_at_ingress.contains(&(
                key.from[0],
                key.to[0],
                key.proto,
                key.port,
                key.family,
            ));
        let edge = Edge {
            from: resolvers.0.name(key.from[0]),
            to: resolvers.0.name(key.to[0]),
            proto: key.proto,
            port: key.port,
        };
        edges.insert(edge.clone());
        report.decided += seen.count;
        let recorded_allows = key.recorded == Recorded::Allowed;
        let mut add = |finding: Finding, decision: Decision| {
            let aggregate = report
                .findings
                .entry(finding)
                .or_default()
                .entry(edge.clone())
                .or_insert_with(|| Aggregate {
                    flows: 0,
                    first: None,
                    last: None,
                    recorded: key.recorded,
                    porin: decision.verdict,
                    rules: BTreeSet::new(),
                    cited: BTreeSet::new(),
                    example: (
                        recording.files.get(seen.at.0).cloned().unwrap_or_default(),
                        seen.at.1,
                    ),
                });
            aggregate.flows += seen.count;
            aggregate.first = match (aggregate.first, seen.first) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            aggregate.last = match (aggregate.last, seen.last) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            aggregate.rules.extend(decision.rules);
            aggregate.cited.extend(seen.cited.iter().cloned());
        };
        let current_decision = match (current, &resolvers.1) {
            (Some(current), Some(resolver)) => Some(decide(current, resolver, key, 1, ips)),
            _ => None,
        };
        let mut proposed_decision = decide(proposed, &resolvers.0, key, 0, ips);
        let changed = !superseded && allows(proposed_decision.verdict) != recorded_allows;
        if changed {
            let finding = if recorded_allows {
                Finding::NewlyDenied
            } else {
                Finding::NewlyAllowed
            };
            // What decided it under the policies in force, when known
            // and porin agrees with the recording there: the rule the
            // change takes away (or the deny it lifts).
            if let Some(before) = &current_decision
                && allows(before.verdict) == recorded_allows
            {
                for rule in before.rules.iter().filter(|r| !r.file.is_empty()) {
                    let mut rule = rule.clone();
                    rule.text = format!(
                        "in force, {} {}",
                        if recorded_allows {
                            "allowed by"
                        } else {
                            "denied by"
                        },
                        rule.text
                    );
                    // Only the new policies' lines carry the finding.
                    rule.file.clear();
                    proposed_decision.rules.insert(rule);
                }
            }
            add(finding, proposed_decision);
        } else {
            report.unchanged += seen.count;
        }
        if let Some(decision) = current_decision
            && allows(decision.verdict) != recorded_allows
        {
            add(Finding::Disagreement, decision);
        }
    }
    report.edges = edges.len();
    report
}

/// Observed flows whose verdict a policy change changes (`porin diff
/// --flows`), per edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The source's name in the new compilation, then in the old one
    /// (they differ for an address whose CIDR identity one side lacks).
    pub from: [String; 2],
    /// The destination's names.
    pub to: [String; 2],
    /// IP protocol.
    pub proto: u8,
    /// Destination port (ICMP type).
    pub port: u16,
    /// Whether the change closes it (the old policies allow, the new deny);
    /// otherwise it opens it.
    pub closes: bool,
    /// Flow events.
    pub flows: u64,
    /// First time.
    pub first: Option<Timestamp>,
    /// Last time.
    pub last: Option<Timestamp>,
}

/// Names of both ends (per compilation), protocol, port, whether it closes.
type ChangedKey = ([String; 2], [String; 2], u8, u16, bool);

/// The observed flows whose verdict differs between `old` and `new`,
/// aggregated per edge; the recording is resolved against `[new, old]`.
/// Each distinct flow is decided end to end (both checks), as
/// connections are.
pub fn changed_flows(recording: &Recording, new: &Compiled, old: &Compiled) -> Vec<Changed> {
    let resolvers = [Resolver::new(new), Resolver::new(old)];
    let mut out: BTreeMap<ChangedKey, Changed> = BTreeMap::new();
    for (key, seen) in &recording.flows {
        let ips = (seen.from_ip, seen.to_ip);
        // End to end, as connections are: an egress event of a flow the
        // destination drops anyway changes no connection.
        let whole = FlowKey {
            direction: TrafficDirection::Unknown,
            ..*key
        };
        let after = allows(decide(new, &resolvers[0], &whole, 0, ips).verdict);
        let before = allows(decide(old, &resolvers[1], &whole, 1, ips).verdict);
        if after == before {
            continue;
        }
        let from = [
            resolvers[0].name(key.from[0]),
            resolvers[1].name(key.from[1]),
        ];
        let to = [resolvers[0].name(key.to[0]), resolvers[1].name(key.to[1])];
        let entry = out
            .entry((from.clone(), to.clone(), key.proto, key.port, before))
            .or_insert_with(|| Changed {
                from,
                to,
                proto: key.proto,
                port: key.port,
                closes: before,
                flows: 0,
                first: None,
                last: None,
            });
        entry.flows += seen.count;
        entry.first = match (entry.first, seen.first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        entry.last = match (entry.last, seen.last) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }
    out.into_values().collect()
}

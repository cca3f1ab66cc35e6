//! The lint rule registry: one [`RuleInfo`] per `PR0xx` code, with the
//! documentation `porin explain CODE` prints.
//!
//! Codes are stable: a code is never reused for another condition. Each
//! rule's check lives in `crates/lint/src/rules/<name>.rs`.

use porin_model::diagnostic::Severity;

/// Documentation and defaults of one lint rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RuleInfo {
    /// Stable code, e.g. `PR001`.
    pub code: &'static str,
    /// Kebab-case name, e.g. `map-capacity-exceeded`.
    pub name: &'static str,
    /// Default severity (a config file or annotation may change it).
    pub severity: Severity,
    /// Whether the rule needs an inventory (skipped without one).
    pub needs_inventory: bool,
    /// One-line summary.
    pub summary: &'static str,
    /// What the rule does.
    pub what: &'static str,
    /// Why the finding matters.
    pub why: &'static str,
    /// A policy that triggers it.
    pub example: &'static str,
    /// What to write instead.
    pub instead: &'static str,
    /// Cilium sources and issues behind the rule.
    pub references: &'static str,
}

impl RuleInfo {
    /// The `porin explain` text: title and the five documentation sections.
    pub fn document(&self) -> String {
        format!(
            "{code} {name} (default severity: {severity}{inventory})\n\n{summary}\n\n\
             ## What it does\n\n{what}\n\n## Why is this bad\n\n{why}\n\n\
             ## Example\n\n{example}\n\n## Use instead\n\n{instead}\n\n## References\n\n{references}\n",
            code = self.code,
            name = self.name,
            severity = self.severity.as_str(),
            inventory = if self.needs_inventory {
                "; needs --inventory"
            } else {
                ""
            },
            summary = self.summary,
            what = self.what.trim(),
            why = self.why.trim(),
            example = self.example.trim_end(),
            instead = self.instead.trim_end(),
            references = self.references.trim(),
        )
    }
}

/// `map-capacity-exceeded`.
pub const MAP_CAPACITY_EXCEEDED: &str = "PR001";
/// `map-capacity-near`.
pub const MAP_CAPACITY_NEAR: &str = "PR002";
/// `ipcache-capacity`.
pub const IPCACHE_CAPACITY: &str = "PR003";
/// `allow-shadowed-by-deny`.
pub const ALLOW_SHADOWED_BY_DENY: &str = "PR004";
/// `redundant-allow`.
pub const REDUNDANT_ALLOW: &str = "PR005";
/// `deny-bypass`.
pub const DENY_BYPASS: &str = "PR006";
/// `subject-selects-nothing`.
pub const SUBJECT_SELECTS_NOTHING: &str = "PR007";
/// `peer-selects-nothing`.
pub const PEER_SELECTS_NOTHING: &str = "PR008";
/// `l7-never-reached`.
pub const L7_NEVER_REACHED: &str = "PR009";
/// `overlapping-ports`.
pub const OVERLAPPING_PORTS: &str = "PR010";
/// `duplicate-rule`.
pub const DUPLICATE_RULE: &str = "PR011";
/// `rule-allows-nothing`.
pub const RULE_ALLOWS_NOTHING: &str = "PR012";
/// `allows-all-traffic`.
pub const ALLOWS_ALL_TRAFFIC: &str = "PR013";
/// `egress-blocks-dns`.
pub const EGRESS_BLOCKS_DNS: &str = "PR014";
/// `named-port-unresolved`.
pub const NAMED_PORT_UNRESOLVED: &str = "PR015";
/// `unsupported-field`.
pub const UNSUPPORTED_FIELD: &str = "PR016";
/// `range-partly-covered`.
pub const RANGE_PARTLY_COVERED: &str = "PR017";

/// Every lint rule, in code order.
pub const ALL: &[RuleInfo] = &[
    RuleInfo {
        code: MAP_CAPACITY_EXCEEDED,
        name: "map-capacity-exceeded",
        severity: Severity::Error,
        needs_inventory: true,
        summary: "An endpoint needs more policy-map entries than its map holds.",
        what: "Compiles every endpoint of the inventory and compares the number of policy-map \
entries with the map size (`policyMapMax`, default 16384 like Cilium's `bpf-policy-map-max`, \
clamped to 256..65536 like Cilium). It names the rules, selectors and port ranges that contribute \
most entries, as `rules × identities × port prefixes × protocols`.",
        why: "When the map is full the kernel refuses further entries: some desired entries are \
missing and drops look random (cilium/cilium#46189, #45788), or, with \
`enable-endpoint-lockdown-on-policy-overflow`, the endpoint is locked down entirely.",
        example: "egress:\n- toCIDRSet: [{cidr: 10.0.0.0/8, except: [...812 prefixes...]}]\n  toPorts:\n  - ports: [{port: \"1000\", endPort: 1999, protocol: ANY}]",
        instead: "Select peers with fewer identities (an entity, one wider CIDR, a namespace \
selector), and align port ranges to power-of-two prefixes (1024-2047 is one prefix; 1000-1999 \
is 6). Or raise `bpf-policy-map-max` and `policyMapMax` in `.porin.yaml` together.",
        references: "semantics.md §4.8, §5.5; Cilium `pkg/endpoint/bpf.go` \
(`shouldLockdownLocked`), `pkg/option/config.go` (`bpf-policy-map-max`, `PolicyMapMin/Max`); \
cilium/cilium#8060, #28337, #41121, #46189.",
    },
    RuleInfo {
        code: MAP_CAPACITY_NEAR,
        name: "map-capacity-near",
        severity: Severity::Warning,
        needs_inventory: true,
        summary: "An endpoint uses more than the warning fraction of its policy map.",
        what: "Like PR001, but fires when the entry count is above `capacityWarnFraction` \
(default 0.8) of the map size without exceeding it.",
        why: "A few more identities (new pods with new label sets, new CIDR prefixes) will \
overflow the map; the failure then happens at runtime, not in review.",
        example: "A policy producing 14,000 entries against the default 16,384.",
        instead: "The same as PR001: fewer identities per selector, aligned port ranges, or a \
larger map.",
        references: "semantics.md §4.8; Cilium `pkg/endpointmanager/policymap_pressure.go` \
(`bpf_map_pressure`).",
    },
    RuleInfo {
        code: IPCACHE_CAPACITY,
        name: "ipcache-capacity",
        severity: Severity::Error,
        needs_inventory: true,
        summary: "The ipcache needs more entries than its map holds (warning above the fraction).",
        what: "Counts the ipcache entries porin would install (endpoint addresses, policy \
prefixes, the two world routes) and compares them with `ipcacheMapMax` (default 512000, the size of Cilium's \
`cilium_ipcache` map). Over the limit is an error, above the warning fraction a \
warning.",
        why: "An address missing from the ipcache resolves to `world`, so policies written for it \
silently stop applying.",
        example: "Thousands of `toCIDR` /32 prefixes in one cluster.",
        instead: "Aggregate prefixes; use FQDN or entity selectors where possible.",
        references: "Cilium `pkg/maps/ipcache/ipcache.go` (MaxEntries).",
    },
    RuleInfo {
        code: ALLOW_SHADOWED_BY_DENY,
        name: "allow-shadowed-by-deny",
        severity: Severity::Warning,
        needs_inventory: true,
        summary: "An allow rule grants nothing: deny rules cover every flow it would allow.",
        what: "For every endpoint the rule selects, porin compiles the map state with and without \
the rule and compares the verdict of every (peer identity, protocol, port class) exactly (the \
classes are derived from the keys, nothing is sampled). If the rule changes no verdict anywhere \
and some flow it would allow on its own is denied by a deny rule, this fires and names the deny \
rules.",
        why: "The author believed the allow opens a path; it does not. Either the allow is dead \
code or the deny is broader than intended.",
        example: "ingressDeny:\n- fromEntities: [cluster]\ningress:\n- fromEndpoints: [{matchLabels: {app: web}}]\n  toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]",
        instead: "Narrow the deny (e.g. `except`-style CIDR sets or a tighter selector), or delete \
the allow.",
        references: "semantics.md §4.6 (deny precedence), §5.4; Cilium `pkg/policy/mapstate.go` \
(`insertWithChanges`).",
    },
    RuleInfo {
        code: REDUNDANT_ALLOW,
        name: "redundant-allow",
        severity: Severity::Warning,
        needs_inventory: true,
        summary: "An allow rule grants nothing new: other allow rules already grant all of it.",
        what: "Same exact comparison as PR004; fires when the flows the rule allows on its own are \
all allowed by other rules, which it names.",
        why: "Redundant rules make policies harder to review and let a later edit of the covering \
rule change behaviour unexpectedly. They also cost map entries.",
        example: "ingress:\n- fromEndpoints: [{}]\n  toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]\n- fromEndpoints: [{matchLabels: {app: web}}]\n  toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]",
        instead: "Delete the redundant rule, or narrow the broader one if it allows too much.",
        references: "semantics.md §4.6, §5.4.",
    },
    RuleInfo {
        code: DENY_BYPASS,
        name: "deny-bypass",
        severity: Severity::Warning,
        needs_inventory: true,
        summary: "Security: addresses inside a denied CIDR are still allowed, because the ipcache \
gives them another identity.",
        what: "For every CIDR deny rule and every endpoint it applies to, porin looks for \
addresses inside the denied prefixes that the ipcache resolves to an identity the deny does \
not select (a pod or node address inside `10.0.0.0/8`, say), and checks whether another rule \
(or the default allow of `enableDefaultDeny: false`) allows them on the denied ports. It reports \
both rules.",
        why: "This is the shape of advisory GHSA-3wwx-63fv-pfq6: a broad CIDR deny the author \
thought covered everything in the range, re-opened for one identity by a narrower allow. CIDR \
selectors never select endpoint identities, so the deny does not apply to pods in the range.",
        example: "egressDeny:\n- toCIDR: [10.0.0.0/8]\negress:\n- toEndpoints: [{matchLabels: {app: db}}]   # db pods live in 10.0.0.0/8",
        instead: "Deny the workloads by selector as well (`toEndpoints`/`toEntities: [cluster]`), \
or make the intent explicit with a porin annotation if the exception is wanted.",
        references: "semantics.md §9 item 12; GHSA-3wwx-63fv-pfq6; cilium/cilium#15198, \
#22314, #22966; semantics.md §4.6 and PR #33719 (covered CIDR denies are kept, not flagged).",
    },
    RuleInfo {
        code: SUBJECT_SELECTS_NOTHING,
        name: "subject-selects-nothing",
        severity: Severity::Warning,
        needs_inventory: true,
        summary: "A policy's subject selector matches no endpoint of the inventory.",
        what: "Matches `endpointSelector` / `podSelector` against every endpoint identity of the \
inventory.",
        why: "The policy enforces nothing; usually a label typo or a wrong namespace.",
        example: "endpointSelector: {matchLabels: {app: frontedn}}",
        instead: "Fix the labels, or complete the inventory if the workload exists.",
        references: "Cilium `pkg/policy/repository.go` (`computePolicyEnforcementAndRules`).",
    },
    RuleInfo {
        code: PEER_SELECTS_NOTHING,
        name: "peer-selects-nothing",
        severity: Severity::Warning,
        needs_inventory: true,
        summary: "A peer selector of an allow or deny rule selects no identity.",
        what: "Matches each `fromEndpoints`/`toEndpoints` selector against every identity \
(endpoints, reserved, CIDR) of the compilation.",
        why: "The rule allows (or denies) nothing for that selector; usually a label typo.",
        example: "ingress:\n- fromEndpoints: [{matchLabels: {app: bakend}}]",
        instead: "Fix the selector or complete the inventory.",
        references: "Cilium `pkg/policy/selectorcache.go`.",
    },
    RuleInfo {
        code: L7_NEVER_REACHED,
        name: "l7-never-reached",
        severity: Severity::Warning,
        needs_inventory: true,
        summary: "An L7 rule never sees traffic: no flow is redirected to its proxy.",
        what: "Looks up every flow class of every endpoint the rule selects; fires when no \
verdict is a redirect carrying the rule, because a deny or a higher-precedence entry decides \
all of its flows.",
        why: "HTTP/Kafka/DNS rules that never see traffic give a false sense of L7 filtering.",
        example: "ingressDeny:\n- toPorts: [{ports: [{port: \"80\", protocol: TCP}]}]\ningress:\n- toPorts: [{ports: [{port: \"80\", protocol: TCP}], rules: {http: [{method: GET}]}}]",
        instead: "Remove the deny on that port or the L7 rule.",
        references: "semantics.md §4.3 (precedence), §4.6; Cilium `pkg/policy/l4.go`.",
    },
    RuleInfo {
        code: OVERLAPPING_PORTS,
        name: "overlapping-ports",
        severity: Severity::Warning,
        needs_inventory: false,
        summary: "Port ranges of one rule overlap (part of a range is already covered).",
        what: "Compares the numeric ports and ranges of each rule item per protocol (`ANY` \
expands to TCP, UDP and SCTP).",
        why: "Overlapping ranges are a sign of a mistake, and overlapping ranges with different \
`endPort` crashed cilium-envoy (cilium/cilium#45811).",
        example: "toPorts:\n- ports: [{port: \"8000\", endPort: 8100, protocol: TCP}, {port: \"8080\", protocol: TCP}]",
        instead: "Merge the ranges into one.",
        references: "cilium/cilium#45811; semantics.md §4.5.",
    },
    RuleInfo {
        code: DUPLICATE_RULE,
        name: "duplicate-rule",
        severity: Severity::Warning,
        needs_inventory: false,
        summary: "Two rule items are identical after lowering.",
        what: "Compares every lowered rule (subject, direction, deny, peers, ports, L7, auth).",
        why: "Duplicates are copy-paste leftovers; editing one leaves the other in force.",
        example: "Two policies with the same endpointSelector and the same ingress item.",
        instead: "Keep one.",
        references: "Cilium `pkg/policy/rule.go` (rules are merged, duplicates are invisible).",
    },
    RuleInfo {
        code: RULE_ALLOWS_NOTHING,
        name: "rule-allows-nothing",
        severity: Severity::Warning,
        needs_inventory: false,
        summary: "`ingress: [{}]` or an explicitly empty peer list: allows nothing, yet enforces default deny.",
        what: "Finds allow items with no peer and no port (`ingress: [{}]`, `egress: [{}]` in \
Cilium policies) and items with an explicitly empty peer list (`fromEndpoints: []`, \
`toCIDR: []`, ...), which select nothing even with `toPorts`.",
        why: "Users read `ingress: [{}]` as \"allow everything\" (it is in Kubernetes \
NetworkPolicy); in Cilium it allows nothing and puts the endpoint in default deny, so all \
traffic in that direction is dropped. Intended?",
        example: "spec:\n  endpointSelector: {}\n  ingress: [{}]",
        instead: "To deny all: keep it, and say so with `porin.dev/ignore: PR012`. To allow all: \
`ingress: [{fromEntities: [all]}]`.",
        references: "semantics.md §3.2 (`mergeL4Filter`, `distillery_test.go rule____NoAllow`); \
§9 items 15 and 17; UKGovernmentBEIS/inspect_k8s_sandbox PR #228.",
    },
    RuleInfo {
        code: ALLOWS_ALL_TRAFFIC,
        name: "allows-all-traffic",
        severity: Severity::Warning,
        needs_inventory: false,
        summary: "An allow rule allows every peer on every port.",
        what: "Finds allow items whose peers include the wildcard (`fromEntities: [all]`, \
`toEntities: [all]`, CIDR `0.0.0.0/0` with `::/0`, KNP `ingress: [{}]`) and that name no port.",
        why: "It disables the direction's policy for the subject; deny rules still apply, but \
every other rule becomes redundant.",
        example: "egress:\n- toEntities: [all]",
        instead: "Name the peers and ports actually needed.",
        references: "semantics.md §3.2, §3.4 (`EntitySelectorMapping[all]`).",
    },
    RuleInfo {
        code: EGRESS_BLOCKS_DNS,
        name: "egress-blocks-dns",
        severity: Severity::Warning,
        needs_inventory: true,
        summary: "An endpoint with enforced egress cannot reach kube-dns on UDP/53.",
        what: "For every endpoint whose egress is enforced, looks up egress to every kube-dns \
endpoint of the inventory (`k8s-app=kube-dns` in `kube-system`) on UDP/53 and TCP/53.",
        why: "Name resolution fails, and with it nearly everything else; FQDN policies also need \
DNS to be allowed (and proxied) to learn addresses.",
        example: "egress:\n- toEndpoints: [{matchLabels: {app: db}}]",
        instead: "egress:\n- toEndpoints: [{matchLabels: {k8s:io.kubernetes.pod.namespace: kube-system, k8s-app: kube-dns}}]\n  toPorts: [{ports: [{port: \"53\", protocol: ANY}]}]",
        references: "Cilium docs \"DNS-based policies\"; semantics.md §3.3.",
    },
    RuleInfo {
        code: NAMED_PORT_UNRESOLVED,
        name: "named-port-unresolved",
        severity: Severity::Warning,
        needs_inventory: true,
        summary: "A named port resolves to no port, or (egress) to several different ports.",
        what: "Resolves each named port like Cilium: ingress from the subject endpoint's own \
container ports, egress from every endpoint's ports, where two different numbers for one name \
are an error (\"duplicate named ports\").",
        why: "Cilium silently emits no entry for such a port, so the rule allows nothing \
(cilium/cilium#30003, #24779).",
        example: "toPorts: [{ports: [{port: http-alt, protocol: TCP}]}]",
        instead: "Use the number, or give the port one unambiguous name across the cluster.",
        references: "semantics.md §4.4, §9 item 14; Cilium `pkg/types/portmap.go`.",
    },
    RuleInfo {
        code: UNSUPPORTED_FIELD,
        name: "unsupported-field",
        severity: Severity::Warning,
        needs_inventory: false,
        summary: "A field the chosen Cilium version (`ciliumVersion` in `.porin.yaml`) does not honour: introduced later, or removed.",
        what: "Looks up every field of a rule, by its route, in a table of versioned fields (a \
label key or header that happens to be called `endPort` is not a port range). Introduced: \
`icmps` 1.12 (ingress, ingressDeny, egress, egressDeny; 1.11 only behind `enable-icmp-rules`); \
`toPorts[].serverNames` 1.13; `authentication` 1.14; `fromCIDRSet[].cidrGroupRef` 1.14; \
`toCIDRSet[].cidrGroupRef` 1.16; `toPorts[].ports[].endPort` 1.16 (allow and deny rules, and \
`ports[].endPort` of Kubernetes NetworkPolicies); `fromNodes`/`toNodes` 1.16; \
`enableDefaultDeny` 1.16; `log` 1.18. Removed: `fromRequires`/`toRequires` with entries, \
deprecated in 1.17 and removed in 1.19 (porin, modelling 1.19, also rejects them as PM031). \
Not in the table, because their first release could not be established: `listener`, \
`listener.priority`, `cidrGroupSelector`, ICMP type names.",
        why: "An agent older than a field drops or ignores it, often silently: before 1.16 a port \
range was ignored (cilium/cilium#28684) or the policy not processed at all (#28704), so the rule \
allows a different set of ports than the one reviewed; an API server whose CRD lacks the field \
prunes or rejects it. A removed field is refused by the API server.",
        example: "ciliumVersion: \"1.15\" with `ports: [{port: \"8000\", endPort: 8100}]`, or \
`icmps` with ciliumVersion 1.11.",
        instead: "Upgrade Cilium (and `ciliumVersion` with it), or express the rule with fields \
that version supports: a list of single ports instead of a range, `fromCIDRSet` CIDRs instead \
of a CIDR group, labels in every `fromEndpoints` selector instead of `fromRequires`.",
        references: "semantics.md §9 item 9; Cilium release notes v1.11.0-rc0 (#16516), \
v1.12.0-rc3 (#20174), v1.13.0 (#22398), v1.14.0 (#24263, #24638), v1.14.4 (#28704), v1.16.0 \
(#26924, #30624, #32807), v1.18.0 (#39902); cilium/cilium#30572, #36649, #42615, #43167. Each \
entry's source is in `crates/lint/src/rules/unsupported_field.rs` and in the finding's note.",
    },
    RuleInfo {
        code: RANGE_PARTLY_COVERED,
        name: "range-partly-covered",
        severity: Severity::Warning,
        needs_inventory: true,
        summary: "Part of an allow rule's port range is already allowed, for every peer it names, by other rules.",
        what: "For an allow rule with a port range, compares (exactly, per port class and \
endpoint) the flows it allows on its own with the state compiled without it, and reports the \
ports of its range that other rules already allow for every peer. A rule that is redundant as a \
whole is PR005.",
        why: "Overlapping ranges across rules hide which rule is responsible for a port; \
narrowing one of them later does not close the port. They also cost policy-map entries.",
        example: "ingress:\n- fromEndpoints: [{matchLabels: {app: api}}]\n  toPorts: [{ports: [{port: \"8080\", protocol: TCP}]}]\n- fromEndpoints: [{matchLabels: {app: api}}]\n  toPorts: [{ports: [{port: \"8000\", endPort: 8100, protocol: TCP}]}]",
        instead: "Shrink the range to the ports nothing else allows, or drop the narrower rule.",
        references: "semantics.md §4.5 (port ranges), §4.6.",
    },
];

/// The rule with a code (`PR001`) or name (`map-capacity-exceeded`),
/// case-insensitive.
pub fn lookup(code_or_name: &str) -> Option<&'static RuleInfo> {
    ALL.iter().find(|r| {
        r.code.eq_ignore_ascii_case(code_or_name) || r.name.eq_ignore_ascii_case(code_or_name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_sequential_and_documented() {
        for (i, rule) in ALL.iter().enumerate() {
            assert_eq!(rule.code, format!("PR{:03}", i + 1));
            assert!(!rule.what.is_empty() && !rule.why.is_empty() && !rule.references.is_empty());
            assert_eq!(lookup(rule.name).map(|r| r.code), Some(rule.code));
        }
    }
}

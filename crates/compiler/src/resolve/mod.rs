//! Policy → L4 filters → map state.
//!
//! 1. [`lower`]: policy documents become [`rule::PolicyRule`]s, one per
//!    direction item, with selectors rewritten as Cilium does (namespace
//!    and cluster pinning, entities, CIDR selectors, KNP translation) and an
//!    [`lower::Origin`] each.
//! 2. [`policy::Resolver`]: rules are matched to subject identities, merged
//!    into L4 filters per (port, protocol) and selector, and distilled into
//!    each endpoint's [`crate::mapstate::MapState`].

pub mod lower;
pub mod matchpattern;
pub mod policy;
pub mod rule;
pub mod selection;

/// Compiler diagnostic codes (`PC0xx`). Stable: never reuse a number.
pub mod codes {
    /// A peer porin cannot resolve offline (nodes, groups, CIDR groups):
    /// allow rules allow nothing for it, deny rules deny every peer.
    pub const UNSUPPORTED_PEER: &str = "PC001";
    /// `toFQDNs` with no DNS answers in the inventory.
    pub const UNKNOWN_FQDN: &str = "PC002";
    /// `toServices` that yields no peer: no inventory service matches, or
    /// only selector-less services without backends do.
    pub const UNKNOWN_SERVICE: &str = "PC003";
    /// A named port that does not resolve: no keys (as in Cilium).
    pub const NAMED_PORT: &str = "PC004";
    /// The KNP ingress ipBlock quirk is in effect.
    pub const KNP_IPBLOCK_QUIRK: &str = "PC005";
    /// Rules Cilium cannot merge (L7 parsers, listeners, auth): nothing is
    /// allowed for that selector and port.
    pub const MERGE_CONFLICT: &str = "PC006";
    /// A rule for nodes (host firewall), not applied to endpoints.
    pub const HOST_POLICY: &str = "PC007";
    /// A policy selects no endpoint of the inventory.
    pub const SELECTS_NOTHING: &str = "PC008";
    /// A peer that does not parse (bad CIDR).
    pub const INVALID_PEER: &str = "PC009";
    /// A port or ICMP type that does not parse.
    pub const INVALID_PORT: &str = "PC010";
    /// A Cilium 1.19 quirk that porin mirrors and the user should know:
    /// ICMP type 0 read as every ICMP type (cilium/cilium#41304).
    pub const CILIUM_QUIRK: &str = "PC011";
    /// `port: "0"` with an `endPort`: Cilium's datapath key would cover all
    /// ports; porin keeps the range for allows and widens denies to every
    /// port (fail closed).
    pub const PORT_ZERO_RANGE: &str = "PC012";
    /// A `toServices` reference without a namespace in a CNP matched a
    /// service of another namespace (Cilium matches every namespace).
    pub const SERVICE_ANY_NAMESPACE: &str = "PC013";
    /// `toServices` in an `egressDeny` item, which Cilium never translates.
    pub const SERVICE_IN_DENY: &str = "PC014";

    /// Every code with a kebab-case name and a one-line meaning, in code
    /// order (the source of `crates/compiler/CODES.md`).
    pub const ALL: &[(&str, &str, &str)] = &[
        (
            UNSUPPORTED_PEER,
            "unsupported-peer",
            "A peer porin cannot resolve offline (fromNodes/toNodes, fromGroups/toGroups, cidrGroupRef/cidrGroupSelector): allow rules allow nothing for it, deny rules deny every peer on those ports (fail closed).",
        ),
        (
            UNKNOWN_FQDN,
            "unknown-fqdn",
            "toFQDNs has no DNS answers in the inventory (`fqdns`): nothing is allowed for that selector (fail closed).",
        ),
        (
            UNKNOWN_SERVICE,
            "unknown-service",
            "toServices yields no peer (no inventory service matches, or only selector-less services without backends): allow rules allow nothing, deny rules deny every peer (fail closed). When no item of an allow rule with ports yields a peer, Cilium 1.19 leaves the rule without L3 and allows those ports to every peer; porin does not.",
        ),
        (
            NAMED_PORT,
            "named-port",
            "A named port does not resolve (unknown, incompatible protocol, zero, duplicate numbers cluster-wide for egress): the rule yields no keys, as in Cilium (`GetNamedPort`, pkg/types/portmap.go).",
        ),
        (
            KNP_IPBLOCK_QUIRK,
            "knp-ipblock-quirk",
            "A KNP ingress peer with only an ipBlock also admits every pod of the policy namespace in Cilium (parseNetworkPolicyPeer); porin mirrors it.",
        ),
        (
            MERGE_CONFLICT,
            "merge-conflict",
            "Rules Cilium cannot merge on one port and selector (L7 parsers, listeners with the same priority, authentication types): nothing is allowed there (fail closed).",
        ),
        (
            HOST_POLICY,
            "host-policy",
            "A rule with a nodeSelector applies to nodes (host firewall), not to inventory endpoints; porin skips it.",
        ),
        (
            SELECTS_NOTHING,
            "selects-nothing",
            "A policy selects no endpoint of the inventory (incomplete inventory, or a wrong selector).",
        ),
        (
            INVALID_PEER,
            "invalid-peer",
            "A peer that does not parse (a CIDR): compiled like an unresolvable peer (fail closed).",
        ),
        (
            INVALID_PORT,
            "invalid-port",
            "A port or ICMP type that does not parse: that port is left out; the rule never widens to all ports.",
        ),
        (
            CILIUM_QUIRK,
            "cilium-quirk",
            "ICMP type 0 in icmps means every ICMP type in Cilium 1.19 (cilium/cilium#41304); porin mirrors it and says so.",
        ),
        (
            PORT_ZERO_RANGE,
            "port-zero-range",
            "port \"0\" with an endPort: Cilium's datapath key covers every port; porin keeps the range 0-endPort for allows and denies every port for denies (fail closed both ways).",
        ),
        (
            SERVICE_ANY_NAMESPACE,
            "service-any-namespace",
            "A toServices k8sService/k8sServiceSelector without a namespace in a CiliumNetworkPolicy matched a service outside the policy's namespace: Cilium matches every namespace (serviceRefMatches, serviceSelectorMatches), and so does porin.",
        ),
        (
            SERVICE_IN_DENY,
            "service-in-deny",
            "toServices in egressDeny: Cilium translates toServices only in egress rules (processRule), leaving the deny item without L3: with ports it denies them to every peer (porin too); without ports it denies nothing (porin denies the services' backends, fail closed).",
        ),
    ];
}

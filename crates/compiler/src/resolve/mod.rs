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
pub mod policy;
pub mod rule;

/// Compiler diagnostic codes (`PC0xx`). Stable: never reuse a number.
pub mod codes {
    /// A peer porin cannot resolve offline (nodes, groups, CIDR groups):
    /// allow rules allow nothing for it, deny rules deny every peer.
    pub const UNSUPPORTED_PEER: &str = "PC001";
    /// `toFQDNs` with no DNS answers in the inventory.
    pub const UNKNOWN_FQDN: &str = "PC002";
    /// `toServices` naming a service the inventory does not define.
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
    /// ports; porin keeps the range (fail closed).
    pub const PORT_ZERO_RANGE: &str = "PC012";
}

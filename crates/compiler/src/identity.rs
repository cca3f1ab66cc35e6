//! Numeric security identities, as Cilium numbers them.
//!
//! Reference: Cilium `pkg/identity/numericidentity.go` (docs/semantics.md §3.5).
//!
//! A [`Identity`] is a `u32` whose top 8 bits are a *scope*:
//!
//! | scope byte | meaning | constructor |
//! |---|---|---|
//! | `0x00` | global: reserved (1..=11), well-known (100..=115), user-reserved (128..=255), cluster-allocated (>= 256) | [`Identity::new`] |
//! | `0x01` | local (CIDR / FQDN identities, `0x01000000 \| n`) | [`Identity::local`] |
//! | `0x02` | remote-node (`0x02000000 \| n`) | [`Identity::remote_node`] |
//!
//! Any other scope byte is rejected: the datapath and ipcache carry identities
//! as 32-bit values, and a value Cilium could never allocate is almost always a
//! bug upstream of us, so we fail instead of guessing.
//!
//! Identity `0` is special: it is `IdentityUnknown` / `InvalidIdentity` and,
//! in a policy-map key, the *wildcard* ("any peer"). It is accepted by
//! [`Identity::new`] because policy keys need it.

use std::fmt;
use std::ops::RangeInclusive;

use thiserror::Error;

/// An error building an [`Identity`] or an identity range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// The value's scope byte is not global, local or remote-node.
    #[error(
        "identity `{value:#010x}` has unknown scope `{scope:#04x}` (expected 0x00, 0x01 or 0x02)"
    )]
    UnknownScope {
        /// The rejected value.
        value: u32,
        /// Its top 8 bits.
        scope: u8,
    },
    /// A scoped (local / remote-node) identity needs a non-zero 24-bit index.
    #[error("scoped identity index `{index}` is out of range 1..=16777215")]
    ScopedIndexOutOfRange {
        /// The rejected index.
        index: u32,
    },
    /// `max-connected-clusters` must be 255 or 511 (what Cilium accepts).
    #[error("max-connected-clusters `{given}` is not supported (Cilium accepts 255 or 511)")]
    UnsupportedMaxConnectedClusters {
        /// The rejected setting.
        given: u32,
    },
    /// A cluster ID beyond `max-connected-clusters`.
    #[error("cluster id `{given}` exceeds the limit `{limit}`")]
    ClusterIdOutOfRange {
        /// The rejected cluster ID.
        given: u32,
        /// The largest valid cluster ID.
        limit: u32,
    },
}

/// The scope of an identity (its top 8 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// `0x00`: reserved, well-known and cluster-allocated identities.
    Global,
    /// `0x01` (`IdentityScopeLocal`): CIDR and FQDN identities, node-local.
    Local,
    /// `0x02` (`IdentityScopeRemoteNode`): remote-node identities.
    RemoteNode,
}

/// A Cilium numeric security identity (`NumericIdentity`).
///
/// The inner value is private so every identity went through a checked
/// constructor; [`Identity::get`] gives the raw number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Identity(u32);

impl Identity {
    /// `IdentityScopeMask`: the top 8 bits.
    pub const SCOPE_MASK: u32 = 0xFF00_0000;
    /// `IdentityScopeLocal`.
    pub const SCOPE_LOCAL: u32 = 0x0100_0000;
    /// `IdentityScopeRemoteNode`.
    pub const SCOPE_REMOTE_NODE: u32 = 0x0200_0000;
    /// The largest 24-bit index (`NumericIdentityBitlength = 24`).
    pub const MAX_INDEX: u32 = 0x00FF_FFFF;
    /// Exclusive upper bound of all valid identity values
    /// (remote-node scope is the highest scope).
    pub const LIMIT: u32 = 0x0300_0000;

    /// 0: unknown / invalid identity; the wildcard ("any") in policy keys.
    pub const WILDCARD: Identity = Identity(0);
    /// 0: alias of [`Identity::WILDCARD`] (`IdentityUnknown`).
    pub const UNKNOWN: Identity = Identity(0);
    /// 1: `reserved:host`.
    pub const HOST: Identity = Identity(1);
    /// 2: `reserved:world`.
    pub const WORLD: Identity = Identity(2);
    /// 3: `reserved:unmanaged`.
    pub const UNMANAGED: Identity = Identity(3);
    /// 4: `reserved:health`.
    pub const HEALTH: Identity = Identity(4);
    /// 5: `reserved:init`.
    pub const INIT: Identity = Identity(5);
    /// 6: `reserved:remote-node`.
    pub const REMOTE_NODE: Identity = Identity(6);
    /// 7: `reserved:kube-apiserver` (also carries `reserved:remote-node`).
    pub const KUBE_APISERVER: Identity = Identity(7);
    /// 8: `reserved:ingress`.
    pub const INGRESS: Identity = Identity(8);
    /// 9: `reserved:world-ipv4` (dual-stack world for IPv4).
    pub const WORLD_IPV4: Identity = Identity(9);
    /// 10: `reserved:world-ipv6` (dual-stack world for IPv6).
    pub const WORLD_IPV6: Identity = Identity(10);
    /// 11: `reserved:overlay-to-encrypt` (`ReservedEncryptedOverlay`; never on the wire).
    pub const ENCRYPTED_OVERLAY: Identity = Identity(11);

    /// 100: first well-known identity (`iota + 100`).
    pub const FIRST_WELL_KNOWN: u32 = 100;
    /// 115: last well-known identity (the "…2" variants end here).
    pub const LAST_WELL_KNOWN: u32 = 115;
    /// 128: `UserReservedNumericIdentity`, first user-reserved number.
    pub const USER_RESERVED_MIN: u32 = 128;
    /// 256: `MinimalNumericIdentity`, first allocatable global identity.
    pub const MINIMAL_NUMERIC: u32 = 256;
    /// `MinLocalIdentity = 1 | 0x01000000`.
    pub const MIN_LOCAL: Identity = Identity(Self::SCOPE_LOCAL | 1);
    /// `MaxLocalIdentity = 0xFFFFFF | 0x01000000`.
    pub const MAX_LOCAL: Identity = Identity(Self::SCOPE_LOCAL | Self::MAX_INDEX);

    /// The reserved identities with their label names (`reserved:<name>`).
    pub const RESERVED: [(Identity, &'static str); 11] = [
        (Self::HOST, "host"),
        (Self::WORLD, "world"),
        (Self::UNMANAGED, "unmanaged"),
        (Self::HEALTH, "health"),
        (Self::INIT, "init"),
        (Self::REMOTE_NODE, "remote-node"),
        (Self::KUBE_APISERVER, "kube-apiserver"),
        (Self::INGRESS, "ingress"),
        (Self::WORLD_IPV4, "world-ipv4"),
        (Self::WORLD_IPV6, "world-ipv6"),
        (Self::ENCRYPTED_OVERLAY, "overlay-to-encrypt"),
    ];

    /// Checks a raw value: the scope byte must be 0x00, 0x01 or 0x02, and a
    /// scoped value needs a non-zero index.
    pub fn new(value: u32) -> Result<Identity, IdentityError> {
        let scope = (value >> 24) as u8;
        match scope {
            0 => Ok(Identity(value)),
            1 | 2 => {
                if value & Self::MAX_INDEX == 0 {
                    Err(IdentityError::ScopedIndexOutOfRange { index: 0 })
                } else {
                    Ok(Identity(value))
                }
            }
            _ => Err(IdentityError::UnknownScope { value, scope }),
        }
    }

    /// A local-scope (CIDR / FQDN) identity `0x01000000 | index`,
    /// `index` in `1..=0xFFFFFF` (`localIdentity(n)` in Cilium's tests).
    pub fn local(index: u32) -> Result<Identity, IdentityError> {
        Self::scoped(Self::SCOPE_LOCAL, index)
    }

    /// A remote-node-scope identity `0x02000000 | index`, `index` in `1..=0xFFFFFF`.
    pub fn remote_node(index: u32) -> Result<Identity, IdentityError> {
        Self::scoped(Self::SCOPE_REMOTE_NODE, index)
    }

    fn scoped(scope: u32, index: u32) -> Result<Identity, IdentityError> {
        if index == 0 || index > Self::MAX_INDEX {
            return Err(IdentityError::ScopedIndexOutOfRange { index });
        }
        Ok(Identity(scope | index))
    }

    /// The raw number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The scope of this identity.
    pub const fn scope(self) -> Scope {
        match self.0 & Self::SCOPE_MASK {
            Self::SCOPE_LOCAL => Scope::Local,
            Self::SCOPE_REMOTE_NODE => Scope::RemoteNode,
            // `new` admits only these three scopes.
            _ => Scope::Global,
        }
    }

    /// True for identity 0, the wildcard of policy keys.
    pub const fn is_wildcard(self) -> bool {
        self.0 == 0
    }

    /// True for a reserved identity 1..=11 (`reserved:*` labels).
    pub const fn is_reserved(self) -> bool {
        self.0 >= 1 && self.0 <= 11
    }

    /// True for a well-known identity 100..=115 (kube-dns, CoreDNS, operator, …).
    pub const fn is_well_known(self) -> bool {
        self.0 >= Self::FIRST_WELL_KNOWN && self.0 <= Self::LAST_WELL_KNOWN
    }

    /// True for world (2) and, in dual-stack, world-ipv4 (9) and world-ipv6 (10)
    /// (`NumericIdentity.IsWorld`).
    pub const fn is_world(self) -> bool {
        self.0 == 2 || self.0 == 9 || self.0 == 10
    }

    /// True for a local-scope (CIDR / FQDN) identity (`HasLocalScope`).
    pub const fn has_local_scope(self) -> bool {
        self.0 & Self::SCOPE_MASK == Self::SCOPE_LOCAL
    }

    /// True for a remote-node-scope identity.
    pub const fn has_remote_node_scope(self) -> bool {
        self.0 & Self::SCOPE_MASK == Self::SCOPE_REMOTE_NODE
    }

    /// `IsCluster()`: not world and not local scope.
    pub const fn is_cluster(self) -> bool {
        !self.is_world() && !self.has_local_scope()
    }

    /// The `reserved:<name>` label name of a reserved identity.
    pub fn reserved_name(self) -> Option<&'static str> {
        Self::RESERVED
            .iter()
            .find(|(id, _)| *id == self)
            .map(|(_, name)| *name)
    }

    /// The reserved identity named `name` (without the `reserved:` prefix).
    pub fn from_reserved_name(name: &str) -> Option<Identity> {
        Self::RESERVED
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(id, _)| *id)
    }
}

impl TryFrom<u32> for Identity {
    type Error = IdentityError;

    fn try_from(value: u32) -> Result<Self, Self::Error> {
        Identity::new(value)
    }
}

impl From<Identity> for u32 {
    fn from(id: Identity) -> u32 {
        id.0
    }
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The identity range allocated to cluster `cluster_id` when Cilium runs with
/// `max-connected-clusters = max_connected_clusters` (255 or 511).
///
/// `clusterIDBits = log2(max+1)`, `shift = 24 - bits`; cluster `c` owns
/// `[c << shift, ((c+1) << shift) - 1]`, except that cluster 0 starts at
/// [`Identity::MINIMAL_NUMERIC`] (256). Defaults: cluster 0 = 256..=65535,
/// cluster 5 = 327680..=393215 (docs/semantics.md §3.5).
pub fn cluster_identity_range(
    cluster_id: u32,
    max_connected_clusters: u32,
) -> Result<RangeInclusive<u32>, IdentityError> {
    let bits = match max_connected_clusters {
        255 => 8,
        511 => 9,
        given => return Err(IdentityError::UnsupportedMaxConnectedClusters { given }),
    };
    if cluster_id > max_connected_clusters {
        return Err(IdentityError::ClusterIdOutOfRange {
            given: cluster_id,
            limit: max_connected_clusters,
        });
    }
    let shift = 24 - bits;
    let start = (cluster_id << shift).max(Identity::MINIMAL_NUMERIC);
    let end = ((cluster_id + 1) << shift) - 1;
    Ok(start..=end)
}

#[cfg(test)]
mod tests {
    use super::*;

    // pkg/identity/numericidentity.go: the reserved iota table.
    #[test]
    fn reserved_numbers_match_numericidentity_go() {
        let expected = [
            ("host", 1),
            ("world", 2),
            ("unmanaged", 3),
            ("health", 4),
            ("init", 5),
            ("remote-node", 6),
            ("kube-apiserver", 7),
            ("ingress", 8),
            ("world-ipv4", 9),
            ("world-ipv6", 10),
            ("overlay-to-encrypt", 11),
        ];
        for (name, number) in expected {
            let id = Identity::from_reserved_name(name).unwrap();
            assert_eq!(id.get(), number, "{name}");
            assert_eq!(id.reserved_name(), Some(name));
            assert!(id.is_reserved());
        }
        assert_eq!(Identity::WILDCARD.get(), 0);
        assert!(Identity::WILDCARD.is_wildcard());
        assert_eq!(Identity::from_reserved_name("nope"), None);
        assert_eq!(Identity::new(12).unwrap().reserved_name(), None);
    }

    #[test]
    fn scopes_and_checked_constructors() {
        assert_eq!(Identity::local(1).unwrap(), Identity::MIN_LOCAL);
        assert_eq!(Identity::local(0xFF_FFFF).unwrap(), Identity::MAX_LOCAL);
        assert_eq!(Identity::local(16324).unwrap().get(), 0x0100_3FC4);
        assert!(Identity::local(0).is_err());
        assert!(Identity::local(0x100_0000).is_err());
        assert_eq!(Identity::remote_node(7).unwrap().get(), 0x0200_0007);
        assert_eq!(Identity::local(3).unwrap().scope(), Scope::Local);
        assert_eq!(Identity::remote_node(3).unwrap().scope(), Scope::RemoteNode);
        assert_eq!(Identity::new(256).unwrap().scope(), Scope::Global);
        assert_eq!(
            Identity::new(0x0300_0001),
            Err(IdentityError::UnknownScope {
                value: 0x0300_0001,
                scope: 3
            })
        );
        assert!(Identity::new(0x0100_0000).is_err());
        assert!(Identity::try_from(0xFFFF_FFFF).is_err());
        assert_eq!(u32::from(Identity::try_from(65535).unwrap()), 65535);
        // Every value below LIMIT with a valid scope is accepted.
        assert!(Identity::new(Identity::LIMIT - 1).is_ok());
        assert!(Identity::new(Identity::LIMIT).is_err());
    }

    // numericidentity.go IsWorld / IsCluster / HasLocalScope.
    #[test]
    fn world_and_cluster_predicates() {
        for id in [2, 9, 10] {
            assert!(Identity::new(id).unwrap().is_world());
            assert!(!Identity::new(id).unwrap().is_cluster());
        }
        assert!(!Identity::HOST.is_world());
        assert!(Identity::HOST.is_cluster());
        let cidr = Identity::local(5).unwrap();
        assert!(cidr.has_local_scope());
        assert!(!cidr.is_cluster());
        assert!(Identity::remote_node(5).unwrap().is_cluster());
        assert!(Identity::new(104).unwrap().is_well_known());
        assert!(!Identity::new(116).unwrap().is_well_known());
    }

    // docs/semantics.md §3.5 cluster ranges.
    #[test]
    fn cluster_ranges() {
        assert_eq!(cluster_identity_range(0, 255).unwrap(), 256..=65535);
        assert_eq!(cluster_identity_range(5, 255).unwrap(), 327_680..=393_215);
        assert_eq!(
            cluster_identity_range(255, 255).unwrap(),
            0xFF_0000..=0xFF_FFFF
        );
        assert_eq!(cluster_identity_range(1, 511).unwrap(), 32768..=65535);
        assert_eq!(
            cluster_identity_range(511, 511).unwrap(),
            0xFF_8000..=0xFF_FFFF
        );
        assert!(cluster_identity_range(256, 255).is_err());
        assert!(cluster_identity_range(1, 100).is_err());
    }
}

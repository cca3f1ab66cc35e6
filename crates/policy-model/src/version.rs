//! The Cilium version as an input, and the one table of what changes
//! between versions ([`TABLE`]).
//!
//! Every difference porin knows between Cilium minor versions is a row of
//! [`TABLE`], each citing where it comes from (release notes, pull
//! requests, files). Validation ([`crate::target`], code `PM050`),
//! lint's `PR016` and the upgrade check (`porin lint --upgrade-to`) all
//! read the same rows; nothing else lists versioned fields.
//!
//! porin *models* two versions end to end ([`CiliumVersion::MODELLED`]:
//! 1.19, the default, and 1.20). Older versions are accepted by `PR016`
//! (`ciliumVersion` in `.porin.yaml`), which reports the fields they do
//! not honour; validation then follows 1.19.

use std::fmt;

use serde_json::Value;

/// A Cilium `major.minor` version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CiliumVersion {
    /// Major version (1).
    pub major: u32,
    /// Minor version.
    pub minor: u32,
}

impl CiliumVersion {
    /// Cilium 1.19, porin's semantic oracle and the default.
    pub const V1_19: CiliumVersion = CiliumVersion::new(1, 19);
    /// Cilium 1.20.
    pub const V1_20: CiliumVersion = CiliumVersion::new(1, 20);
    /// The version used when none is given.
    pub const DEFAULT: CiliumVersion = CiliumVersion::V1_19;
    /// The versions whose validation and semantics porin models.
    pub const MODELLED: [CiliumVersion; 2] = [CiliumVersion::V1_19, CiliumVersion::V1_20];

    /// A version.
    pub const fn new(major: u32, minor: u32) -> CiliumVersion {
        CiliumVersion { major, minor }
    }

    /// Parses `MAJOR.MINOR` (`"1.20"`); a patch part (`1.20.3`) is
    /// accepted and ignored, as no row depends on it.
    pub fn parse(text: &str) -> Option<CiliumVersion> {
        let text = text.trim().trim_start_matches('v');
        let mut parts = text.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        match parts.next() {
            None => {}
            Some(patch) if patch.parse::<u32>().is_ok() && parts.next().is_none() => {}
            Some(_) => return None,
        }
        Some(CiliumVersion::new(major, minor))
    }

    /// Parses a version porin models (`1.19` or `1.20`), for
    /// `--cilium-version`; the error says which are.
    pub fn parse_modelled(text: &str) -> Result<CiliumVersion, String> {
        match CiliumVersion::parse(text) {
            Some(version) if CiliumVersion::MODELLED.contains(&version) => Ok(version),
            _ => Err(format!(
                "`{text}` is not a Cilium version porin models; use one of {}",
                CiliumVersion::MODELLED.map(|v| v.to_string()).join(", ")
            )),
        }
    }

    /// Whether porin models this version's validation and semantics.
    pub fn is_modelled(self) -> bool {
        CiliumVersion::MODELLED.contains(&self)
    }

    /// The version whose validation applies: this one if modelled, else
    /// 1.19 (the oldest porin models; `PR016` reports the rest).
    pub fn validation(self) -> CiliumVersion {
        if self.is_modelled() {
            self
        } else {
            CiliumVersion::V1_19
        }
    }
}

impl Default for CiliumVersion {
    fn default() -> Self {
        CiliumVersion::DEFAULT
    }
}

impl fmt::Display for CiliumVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The agent settings a version-dependent row may need, with the version:
/// what porin is told about the cluster it checks policies for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Target {
    /// The Cilium version.
    pub version: CiliumVersion,
    /// `--enable-k8s-cluster-network-policy` (Cilium 1.20+, default
    /// false): whether the agent watches Kubernetes ClusterNetworkPolicy.
    pub k8s_cluster_network_policy: bool,
}

impl Target {
    /// A target of this version with every optional setting off.
    pub const fn new(version: CiliumVersion) -> Target {
        Target {
            version,
            k8s_cluster_network_policy: false,
        }
    }
}

/// What one source of the target says, each part optional: the command
/// line (`--cilium-version`, `--enable-k8s-cluster-network-policy`), an
/// inventory or PolicyTest file (`ciliumVersion`,
/// `enableK8sClusterNetworkPolicy`), `.porin.yaml`, or a C API session.
/// Sources are layered with [`TargetChoice::or`], the most specific first
/// (command line > inventory or test file > `.porin.yaml` > default), and
/// the unset parts take the defaults ([`TargetChoice::target`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TargetChoice {
    /// The Cilium version, if this source names one.
    pub version: Option<CiliumVersion>,
    /// `--enable-k8s-cluster-network-policy`, if this source sets it.
    pub k8s_cluster_network_policy: Option<bool>,
}

impl TargetChoice {
    /// This choice where it says something, `lower` elsewhere.
    #[must_use]
    pub fn or(self, lower: TargetChoice) -> TargetChoice {
        TargetChoice {
            version: self.version.or(lower.version),
            k8s_cluster_network_policy: self
                .k8s_cluster_network_policy
                .or(lower.k8s_cluster_network_policy),
        }
    }

    /// The target, with the defaults (Cilium 1.19, every setting off) for
    /// what no source said.
    pub fn target(self) -> Target {
        Target {
            version: self.version.unwrap_or(CiliumVersion::DEFAULT),
            k8s_cluster_network_policy: self.k8s_cluster_network_policy.unwrap_or(false),
        }
    }
}

/// What a row applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    /// A field of a CiliumNetworkPolicy or CiliumClusterwideNetworkPolicy
    /// rule (route below `spec`/`specs[i]`).
    Cilium,
    /// A field of a Kubernetes `networking.k8s.io/v1` NetworkPolicy spec.
    Kubernetes,
    /// A resource kind (route: `apiVersion kind`).
    Kind,
}

/// When Cilium honours what a row names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// First honoured in this version.
    Since(CiliumVersion),
    /// Deprecated in the first (if it was), no longer honoured from the
    /// second on.
    Removed {
        /// Release that deprecated it, if any did.
        deprecated: Option<CiliumVersion>,
        /// First release without it.
        removed: CiliumVersion,
    },
}

/// What a version that does not honour a row's field does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The API server refuses the object (the CRD lacks the field, or
    /// bounds it to nothing): the policy stops validating.
    Rejected,
    /// The object is accepted but the agent ignores the field (or the
    /// kind): the policy means something else than it says.
    Ignored,
}

/// One difference between Cilium versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// Stable short name, quoted by the upgrade report.
    pub id: &'static str,
    /// Which documents it applies to.
    pub applies: Applies,
    /// Route below the rule, `[*]` for any index (e.g.
    /// `ingress[*].toPorts[*].ports[*].endPort`), or `apiVersion kind` for
    /// [`Applies::Kind`].
    pub route: &'static str,
    /// When it is honoured.
    pub change: Change,
    /// What a version that does not honour it does.
    pub effect: Effect,
    /// The validation code that rejects it in a modelled version that
    /// does not honour it (`None`: no modelled version rejects it).
    pub validated_by: Option<&'static str>,
    /// What older (or newer) agents do with it, for messages.
    pub note: &'static str,
    /// Where the row comes from.
    pub source: &'static str,
}

impl Row {
    /// Whether `version` honours the row's field or kind.
    pub fn honoured_in(&self, version: CiliumVersion) -> bool {
        match self.change {
            Change::Since(since) => version >= since,
            Change::Removed { removed, .. } => version < removed,
        }
    }

    /// The field name the row is about (last route segment).
    pub fn field(&self) -> &'static str {
        let route = self.route;
        route.rsplit(['.', ' ']).next().unwrap_or(route)
    }

    /// The version the row turns at.
    pub fn turning_version(&self) -> CiliumVersion {
        match self.change {
            Change::Since(v) | Change::Removed { removed: v, .. } => v,
        }
    }
}

const fn v(minor: u32) -> CiliumVersion {
    CiliumVersion::new(1, minor)
}

const fn since(
    id: &'static str,
    applies: Applies,
    route: &'static str,
    version: CiliumVersion,
    note: &'static str,
    source: &'static str,
) -> Row {
    Row {
        id,
        applies,
        route,
        change: Change::Since(version),
        effect: Effect::Ignored,
        validated_by: None,
        note,
        source,
    }
}

#[allow(clippy::too_many_arguments, reason = "a table row, named at each use")]
const fn removed(
    id: &'static str,
    route: &'static str,
    deprecated: Option<CiliumVersion>,
    removed: CiliumVersion,
    validated_by: &'static str,
    note: &'static str,
    source: &'static str,
) -> Row {
    Row {
        id,
        applies: Applies::Cilium,
        route,
        change: Change::Removed {
            deprecated,
            removed,
        },
        effect: Effect::Rejected,
        validated_by: Some(validated_by),
        note,
        source,
    }
}

const ICMPS_NOTE: &str = "ICMP rules (`icmps`) arrived in Cilium 1.11 behind the `enable-icmp-rules` flag, off by \
default; 1.12 turned the flag on by default";
const ICMPS_SOURCE: &str = "v1.11.0-rc0 release notes: \"policy: Add ICMP and ICMPv6 support for CNP and CCNP with a \
feature flag\" (cilium/cilium#16516); v1.12.0-rc3 release notes: \"Enables ICMP network policy function by default\" \
(#20174)";
const PORT_RANGE_NOTE: &str = "port ranges arrived in Cilium 1.16; 1.14.4 and later 1.14/1.15 patch releases do not \
process policies that use them (cilium/cilium#28704), older agents ignore `endPort` silently (#28684)";
const PORT_RANGE_SOURCE: &str = "cilium/cilium#32807 (port range mapping, fixes #16622), docs #33389 (merged \
2024-07-04 for v1.16.0); v1.14.4 release notes for #28704";
const NODES_NOTE: &str = "node selectors in policies arrived in Cilium 1.16 and need the agent flag \
`enable-node-selector-labels`";
const NODES_SOURCE: &str = "v1.16.0 CHANGELOG: \"identity: Allow nodes to be selectable by their labels instead of \
CIDR and/or remote-node entity\" (cilium/cilium#26924)";
const CIDR_GROUP_INGRESS_NOTE: &str = "CiliumCIDRGroup references (`cidrGroupRef`) in `fromCIDRSet` arrived in \
Cilium 1.14 (the ingress and ingress-deny rules share the field)";
const CIDR_GROUP_INGRESS_SOURCE: &str = "v1.14.0 release notes: \"Add support for references to CiliumCIDRGroup \
inside FromCIDRSet for ingress rules in CNPs\" (cilium/cilium#24638)";
const CIDR_GROUP_EGRESS_NOTE: &str = "CiliumCIDRGroup references in `toCIDRSet` arrived in Cilium 1.16 (the egress \
and egress-deny rules share the field)";
const CIDR_GROUP_EGRESS_SOURCE: &str = "v1.16.0 CHANGELOG: \"Add support for matching CiliumCIDRGroups in Egress \
policy rules\" (cilium/cilium#30624)";
const AUTH_NOTE: &str =
    "mutual authentication (`authentication.mode`) arrived in Cilium 1.14 (beta)";
const AUTH_SOURCE: &str = "v1.14.0 release notes: \"Add mtls-spiffe as auth mode in the CiliumNetworkPolicy\" (cilium/cilium#24263)";
const SNI_NOTE: &str = "SNI enforcement (`serverNames`) arrived in Cilium 1.13";
const SNI_SOURCE: &str = "v1.13.0 release notes: \"CiliumNetworkPolicy now supports enforcement of SNI in TLS \
connections\" (cilium/cilium#22398)";
const REQUIRES_NOTE: &str = "`fromRequires`/`toRequires` were deprecated in Cilium 1.17 and removed in 1.19; the \
1.19 CRD keeps them with `maxItems: 0`, so the API server rejects any entry";
const REQUIRES_SOURCE: &str = "cilium/cilium#36649 (docs: deprecate requires fields, 1.17), #42615 (remove support, \
1.19 upgrade notes), #43167 and issue #43088 (release-blocker/1.19: reject with maxItems 0)";
const KAFKA_NOTE: &str = "Kafka-aware policy (`toPorts[].rules.kafka`) was deprecated in Cilium 1.18 and removed \
in 1.20 with proxylib; the 1.20 CRDs no longer define the field, so the API server rejects a policy that uses it";
const KAFKA_SOURCE: &str = "cilium/cilium#40967 (1.18 release note: \"Kafka Network Policy support is deprecated and \
will be removed in Cilium v1.20\"), #43557 (\"Removed support for Envoy Go Extensions (proxylib) and Kafka-aware \
network policies\"), #44610 (\"`Kafka`, `L7Proto` and `L7` fields are removed from CNP and CCNP CRDs\", \
pkg/k8s/apis/cilium.io/client/crds/v2/ciliumnetworkpolicies.yaml)";
const L7PROTO_NOTE: &str = "generic L7 rules (`toPorts[].rules.l7proto` and `rules.l7`, the proxylib parsers) were \
removed from the CNP and CCNP CRDs in Cilium 1.20 without a deprecation period";
const L7PROTO_SOURCE: &str = "cilium/cilium#44610 (\"policy: Remove generic L7 policy support\": `Kafka`, `L7Proto` \
and `L7` fields are removed from CNP and CCNP CRDs), after #43557 (proxylib removed)";
const KCNP_NOTE: &str = "Kubernetes ClusterNetworkPolicy (`policy.networking.k8s.io/v1alpha2`) is implemented from \
Cilium 1.20, and only with `--enable-k8s-cluster-network-policy=true` (Helm `k8sClusterNetworkPolicy.enabled`); an \
older or unconfigured agent does not watch the resource, so none of its rules (Deny included) is enforced";
const KCNP_SOURCE: &str = "cilium/cilium pkg/k8s/cluster_network_policy.go (ParseClusterNetworkPolicy), \
pkg/policy/k8s/cluster_network_policy.go (the watcher), #47227 (docs: \"Support for the Kubernetes \
ClusterNetworkPolicy (KCNP) is available starting with Cilium 1.20\")";

/// Every difference between Cilium versions porin knows, by route. Left
/// out because their first release could not be established from release
/// notes or pull requests: `listener` and `listener.priority`
/// (cilium/cilium#21600, #28555), `cidrGroupSelector` (#36087), ICMP type
/// names in `icmps[].fields[].type`. Fields older than Cilium 1.10
/// (`terminatingTLS`, `originatingTLS`, `headerMatches`, `toGroups`,
/// `toFQDNs`, `nodeSelector`, deny rules) are not listed: every supported
/// version has them.
pub const TABLE: &[Row] = &[
    since(
        "icmps",
        Applies::Cilium,
        "ingress[*].icmps",
        v(12),
        ICMPS_NOTE,
        ICMPS_SOURCE,
    ),
    since(
        "icmps",
        Applies::Cilium,
        "ingressDeny[*].icmps",
        v(12),
        ICMPS_NOTE,
        ICMPS_SOURCE,
    ),
    since(
        "icmps",
        Applies::Cilium,
        "egress[*].icmps",
        v(12),
        ICMPS_NOTE,
        ICMPS_SOURCE,
    ),
    since(
        "icmps",
        Applies::Cilium,
        "egressDeny[*].icmps",
        v(12),
        ICMPS_NOTE,
        ICMPS_SOURCE,
    ),
    since(
        "server-names",
        Applies::Cilium,
        "ingress[*].toPorts[*].serverNames",
        v(13),
        SNI_NOTE,
        SNI_SOURCE,
    ),
    since(
        "server-names",
        Applies::Cilium,
        "egress[*].toPorts[*].serverNames",
        v(13),
        SNI_NOTE,
        SNI_SOURCE,
    ),
    since(
        "authentication",
        Applies::Cilium,
        "ingress[*].authentication",
        v(14),
        AUTH_NOTE,
        AUTH_SOURCE,
    ),
    since(
        "authentication",
        Applies::Cilium,
        "egress[*].authentication",
        v(14),
        AUTH_NOTE,
        AUTH_SOURCE,
    ),
    since(
        "cidr-group-ingress",
        Applies::Cilium,
        "ingress[*].fromCIDRSet[*].cidrGroupRef",
        v(14),
        CIDR_GROUP_INGRESS_NOTE,
        CIDR_GROUP_INGRESS_SOURCE,
    ),
    since(
        "cidr-group-ingress",
        Applies::Cilium,
        "ingressDeny[*].fromCIDRSet[*].cidrGroupRef",
        v(14),
        CIDR_GROUP_INGRESS_NOTE,
        CIDR_GROUP_INGRESS_SOURCE,
    ),
    since(
        "cidr-group-egress",
        Applies::Cilium,
        "egress[*].toCIDRSet[*].cidrGroupRef",
        v(16),
        CIDR_GROUP_EGRESS_NOTE,
        CIDR_GROUP_EGRESS_SOURCE,
    ),
    since(
        "cidr-group-egress",
        Applies::Cilium,
        "egressDeny[*].toCIDRSet[*].cidrGroupRef",
        v(16),
        CIDR_GROUP_EGRESS_NOTE,
        CIDR_GROUP_EGRESS_SOURCE,
    ),
    since(
        "enable-default-deny",
        Applies::Cilium,
        "enableDefaultDeny",
        v(16),
        "per-policy default-deny opt-out; not in 1.15 (the pull request was still in review after v1.15.0 \
shipped), first released in 1.16; older API servers drop or reject the unknown field",
        "cilium/cilium#30572 (in review 2024-02-07, after v1.15.0 of 2024-01-31) and its design \
cilium/design-cfps#16 (CFP-30572, merged 2024-02-28)",
    ),
    since(
        "port-range",
        Applies::Cilium,
        "ingress[*].toPorts[*].ports[*].endPort",
        v(16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        "port-range",
        Applies::Cilium,
        "egress[*].toPorts[*].ports[*].endPort",
        v(16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        "port-range",
        Applies::Cilium,
        "ingressDeny[*].toPorts[*].ports[*].endPort",
        v(16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        "port-range",
        Applies::Cilium,
        "egressDeny[*].toPorts[*].ports[*].endPort",
        v(16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        "port-range",
        Applies::Kubernetes,
        "ingress[*].ports[*].endPort",
        v(16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        "port-range",
        Applies::Kubernetes,
        "egress[*].ports[*].endPort",
        v(16),
        PORT_RANGE_NOTE,
        PORT_RANGE_SOURCE,
    ),
    since(
        "nodes",
        Applies::Cilium,
        "ingress[*].fromNodes",
        v(16),
        NODES_NOTE,
        NODES_SOURCE,
    ),
    since(
        "nodes",
        Applies::Cilium,
        "ingressDeny[*].fromNodes",
        v(16),
        NODES_NOTE,
        NODES_SOURCE,
    ),
    since(
        "nodes",
        Applies::Cilium,
        "egress[*].toNodes",
        v(16),
        NODES_NOTE,
        NODES_SOURCE,
    ),
    since(
        "nodes",
        Applies::Cilium,
        "egressDeny[*].toNodes",
        v(16),
        NODES_NOTE,
        NODES_SOURCE,
    ),
    since(
        "log",
        Applies::Cilium,
        "log",
        v(18),
        "the free-text policy `log` field (Hubble) arrived in Cilium 1.18",
        "v1.18.0 release notes: \"Policy Log Fields: A new free-text log field is added to policies\" \
(cilium/cilium#39902)",
    ),
    removed(
        "requires",
        "ingress[*].fromRequires",
        Some(v(17)),
        v(19),
        "PM031",
        REQUIRES_NOTE,
        REQUIRES_SOURCE,
    ),
    removed(
        "requires",
        "ingressDeny[*].fromRequires",
        Some(v(17)),
        v(19),
        "PM031",
        REQUIRES_NOTE,
        REQUIRES_SOURCE,
    ),
    removed(
        "requires",
        "egress[*].toRequires",
        Some(v(17)),
        v(19),
        "PM031",
        REQUIRES_NOTE,
        REQUIRES_SOURCE,
    ),
    removed(
        "requires",
        "egressDeny[*].toRequires",
        Some(v(17)),
        v(19),
        "PM031",
        REQUIRES_NOTE,
        REQUIRES_SOURCE,
    ),
    removed(
        "kafka",
        "ingress[*].toPorts[*].rules.kafka",
        Some(v(18)),
        v(20),
        "PM050",
        KAFKA_NOTE,
        KAFKA_SOURCE,
    ),
    removed(
        "kafka",
        "egress[*].toPorts[*].rules.kafka",
        Some(v(18)),
        v(20),
        "PM050",
        KAFKA_NOTE,
        KAFKA_SOURCE,
    ),
    removed(
        "l7proto",
        "ingress[*].toPorts[*].rules.l7proto",
        None,
        v(20),
        "PM050",
        L7PROTO_NOTE,
        L7PROTO_SOURCE,
    ),
    removed(
        "l7proto",
        "egress[*].toPorts[*].rules.l7proto",
        None,
        v(20),
        "PM050",
        L7PROTO_NOTE,
        L7PROTO_SOURCE,
    ),
    removed(
        "l7proto",
        "ingress[*].toPorts[*].rules.l7",
        None,
        v(20),
        "PM050",
        L7PROTO_NOTE,
        L7PROTO_SOURCE,
    ),
    removed(
        "l7proto",
        "egress[*].toPorts[*].rules.l7",
        None,
        v(20),
        "PM050",
        L7PROTO_NOTE,
        L7PROTO_SOURCE,
    ),
    Row {
        id: "cluster-network-policy",
        applies: Applies::Kind,
        route: "policy.networking.k8s.io ClusterNetworkPolicy",
        change: Change::Since(v(20)),
        effect: Effect::Ignored,
        validated_by: Some("PM066"),
        // PM066 refuses the kind where it is *not* enforced (before 1.20,
        // or without the agent setting): the cluster would ignore its
        // Deny rules. Where it is enforced porin compiles it.
        note: KCNP_NOTE,
        source: KCNP_SOURCE,
    },
];

/// A field of a rule that a version does not honour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionFinding {
    /// The concrete route below the rule, e.g. `ingress[0].icmps`.
    pub route: String,
    /// The row.
    pub row: &'static Row,
    /// What the version does, in a sentence.
    pub message: String,
    /// The row's note and source.
    pub note: String,
}

/// Walks `value`, collecting (concrete route, pattern route, non-empty) of
/// every key whose pattern route `keep` accepts; a key it refuses is not
/// descended into either.
fn walk(
    value: &Value,
    concrete: &str,
    pattern: &str,
    keep: &dyn Fn(&str) -> bool,
    out: &mut Vec<(String, String, bool)>,
) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let join = |base: &str| {
                    if base.is_empty() {
                        key.clone()
                    } else {
                        format!("{base}.{key}")
                    }
                };
                let p = join(pattern);
                if !keep(&p) {
                    continue;
                }
                let c = join(concrete);
                let non_empty = match child {
                    Value::Array(items) => !items.is_empty(),
                    Value::Null => false,
                    _ => true,
                };
                out.push((c.clone(), p.clone(), non_empty));
                walk(child, &c, &p, keep, out);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(
                    item,
                    &format!("{concrete}[{i}]"),
                    &format!("{pattern}[*]"),
                    keep,
                    out,
                );
            }
        }
        _ => {}
    }
}

/// The fields of one rule (as JSON) that Cilium `version` does not honour.
/// A removed list counts only with entries (the 1.19 CRD keeps
/// `fromRequires: []` valid).
pub fn unsupported(rule: &Value, applies: Applies, version: CiliumVersion) -> Vec<VersionFinding> {
    // Only the rows that can fire at `version` are looked for, and only
    // the keys on the way to one of them are walked: walking every key of
    // every rule (with its routes formatted) was 5 % of compiling 65,535
    // CIDR policies, for rows that mostly cannot fire.
    let rows: Vec<&'static Row> = TABLE
        .iter()
        .filter(|r| {
            r.applies == applies
                && match r.change {
                    Change::Since(since) => since > version,
                    Change::Removed { removed, .. } => removed <= version,
                }
        })
        .collect();
    if rows.is_empty() {
        return Vec::new();
    }
    let on_the_way = |pattern: &str| {
        rows.iter().any(|r| {
            r.route.strip_prefix(pattern).is_some_and(|rest| {
                rest.is_empty() || rest.starts_with('.') || rest.starts_with('[')
            })
        })
    };
    let mut keys = Vec::new();
    walk(rule, "", "", &on_the_way, &mut keys);
    let mut found = Vec::new();
    for (concrete, pattern, non_empty) in keys {
        for row in rows.iter().copied().filter(|r| r.route == pattern) {
            let field = row.field();
            let message = match row.change {
                Change::Since(since) if since > version => {
                    format!("`{field}` needs Cilium {since}; the configured version is {version}")
                }
                Change::Removed {
                    deprecated,
                    removed,
                } if removed <= version && non_empty => match deprecated {
                    Some(deprecated) => format!(
                        "`{field}` was removed in Cilium {removed} (deprecated since {deprecated}); the configured version is {version}"
                    ),
                    None => format!(
                        "`{field}` was removed in Cilium {removed}; the configured version is {version}"
                    ),
                },
                _ => continue,
            };
            found.push(VersionFinding {
                route: concrete.clone(),
                row,
                message,
                note: format!("{} (source: {})", row.note, row.source),
            });
        }
    }
    found
}

/// The row of a resource kind, by API group and kind.
pub fn kind_row(group: &str, kind: &str) -> Option<&'static Row> {
    TABLE.iter().find(|row| {
        row.applies == Applies::Kind
            && row
                .route
                .split_once(' ')
                .is_some_and(|(g, k)| g == group && k == kind)
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use serde_json::json;

    use super::*;

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(CiliumVersion::parse("1.20"), Some(CiliumVersion::V1_20));
        assert_eq!(CiliumVersion::parse("v1.19.3"), Some(CiliumVersion::V1_19));
        assert_eq!(CiliumVersion::parse("1"), None);
        assert_eq!(CiliumVersion::parse("1.x"), None);
        assert_eq!(CiliumVersion::parse("1.19.3.4"), None);
        assert!(CiliumVersion::V1_19 < CiliumVersion::V1_20);
        assert!(CiliumVersion::new(1, 9) < CiliumVersion::V1_19);
        assert!(
            CiliumVersion::parse_modelled("1.18")
                .unwrap_err()
                .contains("1.19, 1.20")
        );
        assert_eq!(CiliumVersion::new(1, 15).validation(), CiliumVersion::V1_19);
        assert_eq!(CiliumVersion::DEFAULT, CiliumVersion::V1_19);
    }

    #[test]
    fn target_choices_layer_most_specific_first() {
        let flag = TargetChoice {
            version: Some(CiliumVersion::V1_19),
            k8s_cluster_network_policy: None,
        };
        let file = TargetChoice {
            version: Some(CiliumVersion::V1_20),
            k8s_cluster_network_policy: Some(true),
        };
        // The flag's version wins; the file's switch fills the gap.
        assert_eq!(
            flag.or(file).target(),
            Target {
                version: CiliumVersion::V1_19,
                k8s_cluster_network_policy: true
            }
        );
        // An explicit `false` is an answer, not a gap.
        let off = TargetChoice {
            version: None,
            k8s_cluster_network_policy: Some(false),
        };
        assert!(!off.or(file).target().k8s_cluster_network_policy);
        assert_eq!(
            TargetChoice::default().target(),
            Target::new(CiliumVersion::DEFAULT)
        );
    }

    #[test]
    fn only_the_field_at_its_route_counts() {
        let rule = json!({
            "endpointSelector": {"matchLabels": {"endPort": "x", "log": "y", "kafka": "z"}},
            "ingress": [{"toPorts": [{"ports": [{"port": "80", "endPort": 90}]}]}],
        });
        let found = unsupported(&rule, Applies::Cilium, CiliumVersion::new(1, 15));
        let routes: Vec<&str> = found.iter().map(|f| f.route.as_str()).collect();
        assert_eq!(routes, ["ingress[0].toPorts[0].ports[0].endPort"]);
        assert!(unsupported(&rule, Applies::Kubernetes, CiliumVersion::new(1, 15)).is_empty());
        assert!(unsupported(&rule, Applies::Cilium, CiliumVersion::V1_20).is_empty());
    }

    #[test]
    fn every_row_cites_a_source_and_routes_are_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for row in TABLE {
            assert!(
                !row.source.is_empty() && !row.note.is_empty(),
                "{}",
                row.route
            );
            assert!(
                seen.insert((row.route, row.applies as u8)),
                "{} twice",
                row.route
            );
            // A row validation rejects in a modelled version says which
            // code does; one that only goes unhonoured needs none.
            if row.effect == Effect::Rejected {
                assert!(row.validated_by.is_some(), "{}", row.route);
            }
        }
    }

    #[test]
    fn the_kind_row_is_found_by_group_and_kind() {
        let row = kind_row("policy.networking.k8s.io", "ClusterNetworkPolicy").unwrap();
        assert!(!row.honoured_in(CiliumVersion::V1_19));
        assert!(row.honoured_in(CiliumVersion::V1_20));
        assert_eq!(row.field(), "ClusterNetworkPolicy");
        assert!(kind_row("networking.k8s.io", "NetworkPolicy").is_none());
    }
}

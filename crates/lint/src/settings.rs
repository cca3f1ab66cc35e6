//! The settings a lint run reads ([`LintConfig`], [`RuleLevel`]): data
//! only, so the context and the rules can hold them without naming the code
//! registry that parsing `.porin.yaml` needs (`config.rs`, which re-exports
//! them).

use std::collections::BTreeMap;

use porin_model::diagnostic::Severity;

/// Cilium's `bpf-policy-map-max` default (`pkg/option/config.go`).
pub const DEFAULT_POLICY_MAP_MAX: u32 = 16_384;
/// Default size of Cilium's `cilium_ipcache` map (`pkg/maps/ipcache`).
pub const DEFAULT_IPCACHE_MAP_MAX: u32 = 512_000;
/// Default warning fraction of the capacity rules.
pub const DEFAULT_WARN_FRACTION: f64 = 0.8;
/// The Cilium version porin models.
pub const DEFAULT_CILIUM_VERSION: (u32, u32) = (1, 19);

/// What the configuration says about one rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleLevel {
    /// Turned off.
    Off,
    /// Reported with this severity.
    Severity(Severity),
}

/// The effective lint configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct LintConfig {
    /// Policy-map size per endpoint, clamped to 256..=65536.
    pub policy_map_max: u32,
    /// ipcache map size.
    pub ipcache_map_max: u32,
    /// Fraction of a map above which the capacity rules warn.
    pub warn_fraction: f64,
    /// Cilium (major, minor) whose field support PR016 checks.
    pub cilium_version: (u32, u32),
    /// `enableK8sClusterNetworkPolicy`: the agent enforces Kubernetes
    /// ClusterNetworkPolicy (Cilium 1.20, `--enable-k8s-cluster-network-policy`).
    pub k8s_cluster_network_policy: bool,
    /// Per-code overrides.
    pub rules: BTreeMap<&'static str, RuleLevel>,
    /// The agent settings (`settings:`, Cilium flag names,
    /// `porin_compiler::settings`): the defaults of every inventory the
    /// CLI loads, which an inventory's own `settings:` override.
    pub settings: porin_compiler::settings::SettingsSpec,
}

impl Default for LintConfig {
    fn default() -> Self {
        Self {
            policy_map_max: DEFAULT_POLICY_MAP_MAX,
            ipcache_map_max: DEFAULT_IPCACHE_MAP_MAX,
            warn_fraction: DEFAULT_WARN_FRACTION,
            cilium_version: DEFAULT_CILIUM_VERSION,
            k8s_cluster_network_policy: false,
            rules: BTreeMap::new(),
            settings: porin_compiler::settings::SettingsSpec::default(),
        }
    }
}

//! The target flags shared by every subcommand that validates or compiles
//! policy: which Cilium version (`--cilium-version`, default 1.19) and
//! which version-dependent agent settings the policies are checked for.
//! Their meaning is `porin_model::version` (one table of what changes
//! between versions).
//!
//! The flags are one layer of the target ([`TargetChoice`]): they win over
//! an inventory's or test file's `ciliumVersion` /
//! `enableK8sClusterNetworkPolicy`, which win over `.porin.yaml`, which
//! wins over the defaults ([`resolve`]).

use clap::Args;
use porin_compiler::inventory::Inventory;
use porin_lint::config::LintConfig;
use porin_model::version::{CiliumVersion, Target, TargetChoice};

/// The Cilium the policies are for.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Cilium")]
pub struct TargetArgs {
    /// Cilium version to validate and compile for: 1.19 or 1.20. Wins over
    /// `ciliumVersion` of the inventory or test file and of `.porin.yaml`;
    /// 1.19 when none says.
    #[arg(long, value_name = "VERSION", value_parser = CiliumVersion::parse_modelled)]
    pub cilium_version: Option<CiliumVersion>,
    /// The agent runs with `--enable-k8s-cluster-network-policy=true`
    /// (Cilium 1.20+): Kubernetes ClusterNetworkPolicy is enforced.
    /// `=false` turns off what an inventory, test file or `.porin.yaml`
    /// (`enableK8sClusterNetworkPolicy`) turns on.
    #[arg(
        long,
        value_name = "BOOL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true"
    )]
    pub enable_k8s_cluster_network_policy: Option<bool>,
}

impl TargetArgs {
    /// What the command line says.
    pub fn choice(&self) -> TargetChoice {
        TargetChoice {
            version: self.cilium_version,
            k8s_cluster_network_policy: self.enable_k8s_cluster_network_policy,
        }
    }
}

/// What `.porin.yaml` says (`ciliumVersion`, `enableK8sClusterNetworkPolicy`;
/// its defaults are the defaults).
pub fn config_choice(config: &LintConfig) -> TargetChoice {
    let (major, minor) = config.cilium_version;
    TargetChoice {
        version: Some(CiliumVersion::new(major, minor)),
        k8s_cluster_network_policy: Some(config.k8s_cluster_network_policy),
    }
}

/// The target: `command_line`, then the inventory's keys (when it loaded),
/// then `.porin.yaml`, then the defaults.
pub fn resolve(
    command_line: TargetChoice,
    inventory: Option<&Inventory>,
    config: &LintConfig,
) -> Target {
    command_line
        .or(inventory.map_or_else(TargetChoice::default, |i| i.target.choice()))
        .or(config_choice(config))
        .target()
}

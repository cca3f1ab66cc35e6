//! The target flags shared by every subcommand that validates or compiles
//! policy: which Cilium version (`--cilium-version`, default 1.19) and
//! which version-dependent agent settings the policies are checked for.
//! Their meaning is `porin_model::version` (one table of what changes
//! between versions).

use clap::Args;
use porin_model::version::{CiliumVersion, Target};

/// The Cilium the policies are for.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Cilium")]
pub struct TargetArgs {
    /// Cilium version to validate and compile for: 1.19 (the default, or
    /// `ciliumVersion` of `.porin.yaml`) or 1.20.
    #[arg(long, value_name = "VERSION", value_parser = CiliumVersion::parse_modelled)]
    pub cilium_version: Option<CiliumVersion>,
    /// The agent runs with `--enable-k8s-cluster-network-policy=true`
    /// (Cilium 1.20+): Kubernetes ClusterNetworkPolicy is enforced.
    #[arg(long)]
    pub enable_k8s_cluster_network_policy: bool,
}

impl TargetArgs {
    /// The target: the flag's version, else `configured` (`.porin.yaml`),
    /// else the default.
    pub fn target(&self, configured: Option<CiliumVersion>) -> Target {
        Target {
            version: self
                .cilium_version
                .or(configured)
                .unwrap_or(CiliumVersion::DEFAULT),
            k8s_cluster_network_policy: self.enable_k8s_cluster_network_policy,
        }
    }
}

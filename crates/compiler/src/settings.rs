//! The Cilium agent settings that change verdicts, in one place.
//!
//! Each setting has Cilium's flag name and Cilium 1.19's default
//! ([`SETTINGS`]); inventories and PolicyTest files set them under
//! `settings:` with the flag names as keys (the C API reads them from the
//! inventory text it is given). [`AgentSettings`] holds the values a
//! compilation runs with.
//!
//! A setting whose non-default value porin does not model yet is refused
//! with an error naming it, rather than accepted and ignored: a verdict
//! computed for another agent configuration than the user's is wrong in
//! ways nobody sees.

use serde::{Deserialize, Serialize};

/// The agent's `allow-localhost` option (`pkg/option/config.go`
/// `AllowLocalhost`): whether the host (identity 1) may always reach local
/// endpoints, whatever their ingress policy.
///
/// Cilium inserts the host allow only when the option is `always`
/// (`DaemonConfig.AlwaysAllowLocalhost`); its default `auto` turns into
/// `always` when the agent runs in Kubernetes mode (`daemon/cmd/daemon.go`:
/// "Kubernetes demands that the localhost can always reach local pods") and
/// stays `auto` (no host allow) outside Kubernetes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AllowLocalhost {
    /// `always` for Kubernetes endpoints (their identity has a pod
    /// namespace; reserved endpoints such as health follow the inventory:
    /// Kubernetes mode when any endpoint has a namespace), `policy` for
    /// endpoints outside Kubernetes.
    #[default]
    Auto,
    /// The host reaches every endpoint except the host endpoint itself.
    Always,
    /// Only policy decides (no host allow).
    Policy,
}

impl AllowLocalhost {
    /// The option as written in YAML and in Cilium's configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Always => "always",
            Self::Policy => "policy",
        }
    }
}

/// One setting: its flag, default and what porin does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingInfo {
    /// Cilium's flag (and `settings:` key).
    pub flag: &'static str,
    /// Cilium 1.19's default, as written.
    pub default: &'static str,
    /// The values porin accepts.
    pub accepted: &'static str,
    /// Where Cilium defines it.
    pub source: &'static str,
    /// What the setting changes, and what porin models.
    pub effect: &'static str,
}

/// Every setting, in the order the documentation lists them.
pub const SETTINGS: &[SettingInfo] = &[
    SettingInfo {
        flag: "allow-localhost",
        default: "auto",
        accepted: "auto, always, policy",
        source: "pkg/option/config.go AllowLocalhost",
        effect: "whether the host always reaches local endpoints (semantics §3.3 item 4); modelled",
    },
    SettingInfo {
        flag: "policy-default-local-cluster",
        default: "true",
        accepted: "true, false",
        source: "pkg/clustermesh/types/option.go PolicyConfig (Helm clustermesh.policyDefaultLocalCluster, true in 1.19)",
        effect: "endpoint selectors without a cluster label select the local cluster only (semantics §3.1); modelled",
    },
    SettingInfo {
        flag: "enable-node-selector-labels",
        default: "false",
        accepted: "false, true",
        source: "pkg/option/config.go EnableNodeSelectorLabels",
        effect: "remote nodes get identities of their labels (remote-node scope) and fromNodes/toNodes select them; without it fromNodes/toNodes stay fail-closed (PC001), as Cilium refuses them; modelled",
    },
    SettingInfo {
        flag: "policy-cidr-match-mode",
        default: "",
        accepted: "\"\", nodes",
        source: "pkg/option/config.go PolicyCIDRMatchMode; pkg/node/manager/manager.go nodeIdentityLabels; pkg/ipcache/metadata.go resolveIdentity",
        effect: "with `nodes`, CIDR rules (fromCIDR/toCIDR/fromCIDRSet/toCIDRSet, except included) also select node addresses: every remote node address gets its own remote-node-scope identity carrying `reserved:remote-node` (and the node's labels under enable-node-selector-labels) and the address's `cidr:` labels, the host identity (1) carries the local node addresses' `cidr:` labels; `0.0.0.0/0`/`::/0` (the world entity) never selects a node; with the default \"\" CIDR rules never select nodes; modelled",
    },
    SettingInfo {
        flag: "enable-extended-ip-protocols",
        default: "false",
        accepted: "false, true",
        source: "pkg/option/config.go EnableExtendedIPProtocols; pkg/policy/api/rule_validation.go PortProtocol.Validate; bpf/lib/conntrack.h (DROP_CT_UNKNOWN_PROTO)",
        effect: "with true, `toPorts` ports without a port number are accepted (VRRP/IGMP have no ports: `protocol: VRRP` alone is port 0, every VRRP packet) and the datapath passes VRRP (112) and IGMP (2) packets to policy, looked up and tracked with port 0; with false (the default) such a port is refused as Cilium refuses the rule (PC033, no entry) and VRRP/IGMP packets are dropped before policy (DROP_CT_UNKNOWN_PROTO), whatever the policy says; modelled",
    },
    SettingInfo {
        flag: "mesh-auth-mutual-enabled",
        default: "false",
        accepted: "false, true",
        source: "pkg/auth/spire/delegate.go (SPIRE mutual authentication), pkg/auth/manager.go handleAuthRequest",
        effect: "with true, an `authentication.mode: required` entry between two cluster endpoints passes, as once the agent's handshake succeeded; reserved and CIDR identities never authenticate, `test-always-fail` never passes; with false (the default) every auth-required flow is deny (semantics §4.9); modelled",
    },
];

/// The settings a compilation runs with (Cilium 1.19's defaults unless an
/// inventory says otherwise). `allow-localhost` is
/// [`crate::inventory::Inventory::allow_localhost`], a field of its own for
/// compatibility with earlier embedders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct AgentSettings {
    /// `policy-default-local-cluster`.
    pub policy_default_local_cluster: bool,
    /// `enable-node-selector-labels`.
    pub enable_node_selector_labels: bool,
    /// `mesh-auth-mutual-enabled`: the cluster runs Cilium's mutual
    /// authentication, so auth-required flows between cluster endpoints
    /// pass once authenticated (`crate::explain::authenticates`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub mesh_auth_mutual_enabled: bool,
    /// `policy-cidr-match-mode` includes `nodes`: node addresses carry
    /// `cidr:` labels, so CIDR rules select them
    /// (`crate::allocation::IdentityTable::node_address_identity`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub policy_cidr_match_nodes: bool,
    /// `enable-extended-ip-protocols`: VRRP and IGMP packets reach policy
    /// (port 0) instead of being dropped as protocols Cilium's conntrack
    /// does not track ([`crate::resolve::rule::proto::tracked`]), and ports
    /// without a number are accepted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub enable_extended_ip_protocols: bool,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            policy_default_local_cluster: true,
            enable_node_selector_labels: false,
            mesh_auth_mutual_enabled: false,
            policy_cidr_match_nodes: false,
            enable_extended_ip_protocols: false,
        }
    }
}

/// `settings:` as written in an inventory or PolicyTest file: Cilium's flag
/// names, every one optional.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsSpec {
    /// `allow-localhost`.
    #[serde(default, rename = "allow-localhost")]
    pub allow_localhost: Option<AllowLocalhost>,
    /// `policy-default-local-cluster`.
    #[serde(default, rename = "policy-default-local-cluster")]
    pub policy_default_local_cluster: Option<bool>,
    /// `enable-node-selector-labels`.
    #[serde(default, rename = "enable-node-selector-labels")]
    pub enable_node_selector_labels: Option<bool>,
    /// `policy-cidr-match-mode`: a list in Cilium; a single string is read
    /// as a list of one.
    #[serde(default, rename = "policy-cidr-match-mode")]
    pub policy_cidr_match_mode: Option<OneOrMany>,
    /// `enable-extended-ip-protocols`.
    #[serde(default, rename = "enable-extended-ip-protocols")]
    pub enable_extended_ip_protocols: Option<bool>,
    /// `mesh-auth-mutual-enabled`.
    #[serde(default, rename = "mesh-auth-mutual-enabled")]
    pub mesh_auth_mutual_enabled: Option<bool>,
}

/// A string or a list of strings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One value.
    One(String),
    /// Several.
    Many(Vec<String>),
}

impl OneOrMany {
    fn values(&self) -> Vec<&str> {
        match self {
            Self::One(one) => one
                .split(',')
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .collect(),
            Self::Many(many) => many.iter().map(String::as_str).collect(),
        }
    }
}

impl SettingsSpec {
    /// One setting given as text, `flag` being Cilium's flag name and
    /// `value` as on Cilium's command line (`true`, `policy`, `nodes`): what
    /// the C API's `porin_session_set_setting` takes. `Err` names an
    /// unknown flag or a value the flag does not take.
    pub fn one(flag: &str, value: &str) -> Result<SettingsSpec, String> {
        let value = match value.trim() {
            "true" => serde_json::Value::Bool(true),
            "false" => serde_json::Value::Bool(false),
            other => serde_json::Value::String(other.to_owned()),
        };
        let mut map = serde_json::Map::new();
        map.insert(flag.to_owned(), value);
        serde_json::from_value(serde_json::Value::Object(map)).map_err(|e| {
            let known: Vec<&str> = SETTINGS.iter().map(|s| s.flag).collect();
            format!(
                "setting `{flag}`: {e} (the settings are {})",
                known.join(", ")
            )
        })
    }

    /// Applies the written settings; `Err` names a setting whose value
    /// porin does not model (or does not know).
    pub fn apply(
        &self,
        settings: &mut AgentSettings,
        allow_localhost: &mut AllowLocalhost,
    ) -> Result<(), String> {
        if let Some(value) = self.allow_localhost {
            *allow_localhost = value;
        }
        if let Some(value) = self.policy_default_local_cluster {
            settings.policy_default_local_cluster = value;
        }
        if let Some(value) = self.enable_node_selector_labels {
            settings.enable_node_selector_labels = value;
        }
        if let Some(modes) = &self.policy_cidr_match_mode {
            // A list of modes (`PolicyCIDRMatchMode []string`); Cilium 1.19
            // knows only `nodes` (`option.Config.PolicyCIDRMatchesNodes`).
            let mut nodes = false;
            for mode in modes.values() {
                match mode {
                    "nodes" => nodes = true,
                    other => {
                        return Err(format!(
                            "settings.policy-cidr-match-mode: `{other}` is not a mode Cilium 1.19 knows (only `nodes`)"
                        ));
                    }
                }
            }
            settings.policy_cidr_match_nodes = nodes;
        }
        if let Some(value) = self.enable_extended_ip_protocols {
            settings.enable_extended_ip_protocols = value;
        }
        if let Some(value) = self.mesh_auth_mutual_enabled {
            settings.mesh_auth_mutual_enabled = value;
        }
        Ok(())
    }
}

/// The settings table as Markdown, for the documentation.
pub fn markdown_table() -> String {
    let mut out = String::from(
        "| setting (Cilium flag) | default | porin accepts | Cilium source | effect |\n|---|---|---|---|---|\n",
    );
    for s in SETTINGS {
        let default = if s.default.is_empty() {
            "\"\"".to_owned()
        } else {
            format!("`{}`", s.default)
        };
        out.push_str(&format!(
            "| `{}` | {default} | {} | `{}` | {} |\n",
            s.flag, s.accepted, s.source, s.effect
        ));
    }
    out
}

//! The lint configuration: `.porin.yaml` (rules off, severity overrides,
//! map sizes) and the per-policy annotation `porin.dev/ignore`.
//!
//! ```yaml
//! # .porin.yaml
//! policyMapMax: 16384          # clamped to 256..65536 like Cilium
//! ipcacheMapMax: 512000
//! capacityWarnFraction: 0.8
//! ciliumVersion: "1.19"
//! enableK8sClusterNetworkPolicy: false  # Cilium 1.20: ClusterNetworkPolicy enforced
//! rules:
//!   PR005: off                 # or the name: redundant-allow: off
//!   deny-bypass: error         # error | warning | info | off
//! settings:                    # agent settings, by Cilium flag name
//!   enable-node-selector-labels: true
//! ```

use std::collections::{BTreeMap, BTreeSet};

use porin_compiler::resolve::lower::PolicyInput;
use porin_compiler::settings::SettingsSpec;
use porin_model::diagnostic::{Diagnostic, Location, Severity};
use serde::Deserialize;
use thiserror::Error;

use super::codes;
pub use crate::settings::{
    DEFAULT_CILIUM_VERSION, DEFAULT_IPCACHE_MAP_MAX, DEFAULT_POLICY_MAP_MAX, DEFAULT_WARN_FRACTION,
    LintConfig, RuleLevel,
};

/// Cilium's lower clamp of `bpf-policy-map-max` (`PolicyMapMin`).
pub const POLICY_MAP_MIN: u32 = 1 << 8;
/// Cilium's upper clamp of `bpf-policy-map-max` (`PolicyMapMax`).
pub const POLICY_MAP_MAX: u32 = 1 << 16;
/// The annotation that turns rules off for one policy.
pub const IGNORE_ANNOTATION: &str = "porin.dev/ignore";

/// A configuration error.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// The file is not valid YAML for the schema.
    #[error("invalid lint configuration {file}: {message}")]
    Parse {
        /// File.
        file: String,
        /// Parser message.
        message: String,
    },
    /// A rule that does not exist.
    #[error("{file}: unknown lint rule `{rule}` (see `porin explain`)")]
    UnknownRule {
        /// File.
        file: String,
        /// The key.
        rule: String,
    },
    /// A setting that is not `off`/`error`/`warning`/`info`.
    #[error("{file}: rule `{rule}`: `{value}` is not one of off, error, warning, info")]
    BadLevel {
        /// File.
        file: String,
        /// The rule.
        rule: String,
        /// The value.
        value: String,
    },
    /// A malformed version.
    #[error("{file}: ciliumVersion `{value}` is not MAJOR.MINOR")]
    BadVersion {
        /// File.
        file: String,
        /// The value.
        value: String,
    },
    /// A fraction outside 0..=1.
    #[error("{file}: capacityWarnFraction {value} is not between 0 and 1")]
    BadFraction {
        /// File.
        file: String,
        /// The value.
        value: f64,
    },
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfig {
    policy_map_max: Option<u32>,
    ipcache_map_max: Option<u32>,
    capacity_warn_fraction: Option<f64>,
    cilium_version: Option<String>,
    enable_k8s_cluster_network_policy: Option<bool>,
    rules: Option<BTreeMap<String, String>>,
    settings: Option<SettingsSpec>,
}

impl LintConfig {
    /// Parses `.porin.yaml` text; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, ConfigError> {
        let raw: RawConfig = if text.trim().is_empty() {
            RawConfig {
                policy_map_max: None,
                ipcache_map_max: None,
                capacity_warn_fraction: None,
                cilium_version: None,
                enable_k8s_cluster_network_policy: None,
                rules: None,
                settings: None,
            }
        } else {
            serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
                file: file.to_owned(),
                message: e.to_string(),
            })?
        };
        let mut config = LintConfig::default();
        if let Some(max) = raw.policy_map_max {
            config.policy_map_max = clamp_policy_map_max(max);
        }
        if let Some(max) = raw.ipcache_map_max {
            config.ipcache_map_max = max.max(1);
        }
        if let Some(fraction) = raw.capacity_warn_fraction {
            if !(0.0..=1.0).contains(&fraction) {
                return Err(ConfigError::BadFraction {
                    file: file.to_owned(),
                    value: fraction,
                });
            }
            config.warn_fraction = fraction;
        }
        if let Some(version) = raw.cilium_version {
            config.cilium_version =
                parse_version(&version).ok_or_else(|| ConfigError::BadVersion {
                    file: file.to_owned(),
                    value: version.clone(),
                })?;
        }
        config.k8s_cluster_network_policy = raw.enable_k8s_cluster_network_policy.unwrap_or(false);
        if let Some(settings) = raw.settings {
            // Refused values are refused here, naming this file, rather
            // than when an inventory is loaded with them.
            settings
                .apply(
                    &mut porin_compiler::settings::AgentSettings::default(),
                    &mut porin_compiler::settings::AllowLocalhost::default(),
                )
                .map_err(|message| ConfigError::Parse {
                    file: file.to_owned(),
                    message,
                })?;
            config.settings = settings;
        }
        for (rule, value) in raw.rules.unwrap_or_default() {
            let info = codes::lookup(&rule).ok_or_else(|| ConfigError::UnknownRule {
                file: file.to_owned(),
                rule: rule.clone(),
            })?;
            let level = parse_level(&value).ok_or_else(|| ConfigError::BadLevel {
                file: file.to_owned(),
                rule: rule.clone(),
                value: value.clone(),
            })?;
            config.rules.insert(info.code, level);
        }
        Ok(config)
    }

    /// The effective level of a rule.
    pub fn level(&self, code: &str) -> RuleLevel {
        if let Some(level) = self.rules.get(code) {
            return *level;
        }
        codes::lookup(code).map_or(RuleLevel::Severity(Severity::Warning), |info| {
            RuleLevel::Severity(info.severity)
        })
    }
}

/// Cilium's clamp of `bpf-policy-map-max` (`checkMapSizeLimits`).
pub fn clamp_policy_map_max(value: u32) -> u32 {
    value.clamp(POLICY_MAP_MIN, POLICY_MAP_MAX)
}

fn parse_level(value: &str) -> Option<RuleLevel> {
    match value.to_ascii_lowercase().as_str() {
        "off" | "false" | "none" | "ignore" => Some(RuleLevel::Off),
        "error" => Some(RuleLevel::Severity(Severity::Error)),
        "warning" | "warn" => Some(RuleLevel::Severity(Severity::Warning)),
        "info" | "note" => Some(RuleLevel::Severity(Severity::Info)),
        _ => None,
    }
}

/// Parses `1.19` / `v1.19.2` into (1, 19).
pub fn parse_version(text: &str) -> Option<(u32, u32)> {
    let text = text.trim().trim_start_matches('v');
    let mut parts = text.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The codes a `porin.dev/ignore` annotation value names (codes or names,
/// comma or blank separated; `all` ignores every rule). Unknown names are
/// returned separately so the caller can report them.
pub fn parse_ignore(value: &str) -> (Vec<&'static str>, Vec<String>) {
    let mut codes_out = Vec::new();
    let mut unknown = Vec::new();
    for token in value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
    {
        if token.eq_ignore_ascii_case("all") {
            codes_out.extend(codes::rules().map(|r| r.code));
        } else if let Some(info) = codes::lookup(token) {
            codes_out.push(info.code);
        } else {
            unknown.push(token.to_owned());
        }
    }
    (codes_out, unknown)
}

/// The `porin.dev/ignore` annotation of a policy, if it has one.
fn ignore_annotation<'a>(input: &'a PolicyInput<'_>) -> Option<&'a str> {
    input
        .policy
        .metadata()
        .annotations
        .as_ref()
        .and_then(|a| a.get(IGNORE_ANNOTATION))
        .map(String::as_str)
}

/// `porin.dev/ignore` per (file, document).
pub(crate) fn annotation_ignores(
    inputs: &[PolicyInput<'_>],
) -> BTreeMap<(String, usize), BTreeSet<&'static str>> {
    let mut map: BTreeMap<(String, usize), BTreeSet<&'static str>> = BTreeMap::new();
    for input in inputs {
        let Some(value) = ignore_annotation(input) else {
            continue;
        };
        let (codes, _) = parse_ignore(value);
        map.entry((input.file.to_owned(), input.document))
            .or_default()
            .extend(codes);
    }
    map
}

/// Unknown codes in `porin.dev/ignore` annotations, as diagnostics (the
/// annotation is otherwise silently useless).
pub fn annotation_problems(inputs: &[PolicyInput<'_>]) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for input in inputs {
        let Some(value) = ignore_annotation(input) else {
            continue;
        };
        let (_, unknown) = parse_ignore(value);
        for name in unknown {
            let route = "metadata.annotations";
            let (line, column) = input.locate(route);
            out.push(
                Diagnostic::new(
                    codes::UNKNOWN_IGNORED_RULE,
                    format!("`{IGNORE_ANNOTATION}` names unknown lint rule `{name}`"),
                )
                .at(Location {
                    file: input.file.to_owned(),
                    document: input.document,
                    line,
                    column,
                    route: route.to_owned(),
                })
                .help("use codes like PR005 or names like redundant-allow (`porin explain`)"),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_map_max_is_clamped_like_cilium_check_map_size_limits() {
        let config = LintConfig::parse("c", "policyMapMax: 10").unwrap();
        assert_eq!(config.policy_map_max, 256);
        let config = LintConfig::parse("c", "policyMapMax: 1000000").unwrap();
        assert_eq!(config.policy_map_max, 65_536);
    }

    #[test]
    fn rules_by_code_or_name() {
        let config =
            LintConfig::parse("c", "rules:\n  PR005: off\n  deny-bypass: error\n").unwrap();
        assert_eq!(config.level("PR005"), RuleLevel::Off);
        assert_eq!(config.level("PR006"), RuleLevel::Severity(Severity::Error));
        assert_eq!(
            config.level("PR004"),
            RuleLevel::Severity(Severity::Warning)
        );
        assert!(LintConfig::parse("c", "rules: {PR999: off}").is_err());
        assert!(LintConfig::parse("c", "rules: {PR001: loud}").is_err());
        assert!(LintConfig::parse("c", "bogus: 1").is_err());
    }

    #[test]
    fn ignore_annotation_accepts_codes_and_names() {
        let (codes, unknown) = parse_ignore("PR003, redundant-allow bogus");
        assert_eq!(codes, vec!["PR003", "PR005"]);
        assert_eq!(unknown, vec!["bogus".to_owned()]);
    }
}

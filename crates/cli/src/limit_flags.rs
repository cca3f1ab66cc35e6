//! The resource-limit flags shared by every subcommand that loads or
//! compiles policy (`lint`, `compile`, `query`, `test`, `diff`, `graph`).
//!
//! One flag per limit: the policy loader's ([`LoadLimits`]), the
//! inventory reader's ([`InventoryLimits`]) and the compiler's
//! ([`CompileLimits`]; the flag names are [`Limit::flag`], which the
//! compiler's error messages quote, and [`InventoryLimit::flag`]). Every
//! default shown by `--help` is the library default.

use clap::Args;
use porin_compiler::limits::{CompileLimits, InventoryLimit, InventoryLimits, Limit, Limits};
use porin_model::limits::LoadLimits;

/// Resource limits (SECURITY.md, "Limits"). Exceeding one is an error
/// naming the limit, the amount needed, the limit and the flag.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Limits")]
pub struct LimitArgs {
    // --- policy loading (porin_model::limits::LoadLimits) ---
    /// Largest policy file (or standard input), in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = LoadLimits::default().max_file_bytes)]
    pub max_file_bytes: u64,
    /// Most bytes of all policy files together.
    #[arg(long, value_name = "BYTES", default_value_t = LoadLimits::default().max_total_bytes)]
    pub max_total_bytes: u64,
    /// Most policy files read from the directories given.
    #[arg(long, value_name = "N", default_value_t = LoadLimits::default().max_files)]
    pub max_files: usize,
    /// Most YAML documents in one policy file.
    #[arg(long, value_name = "N", default_value_t = LoadLimits::default().max_documents)]
    pub max_documents: usize,
    /// Deepest YAML nesting in a policy file (aliases included; at most 512).
    #[arg(long, value_name = "N", default_value_t = LoadLimits::default().max_depth)]
    pub max_depth: usize,
    /// Most YAML nodes in one policy file, counting every node an alias
    /// expands to (stops alias bombs).
    #[arg(long, value_name = "N", default_value_t = LoadLimits::default().max_nodes)]
    pub max_yaml_nodes: usize,
    /// Most scalar bytes in one policy file, counting alias copies.
    #[arg(long, value_name = "BYTES", default_value_t = LoadLimits::default().max_scalar_bytes)]
    pub max_scalar_bytes: usize,
    /// Most findings recorded per policy file (the rest are counted).
    #[arg(long, value_name = "N", default_value_t = LoadLimits::default().max_diagnostics_per_file)]
    pub max_diagnostics_per_file: usize,

    // --- inventory reading (porin_compiler::limits::InventoryLimits) ---
    /// Largest inventory file, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = InventoryLimits::default().max_file_bytes)]
    pub max_inventory_file_bytes: u64,
    /// Most inventory files read from an inventory directory.
    #[arg(long, value_name = "N", default_value_t = InventoryLimits::default().max_files)]
    pub max_inventory_files: usize,
    /// Most YAML documents in one inventory file.
    #[arg(long, value_name = "N", default_value_t = InventoryLimits::default().max_documents)]
    pub max_inventory_documents: usize,
    /// Deepest YAML nesting in an inventory file.
    #[arg(long, value_name = "N", default_value_t = InventoryLimits::default().max_depth)]
    pub max_inventory_depth: usize,
    /// Most YAML nodes in one inventory file (aliases included).
    #[arg(long, value_name = "N", default_value_t = InventoryLimits::default().max_nodes)]
    pub max_inventory_nodes: usize,
    /// Most YAML events aliases replay in one inventory file.
    #[arg(long, value_name = "N", default_value_t = InventoryLimits::default().max_alias_expansions)]
    pub max_inventory_alias_expansions: usize,

    // --- compilation (porin_compiler::limits::CompileLimits) ---
    /// Most endpoints (in the inventory and compiled).
    #[arg(long, value_name = "N", default_value_t = CompileLimits::default().max_endpoints)]
    pub max_endpoints: usize,
    /// Most policy rules after lowering.
    #[arg(long, value_name = "N", default_value_t = CompileLimits::default().max_rules)]
    pub max_rules: usize,
    /// Most peer selectors summed over all rules.
    #[arg(long, value_name = "N", default_value_t = CompileLimits::default().max_peer_selectors)]
    pub max_peer_selectors: usize,
    /// Most distinct CIDR prefixes named by policies.
    #[arg(long, value_name = "N", default_value_t = CompileLimits::default().max_cidr_prefixes)]
    pub max_cidr_prefixes: usize,
    /// Most identities (reserved, endpoint, CIDR).
    #[arg(long, value_name = "N", default_value_t = CompileLimits::default().max_identities)]
    pub max_identities: usize,
    /// Most selector evaluations (identities tested against selectors, after the label index).
    #[arg(long, value_name = "N", default_value_t = CompileLimits::default().max_selector_evaluations)]
    pub max_selector_evaluations: u64,
    /// Most policy-map key insertions for one endpoint (upper bound,
    /// checked before its map state is built).
    #[arg(long, value_name = "N", default_value_t = CompileLimits::default().max_insertions_per_endpoint)]
    pub max_insertions_per_endpoint: u64,
    /// Most policy-map entries of one endpoint (at most the policy map size).
    #[arg(long, value_name = "N", default_value_t = CompileLimits::default().max_entries_per_endpoint)]
    pub max_entries_per_endpoint: usize,
    /// Most policy-map entries of all distinct map states together, where
    /// every state is held at once (`porin query`, `graph`, `diff`, `test`;
    /// `porin compile --format json` and `porin lint` stream and never
    /// hold them together). Default: no limit.
    #[arg(long, value_name = "N")]
    pub max_total_entries: Option<usize>,
}

impl LimitArgs {
    /// The limits the flags set.
    pub fn limits(&self) -> Limits {
        let mut compile = CompileLimits::default();
        let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        for limit in Limit::ALL {
            let value = match limit {
                Limit::Endpoints => wide(self.max_endpoints),
                Limit::Rules => wide(self.max_rules),
                Limit::PeerSelectors => wide(self.max_peer_selectors),
                Limit::CidrPrefixes => wide(self.max_cidr_prefixes),
                Limit::Identities => wide(self.max_identities),
                Limit::SelectorEvaluations => self.max_selector_evaluations,
                Limit::InsertionsPerEndpoint => self.max_insertions_per_endpoint,
                Limit::EntriesPerEndpoint => wide(self.max_entries_per_endpoint),
                Limit::TotalEntries => self.max_total_entries.map_or(u64::MAX, wide),
                // `Limit` is non-exhaustive: a limit without a flag keeps
                // its default (the CLI tests fail until it has one).
                _ => compile.get(limit),
            };
            compile.set(limit, value);
        }
        let mut inventory = InventoryLimits::default();
        for limit in InventoryLimit::ALL {
            let value = match limit {
                InventoryLimit::FileBytes => self.max_inventory_file_bytes,
                InventoryLimit::Files => wide(self.max_inventory_files),
                // One number bounds the inventory read and the compile.
                InventoryLimit::Endpoints => wide(self.max_endpoints),
                InventoryLimit::Documents => wide(self.max_inventory_documents),
                InventoryLimit::Depth => wide(self.max_inventory_depth),
                InventoryLimit::Nodes => wide(self.max_inventory_nodes),
                InventoryLimit::AliasExpansions => wide(self.max_inventory_alias_expansions),
                _ => inventory.get(limit),
            };
            inventory.set(limit, value);
        }
        Limits {
            load: LoadLimits {
                max_file_bytes: self.max_file_bytes,
                max_total_bytes: self.max_total_bytes,
                max_depth: self.max_depth,
                max_nodes: self.max_yaml_nodes,
                max_scalar_bytes: self.max_scalar_bytes,
                max_documents: self.max_documents,
                max_diagnostics_per_file: self.max_diagnostics_per_file,
                max_files: self.max_files,
            },
            inventory,
            compile,
        }
    }
}

/// The diagnostic (PC015) of a compile error that stopped a run
/// (`porin lint` and `porin compile` print it in the requested format).
pub fn limit_diagnostic(
    error: &porin_compiler::error::CompileError,
) -> porin_model::diagnostic::Diagnostic {
    porin_model::diagnostic::Diagnostic::new(
        porin_compiler::codes::RESOURCE_LIMIT,
        error.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use clap::{Args as _, Command, FromArgMatches as _};

    use super::*;

    fn long_flags() -> Vec<String> {
        LimitArgs::augment_args(Command::new("porin"))
            .get_arguments()
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect()
    }

    #[test]
    fn every_flag_the_errors_name_exists() {
        let flags = long_flags();
        for limit in Limit::ALL {
            assert!(flags.iter().any(|f| f == limit.flag()), "{}", limit.flag());
        }
        for limit in InventoryLimit::ALL {
            assert!(flags.iter().any(|f| f == limit.flag()), "{}", limit.flag());
        }
    }

    #[test]
    fn defaults_are_the_library_defaults() {
        let parsed = LimitArgs::from_arg_matches(
            &LimitArgs::augment_args(Command::new("porin")).get_matches_from(["porin"]),
        )
        .unwrap();
        assert_eq!(parsed.limits(), Limits::default());
    }

    #[test]
    fn each_flag_sets_its_own_limit() {
        let command = || LimitArgs::augment_args(Command::new("porin"));
        for (index, limit) in Limit::ALL.into_iter().enumerate() {
            let value = (1000 + index).to_string();
            let matches = command().get_matches_from(["porin", limit.flag(), value.as_str()]);
            let limits = LimitArgs::from_arg_matches(&matches).unwrap().limits();
            assert_eq!(limits.compile.get(limit).to_string(), value, "{limit:?}");
            let mut expected = CompileLimits::default();
            expected.set(limit, limits.compile.get(limit));
            assert_eq!(limits.compile, expected, "{limit:?} set another limit");
        }
        for (index, limit) in InventoryLimit::ALL.into_iter().enumerate() {
            let value = (2000 + index).to_string();
            let matches = command().get_matches_from(["porin", limit.flag(), value.as_str()]);
            let limits = LimitArgs::from_arg_matches(&matches).unwrap().limits();
            assert_eq!(limits.inventory.get(limit).to_string(), value, "{limit:?}");
        }
    }
}

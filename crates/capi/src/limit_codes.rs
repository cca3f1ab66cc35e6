//! `porin_limit`: the resource limits of a session, settable from C.
//!
//! Every limit of the CLI's flags (SECURITY.md, "Limits") has a
//! `porin_limit` value; `porin_session_set_limit` (in the session module)
//! sets it for the calls that follow on that session, and a limit error of
//! the library names the value that raises it ([`compile_error`]).

use porin_compiler::error::{CompileError, InventoryError};
use porin_compiler::limits::{InventoryLimit, Limit, Limits};

use crate::result::{Failure, porin_result};

/// A resource limit of a session. Numbers are fixed forever and grouped:
/// 1-99 loading policy documents, 100-199 reading inventory, 200-299
/// compiling. Defaults and meaning: SECURITY.md, "Limits"; each is the
/// CLI flag named in its description.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(non_camel_case_types, reason = "C naming: porin_<noun>")]
pub enum porin_limit {
    /// Largest policy document text or file, in bytes (`--max-file-bytes`).
    PolicyFileBytes = 1,
    /// Most policy files read from a directory (`--max-files`).
    PolicyFiles = 2,
    /// Most YAML documents in one policy text (`--max-documents`).
    PolicyDocuments = 3,
    /// Deepest YAML nesting of a policy text, aliases included, at most
    /// 512 (`--max-depth`).
    PolicyDepth = 4,
    /// Most YAML nodes of one policy text, counting alias expansions
    /// (`--max-yaml-nodes`).
    PolicyYamlNodes = 5,
    /// Most scalar bytes of one policy text, counting alias copies
    /// (`--max-scalar-bytes`).
    PolicyScalarBytes = 6,
    /// Most findings recorded per policy text (`--max-diagnostics-per-file`).
    PolicyDiagnosticsPerFile = 7,
    /// Most bytes of all the policy texts and files of a session together
    /// (until `porin_session_clear_policies`) (`--max-total-bytes`).
    PolicyTotalBytes = 8,
    /// Largest inventory text or file, in bytes (`--max-inventory-file-bytes`).
    InventoryFileBytes = 100,
    /// Most inventory files read from a directory (`--max-inventory-files`).
    InventoryFiles = 101,
    /// Most YAML documents in one inventory text (`--max-inventory-documents`).
    InventoryDocuments = 102,
    /// Deepest YAML nesting of an inventory text (`--max-inventory-depth`).
    InventoryDepth = 103,
    /// Most YAML nodes of one inventory text (`--max-inventory-nodes`).
    InventoryNodes = 104,
    /// Most YAML events aliases replay in one inventory text
    /// (`--max-inventory-alias-expansions`).
    InventoryAliasExpansions = 105,
    /// Most endpoints, when inventory is read and when compiling
    /// (`--max-endpoints`).
    Endpoints = 200,
    /// Most policy rules after lowering (`--max-rules`).
    Rules = 201,
    /// Most peer selectors summed over all rules (`--max-peer-selectors`).
    PeerSelectors = 202,
    /// Most distinct CIDR prefixes named by policies (`--max-cidr-prefixes`).
    CidrPrefixes = 203,
    /// Most identities (`--max-identities`).
    Identities = 204,
    /// Most selector evaluations: identities tested against selectors
    /// after the label index narrows them, by a compile and by each update
    /// of a live session (`--max-selector-evaluations`).
    SelectorEvaluations = 205,
    /// Most policy-map key insertions for one endpoint, an upper bound
    /// checked before its map state is built (`--max-insertions-per-endpoint`).
    InsertionsPerEndpoint = 206,
    /// Most policy-map entries of one endpoint (`--max-entries-per-endpoint`).
    EntriesPerEndpoint = 207,
    /// Most policy-map entries of all distinct map states together
    /// (`--max-total-entries`).
    TotalEntries = 208,
}

/// What a `porin_limit` sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Load(LoadField),
    Inventory(InventoryLimit),
    Compile(Limit),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoadField {
    FileBytes,
    Files,
    Documents,
    Depth,
    Nodes,
    ScalarBytes,
    DiagnosticsPerFile,
    TotalBytes,
}

impl porin_limit {
    /// Every limit (crate-private: cbindgen would export a public
    /// associated constant as a macro of names C does not have).
    pub(crate) const ALL: [porin_limit; 23] = [
        Self::PolicyFileBytes,
        Self::PolicyFiles,
        Self::PolicyDocuments,
        Self::PolicyDepth,
        Self::PolicyYamlNodes,
        Self::PolicyScalarBytes,
        Self::PolicyDiagnosticsPerFile,
        Self::PolicyTotalBytes,
        Self::InventoryFileBytes,
        Self::InventoryFiles,
        Self::InventoryDocuments,
        Self::InventoryDepth,
        Self::InventoryNodes,
        Self::InventoryAliasExpansions,
        Self::Endpoints,
        Self::Rules,
        Self::PeerSelectors,
        Self::CidrPrefixes,
        Self::Identities,
        Self::SelectorEvaluations,
        Self::InsertionsPerEndpoint,
        Self::EntriesPerEndpoint,
        Self::TotalEntries,
    ];

    /// The limit of a number, if it is one.
    pub fn from_u32(value: u32) -> Option<porin_limit> {
        Self::ALL.iter().copied().find(|l| *l as u32 == value)
    }

    /// The name of the constant in `porin.h`.
    pub fn c_name(self) -> &'static str {
        match self {
            Self::PolicyFileBytes => "PORIN_LIMIT_POLICY_FILE_BYTES",
            Self::PolicyFiles => "PORIN_LIMIT_POLICY_FILES",
            Self::PolicyDocuments => "PORIN_LIMIT_POLICY_DOCUMENTS",
            Self::PolicyDepth => "PORIN_LIMIT_POLICY_DEPTH",
            Self::PolicyYamlNodes => "PORIN_LIMIT_POLICY_YAML_NODES",
            Self::PolicyScalarBytes => "PORIN_LIMIT_POLICY_SCALAR_BYTES",
            Self::PolicyDiagnosticsPerFile => "PORIN_LIMIT_POLICY_DIAGNOSTICS_PER_FILE",
            Self::PolicyTotalBytes => "PORIN_LIMIT_POLICY_TOTAL_BYTES",
            Self::InventoryFileBytes => "PORIN_LIMIT_INVENTORY_FILE_BYTES",
            Self::InventoryFiles => "PORIN_LIMIT_INVENTORY_FILES",
            Self::InventoryDocuments => "PORIN_LIMIT_INVENTORY_DOCUMENTS",
            Self::InventoryDepth => "PORIN_LIMIT_INVENTORY_DEPTH",
            Self::InventoryNodes => "PORIN_LIMIT_INVENTORY_NODES",
            Self::InventoryAliasExpansions => "PORIN_LIMIT_INVENTORY_ALIAS_EXPANSIONS",
            Self::Endpoints => "PORIN_LIMIT_ENDPOINTS",
            Self::Rules => "PORIN_LIMIT_RULES",
            Self::PeerSelectors => "PORIN_LIMIT_PEER_SELECTORS",
            Self::CidrPrefixes => "PORIN_LIMIT_CIDR_PREFIXES",
            Self::Identities => "PORIN_LIMIT_IDENTITIES",
            Self::SelectorEvaluations => "PORIN_LIMIT_SELECTOR_EVALUATIONS",
            Self::InsertionsPerEndpoint => "PORIN_LIMIT_INSERTIONS_PER_ENDPOINT",
            Self::EntriesPerEndpoint => "PORIN_LIMIT_ENTRIES_PER_ENDPOINT",
            Self::TotalEntries => "PORIN_LIMIT_TOTAL_ENTRIES",
        }
    }

    fn target(self) -> Target {
        match self {
            Self::PolicyFileBytes => Target::Load(LoadField::FileBytes),
            Self::PolicyFiles => Target::Load(LoadField::Files),
            Self::PolicyDocuments => Target::Load(LoadField::Documents),
            Self::PolicyDepth => Target::Load(LoadField::Depth),
            Self::PolicyYamlNodes => Target::Load(LoadField::Nodes),
            Self::PolicyScalarBytes => Target::Load(LoadField::ScalarBytes),
            Self::PolicyDiagnosticsPerFile => Target::Load(LoadField::DiagnosticsPerFile),
            Self::PolicyTotalBytes => Target::Load(LoadField::TotalBytes),
            Self::InventoryFileBytes => Target::Inventory(InventoryLimit::FileBytes),
            Self::InventoryFiles => Target::Inventory(InventoryLimit::Files),
            Self::InventoryDocuments => Target::Inventory(InventoryLimit::Documents),
            Self::InventoryDepth => Target::Inventory(InventoryLimit::Depth),
            Self::InventoryNodes => Target::Inventory(InventoryLimit::Nodes),
            Self::InventoryAliasExpansions => Target::Inventory(InventoryLimit::AliasExpansions),
            Self::Endpoints => Target::Compile(Limit::Endpoints),
            Self::Rules => Target::Compile(Limit::Rules),
            Self::PeerSelectors => Target::Compile(Limit::PeerSelectors),
            Self::CidrPrefixes => Target::Compile(Limit::CidrPrefixes),
            Self::Identities => Target::Compile(Limit::Identities),
            Self::SelectorEvaluations => Target::Compile(Limit::SelectorEvaluations),
            Self::InsertionsPerEndpoint => Target::Compile(Limit::InsertionsPerEndpoint),
            Self::EntriesPerEndpoint => Target::Compile(Limit::EntriesPerEndpoint),
            Self::TotalEntries => Target::Compile(Limit::TotalEntries),
        }
    }

    /// The value of this limit in `limits`.
    pub fn get(self, limits: &Limits) -> u64 {
        let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        match self.target() {
            Target::Load(field) => match field {
                LoadField::FileBytes => limits.load.max_file_bytes,
                LoadField::Files => wide(limits.load.max_files),
                LoadField::Documents => wide(limits.load.max_documents),
                LoadField::Depth => wide(limits.load.max_depth),
                LoadField::Nodes => wide(limits.load.max_nodes),
                LoadField::ScalarBytes => wide(limits.load.max_scalar_bytes),
                LoadField::DiagnosticsPerFile => wide(limits.load.max_diagnostics_per_file),
                LoadField::TotalBytes => limits.load.max_total_bytes,
            },
            Target::Inventory(limit) => limits.inventory.get(limit),
            Target::Compile(limit) => limits.compile.get(limit),
        }
    }

    /// Sets this limit in `limits`. The endpoint limit bounds both the
    /// inventory read and the compile, as the CLI's `--max-endpoints`.
    pub fn set(self, limits: &mut Limits, value: u64) {
        let narrow = usize::try_from(value).unwrap_or(usize::MAX);
        match self.target() {
            Target::Load(field) => {
                let load = &mut limits.load;
                match field {
                    LoadField::FileBytes => load.max_file_bytes = value,
                    LoadField::Files => load.max_files = narrow,
                    LoadField::Documents => load.max_documents = narrow,
                    LoadField::Depth => load.max_depth = narrow,
                    LoadField::Nodes => load.max_nodes = narrow,
                    LoadField::ScalarBytes => load.max_scalar_bytes = narrow,
                    LoadField::DiagnosticsPerFile => load.max_diagnostics_per_file = narrow,
                    LoadField::TotalBytes => load.max_total_bytes = value,
                }
            }
            Target::Inventory(limit) => limits.inventory.set(limit, value),
            Target::Compile(limit) => {
                limits.compile.set(limit, value);
                if limit == Limit::Endpoints {
                    limits.inventory.set(InventoryLimit::Endpoints, value);
                }
            }
        }
    }

    fn of_compile(limit: Limit) -> Option<porin_limit> {
        Self::ALL
            .iter()
            .copied()
            .find(|l| l.target() == Target::Compile(limit))
    }

    fn of_inventory(limit: InventoryLimit) -> Option<porin_limit> {
        if limit == InventoryLimit::Endpoints {
            return Some(Self::Endpoints);
        }
        Self::ALL
            .iter()
            .copied()
            .find(|l| l.target() == Target::Inventory(limit))
    }
}

/// The message and result of a compile error: a compile limit gives
/// `LIMIT_EXCEEDED` and names the `porin_limit` that raises it (the
/// compiler's text names the CLI flag).
pub(crate) fn compile_error(error: &CompileError) -> Failure {
    match error {
        CompileError::Limit { limit, .. } => limit_exceeded(error, porin_limit::of_compile(*limit)),
        CompileError::Inventory(inner) => inventory_error(inner),
        _ => Failure::new(porin_result::CompileFailed, error.to_string()),
    }
}

/// The message and result of an inventory error: a limit gives
/// `LIMIT_EXCEEDED` naming the `porin_limit`, an unreadable file `IO`, the
/// rest `INVENTORY_INVALID`.
pub(crate) fn inventory_error(error: &InventoryError) -> Failure {
    match error {
        InventoryError::Limit { limit_kind, .. } => {
            limit_exceeded(error, porin_limit::of_inventory(*limit_kind))
        }
        InventoryError::Read { .. } => Failure::new(porin_result::Io, error.to_string()),
        _ => Failure::new(porin_result::InventoryInvalid, error.to_string()),
    }
}

/// `LIMIT_EXCEEDED` with the library's text and the `porin_limit` that
/// raises the limit. The library's limits are non-exhaustive:
/// `every_library_limit_has_a_c_value` fails until a new one has a value,
/// and until then the text alone is given.
fn limit_exceeded(error: &dyn std::fmt::Display, limit: Option<porin_limit>) -> Failure {
    let message = match limit {
        Some(limit) => format!(
            "{error} (C API: porin_session_set_limit with {})",
            limit.c_name()
        ),
        None => error.to_string(),
    };
    Failure::new(porin_result::LimitExceeded, message)
}

#[cfg(test)]
mod tests {
    use porin_compiler::limits::{CompileLimits, InventoryLimits};

    use super::*;

    #[test]
    fn numbers_and_names_are_unique_and_match() {
        for (i, a) in porin_limit::ALL.iter().enumerate() {
            assert_eq!(porin_limit::from_u32(*a as u32), Some(*a));
            for b in &porin_limit::ALL[i + 1..] {
                assert_ne!(*a as u32, *b as u32);
                assert_ne!(a.c_name(), b.c_name());
                assert_ne!(a.target(), b.target());
            }
        }
        assert_eq!(porin_limit::from_u32(0), None);
    }

    #[test]
    fn security_md_lists_every_value() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../SECURITY.md");
        let text = std::fs::read_to_string(path).unwrap();
        for limit in porin_limit::ALL {
            let row = format!("`{}` ({}", limit.c_name(), limit as u32);
            assert!(text.contains(&row), "SECURITY.md lacks {row}");
        }
    }

    #[test]
    fn every_library_limit_has_a_c_value() {
        for limit in Limit::ALL {
            assert!(porin_limit::of_compile(limit).is_some(), "{limit:?}");
        }
        for limit in InventoryLimit::ALL {
            assert!(porin_limit::of_inventory(limit).is_some(), "{limit:?}");
        }
    }

    #[test]
    fn each_value_sets_its_own_limit() {
        for (index, limit) in porin_limit::ALL.into_iter().enumerate() {
            let mut limits = Limits::default();
            let value = 3000 + index as u64;
            limit.set(&mut limits, value);
            assert_eq!(limit.get(&limits), value, "{limit:?}");
            let changed = porin_limit::ALL
                .iter()
                .filter(|other| other.get(&limits) != other.get(&Limits::default()))
                .count();
            assert_eq!(changed, 1, "{limit:?} changed another limit");
        }
        let mut limits = Limits::default();
        porin_limit::Endpoints.set(&mut limits, 7);
        assert_eq!(limits.inventory.max_endpoints, 7);
        assert_eq!(limits.compile.max_endpoints, 7);
        assert_eq!(
            limits.compile,
            CompileLimits {
                max_endpoints: 7,
                ..CompileLimits::default()
            }
        );
        assert_ne!(limits.inventory, InventoryLimits::default());
    }
}

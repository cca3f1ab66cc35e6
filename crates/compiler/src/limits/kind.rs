//! Which limit: the names of the settable limits, shared by the limit
//! checks ([`crate::limits`]), the errors ([`crate::error`]) and every
//! front end that maps a limit to its own knob (a CLI flag, a C
//! `porin_limit`). A leaf module, so the errors can name a limit without
//! depending on the checks.

/// Which limit was exceeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`crate::limits::CompileLimits::max_endpoints`].
    Endpoints,
    /// [`crate::limits::CompileLimits::max_rules`].
    Rules,
    /// [`crate::limits::CompileLimits::max_peer_selectors`].
    PeerSelectors,
    /// [`crate::limits::CompileLimits::max_cidr_prefixes`].
    CidrPrefixes,
    /// [`crate::limits::CompileLimits::max_identities`].
    Identities,
    /// [`crate::limits::CompileLimits::max_selector_evaluations`].
    SelectorEvaluations,
    /// [`crate::limits::CompileLimits::max_insertions_per_endpoint`].
    InsertionsPerEndpoint,
    /// [`crate::limits::CompileLimits::max_entries_per_endpoint`].
    EntriesPerEndpoint,
    /// [`crate::limits::CompileLimits::max_total_entries`].
    TotalEntries,
}

impl Limit {
    /// Every limit, in check order.
    pub const ALL: [Limit; 9] = [
        Limit::Endpoints,
        Limit::Rules,
        Limit::PeerSelectors,
        Limit::CidrPrefixes,
        Limit::Identities,
        Limit::SelectorEvaluations,
        Limit::InsertionsPerEndpoint,
        Limit::EntriesPerEndpoint,
        Limit::TotalEntries,
    ];

    /// The CLI flag that sets this limit (`porin compile` / `porin lint`).
    pub const fn flag(self) -> &'static str {
        match self {
            Limit::Endpoints => "--max-endpoints",
            Limit::Rules => "--max-rules",
            Limit::PeerSelectors => "--max-peer-selectors",
            Limit::CidrPrefixes => "--max-cidr-prefixes",
            Limit::Identities => "--max-identities",
            Limit::SelectorEvaluations => "--max-selector-evaluations",
            Limit::InsertionsPerEndpoint => "--max-insertions-per-endpoint",
            Limit::EntriesPerEndpoint => "--max-entries-per-endpoint",
            Limit::TotalEntries => "--max-total-entries",
        }
    }

    /// What is counted, with the CLI flag that raises the limit (the text of
    /// [`crate::error::CompileError::Limit`]).
    pub const fn description(self) -> &'static str {
        match self {
            Limit::Endpoints => "inventory endpoints (raise with `--max-endpoints`)",
            Limit::Rules => "policy rules after lowering (raise with `--max-rules`)",
            Limit::PeerSelectors => {
                "peer selectors in policy rules (raise with `--max-peer-selectors`)"
            }
            Limit::CidrPrefixes => {
                "CIDR prefixes named by policies (raise with `--max-cidr-prefixes`)"
            }
            Limit::Identities => "security identities (raise with `--max-identities`)",
            Limit::SelectorEvaluations => {
                "selector evaluations, identities tested against selectors (raise with `--max-selector-evaluations`)"
            }
            Limit::InsertionsPerEndpoint => {
                "policy-map key insertions for one endpoint, upper bound (raise with `--max-insertions-per-endpoint`)"
            }
            Limit::EntriesPerEndpoint => {
                "policy-map entries of one endpoint (raise with `--max-entries-per-endpoint`, at most the policy map size)"
            }
            Limit::TotalEntries => {
                "policy-map entries of all distinct map states together (raise with `--max-total-entries`)"
            }
        }
    }
}

/// Which inventory limit was exceeded ([`crate::limits::InventoryLimits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InventoryLimit {
    /// [`crate::limits::InventoryLimits::max_file_bytes`].
    FileBytes,
    /// [`crate::limits::InventoryLimits::max_files`].
    Files,
    /// [`crate::limits::InventoryLimits::max_endpoints`].
    Endpoints,
    /// [`crate::limits::InventoryLimits::max_documents`].
    Documents,
    /// [`crate::limits::InventoryLimits::max_depth`].
    Depth,
    /// [`crate::limits::InventoryLimits::max_nodes`].
    Nodes,
    /// [`crate::limits::InventoryLimits::max_alias_expansions`].
    AliasExpansions,
}

impl InventoryLimit {
    /// Every inventory limit.
    pub const ALL: [InventoryLimit; 7] = [
        InventoryLimit::FileBytes,
        InventoryLimit::Files,
        InventoryLimit::Endpoints,
        InventoryLimit::Documents,
        InventoryLimit::Depth,
        InventoryLimit::Nodes,
        InventoryLimit::AliasExpansions,
    ];

    /// The CLI flag that sets this limit. The endpoint limit is the
    /// compiler's ([`Limit::Endpoints`]): one number bounds both the
    /// inventory read and the compilation.
    pub const fn flag(self) -> &'static str {
        match self {
            InventoryLimit::FileBytes => "--max-inventory-file-bytes",
            InventoryLimit::Files => "--max-inventory-files",
            InventoryLimit::Endpoints => Limit::Endpoints.flag(),
            InventoryLimit::Documents => "--max-inventory-documents",
            InventoryLimit::Depth => "--max-inventory-depth",
            InventoryLimit::Nodes => "--max-inventory-nodes",
            InventoryLimit::AliasExpansions => "--max-inventory-alias-expansions",
        }
    }

    /// What is counted, with the flag that raises the limit.
    pub const fn description(self) -> &'static str {
        match self {
            InventoryLimit::FileBytes => {
                "inventory file size in bytes (raise with `--max-inventory-file-bytes`)"
            }
            InventoryLimit::Files => {
                "inventory files under the given directory (raise with `--max-inventory-files`)"
            }
            InventoryLimit::Endpoints => "inventory endpoints (raise with `--max-endpoints`)",
            InventoryLimit::Documents => {
                "YAML documents in one inventory file (raise with `--max-inventory-documents`)"
            }
            InventoryLimit::Depth => {
                "YAML nesting depth of an inventory file (raise with `--max-inventory-depth`)"
            }
            InventoryLimit::Nodes => {
                "YAML nodes in one inventory file (raise with `--max-inventory-nodes`)"
            }
            InventoryLimit::AliasExpansions => {
                "YAML nodes replayed by aliases in one inventory file (raise with `--max-inventory-alias-expansions`)"
            }
        }
    }
}

//! Resource limits for loading untrusted input.

/// Bounds on what one load may consume. Every limit ends the affected file
/// (or document) with a `PM002` error instead of exhausting memory or time.
///
/// The defaults are far above any real policy (the largest file in Cilium's
/// examples is a few KiB and 12 levels deep) and low enough that a hostile
/// input is refused within milliseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadLimits {
    /// Largest file (or stdin) accepted, in bytes. Default 8 MiB.
    pub max_file_bytes: u64,
    /// Most bytes of all the files one load reads together (each file is
    /// also bounded by `max_file_bytes`), charged before any file is
    /// parsed. This is what bounds the memory of a load of many files: a
    /// loaded document costs 35–70 times its text (trees, model, sources).
    /// Default 32 MiB, sized by the compile stage's limits
    /// (`porin_compiler::limits::CompileLimits`: 100,000 rules, 65,536 CIDR
    /// prefixes): a GitOps repository writes about one policy document per
    /// rule, ~270 bytes for a one-CIDR CNP, so 32 MiB holds the 100,000
    /// rules at ~330 bytes each and 65,535 one-CIDR CNPs (17.9 MB, which
    /// the old 16 MiB refused although Cilium runs them) with room; a
    /// hostile set of dense files at the limit peaks at about 1.1 GiB.
    pub max_total_bytes: u64,
    /// Deepest nesting of mappings and sequences (aliases included). Default
    /// 64; values above [`crate::yaml::tree::HARD_MAX_DEPTH`] (512) act as 512,
    /// because deserialization recurses once per level.
    pub max_depth: usize,
    /// Most YAML nodes in one file, counting every node an alias expands to
    /// (this is what stops "billion laughs" alias bombs). Default 1,000,000.
    pub max_nodes: usize,
    /// Most scalar bytes in one file, counting every copy an alias makes (an
    /// alias to a large string costs its length each time). Default 64 MiB.
    pub max_scalar_bytes: usize,
    /// Most documents in one file. Default 10,000.
    pub max_documents: usize,
    /// Most findings recorded per file; the rest are counted in one closing
    /// `PM002` error. Default 200.
    pub max_diagnostics_per_file: usize,
    /// Most files read from the directories given. Default 100,000.
    pub max_files: usize,
}

impl Default for LoadLimits {
    fn default() -> Self {
        LoadLimits {
            max_file_bytes: 8 * 1024 * 1024,
            max_total_bytes: 32 * 1024 * 1024,
            max_depth: 64,
            max_nodes: 1_000_000,
            max_scalar_bytes: 64 * 1024 * 1024,
            max_documents: 10_000,
            max_diagnostics_per_file: 200,
            max_files: 100_000,
        }
    }
}

//! One module per subcommand.

pub mod agent;
pub mod compile;
pub mod diff;
pub mod explain;
pub mod graph;
pub mod lint;
pub mod lsp;
pub mod query;
pub mod schema;
pub mod test;

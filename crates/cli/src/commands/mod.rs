//! One module per subcommand.

pub mod agent;
pub mod compile;
pub mod diff;
pub mod explain;
pub mod flows_weight;
pub mod graph;
pub mod lint;
pub mod lsp;
pub mod query;
pub mod replay;
pub mod schema;
pub mod suggest;
pub mod test;

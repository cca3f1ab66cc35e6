//! One module per subcommand.

pub mod compile;
pub mod explain;
pub mod lint;
pub mod query;
pub mod schema;
pub mod test;

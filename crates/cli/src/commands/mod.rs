//! One module per subcommand.

pub mod compile;
pub mod query;
pub mod test;

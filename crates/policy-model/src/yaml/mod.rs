//! YAML reading: the located tree and a serde deserializer over it.

pub mod de;
pub mod locator;
pub mod tree;

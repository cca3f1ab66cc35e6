//! Policy → L4 filters → map state.
//!
//! 1. [`lower`]: policy documents become [`rule::PolicyRule`]s, one per
//!    direction item, with selectors rewritten as Cilium does (namespace
//!    and cluster pinning, entities, CIDR selectors, KNP translation) and an
//!    [`lower::Origin`] each.
//! 2. [`policy::Resolver`]: rules are matched to subject identities, merged
//!    into L4 filters per (port, protocol) and selector, and distilled into
//!    each endpoint's [`crate::mapstate::MapState`].

pub mod lower;
pub mod matchpattern;
pub mod policy;
mod prehash;
pub mod rule;
pub mod selection;

//! # porin-model: the first stage of porin's pipeline
//!
//! YAML in; a typed, validated model of `CiliumNetworkPolicy`,
//! `CiliumClusterwideNetworkPolicy` and Kubernetes `NetworkPolicy` out, or
//! located errors (file, document, line, column, field path).
//!
//! This stage owns the policy model (1:1 with the YAML, round-trippable),
//! the loader, validation equal to what a Cilium 1.19 cluster accepts (the
//! CRD schema plus the agent's `Sanitize()`), and the diagnostic data model
//! and renderer that every later stage shares.
//!
//! - [`model`]: the serde types ([`PolicyDocument`], [`Rule`], ...).
//! - [`load_path`], [`load_paths`], [`load_str`], [`load_reader`]: the loader.
//! - [`diagnostic`]: [`Diagnostic`], [`Location`], the human and JSON renderers.
//! - [`registry`]: [`CodeInfo`], the one shape of every stage's codes, and
//!   the generated code tables.
//! - [`codes`]: the `PM0xx` codes.
//! - [`LoadLimits`]: resource bounds.
//!
//! ```
//! use porin_model::{LoadLimits, PolicyDocument, load_str};
//!
//! let yaml = r#"
//! apiVersion: cilium.io/v2
//! kind: CiliumNetworkPolicy
//! metadata: {name: web, namespace: default}
//! spec:
//!   endpointSelector: {matchLabels: {app: web}}
//!   ingress:
//!   - toPorts: [{ports: [{port: "80", protocol: TCP}]}]
//! "#;
//! let outcome = load_str("web.yaml", yaml, &LoadLimits::default());
//! assert!(!outcome.has_errors());
//! assert!(matches!(outcome.documents[0].doc, PolicyDocument::CiliumNetworkPolicy(_)));
//! ```
//!
//! Trust: the input may be untrusted CI input. Loading never panics and
//! uses bounded memory ([`LoadLimits`]).

// No unsafe code: system calls live in porin-kernel, the C ABI in porin-capi.
#![forbid(unsafe_code)]

pub mod codes;
pub mod diagnostic;
#[doc(hidden)]
pub mod invariants;
pub mod limits;
pub mod loader;
pub mod model;
pub mod registry;
pub mod reparse;
pub mod route;
pub mod schema;
mod suggest;
pub mod target;
pub mod validate;
pub mod version;
pub mod yaml;

pub use diagnostic::{Diagnostic, Location, Severity, SourceMap};
pub use limits::LoadLimits;
pub use loader::{
    LoadError, LoadOutcome, LoadedDocument, load_path, load_paths, load_reader, load_str,
};
pub use model::*;
pub use registry::{CodeInfo, Doc, Stage};
pub use route::Route;
pub use suggest::suggested_replacement;
pub use version::{CiliumVersion, Target, TargetChoice};

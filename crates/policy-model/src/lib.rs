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
//! Trust: the input may be untrusted CI input. Loading never panics and
//! uses bounded memory.

//! Loading: files, directories, stdin → located documents → typed model.
//!
//! Per file: read (bounded by `max_file_bytes`), parse the YAML stream into a
//! located tree ([`crate::yaml::tree`]), pick each document's resource kind,
//! deserialize the typed model from the tree, then validate it. Every problem
//! becomes a [`Diagnostic`] located through the tree; nothing panics.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::de::DeserializeOwned;
use thiserror::Error;

use crate::codes;
use crate::diagnostic::{Diagnostic, Location, SourceMap};
use crate::limits::LoadLimits;
use crate::model::{
    CiliumCidrGroup, CiliumClusterwideNetworkPolicy, CiliumNetworkPolicy, ClusterNetworkPolicy,
    NetworkPolicy, ObjectKey, PolicyDocument,
};
use crate::registry::CodeInfo;
use crate::route::{Route, Segment};
use crate::validate::{self, Finding};
use crate::yaml::de::{Ctx, DeError, DeErrorKind, NodeDeserializer, UnknownField};
use crate::yaml::locator::{LocatedNode, Locator, Step};
use crate::yaml::tree::{self, Node, NodeKind, Pos, TreeError};

/// A policy document that loaded and validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedDocument {
    /// Display path of its file.
    pub file: String,
    /// 0-based index of the YAML document in the file.
    pub index: usize,
    /// Position in the `items` of a `List` document, if it came from one.
    pub item: Option<usize>,
    /// The policy.
    pub doc: PolicyDocument,
}

impl LoadedDocument {
    /// Route prefix of this policy inside its YAML document (`items[3]` or empty).
    pub fn route_prefix(&self) -> Route {
        match self.item {
            Some(item) => Route::root().key("items").index(item),
            None => Route::root(),
        }
    }
}

/// Everything one load produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LoadOutcome {
    /// Valid policies, in file and document order. A document with any
    /// error-level diagnostic is left out (fail closed).
    pub documents: Vec<LoadedDocument>,
    /// All findings, in file and document order.
    pub diagnostics: Vec<Diagnostic>,
    /// The text of every file read, for rendering.
    pub sources: SourceMap,
    /// The located trees, for resolving routes of later findings (empty
    /// for the files whose trees were released:
    /// [`LoadOutcome::release_trees`], [`load_paths_lean`]).
    pub trees: Vec<FileTree>,
    /// The positions of the files whose trees were released, by display
    /// path: what [`LoadOutcome::locate`] reads for them.
    pub(crate) located: Vec<(String, Locator)>,
    /// Findings not recorded because a file hit `max_diagnostics_per_file`.
    pub omitted: usize,
    /// Documents of a kind only some Cilium versions or settings enforce
    /// (a row of [`crate::version::TABLE`]), which porin skips (PM008):
    /// where each is and its row. [`LoadOutcome::apply_target`] refuses
    /// them when the target enforces them and porin cannot check them.
    pub versioned_kinds: Vec<(Location, &'static crate::version::Row)>,
    /// ClusterNetworkPolicies that loaded and validated, held back until
    /// [`LoadOutcome::apply_target`] knows whether the target Cilium
    /// enforces them (1.20 with `--enable-k8s-cluster-network-policy`):
    /// then they join [`Self::documents`], otherwise they are refused
    /// (PM066). A consumer that applies no target never sees them.
    pub pending_cluster_policies: Vec<LoadedDocument>,
}

impl LoadOutcome {
    /// True when any diagnostic is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Resolves a route inside a document to a location, for findings of
    /// later stages (the compiler/lint). Falls back to the deepest existing
    /// ancestor when the route names a field that is absent.
    pub fn locate(&self, file: &str, document: usize, route: &Route) -> Option<Location> {
        if let Some(tree) = self.trees.iter().find(|t| t.file == file) {
            let root = tree.roots.get(document)?.as_ref()?;
            return Some(locate(file, document, root, route, false));
        }
        let (_, locator) = self.located.iter().find(|(name, _)| name == file)?;
        Some(locate_compact(
            file,
            document,
            locator.root(document)?,
            route,
        ))
    }

    /// Moves the documents and what locates their fields (the trees and
    /// the released trees' positions) into an outcome of their own, and
    /// leaves the findings and the source texts here: a consumer that
    /// renders findings after lowering (`porin compile --format json`) can
    /// then free the models once they are lowered. The moved outcome
    /// locates as this one did.
    pub fn split_off_documents(&mut self) -> LoadOutcome {
        LoadOutcome {
            documents: std::mem::take(&mut self.documents),
            trees: std::mem::take(&mut self.trees),
            located: std::mem::take(&mut self.located),
            ..LoadOutcome::default()
        }
    }

    /// Replaces the located trees by their positions only ([`Locator`]):
    /// [`LoadOutcome::locate`] gives the same locations, but the trees'
    /// nodes and scalar texts are freed. For consumers that only locate
    /// findings after the load (`porin compile`); lint's baseline and the
    /// session's item matching read the trees and need them kept.
    pub fn release_trees(&mut self) {
        for tree in std::mem::take(&mut self.trees) {
            let locator = Locator::of(&tree.roots);
            self.located.push((tree.file, locator));
        }
    }

    /// Resolves a route relative to a loaded policy (e.g. `spec.ingress[0]`,
    /// without a `List`'s `items[i]` prefix) to a location.
    pub fn locate_in(&self, document: &LoadedDocument, route: &Route) -> Option<Location> {
        let full = Route(
            document
                .route_prefix()
                .0
                .into_iter()
                .chain(route.0.iter().cloned())
                .collect(),
        );
        self.locate(&document.file, document.index, &full)
    }

    /// Records a finding unless this file already has `cap` of them.
    fn push_capped(&mut self, diagnostic: Diagnostic, cap: usize) {
        if self.diagnostics.len() < cap {
            self.diagnostics.push(diagnostic);
        } else {
            self.omitted += 1;
        }
    }

    /// Adds what another load produced (another file, a C API text, a
    /// policy test's reference), then refuses every added document that
    /// names an object already loaded ([`codes::DUPLICATE_POLICY`]).
    pub fn merge(&mut self, other: LoadOutcome) {
        let from = self.documents.len();
        self.extend(other);
        self.refuse_duplicates(from);
    }

    /// [`LoadOutcome::merge`] with an index of the keys loaded so far
    /// (kept by the caller across the files of one load).
    fn merge_indexed(&mut self, other: LoadOutcome, first: &mut ObjectIndex) {
        let from = self.documents.len();
        self.extend(other);
        self.refuse_duplicates_with(from, first);
    }

    /// Appends `other` without the duplicate check.
    fn extend(&mut self, other: LoadOutcome) {
        self.omitted += other.omitted;
        self.documents.extend(other.documents);
        self.diagnostics.extend(other.diagnostics);
        self.sources.extend(other.sources);
        self.trees.extend(other.trees);
        self.located.extend(other.located);
        self.versioned_kinds.extend(other.versioned_kinds);
        self.pending_cluster_policies
            .extend(other.pending_cluster_policies);
    }

    /// A cluster keeps one object per kind, namespace and name: applying a
    /// second document with the same key replaces the first, it does not
    /// add to it. Applying both would allow the union (an over-allow), and
    /// which one a cluster ends up with depends on the order of applies,
    /// which porin does not know. So `documents[from..]` that repeat the key
    /// of an earlier document are dropped with an error at their name that
    /// points at the first copy; the error makes every consumer refuse the
    /// whole set.
    pub(crate) fn refuse_duplicates(&mut self, from: usize) {
        let mut first: ObjectIndex = self
            .documents
            .iter()
            .take(from)
            .enumerate()
            .map(|(at, loaded)| (loaded.doc.object_key(), at))
            .collect();
        self.refuse_duplicates_with(from, &mut first);
    }

    /// [`LoadOutcome::refuse_duplicates`] with the keys of
    /// `documents[..from]` already in `first` (and the added ones put
    /// there): a load of many files keeps one index instead of rebuilding
    /// it per file, which was quadratic (23 % of `porin compile` of
    /// 65,535 one-rule files spread over 66 files).
    fn refuse_duplicates_with(&mut self, from: usize, first: &mut ObjectIndex) {
        // The repeats are found before any document moves (a document is
        // ~800 bytes: moving every added one out and back was most of the
        // merge), then removed at once. `first` holds each kept document's
        // index after the removal; `kept` maps those of the added ones to
        // where they are until then.
        let mut repeats: Vec<(usize, usize, ObjectKey)> = Vec::new();
        let mut kept: Vec<usize> = Vec::with_capacity(self.documents.len() - from);
        first.reserve(self.documents.len() - from);
        for at in from..self.documents.len() {
            let key = self.documents[at].doc.object_key();
            match first.get(&key) {
                Some(&earlier) => {
                    let earlier = earlier
                        .checked_sub(from)
                        .map_or(earlier, |added| kept[added]);
                    repeats.push((at, earlier, key));
                }
                None => {
                    first.insert(key, from + kept.len());
                    kept.push(at);
                }
            }
        }
        if repeats.is_empty() {
            return;
        }
        for (at, earlier, key) in &repeats {
            let name_route = Route::root().key("metadata").key("name");
            let here = self.name_location(&self.documents[*at], &name_route);
            let there = self.name_location(&self.documents[*earlier], &name_route);
            let mut diagnostic = Diagnostic::new(codes::DUPLICATE_POLICY, format!(
                    "{key} is defined twice (first at {}:{})",
                    there.file, there.line
                ),
            )
            .note("a cluster keeps one object per kind, namespace and name: the later apply replaces the earlier one, so porin refuses the policy set instead of applying both")
            .help("rename one of the two policies, or remove the copy");
            if here.file == there.file && here.document == there.document {
                diagnostic = diagnostic.note("the same file was given twice");
            }
            diagnostic
                .related
                .push((there, "first defined here".to_owned()));
            self.diagnostics.push(diagnostic.at(here));
        }
        let mut repeated = repeats.iter().map(|(at, _, _)| *at).peekable();
        let mut at = 0;
        self.documents.retain(|_| {
            let repeat = repeated.next_if_eq(&at).is_some();
            at += 1;
            !repeat
        });
    }

    /// Where a loaded document's `route` is, or its document's start.
    fn name_location(&self, loaded: &LoadedDocument, route: &Route) -> Location {
        self.locate_in(loaded, route).unwrap_or_else(|| Location {
            file: loaded.file.clone(),
            document: loaded.index,
            line: 1,
            column: 1,
            route: String::new(),
        })
    }
}

/// Where the first document of each object key is (the index of
/// [`LoadOutcome::refuse_duplicates`]).
type ObjectIndex = foldhash::HashMap<ObjectKey, usize>;

/// The located YAML trees of one file, by document index.
#[derive(Debug, Clone, PartialEq)]
pub struct FileTree {
    /// Display path.
    pub file: String,
    /// Root node of each document (`None` for empty documents).
    pub roots: Vec<Option<Node>>,
}

/// Why porin could not read its input at all (exit code 2, not a finding).
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum LoadError {
    /// A path could not be read.
    #[error("cannot read `{path}`")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Directories held more files than `max_files`.
    #[error(
        "more than {limit} policy files under the given paths (LoadLimits::max_files, `--max-files`)"
    )]
    TooManyFiles {
        /// The limit.
        limit: usize,
    },
    /// The files together are larger than `max_total_bytes`; refused
    /// before the file that crosses the limit is read.
    #[error(
        "the policy files add up to more than {limit} bytes at `{path}`; the limit is {limit} bytes (LoadLimits::max_total_bytes, `--max-total-bytes`)"
    )]
    TooMuchInput {
        /// The file that crossed the limit.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
}

/// Resolves `route` against `root`: the node it names, or the deepest
/// ancestor that exists. `at_key` points at the key instead of the value.
fn locate(file: &str, document: usize, root: &Node, route: &Route, at_key: bool) -> Location {
    let mut node = root;
    let mut pos = root.pos;
    for segment in &route.0 {
        let next = match (segment, &node.kind) {
            (Segment::Key(key), NodeKind::Mapping(_)) => node.entry(key),
            (Segment::Index(index), NodeKind::Sequence(items)) => items.get(*index).map(|n| (n, n)),
            _ => None,
        };
        match next {
            Some((key, value)) => {
                // A block mapping or sequence "starts" at its first entry,
                // which reads as the wrong place; its key is where it is named.
                let container = matches!(value.kind, NodeKind::Mapping(_) | NodeKind::Sequence(_));
                let keyed = matches!(segment, Segment::Key(_));
                pos = if at_key || (container && keyed) {
                    key.pos
                } else {
                    value.pos
                };
                node = value;
            }
            None => break,
        }
    }
    routed_location(file, document, pos, route)
}

/// [`locate`] over a file's [`Locator`] (never at the key): the same
/// steps, so the same line and column.
fn locate_compact(file: &str, document: usize, root: LocatedNode<'_>, route: &Route) -> Location {
    let mut node = root;
    for segment in &route.0 {
        let step = match segment {
            Segment::Key(key) => Step::Key(key),
            Segment::Index(index) => Step::Index(*index),
        };
        let Some(value) = node.child(step) else {
            break;
        };
        node = value;
    }
    // Each node holds the position a route ending at it reports
    // (a container under a key: the key), as `locate` chooses it.
    let pos = node.pos();
    routed_location(file, document, pos, route)
}

fn routed_location(file: &str, document: usize, pos: Pos, route: &Route) -> Location {
    Location {
        route: route.to_string(),
        ..position_location(file, document, pos)
    }
}

fn position_location(file: &str, document: usize, pos: Pos) -> Location {
    Location {
        file: file.to_owned(),
        document,
        line: pos.line,
        column: pos.column,
        route: String::new(),
    }
}

/// Loads YAML/JSON text that came from `name`.
pub fn load_str(name: &str, text: &str, limits: &LoadLimits) -> LoadOutcome {
    let mut outcome = LoadOutcome::default();
    outcome.sources.insert(name, text);
    if u64::try_from(text.len()).unwrap_or(u64::MAX) > limits.max_file_bytes {
        outcome
            .diagnostics
            .push(too_large(name, text.len() as u64, limits));
        return outcome;
    }
    let stream = tree::parse_stream(text, limits);
    let mut roots = Vec::new();
    for document in stream.documents {
        for (key, pos) in &document.duplicate_keys {
            outcome.push_capped(
                Diagnostic::new(codes::DUPLICATE_KEY, format!("duplicate key `{key}`"))
                    .at(position_location(name, document.index, *pos))
                    .help("remove one of the two entries; kubectl rejects repeated keys"),
                limits.max_diagnostics_per_file,
            );
        }
        if let Some(root) = &document.root {
            let before = outcome.documents.len();
            load_document(
                name,
                document.index,
                root,
                &mut outcome,
                limits.max_diagnostics_per_file,
            );
            if !document.duplicate_keys.is_empty() {
                // The repeated key makes the document invalid as a whole.
                outcome.documents.truncate(before);
            }
        }
        roots.push(document.root);
    }
    if let Some((index, error)) = stream.error {
        let (code, message, pos) = match error {
            TreeError::Syntax { message, pos } => {
                (codes::YAML_SYNTAX, format!("invalid YAML: {message}"), pos)
            }
            TreeError::Limit { message, pos } => (codes::LIMIT_EXCEEDED, message, pos),
        };
        outcome.diagnostics.push(
            Diagnostic::new(code, message)
                .at(position_location(name, index, pos))
                .note("nothing after this point in the file was read"),
        );
    }
    outcome.trees.push(FileTree {
        file: name.to_owned(),
        roots,
    });
    outcome.refuse_duplicates(0);
    if outcome.omitted > 0 {
        outcome.diagnostics.push(
            Diagnostic::new(codes::LIMIT_EXCEEDED, format!(
                    "{} more findings in `{name}` are not shown (LoadLimits::max_diagnostics_per_file, `--max-diagnostics-per-file`, is {})",
                    outcome.omitted, limits.max_diagnostics_per_file
                ),
            )
            .at(position_location(name, 0, Pos { line: 1, column: 1 })),
        );
    }
    outcome
}

fn too_large(name: &str, size: u64, limits: &LoadLimits) -> Diagnostic {
    Diagnostic::new(codes::LIMIT_EXCEEDED, format!(
            "`{name}` is {size} bytes; the limit is {} bytes (LoadLimits::max_file_bytes, `--max-file-bytes`)",
            limits.max_file_bytes
        ),
    )
    .at(Location {
        file: name.to_owned(),
        document: 0,
        line: 1,
        column: 1,
        route: String::new(),
    })
}

/// What a document's `apiVersion`/`kind` make of it.
enum Dispatch {
    Cnp,
    Ccnp,
    Knp,
    CidrGroup,
    ClusterNetworkPolicy,
    List,
    Skip(String),
    /// A kind of the version table: skipped, and recorded.
    Versioned(String, &'static crate::version::Row),
    Bad(String, Route),
}

fn dispatch(root: &Node) -> Dispatch {
    let kind = root.get("kind").and_then(Node::as_scalar);
    let api_version = root
        .get("apiVersion")
        .and_then(Node::as_scalar)
        .unwrap_or("");
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let Some(kind) = kind else {
        return Dispatch::Skip(
            "the document has no `kind`, so it is not a Kubernetes object".to_owned(),
        );
    };
    match kind {
        "CiliumNetworkPolicy" | "CiliumClusterwideNetworkPolicy" => {
            if api_version == "cilium.io/v2" {
                if kind == "CiliumNetworkPolicy" {
                    Dispatch::Cnp
                } else {
                    Dispatch::Ccnp
                }
            } else if group == "cilium.io" || api_version.is_empty() {
                Dispatch::Bad(
                    format!("`{kind}` must have apiVersion `cilium.io/v2`, found `{api_version}`"),
                    Route::root().key("apiVersion"),
                )
            } else {
                Dispatch::Skip(format!("`{api_version}` `{kind}` is not a Cilium resource"))
            }
        }
        "NetworkPolicy" => {
            if api_version == "networking.k8s.io/v1" {
                Dispatch::Knp
            } else if group == "networking.k8s.io"
                || group == "extensions"
                || api_version.is_empty()
            {
                Dispatch::Bad(
                    format!(
                        "`NetworkPolicy` must have apiVersion `networking.k8s.io/v1`, found `{api_version}`"
                    ),
                    Route::root().key("apiVersion"),
                )
            } else {
                Dispatch::Skip(format!(
                    "`{api_version}` `NetworkPolicy` is not a Kubernetes NetworkPolicy"
                ))
            }
        }
        // Both versions of Cilium 1.19's CRD serve the same schema
        // (v2alpha1 and v2 `cidrgroups_types.go`).
        "CiliumCIDRGroup" => match api_version {
            "cilium.io/v2alpha1" | "cilium.io/v2" => Dispatch::CidrGroup,
            _ if group == "cilium.io" || api_version.is_empty() => Dispatch::Bad(
                format!(
                    "`CiliumCIDRGroup` must have apiVersion `cilium.io/v2alpha1` or `cilium.io/v2`, found `{api_version}`"
                ),
                Route::root().key("apiVersion"),
            ),
            _ => Dispatch::Skip(format!("`{api_version}` `{kind}` is not a Cilium resource")),
        },
        // One shape for both served versions (network-policy-api
        // `apis/v1alpha2` and `apis/v1beta1` clusternetworkpolicy_types.go).
        "ClusterNetworkPolicy"
            if crate::model::CLUSTER_NETWORK_POLICY_VERSIONS.contains(&api_version) =>
        {
            Dispatch::ClusterNetworkPolicy
        }
        "ClusterNetworkPolicy" if group == "policy.networking.k8s.io" || api_version.is_empty() => {
            Dispatch::Bad(
                format!(
                    "`ClusterNetworkPolicy` must have apiVersion `policy.networking.k8s.io/v1alpha2` or `policy.networking.k8s.io/v1beta1`, found `{api_version}`"
                ),
                Route::root().key("apiVersion"),
            )
        }
        kind if crate::version::kind_row(group, kind).is_some() => {
            match crate::version::kind_row(group, kind) {
                Some(row) => Dispatch::Versioned(
                    format!(
                        "`{api_version}` `{kind}` is not modelled by porin yet; Cilium enforces it only from {} (row `{}` of porin's version table)",
                        row.turning_version(),
                        row.id
                    ),
                    row,
                ),
                None => Dispatch::Skip(format!("`{kind}` is not a policy kind")),
            }
        }
        kind if kind == "List" || kind.ends_with("List") => Dispatch::List,
        other => Dispatch::Skip(format!("`{other}` is not a policy kind")),
    }
}

fn load_document(file: &str, index: usize, root: &Node, outcome: &mut LoadOutcome, cap: usize) {
    if !matches!(root.kind, NodeKind::Mapping(_)) {
        outcome.push_capped(
            Diagnostic::new(
                codes::BAD_RESOURCE,
                "a document must be a mapping (a Kubernetes object)",
            )
            .at(locate(file, index, root, &Route::root(), false)),
            cap,
        );
        return;
    }
    match dispatch(root) {
        Dispatch::List => {
            let Some(items) = root.get("items") else {
                outcome.push_capped(
                    Diagnostic::new(codes::BAD_RESOURCE, "a `List` needs `items`").at(locate(
                        file,
                        index,
                        root,
                        &Route::root(),
                        false,
                    )),
                    cap,
                );
                return;
            };
            let NodeKind::Sequence(entries) = &items.kind else {
                if !items.is_null() {
                    outcome.push_capped(
                        Diagnostic::new(codes::BAD_RESOURCE, "`items` must be a sequence").at(
                            locate(file, index, root, &Route::root().key("items"), false),
                        ),
                        cap,
                    );
                }
                return;
            };
            for (item_index, item) in entries.iter().enumerate() {
                let prefix = Route::root().key("items").index(item_index);
                load_object(
                    file,
                    index,
                    Some(item_index),
                    root,
                    item,
                    &prefix,
                    outcome,
                    cap,
                );
            }
        }
        _ => load_object(file, index, None, root, root, &Route::root(), outcome, cap),
    }
}

#[expect(
    clippy::too_many_arguments,
    reason = "one document's context threaded through a private helper"
)]
fn load_object(
    file: &str,
    index: usize,
    item: Option<usize>,
    root: &Node,
    node: &Node,
    prefix: &Route,
    outcome: &mut LoadOutcome,
    cap: usize,
) {
    let dispatched = if matches!(node.kind, NodeKind::Mapping(_)) {
        dispatch(node)
    } else {
        Dispatch::Bad(
            "a list item must be a mapping (a Kubernetes object)".to_owned(),
            Route::root(),
        )
    };
    let deserialize: fn(&Node, &Route, &Ctx) -> Result<PolicyDocument, DeError> =
        match dispatched {
            Dispatch::Cnp => |node, prefix, ctx| {
                typed::<CiliumNetworkPolicy>(node, prefix, ctx)
                    .map(PolicyDocument::CiliumNetworkPolicy)
            },
            Dispatch::Ccnp => |node, prefix, ctx| {
                typed::<CiliumClusterwideNetworkPolicy>(node, prefix, ctx)
                    .map(PolicyDocument::CiliumClusterwideNetworkPolicy)
            },
            Dispatch::Knp => |node, prefix, ctx| {
                typed::<NetworkPolicy>(node, prefix, ctx).map(PolicyDocument::NetworkPolicy)
            },
            Dispatch::CidrGroup => |node, prefix, ctx| {
                typed::<CiliumCidrGroup>(node, prefix, ctx).map(PolicyDocument::CiliumCidrGroup)
            },
            Dispatch::ClusterNetworkPolicy => |node, prefix, ctx| {
                typed::<ClusterNetworkPolicy>(node, prefix, ctx)
                    .map(PolicyDocument::ClusterNetworkPolicy)
            },
            Dispatch::List => {
                outcome.push_capped(
                    Diagnostic::new(codes::BAD_RESOURCE, "a `List` cannot contain another list")
                        .at(locate(file, index, root, prefix, false)),
                    cap,
                );
                return;
            }
            Dispatch::Skip(reason) => {
                outcome.push_capped(
                    Diagnostic::new(codes::SKIPPED_DOCUMENT, format!("skipped: {reason}"))
                        .at(locate(file, index, root, &prefix.key("kind"), false)),
                    cap,
                );
                return;
            }
            Dispatch::Versioned(reason, row) => {
                let location = locate(file, index, root, &prefix.key("kind"), false);
                outcome.versioned_kinds.push((location.clone(), row));
                outcome.push_capped(
                    Diagnostic::new(codes::SKIPPED_DOCUMENT, format!("skipped: {reason}"))
                        .at(location),
                    cap,
                );
                return;
            }
            Dispatch::Bad(message, route) => {
                let full = Route(prefix.0.iter().chain(route.0.iter()).cloned().collect());
                outcome.push_capped(
                    Diagnostic::new(codes::BAD_RESOURCE, message)
                        .at(locate(file, index, root, &full, false)),
                    cap,
                );
                return;
            }
        };
    let (parsed, unknown_fields, de_errors) = deserialize_all(node, prefix, deserialize);
    let mut found: Vec<Diagnostic> = Vec::new();
    for unknown in unknown_fields {
        let message = match unknown.suggestion {
            Some(suggestion) => format!(
                "unknown field \"{}\", did you mean \"{suggestion}\"?",
                unknown.field
            ),
            None => format!("unknown field \"{}\"", unknown.field),
        };
        let expected = unknown
            .expected
            .iter()
            .filter(|field| !crate::yaml::de::HIDDEN_FIELDS.contains(field))
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", ");
        found.push(
            Diagnostic::new(codes::UNKNOWN_FIELD, message)
                .at(locate(file, index, root, &unknown.route, true))
                .help(format!("fields allowed here: {expected}")),
        );
    }
    let had_de_errors = !de_errors.is_empty();
    for error in de_errors {
        found.push(de_error_diagnostic(file, index, root, prefix, error));
    }
    let doc = match parsed {
        Some(doc) if !had_de_errors => {
            for finding in validate::validate_document(&doc) {
                found.push(finding_diagnostic(file, index, root, prefix, finding));
            }
            Some(doc)
        }
        _ => {
            // Cilium's semantic checks need the whole document; say so once.
            if let Some(last) = found
                .iter_mut()
                .rev()
                .find(|d| d.code != codes::UNKNOWN_FIELD.code)
            {
                last.notes.push(
                    "Cilium's rule checks were not run on this document: fix its structure first"
                        .to_owned(),
                );
            }
            None
        }
    };
    // Report in source order, whichever phase found them.
    found.sort_by_key(|d| d.primary.as_ref().map(|p| (p.line, p.column)));
    let errors = found.iter().filter(|d| d.is_error()).count();
    for diagnostic in found {
        outcome.push_capped(diagnostic, cap);
    }
    let Some(doc) = doc else { return };
    if errors == 0 && matches!(doc, PolicyDocument::ClusterNetworkPolicy(_)) {
        let location = locate(file, index, root, &prefix.key("kind"), false);
        if let Some(row) =
            crate::version::kind_row("policy.networking.k8s.io", "ClusterNetworkPolicy")
        {
            outcome.versioned_kinds.push((location.clone(), row));
        }
        outcome.push_capped(
            Diagnostic::new(
                codes::SKIPPED_DOCUMENT,
                "skipped until a target is known: ClusterNetworkPolicy is enforced only by Cilium 1.20 with --enable-k8s-cluster-network-policy",
            )
            .at(location),
            cap,
        );
        outcome.pending_cluster_policies.push(LoadedDocument {
            file: file.to_owned(),
            index,
            item,
            doc,
        });
    } else if errors == 0 {
        outcome.documents.push(LoadedDocument {
            file: file.to_owned(),
            index,
            item,
            doc,
        });
    }
}

/// At most this many structural errors are collected per document.
const MAX_STRUCTURAL_ERRORS: usize = 20;

type Deserialize = fn(&Node, &Route, &Ctx) -> Result<PolicyDocument, DeError>;

/// Deserializes a policy, collecting every structural error rather than the
/// first: after an error, the offending node is cut from a copy of the tree
/// and deserialization is retried. Each retry removes at least one node, so
/// this ends; the model is returned only when no error occurred.
fn deserialize_all(
    node: &Node,
    prefix: &Route,
    deserialize: Deserialize,
) -> (Option<PolicyDocument>, Vec<UnknownField>, Vec<DeError>) {
    let mut unknown: BTreeMap<Route, UnknownField> = BTreeMap::new();
    let mut errors: Vec<DeError> = Vec::new();
    let mut repaired: Option<Node> = None;
    // Sequence items cut so far, in original coordinates, so that routes
    // found in the repaired copy can be mapped back to the source.
    let mut cut: Vec<(Vec<Segment>, usize)> = Vec::new();
    // The last key cut (its parent's source route and the key), to recognise
    // the "missing field" error the cut itself causes.
    let mut last_cut: Option<(Route, String)> = None;
    let to_source = |route: &Route, cut: &[(Vec<Segment>, usize)]| -> Option<Route> {
        let relative = route.0.strip_prefix(prefix.0.as_slice())?;
        let mut original = prefix.0.clone();
        let mut path: Vec<Segment> = Vec::new();
        for segment in relative {
            let mapped = match segment {
                Segment::Index(index) => {
                    let mut gone: Vec<usize> = cut
                        .iter()
                        .filter(|(parent, _)| *parent == path)
                        .map(|(_, i)| *i)
                        .collect();
                    gone.sort_unstable();
                    let mut source_index = *index;
                    for removed in gone {
                        if removed <= source_index {
                            source_index += 1;
                        }
                    }
                    Segment::Index(source_index)
                }
                Segment::Key(key) => Segment::Key(key.clone()),
            };
            path.push(mapped.clone());
            original.push(mapped);
        }
        Some(Route(original))
    };
    let mut attempts = 0usize;
    loop {
        attempts += 1;
        let ctx = Ctx::default();
        let current = repaired.as_ref().unwrap_or(node);
        let result = deserialize(current, prefix, &ctx);
        for mut field in ctx.unknown_fields.take() {
            if let Some(route) = to_source(&field.route, &cut) {
                field.route = route;
            }
            unknown.entry(field.route.clone()).or_insert(field);
        }
        let mut error = match result {
            Ok(doc) => return (Some(doc), unknown.into_values().collect(), errors),
            Err(error) => error,
        };
        let relative = error
            .route
            .as_ref()
            .and_then(|route| route.0.strip_prefix(prefix.0.as_slice()))
            .map(<[Segment]>::to_vec);
        let source = error
            .route
            .as_ref()
            .and_then(|route| to_source(route, &cut));
        if let Some(source) = &source {
            error.route = Some(source.clone());
        }
        // Cutting a required field's bad value makes its parent miss the
        // field: that is the same defect again, so it is not reported twice.
        let cascade = error.kind == DeErrorKind::Missing
            && last_cut.as_ref().is_some_and(|(parent, key)| {
                error.route.as_ref() == Some(parent)
                    && error.message == format!("missing required field `{key}`")
            });
        last_cut = match (
            &error.route,
            relative.as_deref().and_then(<[Segment]>::last),
        ) {
            (Some(route), Some(Segment::Key(key))) => Some((
                Route(route.0[..route.0.len().saturating_sub(1)].to_vec()),
                key.clone(),
            )),
            _ => None,
        };
        if !cascade {
            errors.push(error);
        }
        let mut copy = current.clone();
        let removed = relative
            .as_deref()
            .is_some_and(|segments| remove_at(&mut copy, segments));
        if !removed
            || errors.len() >= MAX_STRUCTURAL_ERRORS
            || attempts >= 4 * MAX_STRUCTURAL_ERRORS
        {
            return (None, unknown.into_values().collect(), errors);
        }
        if let Some(source) = source
            && let Some((Segment::Index(index), parent)) = source.0.split_last()
        {
            let parent = parent
                .strip_prefix(prefix.0.as_slice())
                .unwrap_or_default()
                .to_vec();
            cut.push((parent, *index));
        }
        repaired = Some(copy);
    }
}

/// Removes the node at `segments` (relative to `node`); false when the route
/// is empty or names nothing.
fn remove_at(node: &mut Node, segments: &[Segment]) -> bool {
    let Some((last, parents)) = segments.split_last() else {
        return false;
    };
    let mut current = node;
    for segment in parents {
        let next = match (segment, &mut current.kind) {
            (Segment::Key(key), NodeKind::Mapping(entries)) => entries
                .iter_mut()
                .find(|(k, _)| k.as_scalar() == Some(key.as_str()))
                .map(|(_, v)| v),
            (Segment::Index(i), NodeKind::Sequence(items)) => items.get_mut(*i),
            _ => None,
        };
        match next {
            Some(next) => current = next,
            None => return false,
        }
    }
    match (last, &mut current.kind) {
        (Segment::Key(key), NodeKind::Mapping(entries)) => {
            let before = entries.len();
            entries.retain(|(k, _)| k.as_scalar() != Some(key.as_str()));
            entries.len() < before
        }
        (Segment::Index(i), NodeKind::Sequence(items)) if *i < items.len() => {
            items.remove(*i);
            true
        }
        _ => false,
    }
}

fn typed<T: DeserializeOwned>(node: &Node, prefix: &Route, ctx: &Ctx) -> Result<T, DeError> {
    T::deserialize(NodeDeserializer::new(node, prefix, ctx))
}

fn de_error_diagnostic(
    file: &str,
    index: usize,
    root: &Node,
    prefix: &Route,
    error: DeError,
) -> Diagnostic {
    let code = match error.kind {
        DeErrorKind::Type | DeErrorKind::Other => codes::WRONG_TYPE,
        DeErrorKind::Missing => codes::MISSING_FIELD,
        DeErrorKind::UnknownVariant => codes::INVALID_ENUM,
        DeErrorKind::UnknownField => codes::UNKNOWN_FIELD,
    };
    let route = error.route.clone().unwrap_or_else(|| prefix.clone());
    let (code, message) = refine_enum_error(code, &route, error.message);
    let mut diagnostic =
        Diagnostic::new(code, message).at(locate(file, index, root, &route, error.at_key));
    diagnostic.help = error.help;
    if code == codes::PROTOCOL && diagnostic.message.to_ascii_uppercase().contains("\"ICMP") {
        diagnostic.help = Some(
            "ICMP is not a toPorts protocol; match ICMP types with an `icmps` block".to_owned(),
        );
    }
    diagnostic
}

/// Gives enum errors of well-known fields their own code and Cilium's wording.
fn refine_enum_error(code: CodeInfo, route: &Route, message: String) -> (CodeInfo, String) {
    if code != codes::INVALID_ENUM {
        return (code, message);
    }
    let value = message
        .strip_prefix("unknown value `")
        .and_then(|rest| rest.strip_suffix('`'))
        .unwrap_or_default()
        .to_owned();
    let segments = &route.0;
    let last_key = segments.iter().rev().find_map(|segment| match segment {
        Segment::Key(key) => Some(key.as_str()),
        Segment::Index(_) => None,
    });
    match (segments.last(), last_key) {
        (Some(Segment::Key(_)), Some("protocol")) => (
            codes::PROTOCOL,
            // L4Proto.Validate (pkg/policy/api/l4.go); the CRD enum is upper case only.
            format!(
                "invalid protocol \"{value}\", must be {{ TCP | UDP | SCTP | VRRP | IGMP | ANY }}"
            ),
        ),
        (Some(Segment::Index(_)), Some("fromEntities" | "toEntities")) => {
            (codes::ENTITY, format!("unsupported entity: {value}"))
        }
        (Some(Segment::Key(_)), Some("family")) => (codes::ICMP, format!("wrong family: {value}")),
        _ => (code, message),
    }
}

fn finding_diagnostic(
    file: &str,
    index: usize,
    root: &Node,
    prefix: &Route,
    finding: Finding,
) -> Diagnostic {
    let join = |route: &Route| Route(prefix.0.iter().chain(route.0.iter()).cloned().collect());
    Diagnostic {
        code: finding.code,
        severity: finding.severity,
        message: finding.message,
        primary: Some(locate(
            file,
            index,
            root,
            &join(&finding.route),
            finding.at_key,
        )),
        related: finding
            .related
            .iter()
            .map(|(route, label)| {
                (
                    locate(file, index, root, &join(route), false),
                    label.clone(),
                )
            })
            .collect(),
        notes: finding.notes,
        help: finding.help,
    }
}

/// Reads standard input (bounded by `max_file_bytes`) and loads it as `<stdin>`.
pub fn load_reader(
    name: &str,
    reader: impl Read,
    limits: &LoadLimits,
) -> Result<LoadOutcome, LoadError> {
    let mut bytes = Vec::new();
    reader
        .take(limits.max_file_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| LoadError::Io {
            path: PathBuf::from(name),
            source,
        })?;
    Ok(load_bytes(name, &bytes, limits))
}

fn load_bytes(name: &str, bytes: &[u8], limits: &LoadLimits) -> LoadOutcome {
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limits.max_file_bytes {
        let mut outcome = LoadOutcome::default();
        outcome
            .diagnostics
            .push(too_large(name, bytes.len() as u64, limits));
        return outcome;
    }
    match std::str::from_utf8(bytes) {
        Ok(text) => load_str(name, text.strip_prefix('\u{feff}').unwrap_or(text), limits),
        Err(error) => {
            let mut outcome = LoadOutcome::default();
            outcome.diagnostics.push(
                Diagnostic::new(
                    codes::YAML_SYNTAX,
                    format!("`{name}` is not UTF-8: {error}"),
                )
                .at(Location {
                    file: name.to_owned(),
                    document: 0,
                    line: 1,
                    column: 1,
                    route: String::new(),
                }),
            );
            outcome
        }
    }
}

fn load_file(path: &Path, limits: &LoadLimits) -> Result<LoadOutcome, LoadError> {
    let name = path.display().to_string();
    let io = |source| LoadError::Io {
        path: path.to_owned(),
        source,
    };
    let size = std::fs::metadata(path).map_err(io)?.len();
    if size > limits.max_file_bytes {
        let mut outcome = LoadOutcome::default();
        outcome.diagnostics.push(too_large(&name, size, limits));
        return Ok(outcome);
    }
    let file = std::fs::File::open(path).map_err(io)?;
    load_reader(&name, file, limits)
}

fn is_policy_file(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
}

/// Lists the policy files under a directory, recursively and sorted, as
/// [`load_path`] reads them (public for callers that load some of the files
/// from elsewhere or must know which files a directory names: the language
/// server's unsaved editor buffers, `porin lint --context`).
/// Symbolic links to directories are not followed (no cycles).
pub fn policy_files(dir: &Path, limits: &LoadLimits) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(current) = pending.pop() {
        let entries = std::fs::read_dir(&current).map_err(|source| LoadError::Io {
            path: current.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| LoadError::Io {
                path: current.clone(),
                source,
            })?;
            let path = entry.path();
            let file_type = entry.file_type().map_err(|source| LoadError::Io {
                path: path.clone(),
                source,
            })?;
            if file_type.is_dir() {
                pending.push(path);
            } else if is_policy_file(&path) && (file_type.is_file() || path.is_file()) {
                files.push(path);
                if files.len() > limits.max_files {
                    return Err(LoadError::TooManyFiles {
                        limit: limits.max_files,
                    });
                }
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Loads a file, or every `*.yaml`/`*.yml`/`*.json` under a directory.
pub fn load_path(path: &Path, limits: &LoadLimits) -> Result<LoadOutcome, LoadError> {
    load_paths(std::slice::from_ref(&path.to_owned()), limits)
}

/// One input of a load, in the order the user gave them.
enum Input {
    Stdin,
    File(PathBuf),
}

/// From how many bytes of input [`load_paths`] parses files on rayon's
/// threads.
const PARALLEL_LOAD_BYTES: u64 = 256 * 1024;

/// Loads several paths (files or directories); `-` means standard input.
///
/// The inputs are listed and charged against `max_total_bytes` first, and
/// a listing error (a file that crosses the total, a path that cannot be
/// read) ends the load before any file is parsed. Then the files are parsed
/// in parallel (rayon; from 256 KiB of input in more than one
/// file) and merged in input order, so the outcome, and which
/// read error ends the load, are those of reading them one after the other.
pub fn load_paths(paths: &[PathBuf], limits: &LoadLimits) -> Result<LoadOutcome, LoadError> {
    load_paths_with(paths, limits, true)
}

/// [`load_paths`] that releases each file's trees as soon as the file is
/// loaded ([`LoadOutcome::release_trees`]): the same documents,
/// diagnostics and locations, without holding every file's tree at once
/// (most of the memory of a load of many small policies). For consumers
/// that never read [`LoadOutcome::trees`] (`porin compile`).
pub fn load_paths_lean(paths: &[PathBuf], limits: &LoadLimits) -> Result<LoadOutcome, LoadError> {
    load_paths_with(paths, limits, false)
}

fn load_paths_with(
    paths: &[PathBuf],
    limits: &LoadLimits,
    keep_trees: bool,
) -> Result<LoadOutcome, LoadError> {
    let mut inputs: Vec<Input> = Vec::new();
    let mut total: u64 = 0;
    // Charges a file's size against `max_total_bytes` before it is read
    // (a file over `max_file_bytes` is not read, so not charged).
    let mut charge = |file: &Path| -> Result<(), LoadError> {
        let size = std::fs::metadata(file)
            .map_err(|source| LoadError::Io {
                path: file.to_owned(),
                source,
            })?
            .len();
        if size <= limits.max_file_bytes {
            total = total.saturating_add(size);
            if total > limits.max_total_bytes {
                return Err(LoadError::TooMuchInput {
                    path: file.to_owned(),
                    limit: limits.max_total_bytes,
                });
            }
        }
        Ok(())
    };
    let mut list = || -> Result<(), LoadError> {
        for path in paths {
            if path.as_os_str() == "-" {
                inputs.push(Input::Stdin);
                continue;
            }
            let metadata = std::fs::metadata(path).map_err(|source| LoadError::Io {
                path: path.clone(),
                source,
            })?;
            if metadata.is_dir() {
                for file in policy_files(path, limits)? {
                    charge(&file)?;
                    inputs.push(Input::File(file));
                }
            } else {
                charge(path)?;
                inputs.push(Input::File(path.clone()));
            }
        }
        Ok(())
    };
    // Nothing is parsed when the listing failed (a file over the total,
    // one that cannot be listed): refusing before reading is what bounds
    // the memory of a hostile set of files.
    list()?;
    // A few small files stay on the calling thread: parsing them takes
    // less than starting rayon's pool, and an embedder (the C API) should
    // not get that pool for them.
    let parallel = inputs.len() > 1 && total >= PARALLEL_LOAD_BYTES;
    // Each file's object keys are made with it, on the pool: the merge
    // below, alone on the calling thread, only compares them.
    let load = |input: &Input| -> Result<(LoadOutcome, Vec<ObjectKey>), LoadError> {
        let mut one = match input {
            Input::Stdin => load_reader("<stdin>", std::io::stdin().lock(), limits),
            Input::File(file) => load_file(file, limits),
        }?;
        if !keep_trees {
            one.release_trees();
        }
        let keys = one
            .documents
            .iter()
            .map(|loaded| loaded.doc.object_key())
            .collect();
        Ok((one, keys))
    };
    let loaded: Vec<Result<(LoadOutcome, Vec<ObjectKey>), LoadError>> = if parallel {
        inputs.par_iter().map(load).collect()
    } else {
        inputs.iter().map(load).collect()
    };
    // The first failure in input order (as reading them one by one would).
    let loaded: Vec<(LoadOutcome, Vec<ObjectKey>)> =
        loaded.into_iter().collect::<Result<_, _>>()?;
    let documents = loaded.iter().map(|(one, _)| one.documents.len()).sum();
    let mut outcome = LoadOutcome::default();
    // At its final size at once: the documents are large, and doubling
    // moved each of them several times.
    outcome.documents.reserve_exact(documents);
    // Usually no document repeats another's object: then the merge only
    // appends (`refuse_duplicates_with` would find nothing), and each
    // file's documents (~800 bytes each, 52 MiB for 65,535 policies, most
    // of it page faults of the new list) are moved on the pool.
    let mut seen: foldhash::HashSet<&ObjectKey> = foldhash::HashSet::default();
    seen.reserve(documents);
    let unique = loaded
        .iter()
        .flat_map(|(_, keys)| keys)
        .all(|key| seen.insert(key));
    drop(seen);
    if unique {
        for (mut one, _) in loaded {
            let documents = std::mem::take(&mut one.documents);
            if parallel {
                outcome.documents.par_extend(documents);
            } else {
                outcome.documents.extend(documents);
            }
            outcome.extend(one);
        }
        return Ok(outcome);
    }
    let mut first = ObjectIndex::default();
    first.reserve(documents);
    for (one, _) in loaded {
        outcome.merge_indexed(one, &mut first);
    }
    Ok(outcome)
}

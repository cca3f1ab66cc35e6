//! Policy documents → [`PolicyRule`]s (Cilium's `ParseToCiliumRule` +
//! `RulesToPolicyEntries` for CNP/CCNP, `ParseNetworkPolicy` for KNP).
//!
//! Selector rewriting follows docs/semantics.md §3.1 (`pkg/k8s/apis/cilium.io/utils/utils.go`
//! `getEndpointSelector`/`ParseToCiliumRule`, `pkg/k8s/network_policy.go`).
//! Peers porin cannot resolve offline (nodes, groups, CIDR groups, services
//! or FQDNs missing from the inventory) compile to nothing in allow rules
//! and to the wildcard peer in deny rules: fail closed both ways, with a
//! diagnostic saying so.

mod cilium;
mod cluster;
mod knp;
mod l7;
mod origin;
mod peers;
mod ports;
mod selectors;

pub use origin::{Origin, OriginKind, OriginTier, RuleSection};
use origin::{allow_section, direction_of};
pub use selectors::convert_selector;

use std::collections::{BTreeMap, BTreeSet};

use ipnetwork::IpNetwork;
use porin_model::CodeInfo;
use porin_model::diagnostic::{Diagnostic, Location};
use porin_model::loader::{LoadOutcome, LoadedDocument};
use porin_model::model::PolicyDocument;
use porin_model::route::Route;
use rayon::prelude::*;

use super::rule::PolicyRule;
use crate::cidrgroup::CidrGroups;
use crate::inventory::{AllowLocalhost, Inventory};
use crate::mapstate::Direction;
use crate::tier::rules::TierRules;

/// One policy document to lower, with a way to locate its fields.
#[derive(Clone, Copy)]
pub struct PolicyInput<'a> {
    /// Display path of the file.
    pub file: &'a str,
    /// Document index in the file.
    pub document: usize,
    /// Position in a `List` document, if the policy came from one.
    pub item: Option<usize>,
    /// The policy.
    pub policy: &'a PolicyDocument,
    /// The load that produced it, to locate fields (none: line 0).
    pub source: Option<&'a LoadOutcome>,
}

impl<'a> PolicyInput<'a> {
    /// Every valid document of a load.
    pub fn from_outcome(outcome: &'a LoadOutcome) -> Vec<PolicyInput<'a>> {
        outcome
            .documents
            .iter()
            .map(|doc| PolicyInput::of(doc, outcome))
            .collect()
    }

    /// One loaded document, located through the load that produced it.
    pub fn of(doc: &'a LoadedDocument, source: &'a LoadOutcome) -> PolicyInput<'a> {
        PolicyInput {
            file: &doc.file,
            document: doc.index,
            item: doc.item,
            policy: &doc.doc,
            source: Some(source),
        }
    }

    /// The (line, column) of a field path of this policy (0, 0 if unknown).
    pub fn locate(&self, route: &str) -> (u32, u32) {
        let full = match self.item {
            Some(item) if route.is_empty() => format!("items[{item}]"),
            Some(item) => format!("items[{item}].{route}"),
            None => route.to_owned(),
        };
        let Some(source) = self.source else {
            return (0, 0);
        };
        Route::parse(&full)
            .and_then(|r| source.locate(self.file, self.document, &r))
            .map_or((0, 0), |l| (l.line, l.column))
    }

    /// The location of a field path of this policy (line and column 0 if
    /// unknown).
    pub fn location(&self, route: &str) -> Location {
        let (line, column) = self.locate(route);
        Location {
            file: self.file.to_owned(),
            document: self.document,
            line,
            column,
            route: route.to_owned(),
        }
    }
}

/// The result of lowering all policies.
#[derive(Debug, Default)]
pub struct Lowered {
    /// The rules, in input order.
    pub rules: Vec<PolicyRule>,
    /// Origin table, indexed by origin id.
    pub origins: Vec<Origin>,
    /// Every prefix the rules name (CIDR identities are made for these).
    pub prefixes: BTreeSet<IpNetwork>,
    /// Findings.
    pub diagnostics: Vec<Diagnostic>,
    /// Log cookie numbers by `log.value`.
    pub cookies: BTreeMap<String, u32>,
    /// Origin id of the synthetic host allow (`allow-localhost-ingress`,
    /// see [`crate::inventory::AllowLocalhost`]); none when the inventory
    /// says `allowLocalhost: policy`. It comes after the policies' origins
    /// so their ids do not depend on the option.
    pub localhost_origin: Option<u32>,
    /// The CiliumCIDRGroups among the inputs; their prefixes are in
    /// [`Self::prefixes`] and their labels go to the CIDR identities.
    pub cidr_groups: CidrGroups,
    /// The ClusterNetworkPolicy rules among [`Self::rules`] as allows, with
    /// their places among the tiers ([`crate::tier`]).
    pub tier_rules: TierRules,
}

impl Lowered {
    /// The [`Scope`] this lowering gives a part of its inputs: its CIDR
    /// groups and log cookies, with `inventory`.
    pub fn scope<'a>(&'a self, inventory: &'a Inventory) -> Scope<'a> {
        Scope {
            inventory,
            cidr_groups: &self.cidr_groups,
            cookies: &self.cookies,
        }
    }
}

/// Origin ids of the synthetic allow-all rules (§3.3): always 0 and 1.
pub const ORIGIN_ALLOW_ANY_INGRESS: u32 = 0;
/// See [`ORIGIN_ALLOW_ANY_INGRESS`].
pub const ORIGIN_ALLOW_ANY_EGRESS: u32 = 1;

/// Name of the synthetic origin of the host allow: Cilium's label
/// `reserved:io.cilium.policy.derived-from=allow-localhost-ingress`
/// (`LabelAllowLocalHostIngress`, `pkg/policy/mapstate.go`).
pub const LOCALHOST_ORIGIN_NAME: &str = "allow-localhost-ingress";

struct Ctx<'a> {
    inventory: &'a Inventory,
    cluster: String,
    /// Log cookie numbers by `log.value` ([`Lowered::cookies`]), read-only
    /// while the documents are lowered.
    cookies: &'a BTreeMap<String, u32>,
    /// The CiliumCIDRGroups among the inputs ([`Lowered::cidr_groups`]),
    /// read-only while the documents are lowered.
    cidr_groups: &'a CidrGroups,
    out: Lowered,
}

/// What lowering a part of the inputs reads besides the part itself: the
/// inventory, the CIDR groups of every input (a `cidrGroupRef` in one
/// text names a group another text holds) and the log cookies numbered
/// over every input.
#[derive(Clone, Copy)]
pub struct Scope<'a> {
    /// The inventory the policies are lowered against.
    pub inventory: &'a Inventory,
    /// The CiliumCIDRGroups of all inputs ([`Lowered::cidr_groups`] of
    /// the whole lowering).
    pub cidr_groups: &'a CidrGroups,
    /// The log cookies of all inputs ([`Lowered::cookies`] of the whole
    /// lowering, [`log_values`] numbered 1.. in order).
    pub cookies: &'a BTreeMap<String, u32>,
}

/// Documents per batch of [`lower`]'s parallel lowering: enough that a
/// batch's merge is small next to its work, few enough that both threads
/// stay busy on a few thousand documents.
const LOWER_BATCH: usize = 256;

/// Lowers every policy.
///
/// Log cookies are numbered 1.. in sorted order of the distinct
/// `log.value` strings, so they do not depend on input order.
pub fn lower(inputs: &[PolicyInput<'_>], inventory: &Inventory) -> Lowered {
    lower_in_batches(inputs, inventory, LOWER_BATCH)
}

/// [`lower`] with `batch` documents per batch (one batch, on the calling
/// thread, when they are not more).
fn lower_in_batches(inputs: &[PolicyInput<'_>], inventory: &Inventory, batch: usize) -> Lowered {
    let out = prelude(inputs);
    let scope = out.scope(inventory);
    let batches: Vec<Lowered> = if inputs.len() > batch {
        inputs
            .par_chunks(batch.max(1))
            .map(|chunk| lower_batch(scope, chunk))
            .collect()
    } else {
        vec![lower_batch(scope, inputs)]
    };
    assemble(out, batches, inventory)
}

/// [`lower`] of a part of the inputs (one text of a live session), as
/// [`lower`] of every input lowers that part: `cidrGroupRef` and
/// `cidrGroupSelector` look groups up in `scope` (every input's groups),
/// not only among the part's own, and `log.value`s take `scope`'s cookie
/// numbers. The result's prefixes are the part's rules' and its own
/// groups' ([`Lowered::cidr_groups`] holds its own, [`Lowered::cookies`]
/// the numbering of its own log values), so that the parts' prefixes add
/// up to the whole's. Lowered on the calling thread (a part is one text).
pub fn lower_part(inputs: &[PolicyInput<'_>], scope: Scope<'_>) -> Lowered {
    let out = prelude(inputs);
    let batch = lower_batch(scope, inputs);
    assemble(out, vec![batch], scope.inventory)
}

/// [`lower`] over documents it owns, each batch's models freed on the
/// thread that lowered it as soon as it is lowered: the loaded models
/// (~100 MiB for 65,535 small policies) and the lowered rules are then
/// never all alive at once, and the rules reuse the models' memory. The
/// same result as [`lower`] over [`PolicyInput::from_outcome`] of an
/// outcome holding `documents`; `source` locates their fields.
pub fn lower_consuming(
    documents: Vec<LoadedDocument>,
    source: &LoadOutcome,
    inventory: &Inventory,
) -> Lowered {
    fn inputs<'d>(docs: &'d [LoadedDocument], source: &'d LoadOutcome) -> Vec<PolicyInput<'d>> {
        docs.iter()
            .map(|doc| PolicyInput::of(doc, source))
            .collect()
    }
    let out = prelude(&inputs(&documents, source));
    let scope = out.scope(inventory);
    let lower_owned = |chunk: Vec<LoadedDocument>| {
        let inputs = inputs(&chunk, source);
        lower_batch(scope, &inputs)
    };
    let batches: Vec<Lowered> = if documents.len() > LOWER_BATCH {
        // Moved out of the vector in parallel (no sequential pass over
        // the documents), in order.
        documents
            .into_par_iter()
            .chunks(LOWER_BATCH)
            .map(lower_owned)
            .collect()
    } else {
        vec![lower_owned(documents)]
    };
    assemble(out, batches, inventory)
}

/// What lowering needs of all documents before any is lowered: the
/// synthetic origins, the CIDR groups and the log cookies.
fn prelude(inputs: &[PolicyInput<'_>]) -> Lowered {
    let mut out = Lowered {
        cidr_groups: CidrGroups::from_documents(
            inputs.iter().map(|i| (i.file, i.document, i.policy)),
        ),
        ..Lowered::default()
    };
    for (id, direction) in [
        (ORIGIN_ALLOW_ANY_INGRESS, Direction::Ingress),
        (ORIGIN_ALLOW_ANY_EGRESS, Direction::Egress),
    ] {
        out.origins.push(Origin {
            id,
            kind: OriginKind::Synthetic,
            namespace: None,
            name: format!("allow-any-{direction}"),
            section: allow_section(direction),
            index: 0,
            direction,
            deny: false,
            route: String::new(),
            file: String::new(),
            document: 0,
            line: 0,
            tier: None,
        });
    }
    out.cookies = log_values(inputs)
        .into_iter()
        .enumerate()
        .map(|(i, v)| (v, u32::try_from(i + 1).unwrap_or(u32::MAX)))
        .collect();
    out
}

/// The distinct non-empty `log.value`s of the inputs' CNP/CCNP rules: the
/// keys of [`Lowered::cookies`], numbered 1.. in this (sorted) order.
pub fn log_values(inputs: &[PolicyInput<'_>]) -> BTreeSet<String> {
    let mut values = BTreeSet::new();
    for input in inputs {
        for (_, rule) in input.policy.cilium_rules() {
            if let Some(value) = rule.log.as_ref().and_then(|l| l.value.as_ref())
                && !value.is_empty()
            {
                values.insert(value.clone());
            }
        }
    }
    values
}

/// Lowers one batch of documents. Each document is lowered on its own (it
/// reads only itself and `scope`: the inventory, the CIDR groups and the
/// log cookies), so batches are lowered in parallel, each with origin ids
/// from 0, and [`assemble`]d in input order with their ids shifted: the
/// rules, origins and findings of lowering the documents one after the
/// other, in the same order.
fn lower_batch(scope: Scope<'_>, batch: &[PolicyInput<'_>]) -> Lowered {
    let mut ctx = Ctx {
        inventory: scope.inventory,
        cluster: scope.inventory.cluster.clone(),
        cookies: scope.cookies,
        cidr_groups: scope.cidr_groups,
        out: Lowered::default(),
    };
    for input in batch {
        ctx.lower_document(input);
    }
    ctx.out
}

/// Appends the batches to the prelude in order, shifting their origin ids,
/// and adds what comes after every policy (the host allow's origin, the
/// tier rules).
fn assemble(mut out: Lowered, batches: Vec<Lowered>, inventory: &Inventory) -> Lowered {
    out.rules
        .reserve_exact(batches.iter().map(|b| b.rules.len()).sum());
    out.origins
        .reserve_exact(batches.iter().map(|b| b.origins.len()).sum());
    let mut prefixes: Vec<IpNetwork> = out.cidr_groups.prefixes().collect();
    for batch in batches {
        let shift = u32::try_from(out.origins.len()).unwrap_or(u32::MAX);
        out.origins
            .extend(batch.origins.into_iter().map(|mut origin| {
                origin.id = origin.id.saturating_add(shift);
                origin
            }));
        out.rules.extend(batch.rules.into_iter().map(|mut rule| {
            rule.origin = rule.origin.saturating_add(shift);
            rule
        }));
        out.diagnostics.extend(batch.diagnostics);
        prefixes.extend(batch.prefixes);
    }
    // Sorted runs, one per batch: collecting sorts and deduplicates them
    // and builds the set in bulk.
    out.prefixes = prefixes.into_iter().collect();
    if inventory.allow_localhost != AllowLocalhost::Policy {
        let id = u32::try_from(out.origins.len()).unwrap_or(u32::MAX);
        out.origins.push(Origin {
            id,
            kind: OriginKind::Synthetic,
            namespace: None,
            name: LOCALHOST_ORIGIN_NAME.to_owned(),
            section: RuleSection::Ingress,
            index: 0,
            direction: Direction::Ingress,
            deny: false,
            route: String::new(),
            file: String::new(),
            document: 0,
            line: 0,
            tier: None,
        });
        out.localhost_origin = Some(id);
    }
    out.tier_rules = TierRules::from_rules(&out.rules);
    // The rules and origins live for the whole compilation; the slack of
    // their doubling growth was 21 MiB at 65,535 CIDR rules.
    out.rules.shrink_to_fit();
    out.origins.shrink_to_fit();
    out
}

/// The namespace a CNP's rules are pinned to (`default` when unset); none
/// for a CCNP.
fn cilium_namespace(policy: &PolicyDocument) -> Option<String> {
    matches!(policy, PolicyDocument::CiliumNetworkPolicy(_)).then(|| {
        policy
            .metadata()
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned())
    })
}

/// Lowers one item of a CNP/CCNP alone: rule `spec` of
/// [`PolicyDocument::cilium_rules`], item `index` of `section`, as
/// [`lower`] lowers it among the others (for the live session, which
/// lowers again only the items a change touched). The result holds its
/// rule and origin (0 or 1 of each; origin id 0: the caller gives it its
/// place), its diagnostics and prefixes, and no synthetic origins. Its
/// CIDR-group peers and its rule's log value read `scope`, as
/// [`lower_part`] does (the caller keeps the cookie numbering as it was).
pub fn lower_cilium_item(
    input: &PolicyInput<'_>,
    scope: Scope<'_>,
    spec: usize,
    section: RuleSection,
    index: usize,
) -> Lowered {
    let mut ctx = Ctx {
        inventory: scope.inventory,
        cluster: scope.inventory.cluster.clone(),
        cookies: scope.cookies,
        cidr_groups: scope.cidr_groups,
        out: Lowered::default(),
    };
    let namespace = cilium_namespace(input.policy);
    if let Some((spec_route, rule)) = input.policy.cilium_rules().into_iter().nth(spec) {
        ctx.lower_cilium_rule(
            input,
            namespace.as_deref(),
            &spec_route,
            rule,
            Some((section, index)),
        );
    }
    ctx.out
}

impl Ctx<'_> {
    /// Lowers one document's rules into [`Ctx::out`].
    fn lower_document(&mut self, input: &PolicyInput<'_>) {
        match input.policy {
            PolicyDocument::NetworkPolicy(knp) => self.lower_knp(input, knp),
            // Not a policy: read before, into `cidr_groups`.
            PolicyDocument::CiliumCidrGroup(_) => {}
            // Only where the target enforces it (`LoadOutcome::apply_target`).
            PolicyDocument::ClusterNetworkPolicy(policy) => {
                self.lower_cluster_network_policy(input, policy);
            }
            PolicyDocument::CiliumNetworkPolicy(_)
            | PolicyDocument::CiliumClusterwideNetworkPolicy(_) => {
                let namespace = cilium_namespace(input.policy);
                for (spec_route, rule) in input.policy.cilium_rules() {
                    self.lower_cilium_rule(input, namespace.as_deref(), &spec_route, rule, None);
                }
            }
        }
    }

    fn new_origin(
        &mut self,
        input: &PolicyInput<'_>,
        namespace: Option<&str>,
        section: RuleSection,
        index: usize,
        route: &str,
    ) -> u32 {
        let id = u32::try_from(self.out.origins.len()).unwrap_or(u32::MAX);
        let (line, _) = input.locate(route);
        self.out.origins.push(Origin {
            id,
            kind: OriginKind::of(input.policy),
            namespace: namespace.map(str::to_owned),
            name: input.policy.name().to_owned(),
            section,
            index,
            direction: direction_of(section),
            deny: section.is_deny(),
            route: route.to_owned(),
            file: input.file.to_owned(),
            document: input.document,
            line,
            tier: None,
        });
        id
    }

    fn diag(
        &mut self,
        input: &PolicyInput<'_>,
        code: CodeInfo,
        route: &str,
        message: String,
    ) -> usize {
        let location = input.location(route);
        self.out
            .diagnostics
            .push(Diagnostic::new(code, message).at(location));
        self.out.diagnostics.len() - 1
    }
}

/// Policies for the unit tests of lowering and resolution (the synthetic
/// clusters of `compile::synthetic` sit above this module).
#[cfg(test)]
pub(crate) mod test_inputs {
    use std::fmt::Write;

    /// `n` CiliumNetworkPolicies over ten apps in three namespaces: egress
    /// to one prefix each (a /24 around the next /32s every 64th) on
    /// TCP/443, a deny every fifth, a second item to entities every
    /// seventh, ingress from another app every third.
    pub(crate) fn cidr_policies(n: usize) -> String {
        let mut yaml = String::new();
        for i in 0..n {
            let address = std::net::Ipv4Addr::from(0x0a00_0000_u32.wrapping_add(i as u32));
            let prefix = if i % 64 == 0 {
                format!("{address}/24")
            } else {
                format!("{address}/32")
            };
            let egress = if i % 5 == 0 { "egressDeny" } else { "egress" };
            let _ = write!(
                yaml,
                "---\napiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata: {{name: p-{i}, namespace: ns-{}}}\nspec:\n  endpointSelector: {{matchLabels: {{app: app-{}}}}}\n  {egress}:\n  - toCIDR: [{prefix}]\n    toPorts: [{{ports: [{{port: \"443\", protocol: TCP}}]}}]\n",
                i % 3,
                i % 10
            );
            if i % 7 == 0 {
                yaml.push_str("  - toEntities: [cluster, world]\n");
            }
            if i % 3 == 0 {
                let _ = write!(
                    yaml,
                    "  ingress:\n  - fromEndpoints: [{{matchLabels: {{app: app-{}}}}}]\n",
                    (i + 1) % 10
                );
            }
        }
        yaml
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use porin_model::LoadLimits;
    use porin_model::loader::load_str;

    /// Batches lowered apart and appended (origin ids shifted) are the
    /// documents lowered one after the other (rules, origins, prefixes,
    /// findings).
    #[test]
    fn batches_give_what_one_pass_gives() {
        let outcome = load_str(
            "p.yaml",
            &test_inputs::cidr_policies(700),
            &LoadLimits::default(),
        );
        assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
        let inputs = PolicyInput::from_outcome(&outcome);
        let inventory = Inventory::new();
        let whole = lower_in_batches(&inputs, &inventory, usize::MAX);
        assert!(whole.rules.len() > 900, "{}", whole.rules.len());
        let whole = format!("{whole:?}");
        for batch in [1, 7, 256] {
            let batched = format!("{:?}", lower_in_batches(&inputs, &inventory, batch));
            assert!(batched == whole, "batches of {batch} differ from one pass");
        }
    }

    /// Lowering owned documents (freed batch by batch) gives what lowering
    /// them borrowed gives, in parallel batches (700 documents) and in one
    /// (fewer than a batch), locations included.
    #[test]
    fn consuming_gives_what_borrowing_gives() {
        let inventory = Inventory::new();
        for count in [700, 40] {
            let mut outcome = load_str(
                "p.yaml",
                &test_inputs::cidr_policies(count),
                &LoadLimits::default(),
            );
            assert!(!outcome.has_errors(), "{:?}", outcome.diagnostics);
            let borrowed = format!(
                "{:?}",
                lower(&PolicyInput::from_outcome(&outcome), &inventory)
            );
            assert!(borrowed.contains("line: 5"), "no located origin in {count}");
            let documents = std::mem::take(&mut outcome.documents);
            let consumed = format!("{:?}", lower_consuming(documents, &outcome, &inventory));
            assert!(
                consumed == borrowed,
                "{count} documents lowered consumed differ"
            );
        }
    }
}

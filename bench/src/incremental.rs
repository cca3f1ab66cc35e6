//! Incremental updates for agents (issue #14): a one-rule change to a 4,096-rule policy and a
//! new or removed identity, each to the map difference for the kernel, through the Rust API under
//! the C API's session (`porin_compiler::session::IncrementalCompiler` + `pin_identities`, then
//! `porin_compiler::diff::policy_diff`, the same calls `porin_session_compile` and
//! `porin_compilation_policy_diff` make). Runs in a child process (`role incr-child`).
//!
//! The policy: one CNP selecting `app: server` with `rules` ingress rules, rule `i` allowing
//! `role: client-<i % 256>` on TCP `10000 + i`; the inventory: the server and 256 client pods
//! (one identity each), so every rule gives one map entry. The steps:
//!
//! - **rule change**: rule 0's port becomes 9999 (and back, alternately): parse the changed
//!   policy text, compile through the session's compiler, difference of the server's map state;
//! - **identity add**: a pod `role: client-3, canary: "true"` appears (a new label set that
//!   the rules `i ≡ 3 (mod 256)` select, 16 of 4,096): compile, difference;
//! - **identity remove**: it goes away again.
//!
//! [`incremental_api`] runs the same steps through the incremental API (`session::Session`,
//! what the C API's live session runs) in the same child, beside the session path, and then
//! rule changes each right after an identity add (`rule_change_after_add`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use porin_compiler::compile::Compiled;
use porin_compiler::diff::policy_diff;
use porin_compiler::inventory::{Endpoint, Inventory, SourceLocation};
use porin_compiler::limits::CompileLimits;
use porin_compiler::resolve::lower::PolicyInput;
use porin_compiler::session::{IncrementalCompiler, Session, TextLoad, Update, pin_identities};
use porin_model::limits::LoadLimits;
use porin_model::loader::{LoadOutcome, load_str};
use serde::{Deserialize, Serialize};

/// Client identities in the inventory.
pub const CLIENTS: usize = 256;
/// The subject endpoint.
const SERVER: &str = "bench/server";

/// Seconds of each part of one step.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Step {
    /// Parsing the changed policy text (rule change only).
    pub load_secs: f64,
    /// Compiling through the session's compiler.
    pub compile_secs: f64,
    /// `policy_diff` of the server's map state.
    pub diff_secs: f64,
    /// Map writes in the difference.
    pub changes: usize,
    /// Map states the session's compiler distilled again.
    pub computed: usize,
}

impl Step {
    /// Everything from the change to the map difference.
    pub fn total(&self) -> f64 {
        self.load_secs + self.compile_secs + self.diff_secs
    }
}

/// The child's report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IncrementalResult {
    /// Rules in the policy.
    pub rules: usize,
    /// Map entries of the server.
    pub entries: usize,
    /// The first (full) compile.
    pub first_compile_secs: f64,
    /// Rule changes.
    pub rule_change: Vec<Step>,
    /// Identity additions.
    pub identity_add: Vec<Step>,
    /// Identity removals.
    pub identity_remove: Vec<Step>,
    /// The incremental API's figures, when this build has one ([`incremental_api`]).
    pub incremental: Option<IncrementalApiResult>,
}

/// Figures of the incremental API (filled in by [`incremental_api`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IncrementalApiResult {
    /// Rule changes.
    pub rule_change: Vec<Step>,
    /// Identity additions.
    pub identity_add: Vec<Step>,
    /// Identity removals.
    pub identity_remove: Vec<Step>,
    /// Rule changes each right after an identity add that a peer selector
    /// of the policy matches (the add and the removal after the change are
    /// not timed): what an agent whose pods come and go between policy
    /// edits sees. Empty from builds before session 9.
    #[serde(default)]
    pub rule_change_after_add: Vec<Step>,
    /// A rule inserted before rule 0 and taken out again, alternately
    /// ([`with_rule_inserted`]): every later rule of the text moves one
    /// place, so its origins move. Empty from builds before session 14.
    #[serde(default)]
    pub rule_insert: Vec<Step>,
    /// The same rule inserted before the middle rule (`rules / 2`) and taken out again
    /// ([`with_rule_inserted_before`]): its peer selector (`client-5`, first used by rule 5)
    /// keeps its place in the order of first uses, so no selector is numbered again. Empty from
    /// builds before session 15.
    #[serde(default)]
    pub rule_insert_middle: Vec<Step>,
    /// A second policy text (one CNP of one rule selecting the server: `role: client-7` on TCP
    /// 9001, [`extra_policy_yaml`]) added and removed again, alternately: a CNP created and
    /// deleted beside the 4,096-rule one. Empty from builds before session 15.
    #[serde(default)]
    pub text_add: Vec<Step>,
    /// A second port added to the middle rule on lines of its own and taken out again
    /// ([`with_port_added`]): a one-rule change that moves the lines of every rule after it.
    /// Empty from builds before session 16.
    #[serde(default)]
    pub port_line_add: Vec<Step>,
    /// A rule allowing a CIDR prefix no rule named (`fromCIDR: 198.51.100.0/24` on TCP 9003,
    /// [`with_cidr_rule_inserted_before`]) inserted before the middle rule and taken out again:
    /// its CIDR identity comes and goes with it. Empty from builds before session 21 (which
    /// recompiled in full for it).
    #[serde(default)]
    pub cidr_insert_middle: Vec<Step>,
    /// With that CIDR rule in the text, its port changed (TCP 9003 to 9013, its prefix the same)
    /// and back: a one-rule change of a CIDR rule. Empty from builds before session 24 (in which
    /// it lowered the whole text again).
    #[serde(default)]
    pub cidr_port_change: Vec<Step>,
    /// Rule 0's port toggled as in `rule_change`, with a third text in the session holding two
    /// CiliumCIDRGroups ([`groups_yaml`]). Empty from builds before session 22 (in which a
    /// session holding a group recompiled every policy change in full).
    #[serde(default)]
    pub group_rule_change: Vec<Step>,
    /// With those groups: a rule from the group `partners` (`fromCIDRSet: [{cidrGroupRef:
    /// partners}]` on TCP 9004, [`with_group_rule_inserted_before`]) inserted before the middle
    /// rule and taken out again. Empty from builds before session 22.
    #[serde(default)]
    pub group_ref_insert_middle: Vec<Step>,
    /// Rule 0's port toggled as in `rule_change` in the policy text carrying `log: {value:
    /// audit}` ([`with_log`]; the groups still there). Empty from builds before session 22 (in
    /// which a session with a log value recompiled every policy change in full).
    #[serde(default)]
    pub logged_rule_change: Vec<Step>,
    /// The one-rule changes above given as the text's bytes to `Session::apply_policy_text`
    /// (what the C API's `porin_session_apply_policy_bytes` runs), each required in place: the
    /// call re-parses the one changed rule item, so its time (`compile_secs`; `load_secs` is 0)
    /// includes the parse. Empty from builds before session 24.
    #[serde(default)]
    pub text_apply: TextApplySteps,
}

/// [`IncrementalApiResult::text_apply`]: each change made and taken out again, alternately.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct TextApplySteps {
    /// Rule 0's port (as `rule_change`).
    pub rule_change: Vec<Step>,
    /// A rule inserted before rule 0 (as `rule_insert`).
    pub rule_insert: Vec<Step>,
    /// The same before the middle rule (as `rule_insert_middle`).
    pub rule_insert_middle: Vec<Step>,
    /// A port added on lines of its own (as `port_line_add`).
    pub port_line_add: Vec<Step>,
    /// The CIDR rule's port (as `cidr_port_change`).
    #[serde(default)]
    pub cidr_port_change: Vec<Step>,
}

/// `text` (a [`policy_yaml`]) with `log: {value: audit}` on its rule.
pub fn with_log(text: &str) -> String {
    text.replacen("  ingress:\n", "  log:\n    value: audit\n  ingress:\n", 1)
}

/// The CIDR groups of [`IncrementalApiResult::group_rule_change`]: `partners` (two prefixes no
/// rule names) and `blocked` (one).
pub fn groups_yaml() -> String {
    "apiVersion: cilium.io/v2\nkind: CiliumCIDRGroup\nmetadata:\n  name: partners\nspec:\n  externalCIDRs:\n  - 203.0.113.0/24\n  - 192.0.2.0/25\n---\napiVersion: cilium.io/v2\nkind: CiliumCIDRGroup\nmetadata:\n  name: blocked\nspec:\n  externalCIDRs:\n  - 198.18.0.0/15\n".to_owned()
}

/// The second text of [`IncrementalApiResult::text_add`].
pub fn extra_policy_yaml() -> String {
    "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: extra\n  namespace: bench\nspec:\n  endpointSelector:\n    matchLabels:\n      app: server\n  ingress:\n  - fromEndpoints:\n    - matchLabels:\n        role: client-7\n    toPorts:\n    - ports:\n      - port: \"9001\"\n        protocol: TCP\n".to_owned()
}

/// The policy text, with rule 0 on `first_port`.
pub fn policy_yaml(rules: usize, first_port: u16) -> String {
    let mut yaml = String::from(
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: server\n  namespace: bench\nspec:\n  endpointSelector:\n    matchLabels:\n      app: server\n  ingress:\n",
    );
    for i in 0..rules {
        let port = if i == 0 {
            first_port
        } else {
            10_000 + i as u16
        };
        let _ = write!(
            yaml,
            "  - fromEndpoints:\n    - matchLabels:\n        role: client-{}\n    toPorts:\n    - ports:\n      - port: \"{port}\"\n        protocol: TCP\n",
            i % CLIENTS
        );
    }
    yaml
}

/// `text` (a [`policy_yaml`]) with one more rule before its rule 0: peers
/// `role: client-5` on TCP 9000.
pub fn with_rule_inserted(text: &str) -> String {
    with_rule_inserted_before(text, 0)
}

/// `text` (a [`policy_yaml`]) with the rule item `rule` before its rule `index` (after the last
/// when there is none).
fn with_item_inserted_before(text: &str, index: usize, rule: &str) -> String {
    const ITEM: &str = "  - fromEndpoints:\n";
    let at = text
        .match_indices(ITEM)
        .nth(index)
        .map_or(text.len(), |(at, _)| at);
    format!("{}{rule}{}", &text[..at], &text[at..])
}

/// `text` (a [`policy_yaml`]) with one more rule before its rule `index` (after the last when
/// there is none): peers `role: client-5` on TCP 9000.
pub fn with_rule_inserted_before(text: &str, index: usize) -> String {
    with_item_inserted_before(
        text,
        index,
        "  - fromEndpoints:\n    - matchLabels:\n        role: client-5\n    toPorts:\n    - ports:\n      - port: \"9000\"\n        protocol: TCP\n",
    )
}

/// `text` (a [`policy_yaml`]) with one more rule before its rule 0 whose peer selector no
/// other rule has (`role in (client-5, client-6)`) on TCP 9005: every other peer selector's
/// first use moves one place later.
pub fn with_new_peer_rule_first(text: &str) -> String {
    with_item_inserted_before(
        text,
        0,
        "  - fromEndpoints:\n    - matchExpressions:\n      - key: role\n        operator: In\n        values:\n        - client-5\n        - client-6\n    toPorts:\n    - ports:\n      - port: \"9005\"\n        protocol: TCP\n",
    )
}

/// `text` (a [`policy_yaml`]) with one more rule before its rule `index`: from the CIDR group
/// `partners` ([`groups_yaml`]) on TCP 9004.
pub fn with_group_rule_inserted_before(text: &str, index: usize) -> String {
    with_item_inserted_before(
        text,
        index,
        "  - fromCIDRSet:\n    - cidrGroupRef: partners\n    toPorts:\n    - ports:\n      - port: \"9004\"\n        protocol: TCP\n",
    )
}

/// `text` (a [`policy_yaml`]) with one more rule before its rule `index`: from
/// `198.51.100.0/24` on TCP 9003, a prefix no other rule names.
pub fn with_cidr_rule_inserted_before(text: &str, index: usize) -> String {
    with_item_inserted_before(
        text,
        index,
        "  - fromCIDR:\n    - 198.51.100.0/24\n    toPorts:\n    - ports:\n      - port: \"9003\"\n        protocol: TCP\n",
    )
}

/// `text` (a [`policy_yaml`]) with a second port (TCP 9002) on lines of its own in rule `index`'s
/// `ports`: a one-rule change that adds two lines, so every later rule's line moves.
pub fn with_port_added(text: &str, index: usize) -> String {
    const ITEM: &str = "  - fromEndpoints:\n";
    const PORT_END: &str = "        protocol: TCP\n";
    let rule = text
        .match_indices(ITEM)
        .nth(index)
        .map_or(text.len(), |(at, _)| at);
    let at = text[rule..]
        .find(PORT_END)
        .map_or(text.len(), |i| rule + i + PORT_END.len());
    format!(
        "{}      - port: \"9002\"\n        protocol: TCP\n{}",
        &text[..at],
        &text[at..]
    )
}

fn pod(name: &str, labels: &[(&str, &str)]) -> Endpoint {
    Endpoint {
        name: name.to_owned(),
        namespace: Some("bench".to_owned()),
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        ips: Vec::new(),
        service_account: None,
        ports: Vec::new(),
        identity: None,
        identity_labels: None,
        location: SourceLocation::default(),
    }
}

/// The server, its clients and `bystanders` pods no rule selects (labels
/// of their own each, so an identity and a map state each).
fn inventory(bystanders: usize) -> Result<Inventory> {
    let mut inventory = Inventory::new();
    inventory
        .namespaces
        .insert("bench".to_owned(), BTreeMap::new());
    inventory
        .endpoints
        .push(pod("server", &[("app", "server")]));
    for c in 0..CLIENTS {
        let role = format!("client-{c}");
        inventory
            .endpoints
            .push(pod(&format!("client-{c}"), &[("role", role.as_str())]));
    }
    for b in 0..bystanders {
        let app = format!("bystander-{b}");
        inventory
            .endpoints
            .push(pod(&app, &[("app", app.as_str())]));
    }
    inventory.finish().context("inventory")?;
    Ok(inventory)
}

fn load(yaml: &str) -> Result<LoadOutcome> {
    let outcome = load_str("server.yaml", yaml, &limits());
    if outcome.has_errors() {
        bail!("policy rejected: {:?}", outcome.diagnostics.first());
    }
    Ok(outcome)
}

/// The session path of main: what `porin_session_compile` does after a change, then the
/// difference the agent writes.
struct SessionPath {
    compiler: IncrementalCompiler,
    inventory: Inventory,
    outcome: LoadOutcome,
    last: Compiled,
}

impl SessionPath {
    fn new(yaml: &str, bystanders: usize) -> Result<(Self, f64)> {
        let mut inventory = inventory(bystanders)?;
        let outcome = load(yaml)?;
        let mut compiler = IncrementalCompiler::new();
        let start = Instant::now();
        let (last, _) = compiler.compile(&PolicyInput::from_outcome(&outcome), &inventory)?;
        let secs = start.elapsed().as_secs_f64();
        pin_identities(&mut inventory, &last);
        Ok((
            Self {
                compiler,
                inventory,
                outcome,
                last,
            },
            secs,
        ))
    }

    /// Compiles the current policies and inventory; the server's difference to the last.
    fn step(&mut self, load_secs: f64) -> Result<Step> {
        let start = Instant::now();
        let mut inventory = self.inventory.clone();
        inventory.finish().context("inventory")?;
        let (compiled, stats) = self
            .compiler
            .compile(&PolicyInput::from_outcome(&self.outcome), &inventory)?;
        pin_identities(&mut inventory, &compiled);
        let compile_secs = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let old = self.last.endpoint(SERVER).context("server")?;
        let new = compiled.endpoint(SERVER).context("server")?;
        let changes = policy_diff(&old.state, &new.state).len();
        let diff_secs = start.elapsed().as_secs_f64();
        self.inventory = inventory;
        self.last = compiled;
        Ok(Step {
            load_secs,
            compile_secs,
            diff_secs,
            changes,
            computed: stats.map_states_computed,
        })
    }
}

/// The parser's limits for the bench's texts: no size limit (the largest is 4,096 rules).
fn limits() -> LoadLimits {
    LoadLimits {
        max_file_bytes: u64::MAX,
        max_nodes: usize::MAX,
        ..LoadLimits::default()
    }
}

/// Runs in the child: `runs` of each step.
pub fn child(rules: usize, runs: usize, bystanders: usize) -> Result<IncrementalResult> {
    let original = policy_yaml(rules, 10_000);
    let changed = policy_yaml(rules, 9_999);
    let (mut session, first_compile_secs) = SessionPath::new(&original, bystanders)?;
    let entries = session.last.endpoint(SERVER).context("server")?.state.len();
    let mut result = IncrementalResult {
        rules,
        entries,
        first_compile_secs,
        rule_change: Vec::new(),
        identity_add: Vec::new(),
        identity_remove: Vec::new(),
        incremental: None,
    };
    for run in 0..runs {
        let text = if run % 2 == 0 { &changed } else { &original };
        let start = Instant::now();
        session.outcome = load(text)?;
        let load_secs = start.elapsed().as_secs_f64();
        result.rule_change.push(session.step(load_secs)?);
    }
    for _ in 0..runs {
        session
            .inventory
            .endpoints
            .push(pod("canary", &[("role", "client-3"), ("canary", "true")]));
        result.identity_add.push(session.step(0.0)?);
        session.inventory.endpoints.retain(|e| e.name != "canary");
        result.identity_remove.push(session.step(0.0)?);
    }
    result.incremental = incremental_api(rules, runs, bystanders)?;
    Ok(result)
}

/// The incremental API (`porin_compiler::session::Session`, what the C API's live session
/// runs): the same policy, inventory and steps as [`child`] ([`policy_yaml`], the `canary`
/// pod), each step through `set_policy` / `add_endpoint` / `remove_endpoint`, whose
/// [`porin_compiler::session::Update`] already carries the hole-free map writes of every
/// endpoint it touched (so `diff_secs` is 0: the difference is part of the update). The
/// rule change's `load_secs` is parsing the changed text, as in [`child`].
fn incremental_api(
    rules: usize,
    runs: usize,
    bystanders: usize,
) -> Result<Option<IncrementalApiResult>> {
    let original = policy_yaml(rules, 10_000);
    let changed = policy_yaml(rules, 9_999);
    let mut session = Session::with_policies(
        inventory(bystanders)?,
        vec![("server.yaml".to_owned(), load(&original)?)],
        CompileLimits::default(),
    )?;
    let server_writes = |update: &Update| -> usize {
        update
            .deltas
            .iter()
            .filter(|d| d.endpoint == SERVER)
            .map(|d| d.changes.len())
            .sum()
    };
    let step = |update: &Update, load_secs: f64, compile_secs: f64| Step {
        load_secs,
        compile_secs,
        diff_secs: 0.0,
        changes: server_writes(update),
        computed: update.states_folded,
    };
    let mut result = IncrementalApiResult {
        rule_change: Vec::new(),
        identity_add: Vec::new(),
        identity_remove: Vec::new(),
        rule_change_after_add: Vec::new(),
        rule_insert: Vec::new(),
        rule_insert_middle: Vec::new(),
        text_add: Vec::new(),
        port_line_add: Vec::new(),
        cidr_insert_middle: Vec::new(),
        cidr_port_change: Vec::new(),
        group_rule_change: Vec::new(),
        group_ref_insert_middle: Vec::new(),
        logged_rule_change: Vec::new(),
        text_apply: TextApplySteps::default(),
    };
    // One timed text replacement: the parse, then the update.
    let replace = |session: &mut Session, text: &str| -> Result<Step> {
        let start = Instant::now();
        let outcome = load(text)?;
        let load_secs = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let update = session.set_policy("server.yaml", outcome)?;
        let secs = start.elapsed().as_secs_f64();
        Ok(step(&update, load_secs, secs))
    };
    for run in 0..runs {
        let text = if run % 2 == 0 { &changed } else { &original };
        result.rule_change.push(replace(&mut session, text)?);
    }
    for _ in 0..runs {
        let canary = pod("canary", &[("role", "client-3"), ("canary", "true")]);
        let start = Instant::now();
        let update = session.add_endpoint(canary)?;
        let secs = start.elapsed().as_secs_f64();
        result.identity_add.push(step(&update, 0.0, secs));
        let start = Instant::now();
        let update = session
            .remove_endpoint("bench/canary")
            .context("canary is there")??;
        let secs = start.elapsed().as_secs_f64();
        result.identity_remove.push(step(&update, 0.0, secs));
    }
    for run in runs..2 * runs {
        let text = if run % 2 == 0 { &changed } else { &original };
        let outcome = load(text)?;
        session.add_endpoint(pod("canary", &[("role", "client-3"), ("canary", "true")]))?;
        let start = Instant::now();
        let update = session.set_policy("server.yaml", outcome)?;
        let secs = start.elapsed().as_secs_f64();
        result.rule_change_after_add.push(step(&update, 0.0, secs));
        session
            .remove_endpoint("bench/canary")
            .context("canary is there")??;
    }
    // `2 * runs` timed replacements alternating `text` and `base`, ending on `base`.
    let toggle =
        |session: &mut Session, (text, base): (&str, &str), steps: &mut Vec<Step>| -> Result<()> {
            for run in 0..2 * runs {
                steps.push(replace(session, if run % 2 == 0 { text } else { base })?);
            }
            Ok(())
        };
    // The last run above (2 runs - 1, odd) left `original`: insert the rule
    // into it and take it out again.
    toggle(
        &mut session,
        (&with_rule_inserted(&original), &original),
        &mut result.rule_insert,
    )?;
    let inserted = with_rule_inserted_before(&original, rules / 2);
    toggle(
        &mut session,
        (&inserted, &original),
        &mut result.rule_insert_middle,
    )?;
    let ported = with_port_added(&original, rules / 2);
    toggle(
        &mut session,
        (&ported, &original),
        &mut result.port_line_add,
    )?;
    let with_cidr = with_cidr_rule_inserted_before(&original, rules / 2);
    toggle(
        &mut session,
        (&with_cidr, &original),
        &mut result.cidr_insert_middle,
    )?;
    // The CIDR rule's port toggled, the rule in place (set and taken out untimed).
    let cidr_ported = with_cidr.replace("\"9003\"", "\"9013\"");
    replace(&mut session, &with_cidr)?;
    toggle(
        &mut session,
        (&cidr_ported, &with_cidr),
        &mut result.cidr_port_change,
    )?;
    replace(&mut session, &original)?;
    // The same changes as the text's bytes (`Session::apply_policy_text`): the first call loads
    // the text in full (untimed: the session got it as a whole outcome), every later one must
    // re-parse the changed item in place.
    let text_load = TextLoad {
        limits: limits(),
        target: None,
    };
    session.apply_policy_text("server.yaml", &original, &text_load)?;
    // `2 * runs` applies alternating `text` and `base`, ending on `base`, each required in place.
    let apply_toggle =
        |session: &mut Session, (text, base): (&str, &str), steps: &mut Vec<Step>| -> Result<()> {
            for run in 0..2 * runs {
                let text = if run % 2 == 0 { text } else { base };
                let start = Instant::now();
                let applied = session.apply_policy_text("server.yaml", text, &text_load)?;
                let secs = start.elapsed().as_secs_f64();
                if !applied.in_place {
                    bail!("a one-rule change given as bytes was loaded in full");
                }
                steps.push(step(&applied.update, 0.0, secs));
            }
            Ok(())
        };
    let applied = &mut result.text_apply;
    let front = with_rule_inserted(&original);
    for (text, steps) in [
        (&changed, &mut applied.rule_change),
        (&front, &mut applied.rule_insert),
        (&inserted, &mut applied.rule_insert_middle),
        (&ported, &mut applied.port_line_add),
    ] {
        apply_toggle(&mut session, (text, &original), steps)?;
    }
    // The CIDR rule's port, the rule in place (put in and taken out untimed).
    session.apply_policy_text("server.yaml", &with_cidr, &text_load)?;
    apply_toggle(
        &mut session,
        (&cidr_ported, &with_cidr),
        &mut applied.cidr_port_change,
    )?;
    session.apply_policy_text("server.yaml", &original, &text_load)?;
    let extra = extra_policy_yaml();
    for _ in 0..runs {
        let start = Instant::now();
        let outcome = load(&extra)?;
        let load_secs = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let update = session.set_policy("extra.yaml", outcome)?;
        let secs = start.elapsed().as_secs_f64();
        result.text_add.push(step(&update, load_secs, secs));
        let start = Instant::now();
        let update = session
            .remove_policy("extra.yaml")
            .context("the extra text is there")??;
        let secs = start.elapsed().as_secs_f64();
        result.text_add.push(step(&update, 0.0, secs));
    }
    // A text of CIDR groups beside the policy (untimed: it recompiles), then the same rule
    // change and a rule from one of the groups inserted and removed.
    session.set_policy("groups.yaml", load(&groups_yaml())?)?;
    toggle(
        &mut session,
        (&changed, &original),
        &mut result.group_rule_change,
    )?;
    let with_group = with_group_rule_inserted_before(&original, rules / 2);
    toggle(
        &mut session,
        (&with_group, &original),
        &mut result.group_ref_insert_middle,
    )?;
    // The policy with a log value (untimed: a new value renumbers the cookies, in full), then
    // the rule change again.
    let (logged, logged_changed) = (with_log(&original), with_log(&changed));
    replace(&mut session, &logged)?;
    toggle(
        &mut session,
        (&logged_changed, &logged),
        &mut result.logged_rule_change,
    )?;
    Ok(Some(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps do what they say: a port change rewrites the changed rule's entries, the
    /// canary adds entries for the 1-in-256 rules that select it, and removing it restores the
    /// state.
    #[test]
    fn steps_produce_their_differences() {
        // Bystanders change no writes: the same checks hold with them.
        for bystanders in [0, 40] {
            steps_with(bystanders);
        }
    }

    fn steps_with(bystanders: usize) {
        let result = child(512, 2, bystanders).unwrap();
        assert!(result.entries >= 512, "{}", result.entries);
        assert!(result.rule_change.iter().all(|s| s.changes > 0));
        // Rules 3 and 259 select client-3, hence the canary.
        assert!(result.identity_add.iter().all(|s| s.changes >= 2));
        assert!(result.identity_remove.iter().all(|s| s.changes >= 2));
        // The incremental API finds the same writes as the batch path.
        let api = result.incremental.unwrap();
        for (api, batch) in [
            (&api.rule_change, &result.rule_change),
            (&api.identity_add, &result.identity_add),
            (&api.identity_remove, &result.identity_remove),
        ] {
            let writes = |steps: &Vec<Step>| steps.iter().map(|s| s.changes).collect::<Vec<_>>();
            assert_eq!(writes(api), writes(batch));
        }
        // With the canary there, rule 0 (client-0) changes the same keys.
        let after_add: Vec<usize> = api
            .rule_change_after_add
            .iter()
            .map(|s| s.changes)
            .collect();
        assert_eq!(after_add, vec![result.rule_change[0].changes; 2]);
        // The inserted rule (client-5, one port) adds and removes the same
        // entries each time; nothing else changes though every later rule
        // moved.
        let inserts: Vec<usize> = api.rule_insert.iter().map(|s| s.changes).collect();
        assert_eq!(inserts.len(), 4);
        assert!(
            inserts.iter().all(|c| *c == inserts[0] && *c > 0),
            "{inserts:?}"
        );
        // In the middle: the same entries (the same rule on the same port), and at most the
        // server's state folded in full (the session's move of one rule; a rebuild folds every
        // state, one per client identity). Before rule 0 too: client-5's first use then comes
        // before client-0's, and the session numbers the selectors again in place instead of
        // rebuilding.
        let middle: Vec<usize> = api.rule_insert_middle.iter().map(|s| s.changes).collect();
        assert_eq!(middle, inserts, "{middle:?}");
        assert!(
            api.rule_insert.iter().all(|s| s.computed <= 1),
            "{:?}",
            api.rule_insert
        );
        assert!(
            api.rule_insert_middle.iter().all(|s| s.computed <= 1),
            "{:?}",
            api.rule_insert_middle
        );
        // The second text adds and removes client-7's entry on 9001 (one key per direction of
        // the change: 2 writes, as the inserted rule), without a rebuild.
        // The CIDR rule: one key (its new CIDR identity on 9003) as the inserted rule's, and
        // only the server's state distilled again (no rebuild).
        let cidr: Vec<usize> = api.cidr_insert_middle.iter().map(|s| s.changes).collect();
        assert_eq!(cidr, inserts, "{cidr:?}");
        assert!(
            api.cidr_insert_middle.iter().all(|s| s.computed <= 1),
            "{:?}",
            api.cidr_insert_middle
        );
        // With CIDR groups in the session: the rule change writes what it wrote without them,
        // and the rule from the group `partners` writes one key per group prefix (two), each
        // step folding the server's state alone.
        let grouped: Vec<usize> = api.group_rule_change.iter().map(|s| s.changes).collect();
        assert_eq!(grouped, vec![result.rule_change[0].changes; 4]);
        let from_group: Vec<usize> = api
            .group_ref_insert_middle
            .iter()
            .map(|s| s.changes)
            .collect();
        assert_eq!(from_group, vec![2 * inserts[0]; 4], "{from_group:?}");
        let logged: Vec<usize> = api.logged_rule_change.iter().map(|s| s.changes).collect();
        assert_eq!(logged, vec![result.rule_change[0].changes; 4]);
        // The same changes as bytes (each made in place, or the child fails): the writes of the
        // whole-outcome path.
        let writes = |steps: &[Step]| steps.iter().map(|s| s.changes).collect::<Vec<_>>();
        let text = &api.text_apply;
        assert_eq!(
            writes(&text.rule_change),
            vec![result.rule_change[0].changes; 4]
        );
        assert_eq!(writes(&text.rule_insert), inserts);
        assert_eq!(writes(&text.rule_insert_middle), inserts);
        assert_eq!(writes(&text.port_line_add), writes(&api.port_line_add));
        // The CIDR rule's port: one key removed and one added each way, both paths, and only the
        // server's state distilled again.
        assert!(
            api.cidr_port_change
                .iter()
                .all(|s| s.changes > 0 && s.computed <= 1),
            "{:?}",
            api.cidr_port_change
        );
        assert_eq!(
            writes(&text.cidr_port_change),
            writes(&api.cidr_port_change)
        );
        for steps in [
            &api.group_rule_change,
            &api.group_ref_insert_middle,
            &api.logged_rule_change,
        ] {
            assert!(steps.iter().all(|s| s.computed <= 1), "{steps:?}");
        }
        let texts: Vec<usize> = api.text_add.iter().map(|s| s.changes).collect();
        assert_eq!(texts, inserts, "{texts:?}");
        assert!(
            api.text_add.iter().all(|s| s.computed <= 1),
            "{:?}",
            api.text_add
        );
        // A port added to the middle rule on lines of its own (client-<n>'s second port: one
        // key in, one key out again) folds the server's state alone though every later rule's
        // line moved.
        let ports: Vec<usize> = api.port_line_add.iter().map(|s| s.changes).collect();
        assert_eq!(ports.len(), 4);
        assert!(ports.iter().all(|c| *c == ports[0] && *c > 0), "{ports:?}");
        assert!(
            api.port_line_add.iter().all(|s| s.computed <= 1),
            "{:?}",
            api.port_line_add
        );
    }
}

//! Every `PolicyTest` file under `fixtures/policy-tests` through the
//! compiler's live session (what the C API's `porin_session_apply_*` and
//! `porin agent` run): each of the file's policy sources set as a text of
//! its own, the session's compilation must equal the batch compile the
//! reference engine checks (`prepare`), and it must stay equal to a batch
//! compile of its inputs while each text, then each endpoint, is removed
//! and added again. The
//! fixtures cover what the session's property test does not generate
//! (host policies, nodes, entities, L7, auth, ClusterNetworkPolicy tiers,
//! CIDR groups, ...): a session that drops a feature the batch compiles
//! fails here.

use std::path::{Path, PathBuf};

use porin_compiler::compile::compile_with_limits;
use porin_compiler::limits::CompileLimits;
use porin_compiler::resolve::lower::PolicyInput;
use porin_compiler::session::Session;
use porin_model::Target;
use porin_model::limits::LoadLimits;
use porin_model::loader::{LoadOutcome, load_path, load_str, policy_files};
use porin_policytest::{PreparedTest, prepare};

/// The test file's policy sources, each loaded alone as `prepare` loads
/// it (the same names; the target not applied yet).
fn loads(path: &Path, prepared: &PreparedTest) -> Vec<(String, LoadOutcome)> {
    let display = path.display().to_string();
    let base = path.parent().unwrap_or(Path::new("."));
    let limits = LoadLimits::default();
    prepared
        .spec
        .policies
        .iter()
        .enumerate()
        .map(|(index, policy)| {
            let name = format!("{display}#policies[{index}]");
            let outcome = match (&policy.value.path, &policy.value.inline) {
                (Some(rel), None) => {
                    load_path(&base.join(rel), &limits).expect("prepare loaded the same path")
                }
                (None, Some(inline)) => load_str(&name, inline, &limits),
                _ => unreachable!("prepare accepted the file"),
            };
            (name, outcome)
        })
        .collect()
}

/// The sources merged, then targeted, as `prepare` does (its input
/// order).
fn prepared_outcome(loads: &[(String, LoadOutcome)], target: &Target) -> LoadOutcome {
    let mut outcome = LoadOutcome::default();
    for (_, load) in loads {
        outcome.merge(load.clone());
    }
    outcome.apply_target(target);
    outcome
}

/// The session's compilation equals a batch compile of its inputs (and
/// of its inventory: the CIDR numbers it pinned as prefixes came).
fn assert_batch(session: &Session, file: &str, step: &str) {
    let batch = compile_with_limits(
        &session.inputs(),
        &session.inventory(),
        &CompileLimits::default(),
    )
    .unwrap_or_else(|e| panic!("{file}: {step}: batch: {e}"));
    assert!(
        session.compiled() == batch,
        "{file}: {step}: the live session differs from the batch compile"
    );
}

#[test]
fn every_fixture_compiles_the_same_in_a_live_session() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/policy-tests");
    let files = policy_files(&root, &LoadLimits::default()).expect("the fixtures are listed");
    let (mut checked, mut same_order) = (0, 0);
    for path in files {
        // Files that expect an error (or are not test files) have no
        // compilation to compare.
        let Ok(prepared) = prepare(&path) else {
            continue;
        };
        let file = prepared.file.clone();
        let loads = loads(&path, &prepared);
        let target = prepared.inventory.target.choice().target();
        let texts: Vec<(String, LoadOutcome)> = loads
            .iter()
            .cloned()
            .map(|(name, mut outcome)| {
                outcome.apply_target(&target);
                (name, outcome)
            })
            .collect();
        if texts.iter().any(|(_, outcome)| outcome.has_errors()) {
            continue;
        }
        // All texts at once (the session's full build): the batch compile
        // the test cases run on, when the inputs come in the same order
        // (`apply_target` puts a file's ClusterNetworkPolicies after its
        // other documents, so a test file's merged load orders them
        // differently from one text per source), else a batch compile of
        // the session's inputs.
        let session = Session::with_policies(
            prepared.inventory.clone(),
            texts.clone(),
            CompileLimits::default(),
        )
        .unwrap_or_else(|e| panic!("{file}: session: {e:?}"));
        assert_batch(&session, &file, "every text at once");
        let merged_order =
            session
                .inputs()
                .iter()
                .map(|i| (i.file, i.document))
                .eq(
                    PolicyInput::from_outcome(&prepared_outcome(&loads, &target))
                        .iter()
                        .map(|i| (i.file, i.document)),
                );
        if merged_order {
            assert!(
                session.compiled() == prepared.compiled,
                "{file}: the live session differs from the compile the test cases run on"
            );
            same_order += 1;
        }
        // One text at a time from an empty session, then each text out
        // and back in (the session's incremental paths where it takes
        // them), against a batch compile of its inputs every time.
        let mut session = Session::new(prepared.inventory.clone(), CompileLimits::default())
            .unwrap_or_else(|e| panic!("{file}: session: {e:?}"));
        for (name, outcome) in &texts {
            session
                .set_policy(name, outcome.clone())
                .unwrap_or_else(|e| panic!("{file}: set {name}: {e:?}"));
            assert_batch(&session, &file, &format!("{name} added"));
        }
        for (name, outcome) in &texts {
            session.remove_policy(name).unwrap().unwrap();
            assert_batch(&session, &file, &format!("{name} removed"));
            session.set_policy(name, outcome.clone()).unwrap();
            assert_batch(&session, &file, &format!("{name} set again"));
        }
        // Each endpoint out and back in (a pod going and coming: the
        // session's incremental identity change where it takes one).
        for endpoint in prepared.inventory.endpoints.clone() {
            let name = endpoint.display_name();
            session.remove_endpoint(&name).unwrap().unwrap();
            assert_batch(&session, &file, &format!("{name} removed"));
            if session.has_endpoint(&name) {
                // A node's host endpoint, which the inventory makes from
                // its nodes again.
                continue;
            }
            session.add_endpoint(endpoint).unwrap();
            assert_batch(&session, &file, &format!("{name} added again"));
        }
        checked += 1;
    }
    eprintln!("{checked} fixtures compared, {same_order} against the test cases' own compile");
    assert!(
        checked > 50 && same_order > 50,
        "only {checked} fixtures compared ({same_order} in the test cases' order)"
    );
}

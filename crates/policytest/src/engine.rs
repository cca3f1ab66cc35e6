//! The engines of `porin test` behind one trait.
//!
//! An [`Engine`] decides the resolved cases of a prepared test file: the
//! reference evaluator ([`crate::Reference`], this crate) looks the flow up
//! in the compiled map state in user space; the kernel engine
//! (`porin_kernel::engine::Kernel`) runs a crafted packet through porin's
//! object in the running kernel. Every engine reports a case the same way,
//! as a [`CaseDecision`]: the verdict of every packet it decided (one per
//! address family when the engine runs the flow per family, or when the
//! flow has a `world` end, whose identity is world-ipv4 over IPv4 and
//! world-ipv6 over IPv6), what each check (one endpoint, one direction)
//! decided, with the deny reason and the proxy port ([`CheckOutcome`]),
//! and why. A case passes only if every family gets the expected verdict
//! ([`CaseDecision::passes`]). [`Both`] runs two engines and fails a case
//! on any disagreement between them, per family; it knows nothing about
//! either engine.
//! The runner ([`crate::run_with_limits`]) turns decisions into the
//! `PASS`/`FAIL` lines and the per-file results `--format junit` writes.

use std::collections::BTreeSet;
use std::fmt;

pub use porin_compiler::explain::Family;
use porin_compiler::explain::{FlowVerdict, authenticates, describe_family_verdicts};
use porin_compiler::mapstate::{self, Direction};

use crate::{PreparedTest, ResolvedCase};

/// An engine of `porin test`.
///
/// The runner calls [`Engine::load`] once per test file, with every case of
/// the file resolved, then [`Engine::decide`] for each case in file order.
pub trait Engine {
    /// The engine's name in reports: `kernel allow, reference deny`,
    /// `kernel engine error`, the sides of a disagreement.
    fn name(&self) -> &str;

    /// Gets ready to decide the cases of one test file (the kernel engine
    /// writes the file's compilation into its maps). An error skips every
    /// case of the file; the file is then an error of the run.
    fn load(&mut self, test: &PreparedTest, cases: &[ResolvedCase]) -> Result<(), EngineError> {
        let _ = (test, cases);
        Ok(())
    }

    /// Decides one case of the file last loaded. An error fails the case
    /// (`<name> engine error`) and the run goes on with the next one.
    fn decide(
        &mut self,
        test: &PreparedTest,
        case: &ResolvedCase,
    ) -> Result<CaseDecision, EngineError>;
}

impl<E: Engine + ?Sized> Engine for Box<E> {
    fn name(&self) -> &str {
        (**self).name()
    }

    fn load(&mut self, test: &PreparedTest, cases: &[ResolvedCase]) -> Result<(), EngineError> {
        (**self).load(test, cases)
    }

    fn decide(
        &mut self,
        test: &PreparedTest,
        case: &ResolvedCase,
    ) -> Result<CaseDecision, EngineError> {
        (**self).decide(test, case)
    }
}

/// Why an engine could not load a file or decide a case: the engine's own
/// error, with the engine's name.
#[derive(Debug)]
pub struct EngineError {
    engine: String,
    source: Box<dyn std::error::Error + Send + Sync + 'static>,
}

impl EngineError {
    /// Wraps an engine's own error.
    pub fn new(
        engine: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> EngineError {
        EngineError {
            engine: engine.into(),
            source: source.into(),
        }
    }

    /// The name of the engine that failed.
    pub fn engine(&self) -> &str {
        &self.engine
    }
}

impl fmt::Display for EngineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Transparent: the engine's error already says what failed.
        self.source.fmt(f)
    }
}

impl std::error::Error for EngineError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.source()
    }
}

/// What one check (one endpoint, one direction) decided, in terms every
/// engine shares: two engines agree on a check when these are equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CheckOutcome {
    /// Passed by policy.
    Allow,
    /// Passed with a redirect to this proxy port.
    Redirect(u16),
    /// Dropped by a deny entry.
    DenyRule,
    /// Dropped: no entry matched.
    DenyDefault,
    /// Dropped: authentication required.
    DenyAuth,
    /// An authentication-required entry the cluster's mutual
    /// authentication lets pass (`mesh-auth-mutual-enabled: true`,
    /// [`porin_compiler::explain::authenticates`]): the datapath drops the
    /// first packet, the agents authenticate the pair, the flow passes.
    Authenticated,
    /// Dropped before policy: Cilium's conntrack does not track the
    /// packet's IP protocol (`DROP_CT_UNKNOWN_PROTO`; VRRP and IGMP
    /// without `enable-extended-ip-protocols`,
    /// [`porin_compiler::resolve::rule::proto::tracked`]).
    UntrackedProtocol,
    /// Something that is not a policy verdict (the kernel counted a parse
    /// drop or a shortcut pass): never expected for the flows of a test.
    Other {
        /// What the engine saw (`counter DroppedMalformed`).
        what: String,
        /// Whether the packet went through.
        passed: bool,
    },
}

impl CheckOutcome {
    /// The outcome of a lookup in a compiled map state.
    pub fn from_reference(verdict: &mapstate::Verdict) -> CheckOutcome {
        match verdict {
            mapstate::Verdict::Allow => CheckOutcome::Allow,
            mapstate::Verdict::Redirect { proxy_port } => CheckOutcome::Redirect(*proxy_port),
            mapstate::Verdict::Deny {
                reason: mapstate::DenyReason::Rule,
            } => CheckOutcome::DenyRule,
            mapstate::Verdict::Deny {
                reason: mapstate::DenyReason::NoEntry,
            } => CheckOutcome::DenyDefault,
            mapstate::Verdict::AuthRequired { .. } => CheckOutcome::DenyAuth,
        }
    }

    /// The flow-level verdict this check contributes.
    pub fn flow_verdict(&self) -> FlowVerdict {
        match self {
            CheckOutcome::Allow | CheckOutcome::Authenticated => FlowVerdict::Allow,
            CheckOutcome::Redirect(_) => FlowVerdict::Redirect,
            CheckOutcome::DenyRule
            | CheckOutcome::DenyDefault
            | CheckOutcome::DenyAuth
            | CheckOutcome::UntrackedProtocol => FlowVerdict::Deny,
            CheckOutcome::Other { passed: true, .. } => FlowVerdict::Allow,
            CheckOutcome::Other { passed: false, .. } => FlowVerdict::Deny,
        }
    }
}

impl fmt::Display for CheckOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckOutcome::Allow => f.write_str("allow"),
            CheckOutcome::Redirect(port) => write!(f, "redirect to proxy port {port}"),
            CheckOutcome::DenyRule => f.write_str("deny (rule)"),
            CheckOutcome::DenyDefault => f.write_str("deny (no matching entry)"),
            CheckOutcome::DenyAuth => f.write_str("deny (authentication required)"),
            CheckOutcome::Authenticated => f.write_str("allow (mutually authenticated)"),
            CheckOutcome::UntrackedProtocol => {
                f.write_str("drop before policy (protocol not tracked, DROP_CT_UNKNOWN_PROTO)")
            }
            CheckOutcome::Other { what, .. } => f.write_str(what),
        }
    }
}

/// Combines the check outcomes of one packet into its verdict (deny >
/// redirect > allow), the reference's rule ([`FlowVerdict::of_checks`]).
pub fn combine<'a>(outcomes: impl IntoIterator<Item = &'a CheckOutcome>) -> FlowVerdict {
    FlowVerdict::of_checks(outcomes.into_iter().map(CheckOutcome::flow_verdict))
}

/// Whether per-family verdicts meet a case's expectation: there is at
/// least one packet and every one gets the expected verdict. Families that
/// differ fail the case whatever it expects: one verdict cannot describe
/// them (a `world` end is world-ipv4 over IPv4 and world-ipv6 over IPv6).
pub fn verdicts_pass(families: &[(Option<Family>, FlowVerdict)], expect: FlowVerdict) -> bool {
    !families.is_empty() && families.iter().all(|(_, v)| *v == expect)
}

/// One check of a flow: the policy of one endpoint in one direction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// The endpoint's display name (`namespace/name`).
    pub endpoint: String,
    /// The policy direction.
    pub direction: Direction,
    /// What the check decided.
    pub outcome: CheckOutcome,
}

/// The checks of a flow in one address family, egress at the source first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FamilyChecks {
    /// The family the packets were of; `None` for an engine that decides a
    /// flow once for any family (the reference).
    pub family: Option<Family>,
    /// The checks made (zero, one or two).
    pub checks: Vec<Check>,
}

/// What an engine decided for one case.
#[derive(Debug, Clone)]
pub struct CaseDecision {
    /// The flow verdict: the one every family gets or, when they differ,
    /// the most permissive ([`FlowVerdict::of_alternatives`]: some packet
    /// of the flow gets it). Deny when no packet was decided.
    pub verdict: FlowVerdict,
    /// The verdict of each packet decided, which the case is judged by
    /// ([`Self::passes`]): one entry (`None`) for an engine that decides
    /// every family alike, one per family (IPv4 first) otherwise.
    pub families: Vec<(Option<Family>, FlowVerdict)>,
    /// The verdict as printed after `=>` (`allow`, `IPv4 deny, IPv6
    /// allow`; `kernel allow, reference deny` for [`Both`]).
    pub seen: String,
    /// The checks, one entry per family the engine ran.
    pub checks: Vec<FamilyChecks>,
    /// Why the verdict is what it is (the rules that decided, or the
    /// checks the kernel ran), for a case whose verdict is not the expected
    /// one.
    pub explanation: String,
    /// Further reasons the case fails whatever its verdict (the families
    /// disagree, two engines disagree).
    pub problems: Vec<String>,
}

impl CaseDecision {
    /// A decision of these per-family verdicts, printed as them (`deny`,
    /// or `IPv4 deny, IPv6 allow` when they differ), with no further
    /// problem.
    pub fn new(
        families: Vec<(Option<Family>, FlowVerdict)>,
        checks: Vec<FamilyChecks>,
        explanation: String,
    ) -> Self {
        let verdict = FlowVerdict::of_alternatives(families.iter().map(|(_, v)| *v))
            // No packet was decided: fail closed.
            .unwrap_or(FlowVerdict::Deny);
        CaseDecision {
            verdict,
            seen: describe_tested(&families),
            families,
            checks,
            explanation,
            problems: Vec::new(),
        }
    }

    /// The verdicts as printed: `deny`, `allow (IPv4, IPv6)` when the
    /// engine decided each family (the families it tested), or `IPv4 deny,
    /// IPv6 allow` when they differ (`no packet` when there is none).
    pub fn describe_verdict(&self) -> String {
        describe_tested(&self.families)
    }

    /// The verdict of a packet of `family` (`None` for the verdict of
    /// every family of an engine that decides them alike): that family's
    /// entry, or the family-independent one; `None` when the engine
    /// decided no such packet.
    pub fn verdict_in(&self, family: Option<Family>) -> Option<FlowVerdict> {
        self.families
            .iter()
            .find(|(f, _)| *f == family)
            .or_else(|| self.families.iter().find(|(f, _)| f.is_none()))
            .map(|(_, v)| *v)
    }

    /// Whether the verdicts meet `expect`: every family gets it
    /// ([`verdicts_pass`]).
    pub fn passes(&self, expect: FlowVerdict) -> bool {
        verdicts_pass(&self.families, expect)
    }

    /// Every reason the case fails when `expect` was expected, in report
    /// order; empty when it passes.
    pub fn failures(&self, expect: FlowVerdict) -> Vec<String> {
        let mut out = Vec::new();
        if !self.passes(expect) {
            out.push(self.explanation.clone());
        }
        out.extend(self.problems.iter().cloned());
        out
    }
}

/// Per-family verdicts as an engine reports them: the verdict, followed
/// by the families its packets were of when it decided them per family
/// (`allow (IPv4, IPv6)`, `deny (IPv6)` for a `family: ipv6` case), so a
/// reader sees what was tested, also for a case that set no `family:`;
/// `IPv4 deny, IPv6 allow` when they differ; `deny` for an engine that
/// decides every family alike.
pub fn describe_tested(families: &[(Option<Family>, FlowVerdict)]) -> String {
    let verdicts = describe_family_verdicts(families);
    let named: Vec<String> = families
        .iter()
        .filter_map(|(f, _)| f.map(|f| f.to_string()))
        .collect();
    let agree = families.windows(2).all(|w| w[0].1 == w[1].1);
    if agree && !named.is_empty() && named.len() == families.len() {
        format!("{verdicts} ({})", named.join(", "))
    } else {
        verdicts
    }
}

impl CaseDecision {
    /// The decision as a cluster running mutual authentication makes it
    /// (`mesh-auth-mutual-enabled: true` in the file's inventory): every
    /// `DenyAuth` check whose entry [`authenticates`] (the reference's
    /// lookup of the same map state gives the entry's auth type) becomes
    /// [`CheckOutcome::Authenticated`], and the verdicts follow. An engine
    /// whose datapath has no auth map (the kernel's) reports the drop of
    /// the first packet; this is what happens after the handshake. Without
    /// the setting, or when no check changes, the decision is returned as
    /// it is.
    pub fn settle_authentication(mut self, test: &PreparedTest, case: &ResolvedCase) -> Self {
        let compiled = &test.compiled;
        if !compiled.mutual_auth {
            return self;
        }
        let flow = &case.flow;
        let mut changed = false;
        for group in &mut self.checks {
            let family = group
                .family
                .or_else(|| flow.families(compiled).ok()?.first().copied());
            for check in &mut group.checks {
                if check.outcome != CheckOutcome::DenyAuth {
                    continue;
                }
                let Some(endpoint) = compiled.endpoint(&check.endpoint) else {
                    continue;
                };
                let peer = match check.direction {
                    Direction::Egress => &flow.to,
                    Direction::Ingress => &flow.from,
                };
                let Some(remote) = family.and_then(|f| peer.identity(compiled, f)) else {
                    continue;
                };
                let Ok(identity) = porin_compiler::identity::Identity::new(remote) else {
                    continue;
                };
                let decision =
                    endpoint
                        .state
                        .lookup(check.direction, identity, flow.proto, flow.port);
                if let mapstate::Verdict::AuthRequired { auth_type } = decision.verdict
                    && authenticates(compiled, auth_type, endpoint.identity, remote)
                {
                    check.outcome = CheckOutcome::Authenticated;
                    changed = true;
                }
            }
        }
        if !changed {
            return self;
        }
        let families: Vec<(Option<Family>, FlowVerdict)> = self
            .checks
            .iter()
            .map(|g| (g.family, combine(g.checks.iter().map(|c| &c.outcome))))
            .collect();
        let explanation = format!(
            "{} (mesh-auth-mutual-enabled: the authentication-required checks pass once the agents authenticate the pair)",
            self.explanation
        );
        let mut settled = CaseDecision::new(families, self.checks, explanation);
        settled.problems = self.problems;
        settled
    }
}

/// Two engines deciding every case: the first engine's decision is the
/// case's, and the case also fails when the second engine's verdicts are
/// not the expected ones (in every family), when the second reports a
/// problem, or when the two disagree on any check (its outcome, deny
/// reason and proxy port, in every family the first engine ran) or on the
/// verdict of any family.
#[derive(Debug)]
pub struct Both<A, B> {
    first: A,
    second: B,
}

impl<A: Engine, B: Engine> Both<A, B> {
    /// Runs `first` and checks it against `second`.
    pub fn new(first: A, second: B) -> Self {
        Both { first, second }
    }
}

impl<A: Engine, B: Engine> Engine for Both<A, B> {
    fn name(&self) -> &str {
        "both"
    }

    fn load(&mut self, test: &PreparedTest, cases: &[ResolvedCase]) -> Result<(), EngineError> {
        self.first.load(test, cases)?;
        self.second.load(test, cases)
    }

    fn decide(
        &mut self,
        test: &PreparedTest,
        case: &ResolvedCase,
    ) -> Result<CaseDecision, EngineError> {
        let first = self
            .first
            .decide(test, case)?
            .settle_authentication(test, case);
        let second = self
            .second
            .decide(test, case)?
            .settle_authentication(test, case);
        let (a, b) = (self.first.name(), self.second.name());
        let mut problems = first.problems.clone();
        if let Some(diff) = disagreement((a, &first), (b, &second)) {
            problems.push(format!("engines disagree: {diff}; {}", first.explanation));
        }
        if !second.passes(case.expect) {
            problems.push(format!("{b}: {}", second.explanation));
        }
        problems.extend(second.problems.iter().map(|p| format!("{b}: {p}")));
        Ok(CaseDecision {
            verdict: first.verdict,
            seen: format!(
                "{a} {}, {b} {}",
                first.describe_verdict(),
                second.describe_verdict()
            ),
            families: first.families,
            checks: first.checks,
            explanation: first.explanation,
            problems,
        })
    }
}

/// Where two engines' decisions differ, if anywhere: per check (outcome,
/// deny reason, proxy port) in every family the first ran, compared with
/// the second's checks of that family (every family's when either side
/// decided the flow once for any family), then the verdict of every family
/// either decided.
pub fn disagreement(
    (a, first): (&str, &CaseDecision),
    (b, second): (&str, &CaseDecision),
) -> Option<String> {
    let mut problems = Vec::new();
    for run in &first.checks {
        let matching: Vec<&FamilyChecks> = second
            .checks
            .iter()
            .filter(|s| s.family == run.family || s.family.is_none() || run.family.is_none())
            .collect();
        let none = FamilyChecks {
            family: run.family,
            checks: Vec::new(),
        };
        let matching = if matching.is_empty() {
            vec![&none]
        } else {
            matching
        };
        for other in matching {
            if let Some(problem) = check_disagreement((a, run), (b, other)) {
                problems.push(problem);
            }
        }
    }
    // The verdict of each family either engine decided (or the one
    // verdict of two engines that decide every family alike): a family one
    // engine decided and the other did not is a disagreement too.
    let explicit: BTreeSet<Family> = first
        .families
        .iter()
        .chain(&second.families)
        .filter_map(|(f, _)| *f)
        .collect();
    let families: Vec<Option<Family>> = if explicit.is_empty() {
        vec![None]
    } else {
        explicit.into_iter().map(Some).collect()
    };
    if families
        .iter()
        .any(|f| first.verdict_in(*f) != second.verdict_in(*f))
    {
        problems.push(format!(
            "flow verdict: {a} {}, {b} {}",
            first.describe_verdict(),
            second.describe_verdict()
        ));
    }
    (!problems.is_empty()).then(|| problems.join(" | "))
}

/// Where the checks of two engines for packets of one family differ.
fn check_disagreement(
    (a, run): (&str, &FamilyChecks),
    (b, other): (&str, &FamilyChecks),
) -> Option<String> {
    let expected = &other.checks;
    let same = run
        .checks
        .iter()
        .map(|c| &c.outcome)
        .eq(expected.iter().map(|c| &c.outcome));
    if same {
        return None;
    }
    let none = || "none".to_owned();
    let pairs: Vec<String> = (0..run.checks.len().max(expected.len()))
        .map(|i| {
            let (c, e) = (run.checks.get(i), expected.get(i));
            let (endpoint, direction) = c
                .or(e)
                .map(|c| (c.endpoint.as_str(), c.direction.to_string()))
                .unwrap_or_default();
            format!(
                "{endpoint} {direction}: {a} {}, {b} {}",
                c.map_or_else(none, |c| c.outcome.to_string()),
                e.map_or_else(none, |e| e.outcome.to_string())
            )
        })
        .collect();
    let family = run
        .family
        .or(other.family)
        .map_or_else(|| "any family".to_owned(), |f| f.to_string());
    Some(format!("{family}: {}", pairs.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_combine_deny_over_redirect_over_allow() {
        use CheckOutcome::*;
        assert_eq!(combine(&[Allow, Redirect(1)]), FlowVerdict::Redirect);
        assert_eq!(combine(&[Redirect(1), DenyDefault]), FlowVerdict::Deny);
        assert_eq!(combine(&[Allow, Allow]), FlowVerdict::Allow);
        assert_eq!(combine(&[]), FlowVerdict::Allow);
        let dropped = Other {
            what: "counter DroppedMalformed".to_owned(),
            passed: false,
        };
        assert_eq!(combine([&dropped]), FlowVerdict::Deny);
    }

    fn decision(family: Option<Family>, outcomes: &[CheckOutcome]) -> CaseDecision {
        let checks = outcomes
            .iter()
            .map(|o| Check {
                endpoint: "prod/server".to_owned(),
                direction: Direction::Ingress,
                outcome: o.clone(),
            })
            .collect();
        CaseDecision::new(
            vec![(family, combine(outcomes))],
            vec![FamilyChecks { family, checks }],
            "why".to_owned(),
        )
    }

    /// A decision per family, as an engine decides a `world` end.
    fn per_family(v4: &[CheckOutcome], v6: &[CheckOutcome]) -> CaseDecision {
        let mut d = decision(Some(Family::V4), v4);
        let v6 = decision(Some(Family::V6), v6);
        d.checks.extend(v6.checks);
        d.families.extend(v6.families);
        CaseDecision::new(d.families, d.checks, d.explanation)
    }

    #[test]
    fn a_different_deny_reason_or_proxy_port_is_a_disagreement() {
        let reference = decision(None, &[CheckOutcome::DenyDefault]);
        let same = decision(Some(Family::V4), &[CheckOutcome::DenyDefault]);
        assert_eq!(disagreement(("k", &same), ("r", &reference)), None);
        let rule = decision(Some(Family::V6), &[CheckOutcome::DenyRule]);
        assert_eq!(
            disagreement(("k", &rule), ("r", &reference)).as_deref(),
            Some("IPv6: prod/server ingress: k deny (rule), r deny (no matching entry)")
        );
        let port = |p| decision(None, &[CheckOutcome::Redirect(p)]);
        assert_eq!(
            disagreement(("a", &port(1)), ("b", &port(2))).as_deref(),
            Some(
                "any family: prod/server ingress: a redirect to proxy port 1, \
                 b redirect to proxy port 2"
            )
        );
    }

    #[test]
    fn a_verdict_alone_can_disagree() {
        let a = CaseDecision::new(vec![(None, FlowVerdict::Allow)], Vec::new(), String::new());
        let b = CaseDecision::new(vec![(None, FlowVerdict::Deny)], Vec::new(), String::new());
        assert_eq!(
            disagreement(("a", &a), ("b", &b)).as_deref(),
            Some("flow verdict: a allow, b deny")
        );
    }

    #[test]
    fn a_failing_case_lists_the_explanation_then_the_problems() {
        let mut d = decision(None, &[CheckOutcome::Allow]);
        assert!(d.failures(FlowVerdict::Allow).is_empty());
        d.problems.push("families disagree".to_owned());
        assert_eq!(
            d.failures(FlowVerdict::Deny),
            ["why".to_owned(), "families disagree".to_owned()]
        );
        assert_eq!(d.failures(FlowVerdict::Allow), ["families disagree"]);
    }

    /// issue 12: a `world` end is world-ipv4 over IPv4 and world-ipv6 over
    /// IPv6; when the families' verdicts differ the case fails whatever it
    /// expects, and both verdicts are printed.
    #[test]
    fn a_case_passes_only_if_every_family_gets_the_expected_verdict() {
        use CheckOutcome::*;
        let differ = per_family(&[DenyRule], &[Allow]);
        assert_eq!(differ.seen, "IPv4 deny, IPv6 allow");
        // The most permissive: some packet of the flow gets through.
        assert_eq!(differ.verdict, FlowVerdict::Allow);
        for expect in [FlowVerdict::Allow, FlowVerdict::Deny] {
            assert!(!differ.passes(expect), "{expect}");
            assert_eq!(differ.failures(expect), ["why"]);
        }
        let agree = per_family(&[DenyRule], &[DenyDefault]);
        // Agreeing families are named: the reader sees what was tested.
        assert_eq!(agree.seen, "deny (IPv4, IPv6)");
        assert!(agree.passes(FlowVerdict::Deny));
        // No packet decided: nothing can pass.
        let nothing = CaseDecision::new(Vec::new(), Vec::new(), "no packet".to_owned());
        assert_eq!(nothing.seen, "no packet");
        // An engine that decides every family alike names none.
        assert_eq!(decision(None, &[Allow]).seen, "allow");
        assert_eq!(nothing.verdict, FlowVerdict::Deny);
        assert!(!nothing.passes(FlowVerdict::Deny));
    }

    /// `Both` compares every family's verdict, not one combined verdict:
    /// two engines whose most permissive verdicts agree still disagree
    /// when one denies the IPv4 half of the world and the other allows it.
    #[test]
    fn two_engines_are_compared_family_by_family() {
        use CheckOutcome::*;
        let differ = per_family(&[DenyRule], &[Allow]);
        let allow = per_family(&[Allow], &[Allow]);
        assert_eq!(differ.verdict, allow.verdict);
        let diff = disagreement(("k", &differ), ("r", &allow)).unwrap_or_default();
        assert!(
            diff.contains("IPv4: prod/server ingress: k deny (rule), r allow"),
            "{diff}"
        );
        assert!(
            diff.ends_with("flow verdict: k IPv4 deny, IPv6 allow, r allow (IPv4, IPv6)"),
            "{diff}"
        );
        // A family-independent decision stands for each family.
        let any = decision(None, &[Allow]);
        assert_eq!(disagreement(("k", &allow), ("r", &any)), None);
        assert!(disagreement(("k", &differ), ("r", &any)).is_some());
        assert!(disagreement(("r", &any), ("k", &differ)).is_some());
        // A family one engine decided and the other did not.
        let v4_only = decision(Some(Family::V4), &[Allow]);
        assert_eq!(
            disagreement(("k", &v4_only), ("r", &allow)).as_deref(),
            Some("flow verdict: k allow (IPv4), r allow (IPv4, IPv6)")
        );
    }
}

//! The engines of `porin test` behind one trait.
//!
//! An [`Engine`] decides the resolved cases of a prepared test file: the
//! reference evaluator ([`crate::Reference`], this crate) looks the flow up
//! in the compiled map state in user space; the kernel engine
//! (`porin_kernel::engine::Kernel`) runs a crafted packet through porin's
//! object in the running kernel. Every engine reports a case the same way,
//! as a [`CaseDecision`]: the flow verdict, what each check (one endpoint,
//! one direction) decided, per address family when the engine runs the
//! flow per family, with the deny reason and the proxy port
//! ([`CheckOutcome`]), and why. [`Both`] runs two engines and fails a case
//! on any disagreement between them; it knows nothing about either engine.
//! The runner ([`crate::run_with_limits`]) turns decisions into the
//! `PASS`/`FAIL` lines and the per-file results `--format junit` writes.

use std::fmt;
use std::net::IpAddr;

use porin_compiler::explain::FlowVerdict;
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

/// An IP family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    /// The family of an address.
    pub fn of(ip: IpAddr) -> Family {
        match ip {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
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
            CheckOutcome::Allow => FlowVerdict::Allow,
            CheckOutcome::Redirect(_) => FlowVerdict::Redirect,
            CheckOutcome::DenyRule | CheckOutcome::DenyDefault | CheckOutcome::DenyAuth => {
                FlowVerdict::Deny
            }
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
            CheckOutcome::Other { what, .. } => f.write_str(what),
        }
    }
}

/// Combines check outcomes into a flow verdict (deny > redirect > allow).
pub fn combine<'a>(outcomes: impl IntoIterator<Item = &'a CheckOutcome>) -> FlowVerdict {
    let verdicts: Vec<FlowVerdict> = outcomes.into_iter().map(|o| o.flow_verdict()).collect();
    if verdicts.contains(&FlowVerdict::Deny) {
        FlowVerdict::Deny
    } else if verdicts.contains(&FlowVerdict::Redirect) {
        FlowVerdict::Redirect
    } else {
        FlowVerdict::Allow
    }
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
    /// The flow verdict the case is judged by.
    pub verdict: FlowVerdict,
    /// The verdict as printed after `=>` (`allow`; `kernel allow,
    /// reference deny` for [`Both`]).
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
    /// A decision printed as its verdict, with no further problem.
    pub fn new(verdict: FlowVerdict, checks: Vec<FamilyChecks>, explanation: String) -> Self {
        CaseDecision {
            verdict,
            seen: verdict.to_string(),
            checks,
            explanation,
            problems: Vec::new(),
        }
    }

    /// Every reason the case fails when `expect` was expected, in report
    /// order; empty when it passes.
    pub fn failures(&self, expect: FlowVerdict) -> Vec<String> {
        let mut out = Vec::new();
        if self.verdict != expect {
            out.push(self.explanation.clone());
        }
        out.extend(self.problems.iter().cloned());
        out
    }
}

/// Two engines deciding every case: the first engine's decision is the
/// case's, and the case also fails when the second engine's verdict is not
/// the expected one or when the two disagree on any check (its outcome,
/// deny reason and proxy port, in every family the first engine ran).
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
        let first = self.first.decide(test, case)?;
        let second = self.second.decide(test, case)?;
        let (a, b) = (self.first.name(), self.second.name());
        let mut problems = first.problems.clone();
        if let Some(diff) = disagreement((a, &first), (b, &second)) {
            problems.push(format!("engines disagree: {diff}; {}", first.explanation));
        }
        if second.verdict != case.expect {
            problems.push(format!("{b}: {}", second.explanation));
        }
        Ok(CaseDecision {
            verdict: first.verdict,
            seen: format!("{a} {}, {b} {}", first.verdict, second.verdict),
            checks: first.checks,
            explanation: first.explanation,
            problems,
        })
    }
}

/// Where two engines' decisions differ, if anywhere: per check (outcome,
/// deny reason, proxy port) in every family the first ran, compared with
/// the second's checks of that family (or of any family), then the flow
/// verdict.
pub fn disagreement(
    (a, first): (&str, &CaseDecision),
    (b, second): (&str, &CaseDecision),
) -> Option<String> {
    let mut problems = Vec::new();
    for run in &first.checks {
        let expected: &[Check] = second
            .checks
            .iter()
            .find(|s| s.family == run.family)
            .or_else(|| second.checks.iter().find(|s| s.family.is_none()))
            .or(second.checks.first())
            .map_or(&[], |s| &s.checks);
        let same = run
            .checks
            .iter()
            .map(|c| &c.outcome)
            .eq(expected.iter().map(|c| &c.outcome));
        if same {
            continue;
        }
        let pairs: Vec<String> = run
            .checks
            .iter()
            .zip(expected.iter().map(Some).chain(std::iter::repeat(None)))
            .map(|(c, e)| {
                format!(
                    "{} {}: {a} {}, {b} {}",
                    c.endpoint,
                    c.direction,
                    c.outcome,
                    e.map_or_else(|| "none".to_owned(), |e| e.outcome.to_string())
                )
            })
            .collect();
        let family = run
            .family
            .map_or_else(|| "any family".to_owned(), |f| f.to_string());
        problems.push(format!("{family}: {}", pairs.join("; ")));
    }
    if first.verdict != second.verdict {
        problems.push(format!(
            "flow verdict: {a} {}, {b} {}",
            first.verdict, second.verdict
        ));
    }
    (!problems.is_empty()).then(|| problems.join(" | "))
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
            combine(outcomes),
            vec![FamilyChecks { family, checks }],
            "why".to_owned(),
        )
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
        let a = CaseDecision::new(FlowVerdict::Allow, Vec::new(), String::new());
        let b = CaseDecision::new(FlowVerdict::Deny, Vec::new(), String::new());
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
}

//! The reference engine: a case is decided by looking its flow up in the
//! compiled map state, in user space ([`porin_compiler::explain`]).

use porin_compiler::explain::{FlowVerdict, evaluate, explain};
use porin_compiler::mapstate::Verdict;

use crate::engine::{CaseDecision, Check, CheckOutcome, Engine, EngineError, FamilyChecks};
use crate::{PreparedTest, ResolvedCase};

/// The reference evaluator of `porin test` (`--engine reference`). It
/// decides a flow once for any address family (the egress check at the
/// source when it is an endpoint, the ingress check at the destination
/// when it is one), except a flow with a `world` end, which it decides per
/// family: the world is one outside address per family, world-ipv4 over
/// IPv4 and world-ipv6 over IPv6 ([`porin_compiler::explain::WorldPeer`]).
/// Its explanation names the rules that decided.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reference;

impl Engine for Reference {
    fn name(&self) -> &str {
        "reference"
    }

    fn decide(
        &mut self,
        test: &PreparedTest,
        case: &ResolvedCase,
    ) -> Result<CaseDecision, EngineError> {
        let evaluation = evaluate(&test.compiled, &case.flow);
        // Built for every case, not only failing ones: a combinator such as
        // `Both` may quote it when another engine disagrees.
        let explanation = explain(&test.compiled, &evaluation);
        // One group of checks per packet decided, in the order of the
        // verdicts (`None` for a flow decided alike in every family). A
        // flow no packet can carry has none, and fails whatever it expects.
        let checks = evaluation
            .families
            .iter()
            .map(|(family, _)| FamilyChecks {
                family: *family,
                checks: evaluation
                    .checks
                    .iter()
                    .filter(|c| c.family == *family)
                    .map(|c| Check {
                        endpoint: c.endpoint.clone(),
                        direction: c.direction,
                        // An auth-required entry the cluster's mutual
                        // authentication lets pass (the evaluator's verdict).
                        outcome: if c.untracked_protocol {
                            CheckOutcome::UntrackedProtocol
                        } else if c.verdict == FlowVerdict::Allow
                            && matches!(c.decision.verdict, Verdict::AuthRequired { .. })
                        {
                            CheckOutcome::Authenticated
                        } else {
                            CheckOutcome::from_reference(&c.decision.verdict)
                        },
                    })
                    .collect(),
            })
            .collect();
        Ok(CaseDecision::new(
            evaluation.families.clone(),
            checks,
            explanation,
        ))
    }
}

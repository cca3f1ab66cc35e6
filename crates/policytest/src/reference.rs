//! The reference engine: a case is decided by looking its flow up in the
//! compiled map state, in user space ([`porin_compiler::explain`]).

use porin_compiler::explain::{evaluate, explain};

use crate::engine::{CaseDecision, Check, CheckOutcome, Engine, EngineError, FamilyChecks};
use crate::{PreparedTest, ResolvedCase};

/// The reference evaluator of `porin test` (`--engine reference`). It
/// decides a flow once for any address family: the egress check at the
/// source when it is an endpoint, the ingress check at the destination
/// when it is one; its explanation names the rules that decided.
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
        let checks = evaluation
            .checks
            .iter()
            .map(|c| Check {
                endpoint: c.endpoint.clone(),
                direction: c.direction,
                outcome: CheckOutcome::from_reference(&c.decision.verdict),
            })
            .collect();
        Ok(CaseDecision::new(
            evaluation.verdict,
            vec![FamilyChecks {
                family: None,
                checks,
            }],
            explanation,
        ))
    }
}

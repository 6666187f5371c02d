//! Upstream's CEL cost limits (k8s.io/apiserver/pkg/apis/cel, apiextensions'
//! validation) and the estimator that applies them.
//!
//! cel-rust has no cost tracking inside its interpreter, so both checks use the same
//! static estimator ([`estimate()`]):
//! - at write time (CRD create/update) with shapes from the schema
//!   ([`schema::shape`]): a rule estimated above [`STATIC_ESTIMATED_COST_LIMIT`] (after
//!   multiplying by how many times it may run), or rules totalling above
//!   [`STATIC_ESTIMATED_CRD_COST_LIMIT`], make the CRD invalid;
//! - at run time with shapes of the actual values ([`Shape::of_json`]): an expression
//!   whose estimate exceeds [`PER_CALL_LIMIT`] is not evaluated and fails with
//!   [`ACTUAL_COST_EXCEEDED`]; the estimates of one object's (or one policy's)
//!   expressions are charged against [`RUNTIME_BUDGET`].
//!
//! The run-time estimate bounds the real work of that evaluation, so an evaluation that
//! starts cannot run away; it may exceed what cel-go would have counted (it assumes every
//! `exists` runs to the end), never fall short of it by construction.

pub mod estimate;
pub mod schema;
pub mod shape;

pub use estimate::estimate;
pub use shape::Shape;

/// The cost one evaluation of one expression may have (`PerCallLimit`, ~0.1 s).
pub const PER_CALL_LIMIT: u64 = 1_000_000;

/// The cost all expressions of one custom resource, or of one policy evaluation, may have
/// together (`RuntimeCELCostBudget`, ~1 s).
pub const RUNTIME_BUDGET: u64 = 10_000_000;

/// The largest estimated cost of one CRD rule times its cardinality
/// (`StaticEstimatedCostLimit`).
pub const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;

/// The largest estimated cost of all rules of one CRD schema
/// (`StaticEstimatedCRDCostLimit`).
pub const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;

/// The request size unbounded lists, maps and strings are bounded by
/// (`MaxRequestSizeBytes`).
pub const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

/// cel-go's error for an evaluation over [`PER_CALL_LIMIT`].
pub const ACTUAL_COST_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// What a batch says once [`RUNTIME_BUDGET`] is spent.
pub const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// Upstream's message for an estimate over its limit (`getCostErrorMessage`):
/// `"<what> exceeds budget by factor of 2.5x (try simplifying the rule, …)"`.
pub fn exceeds_budget(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// A running budget: what one batch of evaluations may still spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    remaining: u64,
}

/// Why an expression may not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Its own estimate is over [`PER_CALL_LIMIT`].
    #[error("operation cancelled: actual cost limit exceeded")]
    CallLimit,
    /// The batch's budget cannot pay for it.
    #[error("validation failed due to running out of cost budget, no further validation rules will be run")]
    OutOfBudget,
}

impl Budget {
    /// A fresh [`RUNTIME_BUDGET`].
    pub fn runtime() -> Budget {
        Budget::new(RUNTIME_BUDGET)
    }

    /// A budget of `remaining` cost units.
    pub fn new(remaining: u64) -> Budget {
        Budget { remaining }
    }

    /// What is left to charge.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Charges `cost` (an estimate of one evaluation), or says why it may not run.
    pub fn charge(&mut self, cost: u64) -> Result<(), Refusal> {
        if cost > PER_CALL_LIMIT {
            return Err(Refusal::CallLimit);
        }
        if cost > self.remaining {
            self.remaining = 0;
            return Err(Refusal::OutOfBudget);
        }
        self.remaining -= cost;
        Ok(())
    }
}

#[cfg(test)]
mod tests;

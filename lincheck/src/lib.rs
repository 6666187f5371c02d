//! A linearizability checker for histories recorded by concurrent clients of a store.
//!
//! The search is Wing & Gong's, with Lowe's memoization of (linearized set, model state) as in
//! porcupine: operations are entries on a time line (call, return); the checker repeatedly
//! tries to linearize a pending call before the earliest return, backtracking when a return is
//! reached whose operation is not linearized yet.
//!
//! Guarantees:
//! - [`check`] answers [`Verdict::Linearizable`] only if a total order of the operations exists
//!   that respects real time (an operation that returned before another was called comes
//!   first) and that the sequential [`Model`] accepts, including every observed output.
//! - An operation whose outcome is unknown (timeout, lost connection) has no return time: it
//!   may take effect at any point after its call, or never (it is then placed after everything
//!   that was observed, where nothing can see it). The model must accept such an operation
//!   with any output.
//! - The history is split by [`Model::partition`] (per key for a key-value store) and every
//!   part is checked alone, which is exact for models that are P-compositional (Herlihy & Wing:
//!   a history is linearizable iff each per-object sub-history is).
//! - The search is bounded by a step budget per part; exceeding it answers
//!   [`Verdict::Unknown`], never a false "linearizable".

use std::collections::BTreeMap;

mod kv;
mod wgl;

pub use kv::{KvInput, KvModel, KvOutput, KvState};
pub use wgl::{check_part, Model, Operation, Verdict};

/// One operation of a history under model `M`.
pub type ModelOp<M> = Operation<<M as Model>::Input, <M as Model>::Output>;

/// One key-value operation.
pub type KvOperation = Operation<KvInput, KvOutput>;

/// Checks every part of `history` under `model`, stopping at the first part that is not
/// linearizable (or that exhausted `budget` search steps). Parts are checked in key order.
pub fn check<M: Model>(
    model: &M,
    history: &[Operation<M::Input, M::Output>],
    budget: u64,
) -> Verdict {
    let mut parts: BTreeMap<String, Vec<ModelOp<M>>> = BTreeMap::new();
    for op in history {
        parts
            .entry(model.partition(&op.input))
            .or_default()
            .push(op.clone());
    }
    for ops in parts.values() {
        let verdict = check_part(model, ops, budget);
        if verdict != Verdict::Linearizable {
            return verdict;
        }
    }
    Verdict::Linearizable
}

#[cfg(test)]
mod tests;

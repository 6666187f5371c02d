//! The Kubernetes CEL environment (k8s.io/apiserver/pkg/cel): compiling and evaluating the
//! expressions of CRD `x-kubernetes-validations` and ValidatingAdmissionPolicies with
//! cel-rust, upstream's variables and as much of its library as cel-rust offers or
//! [`library`] adds.
//!
//! # Guarantees
//! - Pure: no I/O; values come in as `serde_json::Value`s typed by an optional structural
//!   schema ([`value::to_cel`]): integers stay `int`, `type: number` is `double`,
//!   `format: date-time` a `timestamp`, `format: duration` a `duration`, objects are maps.
//! - Bounded: upstream's cost limits are applied by a static estimator ([`cost`]) before an
//!   expression runs — at write time from schemas, at run time from the actual values —
//!   and evaluations run on a fixed pool of threads with a bounded queue ([`pool`]), never
//!   on a thread of their own. Expressions longer than [`env::MAX_EXPRESSION_LEN`] do not
//!   compile.

pub mod authz;
pub mod cost;
pub mod env;
pub mod eval;
pub mod library;
pub mod pool;
pub mod value;

pub use cost::{Budget, Refusal, Shape};
pub use env::{compile, CompileError, Compiled};
pub use eval::{evaluate, EvalError, Var, Vars};
pub use pool::{Pool, PoolError};

/// The estimated cost of one evaluation of `program` with variables of these shapes
/// (see [`cost::estimate()`]).
pub fn cost_of(program: &cel::Program, vars: &[(&str, Shape)]) -> u64 {
    cost::estimate(program.expression(), vars)
}

#[cfg(test)]
mod tests;

//! The Kubernetes CEL environment (k8s.io/apiserver/pkg/cel): compiling and evaluating the
//! expressions of CRD `x-kubernetes-validations` and ValidatingAdmissionPolicies with
//! cel-rust, upstream's variables and as much of its library as cel-rust offers or
//! [`library`] adds.
//!
//! # Guarantees
//! - Pure: no I/O; values come in as `serde_json::Value`s typed by an optional structural
//!   schema ([`value::to_cel`]): integers stay `int`, `type: number` is `double`,
//!   `format: date-time` a `timestamp`, `format: duration` a `duration`, objects are maps.
//! - Bounded: an evaluation batch runs on its own thread and is abandoned after
//!   [`eval::BUDGET`] ([`eval::bounded`]); expressions longer than [`env::MAX_EXPRESSION_LEN`]
//!   or nesting comprehensions deeper than [`env::MAX_COMPREHENSION_DEPTH`] do not compile.

pub mod authz;
pub mod env;
pub mod eval;
pub mod library;
pub mod value;

pub use env::{compile, CompileError, Compiled};
pub use eval::{bounded, evaluate, EvalError, Var, Vars};

#[cfg(test)]
mod tests;

//! Evaluating a compiled expression with bound variables, errors in cel-go's words. Callers
//! check the expression's cost first ([`super::cost`]) and run it on the bounded pool
//! ([`super::pool`]).

use cel::common::types::CelOptional;
use cel::common::value::Val;
use cel::{Context, ExecutionError, Program};

/// A variable's binding.
#[derive(Debug, Clone)]
pub enum Var {
    /// A plain value.
    Plain(cel::Value),
    /// An `optional` value (`optionalOldSelf`, `optional.none()` when absent).
    Optional(Option<cel::Value>),
    /// The `authorizer` of admission policies.
    Authorizer(Box<super::authz::Variable>),
}

/// Named variables of one evaluation.
pub type Vars = Vec<(&'static str, Var)>;

/// Why an evaluation failed, as cel-go prints it (`no such key: x`, `division by zero`, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EvalError(pub String);

/// Evaluates `program` with `vars` bound.
pub fn evaluate(program: &Program, vars: &Vars) -> Result<cel::Value, EvalError> {
    let mut ctx = Context::with_env(super::env::environment());
    for (name, var) in vars {
        match var {
            Var::Plain(v) => ctx.add_variable_from_value(*name, v.clone()),
            Var::Optional(v) => {
                let opt = match v.clone().map(Box::<dyn Val>::try_from) {
                    Some(Ok(b)) => CelOptional::of(b),
                    _ => CelOptional::none(),
                };
                ctx.add_variable_as_val(*name, Box::new(opt));
            }
            Var::Authorizer(a) => ctx.add_variable_as_val(*name, a.value()),
        }
    }
    program.execute(&ctx).map_err(|e| EvalError(message(&e)))
}

fn message(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchKey(k) => format!("no such key: {k}"),
        ExecutionError::NoSuchOverload(_) => "no such overload".to_string(),
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of bounds: {}", shown(i)),
        ExecutionError::UndeclaredReference(r) => format!("no such attribute: {r}"),
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

fn shown(v: &cel::Value) -> String {
    super::value::to_json(v).map_or_else(|| format!("{v:?}"), |j| j.to_string())
}

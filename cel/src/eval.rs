//! Evaluating a compiled expression with bound variables, errors in cel-go's words, and
//! the wall-clock bound that keeps a hostile expression from holding a request (or the
//! server) forever.

use std::time::Duration;

use cel::common::types::CelOptional;
use cel::common::value::Val;
use cel::{Context, ExecutionError, Program};

/// How long one batch of evaluations (all the rules of one object, all the validations of
/// one policy) may run before it is abandoned.
pub const BUDGET: Duration = Duration::from_secs(2);

/// A variable's binding.
#[derive(Debug, Clone)]
pub enum Var {
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

/// Runs `f` on its own thread and waits at most [`BUDGET`] for it; `None` when it ran out of
/// time (the thread is left to finish on its own) or could not start.
pub fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("cel-eval".into())
        .spawn(move || {
            let _ = tx.send(f());
        })
        .ok()?;
    rx.recv_timeout(BUDGET).ok()
}

//! The environment: cel-rust's standard library and macros (`has`, `all`, `exists`,
//! `exists_one`, `map`, `filter`), its strings/lists/math extensions (`lowerAscii`,
//! `upperAscii`, `trim`, `split`, `join`, `indexOf`, `replace`, `substring`, …) and
//! Kubernetes' list library ([`super::library`]), and the length bound. What an
//! expression may cost is decided by [`super::cost`], not here.

use std::sync::{Arc, OnceLock};

use cel::{Env, Program};

/// The longest expression accepted (the parser recurses over it).
pub const MAX_EXPRESSION_LEN: usize = 10 * 1024;

/// Why an expression does not compile, in cel-go's words (`ERROR: <input>:1:5: …`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CompileError(pub String);

/// A compiled expression and the variables it refers to.
#[derive(Debug)]
pub struct Compiled {
    /// The program to evaluate.
    pub program: Program,
    /// Whether it refers to `oldSelf` (a transition rule).
    pub uses_old_self: bool,
}

/// The shared environment.
pub fn environment() -> Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        env.add_extension(cel::extensions::strings)
            .and_then(|()| env.add_extension(cel::extensions::lists))
            .and_then(|()| env.add_extension(cel::extensions::math))
            .and_then(|()| super::library::extension(&mut env))
            .and_then(|()| super::authz::extension(&mut env))
            .expect("the Kubernetes CEL library declares no overload twice");
        Arc::new(env)
    })
    .clone()
}

/// Compiles `source` where only `variables` are declared (plus comprehension variables).
pub fn compile(source: &str, variables: &[&str]) -> Result<Compiled, CompileError> {
    if source.len() > MAX_EXPRESSION_LEN {
        return Err(CompileError(format!(
            "expression is too long: {} bytes, at most {MAX_EXPRESSION_LEN}",
            source.len()
        )));
    }
    let program = environment()
        .compile(source)
        .map_err(|e| CompileError(e.to_string()))?;
    let bound = comprehension_variables(program.expression());
    let refs = program.references();
    if let Some(undeclared) = refs
        .variables()
        .into_iter()
        .find(|v| !variables.contains(v) && !bound.iter().any(|b| b == v) && !is_namespace(v))
    {
        return Err(CompileError(format!(
            "ERROR: <input>:1:1: undeclared reference to '{undeclared}' (in container '')"
        )));
    }
    let uses_old_self = refs.has_variable("oldSelf");
    Ok(Compiled {
        program,
        uses_old_self,
    })
}

/// Names that start qualified function calls (`math.ceil`, `strings.quote`, `lists.range`).
fn is_namespace(v: &str) -> bool {
    matches!(v, "math" | "strings" | "lists" | "optional" | "base64")
}

fn comprehension_variables(e: &cel::common::ast::IdedExpr) -> Vec<String> {
    use cel::common::ast::Expr;
    let mut out = Vec::new();
    if let Expr::Comprehension(c) = &e.expr {
        out.push(c.iter_var.clone());
        if let Some(v) = &c.iter_var2 {
            out.push(v.clone());
        }
        out.push(c.accu_var.clone());
        for x in [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ] {
            out.extend(comprehension_variables(x));
        }
    } else {
        for c in children(e) {
            out.extend(comprehension_variables(c));
        }
    }
    out
}

fn children(e: &cel::common::ast::IdedExpr) -> Vec<&cel::common::ast::IdedExpr> {
    use cel::common::ast::Expr;
    match &e.expr {
        Expr::Call(c) => c.target.iter().map(|t| t.as_ref()).chain(&c.args).collect(),
        Expr::Select(s) => vec![s.operand.as_ref()],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(m) => entries(&m.entries),
        Expr::Struct(s) => entries(&s.entries),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        _ => Vec::new(),
    }
}

fn entries(es: &[cel::common::ast::IdedEntryExpr]) -> Vec<&cel::common::ast::IdedExpr> {
    use cel::common::ast::EntryExpr;
    es.iter()
        .flat_map(|en| match &en.expr {
            EntryExpr::MapEntry(me) => vec![&me.key, &me.value],
            EntryExpr::StructField(f) => vec![&f.value],
        })
        .collect()
}

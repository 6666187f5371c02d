//! Kubernetes' list library (k8s.io/apiserver/pkg/cel/library/lists.go) on top of cel-rust:
//! `isSorted()`, `sum()`, `min()`, `max()`, `indexOf(x)` and `lastIndexOf(x)` on lists.

use std::cmp::Ordering;

use cel::common::types::{DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError, Value};

/// Registers the list functions on `env`.
pub fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    Ok(())
}

fn value_of(v: &dyn Val) -> Result<Value, ExecutionError> {
    Value::try_from(v).map_err(|_| ExecutionError::function_error("list", "unsupported value"))
}

fn list_of(args: &[CowVal<'_, '_>], n: usize) -> Result<Vec<Value>, ExecutionError> {
    if args.len() != n {
        return Err(ExecutionError::invalid_argument_count(n, args.len()));
    }
    match value_of(args[0].as_ref())? {
        Value::List(l) => Ok(l.as_ref().clone()),
        other => Err(ExecutionError::UnexpectedType {
            got: format!("{:?}", other.type_of()),
            want: "list".into(),
        }),
    }
}

fn owned<'b, 'v>(v: Value) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let boxed: Box<dyn Val> = v
        .try_into()
        .map_err(|_| ExecutionError::function_error("list", "unsupported value"))?;
    Ok(CowVal::Owned(boxed))
}

fn compare(f: &str, a: &Value, b: &Value) -> Result<Ordering, ExecutionError> {
    a.partial_cmp(b)
        .ok_or_else(|| ExecutionError::function_error(f, "elements are not comparable"))
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_of(&args, 1)?;
    for w in list.windows(2) {
        if compare("isSorted", &w[0], &w[1])? == Ordering::Greater {
            return owned(Value::Bool(false));
        }
    }
    owned(Value::Bool(true))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_of(&args, 1)?;
    let mut items = list.into_iter();
    let Some(mut acc) = items.next() else {
        return owned(Value::Int(0));
    };
    for x in items {
        acc = (acc + x)?;
    }
    owned(acc)
}

fn extreme<'b, 'v>(
    f: &str,
    args: Vec<CowVal<'b, 'v>>,
    keep: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_of(&args, 1)?;
    let mut items = list.into_iter();
    let Some(mut best) = items.next() else {
        return Err(ExecutionError::function_error(
            f,
            format!("{f} called on empty list"),
        ));
    };
    for x in items {
        if compare(f, &x, &best)? == keep {
            best = x;
        }
    }
    owned(best)
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("min", args, Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme("max", args, Ordering::Greater)
}

fn position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = list_of(&args, 2)?;
    let needle = value_of(args[1].as_ref())?;
    let found = if last {
        list.iter().rposition(|x| *x == needle)
    } else {
        list.iter().position(|x| *x == needle)
    };
    owned(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, true)
}

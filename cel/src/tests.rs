use serde_json::json;

use super::eval::Var;
use super::value::{to_cel, to_json};
use super::{compile, evaluate};

fn eval_with(expr: &str, this: serde_json::Value, schema: Option<serde_json::Value>) -> String {
    let c = compile(expr, &["self", "oldSelf"]).unwrap_or_else(|e| panic!("{expr}: {e}"));
    let vars = vec![("self", Var::Plain(to_cel(&this, schema.as_ref())))];
    match evaluate(&c.program, &vars) {
        Ok(v) => to_json(&v).map_or_else(|| format!("{v:?}"), |j| j.to_string()),
        Err(e) => format!("error: {e}"),
    }
}

fn eval(expr: &str) -> String {
    eval_with(
        expr,
        json!({"a": 1, "l": [3, 1, 2], "s": "Hello World", "m": {"k": "v"}}),
        None,
    )
}

#[test]
fn variables_macros_and_the_standard_library() {
    for (expr, want) in [
        ("self.a == 1", "true"),
        ("has(self.a) && !has(self.b)", "true"),
        ("size(self.l) == 3 && self.l.size() == 3", "true"),
        ("self.l.all(x, x > 0)", "true"),
        ("self.l.exists(x, x == 2)", "true"),
        ("self.l.exists_one(x, x > 2)", "true"),
        ("self.l.map(x, x * 2)", "[6,2,4]"),
        ("self.l.filter(x, x > 1)", "[3,2]"),
        ("self.m.all(k, k == 'k')", "true"),
        (
            "self.s.startsWith('Hell') && self.s.endsWith('rld') && self.s.contains('o W')",
            "true",
        ),
        ("self.s.matches('^H.*d$')", "true"),
        ("int('42') + 1", "43"),
        ("string(self.a)", "\"1\""),
        ("double(self.a) / 2.0", "0.5"),
        ("duration('1m') > duration('30s')", "true"),
        (
            "timestamp('2024-01-01T00:00:00Z') < timestamp('2024-06-01T00:00:00Z')",
            "true",
        ),
        ("self.b", "error: no such key: b"),
        ("1 / 0", "error: division by zero"),
        ("self.l[5]", "error: index out of bounds: 5"),
    ] {
        assert_eq!(eval(expr), want, "{expr}");
    }
}

#[test]
fn kubernetes_string_and_list_libraries() {
    for (expr, want) in [
        ("self.s.lowerAscii()", "\"hello world\""),
        ("self.s.upperAscii()", "\"HELLO WORLD\""),
        ("'  x '.trim()", "\"x\""),
        ("self.s.split(' ')", "[\"Hello\",\"World\"]"),
        ("['a', 'b'].join('-')", "\"a-b\""),
        ("self.s.indexOf('o')", "4"),
        ("self.s.lastIndexOf('o')", "7"),
        ("self.s.replace('l', 'L')", "\"HeLLo WorLd\""),
        ("self.s.substring(6)", "\"World\""),
        ("self.s.substring(0, 5)", "\"Hello\""),
        ("self.l.isSorted()", "false"),
        ("[1, 2, 2].isSorted()", "true"),
        ("self.l.sum()", "6"),
        ("[].sum()", "0"),
        ("[1.5, 2.0].sum()", "3.5"),
        ("self.l.min()", "1"),
        ("self.l.max()", "3"),
        ("self.l.indexOf(1)", "1"),
        ("[1, 2, 1].lastIndexOf(1)", "2"),
        ("[].min()", "error: min called on empty list"),
    ] {
        assert_eq!(eval(expr), want, "{expr}");
    }
}

#[test]
fn schema_types_the_values() {
    let schema = json!({"type": "object", "properties": {
        "n": {"type": "number"}, "i": {"type": "integer"},
        "t": {"type": "string", "format": "date-time"},
        "d": {"type": "string", "format": "duration"},
        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}});
    let obj =
        json!({"n": 2, "i": 2, "t": "2024-01-01T00:00:00Z", "d": "90s", "free": {"x": {"y": 1}}});
    for (expr, want) in [
        ("self.n == 2.0", "true"),
        ("self.n + 0.5", "2.5"),
        ("self.i + 1", "3"),
        ("self.t < timestamp('2025-01-01T00:00:00Z')", "true"),
        ("self.d == duration('1m30s')", "true"),
        ("self.free.x.y == 1", "true"),
    ] {
        assert_eq!(
            eval_with(expr, obj.clone(), Some(schema.clone())),
            want,
            "{expr}"
        );
    }
}

#[test]
fn compile_reports_syntax_and_undeclared_names() {
    let c = compile("self.a >= oldSelf.a", &["self", "oldSelf"]).unwrap();
    assert!(c.uses_old_self);
    assert!(
        !compile("self.l.all(x, x > 0)", &["self"])
            .unwrap()
            .uses_old_self
    );
    let e = compile("self.a >", &["self"]).unwrap_err().0;
    assert!(e.starts_with("ERROR: <input>:1:"), "{e}");
    assert_eq!(
        compile("foo == 1", &["self"]).unwrap_err().0,
        "ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')"
    );
    assert!(compile("self.l.all(x, self.l.all(y, x != y || x == y))", &["self"]).is_ok());
    // Nesting is priced by the cost estimator, not refused here.
    assert!(compile(
        "self.l.all(x, self.l.all(y, self.l.all(z, x + y + z > 0)))",
        &["self"],
    )
    .is_ok());
    assert!(compile(&"1 + ".repeat(5000), &["self"]).is_err());
}

#[test]
fn optional_old_self() {
    let c = compile(
        "!oldSelf.hasValue() || self >= oldSelf.value()",
        &["self", "oldSelf"],
    )
    .unwrap();
    let run = |old: Option<i64>| {
        let vars = vec![
            ("self", Var::Plain(cel::Value::Int(3))),
            ("oldSelf", Var::Optional(old.map(cel::Value::Int))),
        ];
        evaluate(&c.program, &vars).unwrap()
    };
    assert_eq!(run(None), cel::Value::Bool(true));
    assert_eq!(run(Some(2)), cel::Value::Bool(true));
    assert_eq!(run(Some(4)), cel::Value::Bool(false));
}

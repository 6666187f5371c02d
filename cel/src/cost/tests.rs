use serde_json::{json, Value};

use super::schema::{min_serialized_size, shape};
use super::*;

fn cost(expr: &str, this: Shape) -> u64 {
    let c = crate::compile(expr, &["self", "oldSelf"]).unwrap_or_else(|e| panic!("{expr}: {e}"));
    crate::cost_of(&c.program, &[("self", this.clone()), ("oldSelf", this)])
}

fn cost_under(expr: &str, schema: Value) -> u64 {
    cost(expr, shape(&schema, false))
}

fn strings(max_items: Option<u64>, max_length: Option<u64>) -> Value {
    let mut item = json!({"type": "string"});
    if let Some(n) = max_length {
        item["maxLength"] = json!(n);
    }
    let mut s = json!({"type": "array", "items": item});
    if let Some(n) = max_items {
        s["maxItems"] = json!(n);
    }
    s
}

#[test]
fn nested_comprehensions_over_unbounded_lists_exceed_the_limit() {
    let rule = "self.all(x, self.all(y, x == y || x != y))";
    let unbounded = cost_under(rule, strings(None, None));
    assert!(
        unbounded > 100 * STATIC_ESTIMATED_COST_LIMIT,
        "{unbounded} should be far over the limit"
    );
    let bounded = cost_under(rule, strings(Some(100), Some(64)));
    assert!(bounded <= STATIC_ESTIMATED_COST_LIMIT, "{bounded}");
    // maxItems alone bounds the iterations, not the comparisons of unbounded strings.
    let items_only = cost_under(rule, strings(Some(100), None));
    assert!(items_only > bounded, "{items_only} vs {bounded}");
    assert!(
        cost_under(
            "self.all(x, self.all(y, self.all(z, x == y && y == z)))",
            strings(Some(100), Some(8))
        ) > cost_under(rule, strings(Some(100), Some(8))) * 50
    );
}

#[test]
fn a_single_comprehension_is_linear_in_max_items() {
    let rule = "self.all(x, x.size() < 10)";
    let ten = cost_under(rule, strings(Some(10), None));
    let thousand = cost_under(rule, strings(Some(1000), None));
    // Linear but for a constant: (1000 − 10) more items cost 990 times one item's cost.
    let per_item = (thousand - ten) / 990;
    assert!(
        per_item > 0 && thousand <= 1000 * per_item + ten,
        "{ten} {thousand}"
    );
    assert!(thousand >= 90 * ten, "{ten} {thousand}");
    // Unbounded: as many items as a request holds ("" plus a comma: 3 bytes each).
    let unbounded = cost_under(rule, strings(None, None));
    assert!(unbounded >= (MAX_REQUEST_BYTES - 2) / 3, "{unbounded}");
}

#[test]
fn string_functions_scale_with_max_length() {
    let s = |n: u64| json!({"type": "string", "maxLength": n});
    for rule in [
        "self.lowerAscii() == self",
        "self.contains('x')",
        "self.startsWith('abc')",
        "self.split(',').size() > 1",
        "self + self == 'x'",
        "string(self) == 'x'",
    ] {
        let short = cost_under(rule, s(16));
        let long = cost_under(rule, s(16_000));
        assert!(long > 100 * short / 2, "{rule}: {short} → {long}");
    }
    // Constant-time operations do not.
    assert_eq!(
        cost_under("self.size() > 3", s(16)),
        cost_under("self.size() > 3", s(16_000))
    );
    // Enums bound strings by their longest value.
    let e = json!({"type": "string", "enum": ["a", "bbbbbbbbbbbbbbbbbbbb"]});
    assert!(
        cost_under("self.lowerAscii() == self", e)
            < cost_under("self.lowerAscii() == self", s(100))
    );
}

#[test]
fn regexes_cost_input_times_pattern() {
    let s = |n: u64| json!({"type": "string", "maxLength": n});
    let small = cost_under("self.matches('^[a-z]+$')", s(100));
    let long_input = cost_under("self.matches('^[a-z]+$')", s(10_000));
    assert!(long_input > 90 * small, "{small} {long_input}");
    let long_pattern = cost_under(&format!("self.matches('{}')", "a".repeat(800)), s(100));
    assert!(long_pattern > 90 * small, "{small} {long_pattern}");
    // A pattern taken from the object itself is as long as the object allows.
    let both = cost_under("self.matches(self)", s(100_000));
    assert!(both > STATIC_ESTIMATED_COST_LIMIT, "{both}");
}

#[test]
fn run_time_estimates_use_the_actual_sizes() {
    let rule = "self.all(x, self.all(y, x == y || x != y))";
    let few = Shape::of_json(&json!(["a", "b", "c"]));
    let many = Shape::of_json(&Value::Array(vec![json!("abcdefgh"); 2000]));
    assert!(cost(rule, few) < 1000);
    assert!(cost(rule, many) > PER_CALL_LIMIT);
    // Map and filter append in place: linear, not quadratic.
    let items = |n: usize| Shape::of_json(&Value::Array(vec![json!(1); n]));
    for rule in [
        "self.map(x, x + 1).size() > 0",
        "self.filter(x, x > 1).size() > 0",
    ] {
        let (small, large) = (cost(rule, items(10_000)), cost(rule, items(20_000)));
        assert!(large <= 2 * small + 10, "{rule}: {small} {large}");
    }
}

#[test]
fn a_value_valid_under_the_schema_costs_no_more_than_the_schema_says() {
    let schema = json!({"type": "object", "properties": {
        "names": {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 10}},
        "labels": {"type": "object", "maxProperties": 5,
            "additionalProperties": {"type": "string", "maxLength": 8}}}});
    let value = json!({"names": ["a", "bb", "cccccccccc"], "labels": {"x": "12345678"}});
    for rule in [
        "self.names.all(n, self.names.exists(m, n == m))",
        "self.labels.all(k, self.labels[k].size() < 9)",
        "self.names.map(n, n.upperAscii()).join(',').size() < 300",
        "self.names.exists(n, n.matches(self.names[0]))",
    ] {
        let at_write = cost(rule, shape(&schema, false));
        let at_run = cost(rule, Shape::of_json(&value));
        assert!(at_run <= at_write, "{rule}: {at_run} > {at_write}");
    }
}

#[test]
fn generated_sizes_are_charged() {
    let this = Shape::of_json(&json!({"n": 3}));
    assert!(cost("lists.range(10).size() == 10", this.clone()) < 100);
    assert!(cost("lists.range(self.n).size() == 10", this.clone()) > PER_CALL_LIMIT);
    // Repeated replacements grow the string geometrically.
    let grow = "'ab'.replace('', 'abcdefgh').replace('', 'abcdefgh').replace('', 'abcdefgh').replace('', 'abcdefgh').replace('', 'abcdefgh').size() > 0";
    let grow_more = format!(
        "{}.replace('', 'abcdefgh').size() > 0",
        grow.trim_end_matches(".size() > 0")
    );
    assert!(cost(&grow_more, this.clone()) > 5 * cost(grow, this));
}

#[test]
fn authorizer_checks_are_dear() {
    let c = crate::compile(
        "authorizer.group('').resource('pods').check('get').allowed()",
        &["authorizer"],
    )
    .unwrap();
    let got = crate::cost_of(&c.program, &[("authorizer", Shape::Scalar)]);
    assert!(got >= estimate::AUTHZ_CHECK_COST, "{got}");
}

#[test]
fn min_serialized_sizes_follow_upstream() {
    assert_eq!(min_serialized_size(&json!({"type": "string"})), 2);
    assert_eq!(min_serialized_size(&json!({"type": "integer"})), 1);
    assert_eq!(min_serialized_size(&json!({"type": "boolean"})), 4);
    assert_eq!(
        min_serialized_size(
            &json!({"type": "object", "required": ["name", "size"], "properties": {
            "name": {"type": "string"}, "size": {"type": "integer", "default": 1}}})
        ),
        2 + 4 + 2 + 4
    );
}

#[test]
fn messages_are_upstreams() {
    assert_eq!(
        exceeds_budget("estimated rule cost", 25_000_000, STATIC_ESTIMATED_COST_LIMIT),
        "estimated rule cost exceeds budget by factor of 2.5x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    );
    assert!(exceeds_budget("x", 12_000_000, 10_000_000).contains("factor of 1.200000x"));
    assert!(exceeds_budget("x", u64::MAX, 10_000_000).contains("factor of more than 100x"));
}

#[test]
fn the_budget_refuses_what_it_cannot_pay() {
    let mut b = Budget::new(2_500_000);
    assert_eq!(b.charge(PER_CALL_LIMIT + 1), Err(Refusal::CallLimit));
    assert_eq!(b.charge(PER_CALL_LIMIT), Ok(()));
    assert_eq!(b.charge(PER_CALL_LIMIT), Ok(()));
    assert_eq!(b.remaining(), 500_000);
    assert_eq!(b.charge(600_000), Err(Refusal::OutOfBudget));
    assert_eq!(b.charge(1), Err(Refusal::OutOfBudget));
    assert_eq!(Refusal::CallLimit.to_string(), ACTUAL_COST_EXCEEDED);
}

//! The cost limits a CRD's `x-kubernetes-validations` must meet when the CRD is created or
//! updated (apiextensions' `getExpressionCost` and `TotalCost`): each rule's estimated cost
//! (from the schema's size bounds, [`k3rs_cel::cost::schema`]) times how many times it may
//! run must stay within [`STATIC_ESTIMATED_COST_LIMIT`], and all of them together within
//! [`STATIC_ESTIMATED_CRD_COST_LIMIT`].
//!
//! # Guarantees
//! - A rule runs as often as the product of `maxItems`/`maxProperties` above it allows;
//!   below an unbounded list or map, as often as values of its schema fit in a request.
//! - Errors read and sit as upstream's: `…x-kubernetes-validations[0].rule: Forbidden:
//!   estimated rule cost exceeds budget by factor of …`; over the total, the (at most four)
//!   dearest rules are named and the schema root carries the total's message.
//! - Rules that do not compile are left to [`super::rules_definition`].

use serde_json::Value;

use super::rule::Rule;
use k3rs_apimachinery::status::Cause;
use k3rs_cel::cost::schema::{max_elements, shape, unbounded_cardinality};
use k3rs_cel::cost::{
    exceeds_budget, STATIC_ESTIMATED_COST_LIMIT as RULE_LIMIT,
    STATIC_ESTIMATED_CRD_COST_LIMIT as TOTAL_LIMIT,
};
use k3rs_cel::Shape;

/// Rules cheaper than this share of the total limit are not named when the total is over.
const NOTABLE: u64 = TOTAL_LIMIT / 100;

#[derive(Default)]
struct Total {
    sum: u64,
    /// `(field, cost)` of the dearest notable expressions, dearest first, at most four.
    dearest: Vec<(String, u64)>,
}

impl Total {
    fn observe(&mut self, field: String, cost: u64) {
        self.sum = self.sum.saturating_add(cost);
        if cost < NOTABLE {
            return;
        }
        self.dearest.push((field, cost));
        self.dearest.sort_by_key(|d| std::cmp::Reverse(d.1));
        self.dearest.truncate(4);
    }
}

/// Every cost limit the rules of the root schema `s` (found at `at`,
/// `spec.versions[0].schema.openAPIV3Schema`) break.
pub fn check(s: &Value, at: &str, out: &mut Vec<Cause>) {
    let mut total = Total::default();
    walk(s, at, Some(1), true, &mut total, out);
    if total.sum > TOTAL_LIMIT {
        for (field, _) in &total.dearest {
            out.push(Cause::forbidden(
                field.clone(),
                "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        out.push(Cause::forbidden(
            at,
            &exceeds_budget(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                total.sum,
                TOTAL_LIMIT,
            ),
        ));
    }
}

/// `cardinality`: how many times values of `s` may occur (`None`: unbounded).
fn walk(
    s: &Value,
    at: &str,
    cardinality: Option<u64>,
    root: bool,
    total: &mut Total,
    out: &mut Vec<Cause>,
) {
    if !s.is_object() {
        return;
    }
    let rules = Rule::all_of(s);
    if !rules.is_empty() {
        let this = shape(s, root);
        let times = cardinality.unwrap_or_else(|| unbounded_cardinality(s));
        for (i, r) in rules.iter().enumerate() {
            let rat = format!("{at}.x-kubernetes-validations[{i}]");
            for (what, source, field) in [
                ("estimated rule cost", &r.rule, "rule"),
                (
                    "estimated messageExpression cost",
                    &r.message_expression,
                    "messageExpression",
                ),
            ] {
                let Some(cost) = cost(source, &this) else {
                    continue;
                };
                let cost = cost.saturating_mul(times);
                let field = format!("{rat}.{field}");
                if cost > RULE_LIMIT {
                    out.push(Cause::forbidden(
                        field.clone(),
                        &exceeds_budget(what, cost, RULE_LIMIT),
                    ));
                }
                total.observe(field, cost);
            }
        }
    }
    let below = |factor: Option<u64>| Some(cardinality?.saturating_mul(factor?));
    let children = below(max_elements(s));
    if let Some(props) = s["properties"].as_object() {
        for (k, p) in props {
            let pat = format!("{at}.properties[{k}]");
            walk(p, &pat, children, false, total, out);
        }
    }
    if let Some(items) = s.get("items") {
        walk(items, &format!("{at}.items"), children, false, total, out);
    }
    if let Some(a) = s.get("additionalProperties") {
        let aat = format!("{at}.additionalProperties");
        walk(a, &aat, children, false, total, out);
    }
}

/// The estimated cost of one evaluation of `source` on a value of `this`; `None` when
/// there is no expression or it does not compile.
fn cost(source: &str, this: &Shape) -> Option<u64> {
    if source.trim().is_empty() {
        return None;
    }
    let compiled = k3rs_cel::compile(source, &["self", "oldSelf"]).ok()?;
    Some(k3rs_cel::cost_of(
        &compiled.program,
        &[("self", this.clone()), ("oldSelf", this.clone())],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems(s: Value) -> Vec<String> {
        let mut out = Vec::new();
        check(&s, "s", &mut out);
        out.into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    fn with_list(list: Value) -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "names": list}}}})
    }

    const PAIRWISE: &str = "self.all(x, self.exists(y, x == y))";

    #[test]
    fn an_expensive_rule_is_refused_until_bounded() {
        let unbounded = with_list(json!({"type": "array", "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": PAIRWISE}]}));
        let got = problems(unbounded);
        assert_eq!(
            got[0],
            "s.properties[spec].properties[names].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
        );
        assert!(got.iter().any(|g| g.starts_with("s: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget")), "{got:#?}");
        let bounded = with_list(json!({"type": "array", "maxItems": 50,
            "items": {"type": "string", "maxLength": 32},
            "x-kubernetes-validations": [{"rule": PAIRWISE}]}));
        assert_eq!(problems(bounded), Vec::<String>::new());
    }

    #[test]
    fn rules_under_unbounded_lists_run_once_per_item() {
        // Cheap alone, but it may run for every item of an unbounded list.
        let rule = json!([{"rule": "self.name.size() > 0 && self.name.size() < 64 && self.name != 'x' && self.name.startsWith('a')"}]);
        let item = json!({"type": "object", "properties": {"name": {"type": "string", "maxLength": 63}},
            "x-kubernetes-validations": rule});
        let got = problems(with_list(json!({"type": "array", "items": item})));
        assert_eq!(got.len(), 1, "{got:#?}");
        assert!(got[0].starts_with("s.properties[spec].properties[names].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of"), "{}", got[0]);
        let got = problems(with_list(
            json!({"type": "array", "maxItems": 100, "items": item}),
        ));
        assert_eq!(got, Vec::<String>::new());
    }

    #[test]
    fn message_expressions_are_priced_too() {
        let s = with_list(
            json!({"type": "array", "maxItems": 10, "items": {"type": "string"},
            "x-kubernetes-validations": [{"rule": "self.size() < 5",
                "messageExpression": "self.map(x, self.map(y, x + y)).join(',')"}]}),
        );
        let got = problems(s);
        assert!(got[0].starts_with("s.properties[spec].properties[names].x-kubernetes-validations[0].messageExpression: Forbidden: estimated messageExpression cost exceeds budget by factor of"), "{got:#?}");
    }

    #[test]
    fn the_total_is_bounded_and_names_the_dearest_rules() {
        // Each within the per-rule limit, together over the total.
        let rule = json!({"rule": "self.all(x, x.contains('a'))"});
        let list = json!({"type": "array", "maxItems": 100_000, "items": {"type": "string", "maxLength": 128},
            "x-kubernetes-validations": vec![rule; 20]});
        let got = problems(with_list(list));
        assert_eq!(got.len(), 5, "{got:#?}");
        assert!(got[..4].iter().all(|g| g.ends_with("Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema")));
        assert!(got[4].starts_with("s: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of"), "{}", got[4]);
    }
}

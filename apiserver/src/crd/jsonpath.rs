//! The JSONPath subset of `additionalPrinterColumns[].jsonPath` (and the scale subresource's
//! paths): `.a.b`, `['a.b']`, `[2]`, `[*]` and `[?(@.x=="y")]` filters. Parsing is pure and
//! checked when the CRD is accepted.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Field(String),
    Index(usize),
    All,
    /// `[?(@.path=="value")]` (a path under the element compared with a JSON value).
    Filter(Vec<String>, Value),
}

/// A parse error, with kube's wording as far as it goes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

/// Parses a path such as `.status.conditions[?(@.type=="Ready")].status`; an optional
/// `{…}` wrapper is accepted.
pub fn parse(path: &str) -> Result<Vec<Step>, ParseError> {
    let p = path.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(p);
    let p = p.strip_prefix('$').unwrap_or(p);
    if !p.starts_with('.') && !p.starts_with('[') {
        return Err(ParseError(format!(
            "unrecognized character in action: {p:?}"
        )));
    }
    let b = p.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        match b[i] {
            b'.' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j] != b'.' && b[j] != b'[' {
                    j += 1;
                }
                let name = &p[start..j];
                if name.is_empty() {
                    return Err(ParseError(format!("empty field name in {path:?}")));
                }
                out.push(Step::Field(name.to_string()));
                i = j;
            }
            b'[' => {
                let end = p[i..]
                    .find(']')
                    .map(|e| i + e)
                    .ok_or_else(|| ParseError(format!("unterminated array in {path:?}")))?;
                // A filter's value may contain ']'; take up to the closing ")]".
                let (inner, next) = if p[i + 1..].starts_with("?(") {
                    let close = p[i..]
                        .find(")]")
                        .map(|e| i + e)
                        .ok_or_else(|| ParseError(format!("unterminated filter in {path:?}")))?;
                    (&p[i + 3..close], close + 2)
                } else {
                    (&p[i + 1..end], end + 1)
                };
                out.push(bracket(inner, p[i + 1..].starts_with("?("), path)?);
                i = next;
            }
            _ => return Err(ParseError(format!("unexpected character in {path:?}"))),
        }
    }
    Ok(out)
}

fn bracket(inner: &str, filter: bool, path: &str) -> Result<Step, ParseError> {
    let bad = || ParseError(format!("invalid array index or filter in {path:?}"));
    if filter {
        let (lhs, rhs) = inner.split_once("==").ok_or_else(bad)?;
        let lhs = lhs.trim().strip_prefix('@').ok_or_else(bad)?;
        let fields: Vec<String> = lhs
            .split('.')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let rhs = rhs.trim();
        let value = if let Some(s) = rhs.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
            Value::String(s.to_string())
        } else {
            serde_json::from_str(rhs).map_err(|_| bad())?
        };
        return Ok(Step::Filter(fields, value));
    }
    let inner = inner.trim();
    if inner == "*" {
        return Ok(Step::All);
    }
    for q in ['\'', '"'] {
        if let Some(name) = inner.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return Ok(Step::Field(name.to_string()));
        }
    }
    inner.parse().map(Step::Index).map_err(|_| bad())
}

/// Every value the path selects in `v`, in document order.
pub fn select<'a>(steps: &[Step], v: &'a Value) -> Vec<&'a Value> {
    let mut current = vec![v];
    for step in steps {
        let mut next = Vec::new();
        for c in current {
            match step {
                Step::Field(f) => next.extend(c.get(f.as_str())),
                Step::Index(i) => next.extend(c.get(*i)),
                Step::All => match c {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter(fields, want) => {
                    for item in c.as_array().into_iter().flatten() {
                        let got = fields.iter().try_fold(item, |x, f| x.get(f.as_str()));
                        if got == Some(want) {
                            next.push(item);
                        }
                    }
                }
            }
        }
        current = next;
    }
    current
}

/// The first value selected by a dotted path such as `.spec.replicas` (the scale
/// subresource's paths), if any.
pub fn first<'a>(path: &str, v: &'a Value) -> Option<&'a Value> {
    parse(path)
        .ok()
        .and_then(|s| select(&s, v).into_iter().next())
}

/// Sets the value at a dotted path of plain fields (`.spec.replicas`), creating objects on
/// the way. Returns false when the path is not a plain field path.
pub fn set(path: &str, v: &mut Value, value: Value) -> bool {
    let Ok(steps) = parse(path) else { return false };
    let mut fields = Vec::new();
    for s in steps {
        match s {
            Step::Field(f) => fields.push(f),
            _ => return false,
        }
    }
    let Some((last, parents)) = fields.split_last() else {
        return false;
    };
    let mut at = v;
    for f in parents {
        if !at.get(f.as_str()).is_some_and(Value::is_object) {
            at[f.as_str()] = Value::Object(Default::default());
        }
        at = &mut at[f.as_str()];
    }
    if !at.is_object() {
        return false;
    }
    at[last.as_str()] = value;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_the_printer_column_subset() {
        assert_eq!(
            parse(".spec.replicas").unwrap(),
            [Step::Field("spec".into()), Step::Field("replicas".into())]
        );
        assert_eq!(
            parse(".status.conditions[?(@.type==\"Ready\")].status").unwrap(),
            [
                Step::Field("status".into()),
                Step::Field("conditions".into()),
                Step::Filter(vec!["type".into()], json!("Ready")),
                Step::Field("status".into())
            ]
        );
        assert_eq!(
            parse("{.metadata.labels['app.kubernetes.io/name']}").unwrap(),
            [
                Step::Field("metadata".into()),
                Step::Field("labels".into()),
                Step::Field("app.kubernetes.io/name".into())
            ]
        );
        assert_eq!(parse(".a[2][*]").unwrap()[1..], [Step::Index(2), Step::All]);
        assert!(parse("spec").is_err());
        assert!(parse(".a[x]").is_err());
        assert!(parse(".a..b").is_err());
    }

    #[test]
    fn selects_and_sets() {
        let v = json!({"spec": {"items": [{"n": 1}, {"n": 2}]},
            "status": {"conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let s = parse(".spec.items[*].n").unwrap();
        assert_eq!(select(&s, &v), [&json!(1), &json!(2)]);
        assert_eq!(
            first(".status.conditions[?(@.type=='Ready')].status", &v),
            Some(&json!("True"))
        );
        assert_eq!(first(".spec.missing", &v), None);
        let mut w = json!({"spec": {}});
        assert!(set(".spec.replicas", &mut w, json!(3)));
        assert!(set(".status.scale.replicas", &mut w, json!(2)));
        assert_eq!(
            w,
            json!({"spec": {"replicas": 3}, "status": {"scale": {"replicas": 2}}})
        );
        assert!(!set(".spec.items[0]", &mut w, json!(1)));
    }
}

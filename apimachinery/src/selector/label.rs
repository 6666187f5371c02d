//! Label selectors (`k8s.io/apimachinery/pkg/labels`): `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
//! `a notin (x,y)`, `a` (exists), `!a` (does not exist), comma-separated (AND).

use std::collections::BTreeMap;

use crate::status::ApiError;
use crate::validation::{label_key_error, label_value_error};

/// A requirement's operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `key in (…)` (and `key=value`).
    In(Vec<String>),
    /// `key notin (…)` (and `key!=value`).
    NotIn(Vec<String>),
    /// `key`.
    Exists,
    /// `!key`.
    DoesNotExist,
}

/// One term of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// What the label must satisfy.
    pub op: Op,
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// The terms, all of which must hold.
    pub requirements: Vec<Requirement>,
}

/// Why a `metav1.LabelSelector` object is invalid (`metav1.LabelSelectorAsSelector`'s errors).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A `matchLabels` or `matchExpressions` key is not a qualified label name.
    #[error("invalid label key {key:?}: {reason}")]
    Key {
        /// The key as written.
        key: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A `matchLabels` value is not a valid label value.
    #[error("invalid label value {value:?}: {reason}")]
    Value {
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `In`/`NotIn` without values.
    #[error("for 'in', 'notin' operators, values set can't be empty")]
    EmptyValues,
    /// `Exists`/`DoesNotExist` with values.
    #[error("values set must be empty for exists and does not exist")]
    UnexpectedValues,
    /// An operator other than `In`, `NotIn`, `Exists`, `DoesNotExist`.
    #[error("{0:?} is not a valid label selector operator")]
    Operator(String),
}

fn bad(sel: &str, why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!(
        "unable to parse requirement: {why} (in label selector {sel:?})"
    ))
}

/// Splits at commas outside parentheses.
fn split_top(s: &str) -> Option<Vec<&str>> {
    let (mut depth, mut start, mut out) = (0i32, 0usize, Vec::new());
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return None;
                }
            }
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return None;
    }
    out.push(&s[start..]);
    Some(out)
}

fn set_values(sel: &str, rest: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| bad(sel, "found '', expected: '('"))?;
    let mut values = Vec::new();
    for v in inner.split(',') {
        let v = v.trim();
        if let Some(e) = label_value_error(v) {
            return Err(bad(sel, format!("invalid label value: {v:?}: {e}")));
        }
        values.push(v.to_string());
    }
    Ok(values)
}

impl LabelSelector {
    /// Parses the `labelSelector` query form; a 400 with upstream's message otherwise.
    pub fn parse(sel: &str) -> Result<LabelSelector, ApiError> {
        let mut requirements = Vec::new();
        if sel.trim().is_empty() {
            return Ok(LabelSelector { requirements });
        }
        let parts = split_top(sel).ok_or_else(|| bad(sel, "unbalanced parentheses"))?;
        for part in parts {
            let part = part.trim();
            if part.is_empty() {
                return Err(bad(sel, "found '', expected: identifier"));
            }
            let (key, op) = if let Some(k) = part.strip_prefix('!') {
                (k.trim(), Op::DoesNotExist)
            } else if let Some((k, v)) = part.split_once("!=") {
                (k.trim(), Op::NotIn(vec![v.trim().to_string()]))
            } else if let Some((k, v)) = part.split_once("==") {
                (k.trim(), Op::In(vec![v.trim().to_string()]))
            } else if let Some((k, v)) = part.split_once('=') {
                (k.trim(), Op::In(vec![v.trim().to_string()]))
            } else if let Some((k, rest)) = split_word(part, "notin") {
                (k, Op::NotIn(set_values(sel, rest)?))
            } else if let Some((k, rest)) = split_word(part, "in") {
                (k, Op::In(set_values(sel, rest)?))
            } else if part.contains(|c: char| c.is_whitespace() || "()<>".contains(c)) {
                return Err(bad(sel, format!("invalid requirement {part:?}")));
            } else {
                (part, Op::Exists)
            };
            if let Some(e) = label_key_error(key) {
                return Err(bad(sel, format!("invalid label key {key:?}: {e}")));
            }
            if let Op::In(v) | Op::NotIn(v) = &op {
                for v in v {
                    if let Some(e) = label_value_error(v) {
                        return Err(bad(sel, format!("invalid label value: {v:?}: {e}")));
                    }
                }
            }
            requirements.push(Requirement {
                key: key.to_string(),
                op,
            });
        }
        Ok(LabelSelector { requirements })
    }

    /// A `metav1.LabelSelector` object (`matchLabels` + `matchExpressions`), as
    /// `metav1.LabelSelectorAsSelector` reads it: `{}` selects everything. The error is the
    /// reason the selector is invalid (an unknown operator, values on `Exists`, a bad key).
    pub fn from_object(sel: &serde_json::Value) -> Result<LabelSelector, SelectorError> {
        let mut requirements = Vec::new();
        if let Some(m) = sel["matchLabels"].as_object() {
            for (k, v) in m {
                let v = v.as_str().unwrap_or("").to_string();
                if let Some(reason) = label_key_error(k) {
                    return Err(SelectorError::Key {
                        key: k.clone(),
                        reason,
                    });
                }
                if let Some(reason) = label_value_error(&v) {
                    return Err(SelectorError::Value { value: v, reason });
                }
                requirements.push(Requirement {
                    key: k.clone(),
                    op: Op::In(vec![v]),
                });
            }
        }
        for e in sel["matchExpressions"].as_array().into_iter().flatten() {
            let key = e["key"].as_str().unwrap_or("").to_string();
            if let Some(reason) = label_key_error(&key) {
                return Err(SelectorError::Key { key, reason });
            }
            let values: Vec<String> = e["values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| v.as_str().unwrap_or("").to_string())
                .collect();
            let op = match (e["operator"].as_str().unwrap_or(""), values.is_empty()) {
                ("In", false) => Op::In(values),
                ("NotIn", false) => Op::NotIn(values),
                ("Exists", true) => Op::Exists,
                ("DoesNotExist", true) => Op::DoesNotExist,
                ("In" | "NotIn", true) => return Err(SelectorError::EmptyValues),
                ("Exists" | "DoesNotExist", false) => return Err(SelectorError::UnexpectedValues),
                (other, _) => return Err(SelectorError::Operator(other.to_string())),
            };
            requirements.push(Requirement { key, op });
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether it selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// Whether `labels` satisfy every term.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match &r.op {
            Op::In(vals) => labels.get(&r.key).is_some_and(|v| vals.contains(v)),
            Op::NotIn(vals) => labels.get(&r.key).is_none_or(|v| !vals.contains(v)),
            Op::Exists => labels.contains_key(&r.key),
            Op::DoesNotExist => !labels.contains_key(&r.key),
        })
    }
}

/// `key <word> rest` with whitespace around `word`.
fn split_word<'a>(part: &'a str, word: &str) -> Option<(&'a str, &'a str)> {
    let mut it = part.splitn(2, char::is_whitespace);
    let key = it.next()?;
    let rest = it.next()?.trim_start();
    let rest = rest.strip_prefix(word)?;
    (rest.starts_with(|c: char| c.is_whitespace() || c == '(')).then_some((key, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn parses_every_operator() {
        let s = LabelSelector::parse("a=1,b==2,c!=3,d in (x, y),e notin (z),f,!g").unwrap();
        assert_eq!(s.requirements.len(), 7);
        assert_eq!(s.requirements[3].op, Op::In(vec!["x".into(), "y".into()]));
        assert_eq!(s.requirements[6].op, Op::DoesNotExist);
        assert_eq!(
            LabelSelector::parse("app.kubernetes.io/name=web")
                .unwrap()
                .requirements[0]
                .key,
            "app.kubernetes.io/name"
        );
    }

    #[test]
    fn matches_like_apimachinery() {
        let l = labels(&[("a", "1"), ("d", "x"), ("f", "")]);
        let m = |s: &str| LabelSelector::parse(s).unwrap().matches(&l);
        assert!(m(""));
        assert!(m("a=1"));
        assert!(!m("a=2"));
        assert!(m("a!=2"));
        assert!(m("zz!=2"), "!= matches a missing key");
        assert!(m("d in (x,y)"));
        assert!(!m("d notin (x)"));
        assert!(m("e notin (x)"));
        assert!(m("f"));
        assert!(!m("!f"));
        assert!(m("!g,a==1"));
    }

    #[test]
    fn label_selector_objects() {
        let sel = serde_json::json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "canary", "operator": "DoesNotExist"}]});
        let s = LabelSelector::from_object(&sel).unwrap();
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "b")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "c")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "a"), ("canary", "")])));
        assert!(LabelSelector::from_object(&serde_json::json!({}))
            .unwrap()
            .is_empty());
        let bad = serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]});
        assert!(LabelSelector::from_object(&bad).is_err());
        let bad = serde_json::json!({"matchExpressions": [{"key": "a", "operator": "Near"}]});
        assert_eq!(
            LabelSelector::from_object(&bad).unwrap_err().to_string(),
            "\"Near\" is not a valid label selector operator"
        );
    }

    #[test]
    fn rejects_bad_syntax() {
        for s in [
            "a=(", "a in x", "-a=b", "a=b c", "a in (x", ",", "a=b,", "a=b=c", "a=",
        ] {
            if s == "a=" {
                assert!(LabelSelector::parse(s).is_ok(), "empty value is valid");
                continue;
            }
            assert_eq!(LabelSelector::parse(s).unwrap_err().code, 400, "{s}");
        }
    }
}

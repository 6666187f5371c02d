//! Sets of field paths, as server-side apply records them in `managedFields` (FieldsV1):
//! `{"f:spec": {"f:replicas": {}, "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}}}}}`.
//!
//! A path is a list of [`PathElement`]s: `f:<field>`, `k:<key object>` (an item of a list
//! keyed by `x-kubernetes-list-map-keys`), `v:<value>` (an item of a set), `i:<index>` (an
//! item of a list without keys). `.` marks that a node with children is itself in the set.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::{Map, Value};

/// One step of a field path. The derived order (fields, keys, values, indexes) is the order
/// of structured-merge-diff.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// `f:<name>`: a field of a struct or a key of a map.
    Field(String),
    /// `k:<json>`: a list item identified by its key fields; the JSON object has its fields in
    /// name order (canonical).
    Key(String),
    /// `v:<json>`: an item of a set.
    Value(String),
    /// `i:<n>`: an item of a list without keys.
    Index(usize),
}

impl PathElement {
    /// A key element from `(field, value)` pairs.
    pub fn key(fields: &[(String, Value)]) -> PathElement {
        let sorted: BTreeMap<&str, &Value> = fields.iter().map(|(k, v)| (k.as_str(), v)).collect();
        let parts: Vec<String> = sorted
            .iter()
            .map(|(k, v)| format!("{}:{}", Value::from(*k), v))
            .collect();
        PathElement::Key(format!("{{{}}}", parts.join(",")))
    }

    /// A set-item element.
    pub fn value(v: &Value) -> PathElement {
        PathElement::Value(v.to_string())
    }

    /// The FieldsV1 key (`f:name`, `k:{...}`, `v:...`, `i:0`).
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(f) => format!("f:{f}"),
            PathElement::Key(k) => format!("k:{k}"),
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    fn decode(s: &str) -> Option<PathElement> {
        let (prefix, rest) = s.split_once(':')?;
        Some(match prefix {
            "f" => PathElement::Field(rest.to_string()),
            "k" => {
                let Value::Object(m) = serde_json::from_str::<Value>(rest).ok()? else {
                    return None;
                };
                let fields: Vec<(String, Value)> = m.into_iter().collect();
                PathElement::key(&fields)
            }
            "v" => PathElement::value(&serde_json::from_str::<Value>(rest).ok()?),
            "i" => PathElement::Index(rest.parse().ok()?),
            _ => return None,
        })
    }
}

impl fmt::Display for PathElement {
    /// structured-merge-diff's path notation: `.name`, `[name="c",port=80]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(k) => {
                let Ok(Value::Object(m)) = serde_json::from_str::<Value>(k) else {
                    return write!(f, "[{k}]");
                };
                let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={v}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A field path.
pub type Path = Vec<PathElement>;

/// Renders a path as structured-merge-diff does (`.spec.containers[name="c"].image`).
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of field paths, stored as a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether the set has no path.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.is_empty()
    }

    /// Adds a path (the empty path is ignored).
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        let child = self.children.entry(first.clone()).or_default();
        if rest.is_empty() {
            child.member = true;
        } else {
            child.insert(rest);
        }
    }

    /// Whether `path` is in the set.
    pub fn contains(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// Whether the set holds `path` or a path below it.
    pub fn contains_prefix(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => !self.is_empty(),
            Some((first, rest)) => self
                .children
                .get(first)
                .is_some_and(|c| c.contains_prefix(rest)),
        }
    }

    /// The subtree at `path` (paths relative to it).
    pub fn at(&self, path: &[PathElement]) -> Option<&FieldSet> {
        match path.split_first() {
            None => Some(self),
            Some((first, rest)) => self.children.get(first)?.at(rest),
        }
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (k, v) in &other.children {
            let merged = match out.children.get(k) {
                Some(mine) => mine.union(v),
                None => v.clone(),
            };
            out.children.insert(k.clone(), merged);
        }
        out
    }

    /// `self ∖ other` (exact paths).
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            let child = match other.children.get(k) {
                Some(o) => v.difference(o),
                None => v.clone(),
            };
            if !child.is_empty() {
                out.children.insert(k.clone(), child);
            }
        }
        out
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (k, v) in &self.children {
            if let Some(o) = other.children.get(k) {
                let child = v.intersection(o);
                if !child.is_empty() {
                    out.children.insert(k.clone(), child);
                }
            }
        }
        out
    }

    /// Every path of the set, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        if self.member && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        for (k, v) in &self.children {
            prefix.push(k.clone());
            v.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The FieldsV1 JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".to_string(), Value::Object(Map::new()));
        }
        for (k, v) in &self.children {
            m.insert(k.encode(), v.to_fields_v1());
        }
        Value::Object(m)
    }

    /// Parses FieldsV1 JSON; `None` when it is malformed.
    pub fn from_fields_v1(v: &Value) -> Option<FieldSet> {
        let mut set = FieldSet::new();
        for (k, child) in v.as_object()? {
            if k == "." {
                continue;
            }
            let element = PathElement::decode(k)?;
            let child_map = child.as_object()?;
            let mut node = FieldSet::from_fields_v1(child)?;
            node.member = child_map.is_empty() || child_map.contains_key(".");
            set.children.insert(element, node);
        }
        Some(set)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn f(name: &str) -> PathElement {
        PathElement::Field(name.to_string())
    }

    #[test]
    fn fields_v1_round_trip() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:containers": {
                    "k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}},
                },
                "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {}},
            },
            "f:metadata2": {"f:finalizers": {"v:\"a\"": {}}},
            "f:args": {"i:0": {}},
        });
        let set = FieldSet::from_fields_v1(&v).unwrap();
        assert!(set.contains(&[f("spec"), f("replicas")]));
        assert!(set.contains(&[f("metadata"), f("labels")]));
        assert!(!set.contains(&[f("spec")]));
        let item = PathElement::key(&[("name".to_string(), json!("c"))]);
        assert!(set.contains(&[f("spec"), f("containers"), item.clone(), f("image")]));
        assert!(set.contains(&[f("spec"), f("containers"), item]));
        assert_eq!(set.to_fields_v1(), v);
        assert_eq!(set.paths().len(), 9);
    }

    #[test]
    fn key_elements_are_canonical() {
        let a = PathElement::key(&[
            ("protocol".to_string(), json!("TCP")),
            ("containerPort".to_string(), json!(80)),
        ]);
        assert_eq!(a.encode(), r#"k:{"containerPort":80,"protocol":"TCP"}"#);
        assert_eq!(a.to_string(), r#"[containerPort=80,protocol="TCP"]"#);
        assert_eq!(PathElement::value(&json!("x")).to_string(), r#"[="x"]"#);
        assert_eq!(PathElement::Index(3).to_string(), "[3]");
        let path = vec![
            f("spec"),
            f("containers"),
            PathElement::key(&[("name".to_string(), json!("nginx"))]),
            f("image"),
        ];
        assert_eq!(
            path_string(&path),
            r#".spec.containers[name="nginx"].image"#
        );
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::new();
        a.insert(&[f("a"), f("b")]);
        a.insert(&[f("a"), f("c")]);
        let mut b = FieldSet::new();
        b.insert(&[f("a"), f("c")]);
        b.insert(&[f("d")]);
        assert_eq!(a.intersection(&b).paths(), vec![vec![f("a"), f("c")]]);
        assert_eq!(a.difference(&b).paths(), vec![vec![f("a"), f("b")]]);
        assert_eq!(a.union(&b).paths().len(), 3);
        assert!(a.difference(&a).is_empty());
        assert!(a.contains_prefix(&[f("a")]));
        assert!(!a.contains_prefix(&[f("d")]));
    }

    #[test]
    fn malformed_fields_v1() {
        assert_eq!(FieldSet::from_fields_v1(&json!({"x:y": {}})), None);
        assert_eq!(FieldSet::from_fields_v1(&json!({"f:a": 1})), None);
        assert_eq!(FieldSet::from_fields_v1(&json!([])), None);
    }
}

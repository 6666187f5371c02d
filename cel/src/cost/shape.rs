//! Upper bounds on the sizes of CEL values ([`Shape`]): what the cost estimator knows about a
//! variable. At write time a shape comes from a structural schema ([`super::schema`]); at
//! run time from the very value being validated ([`Shape::of_json`]), so the same estimate
//! is then a bound on the cost of this one evaluation.
//!
//! All arithmetic saturates: an unbounded size stays `u64::MAX`, never wraps.

use std::collections::BTreeMap;

use serde_json::Value as Json;

/// Objects with more keys than this keep one shape for all their values (a map) rather
/// than one per key, so shapes stay small for huge maps.
const MAX_FIELDS: usize = 64;

/// What is known of a value's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A value of constant size: bool, int, uint, double, null, timestamp, duration, or an
    /// opaque value (`authorizer`).
    Scalar,
    /// A string or bytes of at most this many bytes.
    Text(u64),
    /// A list of at most `len` items, each within `item`.
    List {
        /// The most items.
        len: u64,
        /// Every item's shape.
        item: Box<Shape>,
    },
    /// A map or object: at most `len` entries, keys within `key`, known properties within
    /// their `fields` shapes and any other value within `other`.
    Map {
        /// The most entries.
        len: u64,
        /// Every key's shape.
        key: Box<Shape>,
        /// The known properties' shapes.
        fields: BTreeMap<String, Shape>,
        /// Any other value's shape.
        other: Box<Shape>,
    },
    /// Any value whose JSON form has at most this many bytes (`dyn`).
    Any(u64),
}

impl Shape {
    /// A list of at most `len` items within `item`.
    pub fn list(len: u64, item: Shape) -> Shape {
        Shape::List {
            len,
            item: Box::new(item),
        }
    }

    /// A map of at most `len` entries, every key within `key` and value within `value`.
    pub fn map(len: u64, key: Shape, value: Shape) -> Shape {
        Shape::Map {
            len,
            key: Box::new(key),
            fields: BTreeMap::new(),
            other: Box::new(value),
        }
    }

    /// An object with exactly these properties (and nothing else).
    pub fn object(fields: BTreeMap<String, Shape>) -> Shape {
        let key = fields.keys().map(|k| k.len() as u64).max().unwrap_or(0);
        Shape::Map {
            len: fields.len() as u64,
            key: Box::new(Shape::Text(key)),
            fields,
            other: Box::new(Shape::Scalar),
        }
    }

    /// The shape of a JSON value: exact lengths, lists bounded by their largest item.
    pub fn of_json(v: &Json) -> Shape {
        match v {
            Json::Null | Json::Bool(_) | Json::Number(_) => Shape::Scalar,
            Json::String(s) => Shape::Text(s.len() as u64),
            Json::Array(items) => {
                let item = items
                    .iter()
                    .map(Shape::of_json)
                    .reduce(|a, b| a.join(&b))
                    .unwrap_or(Shape::Scalar);
                Shape::list(items.len() as u64, item)
            }
            Json::Object(m) if m.len() <= MAX_FIELDS => Shape::object(
                m.iter()
                    .map(|(k, x)| (k.clone(), Shape::of_json(x)))
                    .collect(),
            ),
            Json::Object(m) => {
                let key = m.keys().map(|k| k.len() as u64).max().unwrap_or(0);
                let value = m
                    .values()
                    .map(Shape::of_json)
                    .reduce(|a, b| a.join(&b))
                    .unwrap_or(Shape::Scalar);
                Shape::map(m.len() as u64, Shape::Text(key), value)
            }
        }
    }

    /// A shape that bounds both `self` and `other`.
    pub fn join(&self, other: &Shape) -> Shape {
        use Shape::*;
        match (self, other) {
            (Scalar, Scalar) => Scalar,
            (Text(a), Text(b)) => Text(*a.max(b)),
            (List { len: a, item: x }, List { len: b, item: y }) => {
                Shape::list(*a.max(b), x.join(y))
            }
            (
                Map {
                    len: a,
                    key: ka,
                    fields: fa,
                    other: oa,
                },
                Map {
                    len: b,
                    key: kb,
                    fields: fb,
                    other: ob,
                },
            ) => {
                let mut fields = fa.clone();
                for (k, s) in fb {
                    let joined = match fields.get(k) {
                        Some(mine) => mine.join(s),
                        None => s.join(oa),
                    };
                    fields.insert(k.clone(), joined);
                }
                for (k, s) in fa {
                    if !fb.contains_key(k) {
                        fields.insert(k.clone(), s.join(ob));
                    }
                }
                Map {
                    len: *a.max(b),
                    key: Box::new(ka.join(kb)),
                    fields,
                    other: Box::new(oa.join(ob)),
                }
            }
            (a, b) => Any(a.bytes().max(b.bytes())),
        }
    }

    /// An upper bound on the length of its JSON form.
    pub fn bytes(&self) -> u64 {
        match self {
            Shape::Scalar => 32,
            Shape::Text(n) => n.saturating_add(2),
            Shape::List { len, item } => {
                2u64.saturating_add(len.saturating_mul(item.bytes().saturating_add(1)))
            }
            Shape::Map {
                len, key, other, ..
            } => {
                let value = self.values().bytes().max(other.bytes());
                let entry = key.bytes().saturating_add(value).saturating_add(2);
                2u64.saturating_add(len.saturating_mul(entry))
            }
            Shape::Any(n) => *n,
        }
    }

    /// Its length as `size()` counts it: bytes of a string, items of a list, entries of a
    /// map.
    pub fn len(&self) -> u64 {
        match self {
            Shape::Scalar => 1,
            Shape::Text(n) => *n,
            Shape::List { len, .. } | Shape::Map { len, .. } => *len,
            Shape::Any(n) => *n,
        }
    }

    /// Whether it is known to hold nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The shape of property `name` of an object.
    pub fn field(&self, name: &str) -> Shape {
        match self {
            Shape::Map { fields, other, .. } => fields
                .get(name)
                .cloned()
                .unwrap_or_else(|| (**other).clone()),
            Shape::Any(n) => Shape::Any(*n),
            _ => Shape::Scalar,
        }
    }

    /// The shape of any value it holds: list items, map values.
    pub fn values(&self) -> Shape {
        match self {
            Shape::List { item, .. } => (**item).clone(),
            Shape::Map { fields, other, .. } => fields
                .values()
                .fold((**other).clone(), |acc, s| acc.join(s)),
            Shape::Any(n) => Shape::Any(*n),
            Shape::Text(_) | Shape::Scalar => Shape::Scalar,
        }
    }

    /// How many times a comprehension over it iterates, and the shape of its iteration
    /// variable (list items, map keys).
    pub fn iteration(&self) -> (u64, Shape) {
        match self {
            Shape::List { len, item } => (*len, (**item).clone()),
            Shape::Map { len, key, .. } => (*len, (**key).clone()),
            // Two bytes per item at least (`1,`).
            Shape::Any(n) => (n / 2, Shape::Any(*n)),
            Shape::Text(_) | Shape::Scalar => (0, Shape::Scalar),
        }
    }

    /// As a list: its length and item shape (a `dyn` value could be any list fitting in
    /// its bytes).
    pub fn as_list(&self) -> (u64, Shape) {
        match self {
            Shape::Map { len, key, .. } => (*len, (**key).clone()),
            other => other.iteration(),
        }
    }
}

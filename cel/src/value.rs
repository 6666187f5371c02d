//! JSON to CEL values with upstream's typing (apiextensions' `UnstructuredToVal`): the
//! structural schema, when there is one, decides `double` vs `int`, `timestamp`, `duration`
//! and `bytes`; everything else follows the JSON.

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Map};
use serde_json::Value as Json;

/// `v` as a CEL value, typed by `schema` (a structural schema node) when given.
pub fn to_cel(v: &Json, schema: Option<&Json>) -> cel::Value {
    let typ = schema.and_then(|s| s["type"].as_str()).unwrap_or("");
    let format = schema.and_then(|s| s["format"].as_str()).unwrap_or("");
    match v {
        Json::Null => cel::Value::Null,
        Json::Bool(b) => cel::Value::Bool(*b),
        Json::Number(n) => {
            if typ == "number" {
                cel::Value::Float(n.as_f64().unwrap_or(0.0))
            } else if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                cel::Value::Float(n.as_f64().unwrap_or(0.0))
            }
        }
        Json::String(s) => string(s, typ, format),
        Json::Array(items) => {
            let item_schema = schema
                .and_then(|s| s.get("items"))
                .filter(|i| i.is_object());
            cel::Value::List(Arc::new(
                items.iter().map(|i| to_cel(i, item_schema)).collect(),
            ))
        }
        Json::Object(m) => {
            let mut out: HashMap<Key, cel::Value> = HashMap::with_capacity(m.len());
            for (k, x) in m {
                let sub = schema.and_then(|s| field_schema(s, k));
                out.insert(Key::from(k.as_str()), to_cel(x, sub));
            }
            cel::Value::Map(Map { map: Arc::new(out) })
        }
    }
}

fn string(s: &str, typ: &str, format: &str) -> cel::Value {
    if typ == "string" {
        match format {
            "date-time" => {
                if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
                    return cel::Value::Timestamp(t);
                }
            }
            "date" => {
                if let Ok(t) = chrono::DateTime::parse_from_rfc3339(&format!("{s}T00:00:00Z")) {
                    return cel::Value::Timestamp(t);
                }
            }
            "duration" => {
                if let Some(d) = k3rs_apimachinery::duration::parse(s) {
                    if let Ok(d) = chrono::Duration::from_std(d) {
                        return cel::Value::Duration(d);
                    }
                }
            }
            "byte" => {
                use base64::Engine;
                if let Ok(b) = base64::engine::general_purpose::STANDARD.decode(s) {
                    return cel::Value::Bytes(Arc::new(b));
                }
            }
            _ => {}
        }
    }
    cel::Value::String(Arc::new(s.to_string()))
}

/// A CEL value as JSON (for printing results and `messageExpression`s); `None` for values
/// JSON cannot hold (functions, opaque values).
pub fn to_json(v: &cel::Value) -> Option<Json> {
    Some(match v {
        cel::Value::Null => Json::Null,
        cel::Value::Bool(b) => Json::Bool(*b),
        cel::Value::Int(i) => Json::from(*i),
        cel::Value::UInt(u) => Json::from(*u),
        cel::Value::Float(f) => Json::from(*f),
        cel::Value::String(s) => Json::String(s.to_string()),
        cel::Value::List(l) => Json::Array(l.iter().map(to_json).collect::<Option<_>>()?),
        cel::Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, x) in m.map.iter() {
                let key = match k {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                out.insert(key, to_json(x)?);
            }
            Json::Object(out)
        }
        cel::Value::Timestamp(t) => Json::String(t.to_rfc3339()),
        cel::Value::Duration(d) => Json::String(format!("{}s", d.num_seconds())),
        _ => return None,
    })
}

/// The schema of the value under `key` of an object: its property, else
/// `additionalProperties` when that is a schema.
pub fn field_schema<'a>(schema: &'a serde_json::Value, key: &str) -> Option<&'a serde_json::Value> {
    schema["properties"]
        .get(key)
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

//! JSON object → protobuf message, the reverse of [`super::decode`], for responses.
//!
//! A JSON key no field of the message knows fails the encoding (the caller answers in JSON
//! then), so nothing is ever dropped on the way out either.

use std::collections::HashSet;

use base64::Engine;
use serde_json::{Map, Value};

use super::schema::{Card, Field, Message, Scalar, Schema, Special, Type};
use super::special::{parse_duration, parse_time};
use super::wire::Writer;
use super::Error;

const MAX_DEPTH: usize = 100;

/// Encodes `value` as `msg`; keys in `skip` (e.g. `apiVersion`, `kind`) are left out.
pub fn message(
    schema: &Schema,
    msg: &Message,
    value: &Value,
    skip: &[&str],
) -> Result<Vec<u8>, Error> {
    let mut w = Writer::default();
    let obj = value
        .as_object()
        .ok_or_else(|| mismatch(&msg.name, "an object"))?;
    let mut used: HashSet<&str> = skip.iter().copied().collect();
    fields(schema, msg, obj, &mut w, &mut used, 0)?;
    if let Some(key) = obj.keys().find(|k| !used.contains(k.as_str())) {
        return Err(Error::UnknownJson {
            message: msg.name.clone(),
            key: key.clone(),
        });
    }
    Ok(w.buf)
}

fn mismatch(message: &str, expected: &str) -> Error {
    Error::Json(format!("{message}: expected {expected}"))
}

fn fields<'v>(
    schema: &Schema,
    msg: &Message,
    obj: &'v Map<String, Value>,
    w: &mut Writer,
    used: &mut HashSet<&'v str>,
    depth: usize,
) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::Json("nested too deeply".into()));
    }
    for field in &msg.fields {
        let Some(name) = &field.json else {
            // Inline: the embedded struct's fields live in this object.
            let Type::Message(inner) = &field.ty else {
                continue;
            };
            let mut nested = Writer::default();
            fields(
                schema,
                lookup(schema, inner)?,
                obj,
                &mut nested,
                used,
                depth + 1,
            )?;
            w.put_bytes(field.tag, &nested.buf);
            continue;
        };
        let Some((key, v)) = obj.get_key_value(name.as_str()) else {
            continue;
        };
        used.insert(key.as_str());
        match (field.card, v) {
            (_, Value::Null) => {}
            (Card::One, v) => single(schema, msg, field, v, w, depth)?,
            (Card::Repeated, Value::Array(items)) => {
                for item in items {
                    single(schema, msg, field, item, w, depth)?;
                }
            }
            (Card::Map, Value::Object(entries)) => {
                for (k, item) in entries {
                    let mut entry = Writer::default();
                    entry.put_bytes(1, k.as_bytes());
                    single(
                        schema,
                        msg,
                        &Field {
                            tag: 2,
                            ..field.clone()
                        },
                        item,
                        &mut entry,
                        depth,
                    )?;
                    w.put_bytes(field.tag, &entry.buf);
                }
            }
            _ => return Err(mismatch(&format!("{}.{name}", msg.name), "a list or map")),
        }
    }
    Ok(())
}

fn has_metadata(msg: &Message) -> bool {
    msg.fields
        .iter()
        .any(|f| f.json.as_deref() == Some("metadata"))
}

fn lookup<'s>(schema: &'s Schema, name: &str) -> Result<&'s Message, Error> {
    schema
        .message(name)
        .ok_or_else(|| Error::Json(format!("no message {name} in the schema")))
}

pub(super) fn single(
    schema: &Schema,
    msg: &Message,
    field: &Field,
    v: &Value,
    w: &mut Writer,
    depth: usize,
) -> Result<(), Error> {
    let bad = || mismatch(&format!("{}.{}", msg.name, field.tag), "another JSON type");
    match (&field.ty, v) {
        (Type::Scalar(Scalar::String), Value::String(s)) => w.put_bytes(field.tag, s.as_bytes()),
        (Type::Scalar(Scalar::Bytes), Value::String(s)) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(s)
                .map_err(|_| bad())?;
            w.put_bytes(field.tag, &bytes);
        }
        (Type::Scalar(Scalar::Bool), Value::Bool(b)) => w.put_varint(field.tag, u64::from(*b)),
        (Type::Scalar(Scalar::Int32 | Scalar::Int64), Value::Number(n)) => {
            let n = n.as_i64().ok_or_else(bad)?;
            w.put_varint(field.tag, n as u64);
        }
        (Type::Scalar(Scalar::Double), Value::Number(n)) => {
            w.put_fixed64(field.tag, n.as_f64().ok_or_else(bad)?.to_bits())
        }
        (Type::Message(name), v) => {
            let inner = lookup(schema, name)?;
            let mut nested = Writer::default();
            match inner.special {
                Some(special) => special_message(schema, inner, special, v, &mut nested, depth)?,
                None => {
                    let obj = v.as_object().ok_or_else(bad)?;
                    // List items may carry their own apiVersion and kind; protobuf has no
                    // place for them (the list's envelope says it).
                    let mut used: HashSet<&str> = if has_metadata(inner) {
                        HashSet::from(["apiVersion", "kind"])
                    } else {
                        HashSet::new()
                    };
                    fields(schema, inner, obj, &mut nested, &mut used, depth + 1)?;
                    if let Some(key) = obj.keys().find(|k| !used.contains(k.as_str())) {
                        return Err(Error::UnknownJson {
                            message: inner.name.clone(),
                            key: key.clone(),
                        });
                    }
                }
            }
            w.put_bytes(field.tag, &nested.buf);
        }
        _ => return Err(bad()),
    }
    Ok(())
}

fn special_message(
    schema: &Schema,
    msg: &Message,
    special: Special,
    v: &Value,
    w: &mut Writer,
    depth: usize,
) -> Result<(), Error> {
    let bad = || mismatch(&msg.name, "its JSON form");
    let sub = |tag: u32| msg.field(tag).ok_or_else(bad);
    match (special, v) {
        (_, Value::Null) => {}
        (Special::Time | Special::MicroTime, Value::String(s)) => {
            let (seconds, nanos) = parse_time(s).ok_or_else(bad)?;
            w.put_varint(1, seconds as u64);
            if special == Special::MicroTime && nanos != 0 {
                w.put_varint(2, i64::from(nanos / 1000 * 1000) as u64);
            }
        }
        (Special::Duration, Value::String(s)) => {
            w.put_varint(1, parse_duration(s).ok_or_else(bad)? as u64)
        }
        (Special::Quantity, Value::String(s)) => w.put_bytes(1, s.as_bytes()),
        (Special::Quantity, Value::Number(n)) => w.put_bytes(1, n.to_string().as_bytes()),
        (Special::IntOrString, Value::Number(n)) => {
            w.put_varint(1, 0);
            w.put_varint(2, n.as_i64().ok_or_else(bad)? as u64);
        }
        (Special::IntOrString, Value::String(s)) => {
            w.put_varint(1, 1);
            w.put_bytes(3, s.as_bytes());
        }
        (Special::RawJson, v) => {
            let raw = serde_json::to_vec(v).map_err(|e| Error::Json(e.to_string()))?;
            w.put_bytes(1, &raw);
        }
        (Special::StringList, Value::Array(items)) => {
            for item in items {
                w.put_bytes(1, item.as_str().ok_or_else(bad)?.as_bytes());
            }
        }
        (Special::OrArray, Value::Array(items)) => {
            for item in items {
                single(schema, msg, sub(2)?, item, w, depth + 1)?;
            }
        }
        (Special::OrArray | Special::OrStringArray, v @ Value::Object(_)) => {
            single(schema, msg, sub(1)?, v, w, depth + 1)?
        }
        (Special::OrStringArray, Value::Array(items)) => {
            for item in items {
                w.put_bytes(2, item.as_str().ok_or_else(bad)?.as_bytes());
            }
        }
        (Special::OrBool, Value::Bool(b)) => w.put_varint(1, u64::from(*b)),
        (Special::OrBool, v @ Value::Object(_)) => {
            w.put_varint(1, 1);
            single(schema, msg, sub(2)?, v, w, depth + 1)?;
        }
        _ => return Err(bad()),
    }
    Ok(())
}

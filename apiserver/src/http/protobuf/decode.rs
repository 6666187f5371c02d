//! Protobuf message → the JSON upstream's `json.Marshal` makes of the same Go object.
//!
//! Zero values follow the Go field: a pointer is in JSON whenever it was sent; a plain field
//! with `omitempty` is left out when zero (Go clients send every plain field, zero or not); a
//! plain field without it is always there; a struct is always there (`omitempty` does not
//! apply to structs); empty lists and maps are left out, or `null` without `omitempty`.

use base64::Engine;
use serde_json::{Map, Value};

use super::schema::{Card, Field, Message, Scalar, Schema, Special, Type};
use super::wire::{self, Reader};
use super::Error;

/// Nesting deeper than this is refused (JSONSchemaProps nest themselves).
const MAX_DEPTH: usize = 100;

/// What one field collected off the wire.
enum Slot {
    Absent,
    One(Value),
    Many(Vec<Value>),
    Map(Map<String, Value>),
}

/// Decodes `bytes` as `message` into its JSON form.
pub fn message(schema: &Schema, message: &Message, bytes: &[u8]) -> Result<Value, Error> {
    decode(schema, message, bytes, 0)
}

fn decode(schema: &Schema, msg: &Message, bytes: &[u8], depth: usize) -> Result<Value, Error> {
    if depth > MAX_DEPTH {
        return Err(Error::Malformed(format!(
            "objects nested deeper than {MAX_DEPTH} levels"
        )));
    }
    let slots = collect(schema, msg, bytes, depth)?;
    if let Some(special) = msg.special {
        return special_json(msg, special, bytes, slots);
    }
    let mut out = Map::new();
    for (field, slot) in msg.fields.iter().zip(slots) {
        let value = match (field.card, slot) {
            (_, Slot::One(v)) => Some(v),
            (_, Slot::Many(items)) => Some(Value::Array(items)),
            (_, Slot::Map(entries)) => Some(Value::Object(entries)),
            (Card::One, Slot::Absent) if !field.ptr => zero(schema, field, depth)?,
            (_, Slot::Absent) if !field.omit && !field.ptr => Some(Value::Null),
            (_, Slot::Absent) => None,
        };
        let Some(value) = value else { continue };
        match &field.json {
            None => {
                if let Value::Object(inner) = value {
                    out.extend(inner);
                }
            }
            Some(name) if !omitted(schema, field, &value) => {
                out.insert(name.clone(), value);
            }
            Some(_) => {}
        }
    }
    Ok(Value::Object(out))
}

/// The JSON of an absent plain (non-pointer) field: a struct's empty form, a scalar's zero
/// unless `omitempty` leaves it out anyway.
fn zero(schema: &Schema, field: &Field, depth: usize) -> Result<Option<Value>, Error> {
    Ok(match &field.ty {
        Type::Message(name) => {
            let msg = lookup(schema, name)?;
            Some(decode(schema, msg, &[], depth + 1)?)
        }
        Type::Scalar(_) if field.omit => None,
        Type::Scalar(Scalar::String) => Some(Value::from("")),
        Type::Scalar(Scalar::Bool) => Some(Value::from(false)),
        Type::Scalar(Scalar::Int32 | Scalar::Int64) => Some(Value::from(0)),
        Type::Scalar(Scalar::Double) => Some(Value::from(0.0)),
        Type::Scalar(Scalar::Bytes) => Some(Value::Null),
    })
}

/// Go's `omitempty`: false, 0, "", empty lists and maps; never a pointer or a struct.
fn omitted(schema: &Schema, field: &Field, value: &Value) -> bool {
    if field.ptr || !field.omit {
        return false;
    }
    let slice_like = match &field.ty {
        Type::Scalar(_) => true,
        Type::Message(name) => {
            field.card != Card::One
                || schema.message(name).and_then(|m| m.special) == Some(Special::StringList)
        }
    };
    slice_like
        && match value {
            Value::Null => true,
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::String(s) => s.is_empty(),
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
        }
}

fn lookup<'s>(schema: &'s Schema, name: &str) -> Result<&'s Message, Error> {
    schema
        .message(name)
        .ok_or_else(|| Error::Malformed(format!("no message {name} in the schema")))
}

/// Reads every field of `msg` into its slot (same order as `msg.fields`).
fn collect(schema: &Schema, msg: &Message, bytes: &[u8], depth: usize) -> Result<Vec<Slot>, Error> {
    let mut slots: Vec<Slot> = msg.fields.iter().map(|_| Slot::Absent).collect();
    let mut reader = Reader::new(bytes);
    while let Some((tag, raw)) = reader.next_field()? {
        let index = msg
            .fields
            .binary_search_by_key(&tag, |f| f.tag)
            .map_err(|_| Error::UnknownField {
                message: msg.name.clone(),
                tag,
            })?;
        let field = &msg.fields[index];
        let slot = &mut slots[index];
        match field.card {
            Card::One => *slot = Slot::One(value(schema, msg, field, raw, depth)?),
            Card::Repeated => {
                if !matches!(slot, Slot::Many(_)) {
                    *slot = Slot::Many(Vec::new());
                }
                let Slot::Many(items) = slot else {
                    unreachable!("just made a list")
                };
                match (raw, &field.ty) {
                    (
                        wire::Value::Bytes(packed),
                        Type::Scalar(Scalar::Int32 | Scalar::Int64 | Scalar::Bool),
                    ) => {
                        let mut r = Reader::new(packed);
                        while let Some(v) = r.next_packed_varint()? {
                            items.push(value(schema, msg, field, wire::Value::Varint(v), depth)?);
                        }
                    }
                    _ => items.push(value(schema, msg, field, raw, depth)?),
                }
            }
            Card::Map => {
                let wire::Value::Bytes(entry) = raw else {
                    return Err(wire_type(msg, field, raw));
                };
                let (key, v) = map_entry(schema, msg, field, entry, depth)?;
                match slot {
                    Slot::Map(entries) => {
                        entries.insert(key, v);
                    }
                    _ => *slot = Slot::Map(Map::from_iter([(key, v)])),
                }
            }
        }
    }
    Ok(slots)
}

fn map_entry(
    schema: &Schema,
    msg: &Message,
    field: &Field,
    entry: &[u8],
    depth: usize,
) -> Result<(String, Value), Error> {
    let (mut key, mut v) = (String::new(), None);
    let mut reader = Reader::new(entry);
    while let Some((tag, raw)) = reader.next_field()? {
        match (tag, raw) {
            (1, wire::Value::Bytes(k)) => key = utf8(k)?,
            (2, raw) => v = Some(value(schema, msg, field, raw, depth)?),
            (tag, _) => {
                return Err(Error::UnknownField {
                    message: format!("{}.{} map entry", msg.name, field.tag),
                    tag,
                })
            }
        }
    }
    let v = match v {
        Some(v) => v,
        None => zero(
            schema,
            &Field {
                omit: false,
                ..field.clone()
            },
            depth,
        )?
        .unwrap_or(Value::Null),
    };
    Ok((key, v))
}

/// One value of `field` (an element, for repeated fields and maps).
fn value(
    schema: &Schema,
    msg: &Message,
    field: &Field,
    raw: wire::Value<'_>,
    depth: usize,
) -> Result<Value, Error> {
    Ok(match (&field.ty, raw) {
        (Type::Scalar(Scalar::String), wire::Value::Bytes(b)) => Value::from(utf8(b)?),
        (Type::Scalar(Scalar::Bytes), wire::Value::Bytes(b)) => {
            Value::from(base64::engine::general_purpose::STANDARD.encode(b))
        }
        (Type::Scalar(Scalar::Bool), wire::Value::Varint(v)) => Value::from(v != 0),
        (Type::Scalar(Scalar::Int32), wire::Value::Varint(v)) => Value::from(v as i32),
        (Type::Scalar(Scalar::Int64), wire::Value::Varint(v)) => Value::from(v as i64),
        (Type::Scalar(Scalar::Double), wire::Value::Fixed64(v)) => {
            serde_json::Number::from_f64(f64::from_bits(v))
                .map(Value::Number)
                .ok_or_else(|| {
                    Error::Malformed(format!("{}.{}: not a finite number", msg.name, field.tag))
                })?
        }
        (Type::Message(name), wire::Value::Bytes(b)) => {
            decode(schema, lookup(schema, name)?, b, depth + 1)?
        }
        _ => return Err(wire_type(msg, field, raw)),
    })
}

fn wire_type(msg: &Message, field: &Field, raw: wire::Value<'_>) -> Error {
    Error::WireType {
        message: msg.name.clone(),
        tag: field.tag,
        wire_type: raw.wire_type(),
    }
}

fn utf8(bytes: &[u8]) -> Result<String, Error> {
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::Malformed("a string is not UTF-8".into()))
}

/// The slot of field `tag`, taken out.
fn take(msg: &Message, slots: &mut [Slot], tag: u32) -> Slot {
    msg.fields
        .iter()
        .position(|f| f.tag == tag)
        .map_or(Slot::Absent, |i| {
            std::mem::replace(&mut slots[i], Slot::Absent)
        })
}

fn special_json(
    msg: &Message,
    special: Special,
    bytes: &[u8],
    mut slots: Vec<Slot>,
) -> Result<Value, Error> {
    let mut field = |tag| take(msg, &mut slots, tag);
    let int = |slot: Slot| match slot {
        Slot::One(v) => v.as_i64().unwrap_or(0),
        _ => 0,
    };
    Ok(match special {
        Special::Time | Special::MicroTime if bytes.is_empty() => Value::Null,
        Special::Time => Value::from(super::special::format_time(int(field(1)))?),
        Special::MicroTime => {
            let seconds = int(field(1));
            let nanos = i32::try_from(int(field(2))).unwrap_or(0);
            Value::from(super::special::format_micro_time(seconds, nanos)?)
        }
        Special::Duration => Value::from(super::special::format_duration(int(field(1)))),
        Special::Quantity => match field(1) {
            Slot::One(s) => s,
            _ => Value::from("0"),
        },
        Special::IntOrString => {
            if int(field(1)) == 1 {
                match field(3) {
                    Slot::One(s) => s,
                    _ => Value::from(""),
                }
            } else {
                Value::from(int(field(2)))
            }
        }
        Special::RawJson => match field(1) {
            Slot::One(Value::String(b64)) if !b64.is_empty() => {
                let raw = base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| Error::Malformed(e.to_string()))?;
                serde_json::from_slice(&raw).map_err(|e| {
                    Error::Malformed(format!("{}: embedded object is not JSON: {e}", msg.name))
                })?
            }
            _ => Value::Null,
        },
        Special::StringList => match field(1) {
            Slot::Many(items) => Value::Array(items),
            _ => Value::Array(Vec::new()),
        },
        // OrArray {schema = 1, jSONSchemas = 2}
        Special::OrArray => match (field(2), field(1)) {
            (Slot::Many(items), _) => Value::Array(items),
            (_, Slot::One(schema)) => schema,
            _ => Value::Null,
        },
        // OrBool {allows = 1, schema = 2}
        Special::OrBool => match (field(2), field(1)) {
            (Slot::One(schema), _) => schema,
            (_, Slot::One(allows)) => allows,
            _ => Value::from(false),
        },
        // OrStringArray {schema = 1, property = 2}
        Special::OrStringArray => match (field(2), field(1)) {
            (Slot::Many(items), _) => Value::Array(items),
            (_, Slot::One(schema)) => schema,
            _ => Value::Null,
        },
    })
}

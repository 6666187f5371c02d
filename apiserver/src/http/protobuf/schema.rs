//! The message table the protobuf codec runs on: every Kubernetes 1.35 message with its fields'
//! numbers, wire kinds and JSON names, generated into `schema.txt` by
//! `scripts/gen-protobuf-schema.py` from the k8s-pb crate (upstream's `generated.proto`) and
//! the Go types' struct tags (JSON names, `omitempty`, pointers, inline structs).

use std::collections::HashMap;
use std::sync::LazyLock;

/// A scalar field's kind, as in `generated.proto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    String,
    Bool,
    Int32,
    Int64,
    Double,
    Bytes,
}

/// What a field holds: a scalar or another message (by its table name).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    Scalar(Scalar),
    Message(String),
}

/// Repeated fields are JSON arrays, maps JSON objects (string keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Card {
    One,
    Repeated,
    Map,
}

/// One field of a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    pub tag: u32,
    /// The JSON name; `None` for an inline (embedded) struct whose fields are the parent's.
    pub json: Option<String>,
    pub card: Card,
    pub ty: Type,
    /// A Go pointer: present in JSON whenever it was set, zero or not.
    pub ptr: bool,
    /// Go's `omitempty`: zero values (and empty lists and maps) are left out of JSON.
    pub omit: bool,
}

/// Messages whose JSON form is not an object of their fields (their own `MarshalJSON`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Special {
    /// meta/v1 Time: RFC 3339 seconds, `null` when zero.
    Time,
    /// meta/v1 MicroTime: RFC 3339 with microseconds, `null` when zero.
    MicroTime,
    /// meta/v1 Duration: Go's duration string (`1h2m3s`).
    Duration,
    /// resource.Quantity: its string.
    Quantity,
    /// intstr.IntOrString: an int or a string.
    IntOrString,
    /// RawExtension, FieldsV1, apiextensions JSON: embedded JSON bytes.
    RawJson,
    /// A named `[]string` (ExtraValue, Verbs): `{items}` is the array.
    StringList,
    /// JSONSchemaPropsOrArray: the schema, or the array of schemas.
    OrArray,
    /// JSONSchemaPropsOrBool: the schema, or the bool.
    OrBool,
    /// JSONSchemaPropsOrStringArray: the schema, or the array of strings.
    OrStringArray,
}

/// A message: its fields by ascending tag, and its JSON form when special.
#[derive(Clone, Debug, Default)]
pub struct Message {
    pub name: String,
    pub fields: Vec<Field>,
    pub special: Option<Special>,
}

impl Message {
    pub fn field(&self, tag: u32) -> Option<&Field> {
        self.fields
            .binary_search_by_key(&tag, |f| f.tag)
            .ok()
            .map(|i| &self.fields[i])
    }
}

/// The whole table.
#[derive(Debug, Default)]
pub struct Schema {
    /// apiVersion → the module of its kinds (`apps/v1` → `api.apps.v1`).
    groups: HashMap<String, String>,
    messages: HashMap<String, Message>,
}

/// A line of `schema.txt` that does not parse (a generator bug, caught by the unit tests).
#[derive(Debug, thiserror::Error)]
#[error("schema.txt line {line}: {text}")]
pub struct SchemaError {
    line: usize,
    text: String,
}

impl Schema {
    /// The checked-in table.
    pub fn get() -> &'static Schema {
        static SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
            Schema::parse(include_str!("schema.txt")).expect("the generated schema.txt parses")
        });
        &SCHEMA
    }

    pub fn message(&self, name: &str) -> Option<&Message> {
        self.messages.get(name)
    }

    /// The message of a top-level object, e.g. `apps/v1` `Deployment`.
    pub fn kind(&self, api_version: &str, kind: &str) -> Option<&Message> {
        let module = self.groups.get(api_version)?;
        self.messages.get(&format!("{module}.{kind}"))
    }

    pub fn parse(text: &str) -> Result<Schema, SchemaError> {
        let mut schema = Schema::default();
        let mut specials = HashMap::new();
        let mut current: Option<Message> = None;
        for (i, line) in text.lines().enumerate() {
            let error = || SchemaError {
                line: i + 1,
                text: line.to_string(),
            };
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                [] => {}
                [first, ..] if first.starts_with('#') => {}
                ["group", api_version, module] => {
                    schema
                        .groups
                        .insert(api_version.to_string(), module.to_string());
                }
                ["special", name, how] => {
                    specials.insert(name.to_string(), special(how).ok_or_else(error)?);
                }
                ["message", name] => {
                    if let Some(m) = current.take() {
                        schema.messages.insert(m.name.clone(), m);
                    }
                    current = Some(Message {
                        name: name.to_string(),
                        ..Message::default()
                    });
                }
                ["field", tag, json, card, ty, flags] => {
                    let message = current.as_mut().ok_or_else(error)?;
                    let flags: Vec<&str> = flags.split(',').collect();
                    message.fields.push(Field {
                        tag: tag.parse().map_err(|_| error())?,
                        json: (*json != "-").then(|| json.to_string()),
                        card: match *card {
                            "one" => Card::One,
                            "rep" => Card::Repeated,
                            "map" => Card::Map,
                            _ => return Err(error()),
                        },
                        ty: scalar(ty).map_or_else(|| Type::Message(ty.to_string()), Type::Scalar),
                        ptr: flags.contains(&"ptr"),
                        omit: flags.contains(&"omit"),
                    });
                }
                _ => return Err(error()),
            }
        }
        if let Some(m) = current.take() {
            schema.messages.insert(m.name.clone(), m);
        }
        for (name, how) in specials {
            if let Some(m) = schema.messages.get_mut(&name) {
                m.special = Some(how);
            }
        }
        for m in schema.messages.values_mut() {
            m.fields.sort_by_key(|f| f.tag);
        }
        Ok(schema)
    }
}

fn scalar(word: &str) -> Option<Scalar> {
    Some(match word {
        "string" => Scalar::String,
        "bool" => Scalar::Bool,
        "int32" => Scalar::Int32,
        "int64" => Scalar::Int64,
        "double" => Scalar::Double,
        "bytes" => Scalar::Bytes,
        _ => return None,
    })
}

fn special(word: &str) -> Option<Special> {
    Some(match word {
        "time" => Special::Time,
        "microtime" => Special::MicroTime,
        "duration" => Special::Duration,
        "quantity" => Special::Quantity,
        "intorstring" => Special::IntOrString,
        "rawjson" => Special::RawJson,
        "stringlist" => Special::StringList,
        "orarray" => Special::OrArray,
        "orbool" => Special::OrBool,
        "orstringarray" => Special::OrStringArray,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reference_resolves_and_kinds_are_found() {
        let schema = Schema::get();
        for m in schema.messages.values() {
            for f in &m.fields {
                if let Type::Message(name) = &f.ty {
                    assert!(
                        schema.message(name).is_some(),
                        "{}.{}: {name}",
                        m.name,
                        f.tag
                    );
                }
            }
        }
        let deployment = schema.kind("apps/v1", "Deployment").unwrap();
        assert_eq!(
            deployment.field(1).unwrap().json.as_deref(),
            Some("metadata")
        );
        let service = schema.kind("v1", "ServiceSpec").unwrap();
        let cluster_ip = service.field(3).unwrap();
        assert_eq!(cluster_ip.json.as_deref(), Some("clusterIP"));
        assert!(cluster_ip.omit && !cluster_ip.ptr);
        let volume = schema.kind("v1", "Volume").unwrap();
        assert_eq!(
            volume.field(2).unwrap().json,
            None,
            "VolumeSource is inline"
        );
        assert!(schema
            .kind("apiregistration.k8s.io/v1", "APIService")
            .is_some());
        assert!(schema
            .kind("apiextensions.k8s.io/v1", "CustomResourceDefinition")
            .is_some());
        assert_eq!(
            schema
                .message("apimachinery.pkg.apis.meta.v1.Time")
                .unwrap()
                .special,
            Some(Special::Time)
        );
    }
}

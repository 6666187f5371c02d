//! JSON → gnostic's messages.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{Error, Result};
use crate::openapi::v2::gnostic::*;

/// The keys of one JSON object, read once each; [`Fields::finish`] refuses the unread ones.
struct Fields<'a> {
    at: String,
    map: &'a Map<String, Value>,
    seen: HashSet<&'a str>,
}

impl<'a> Fields<'a> {
    fn new(at: String, v: &'a Value) -> Result<Fields<'a>> {
        let Some(map) = v.as_object() else {
            return Err(Error::Shape {
                at,
                expected: "an object",
            });
        };
        Ok(Fields {
            at,
            map,
            seen: HashSet::new(),
        })
    }

    fn at(&self, key: &str) -> String {
        format!("{}/{}", self.at, key.replace('~', "~0").replace('/', "~1"))
    }

    fn shape(&self, key: &str, expected: &'static str) -> Error {
        Error::Shape {
            at: self.at(key),
            expected,
        }
    }

    fn get(&mut self, key: &'a str) -> Option<&'a Value> {
        self.seen.insert(key);
        self.map.get(key)
    }

    fn string(&mut self, key: &'a str) -> Result<String> {
        match self.get(key) {
            None => Ok(String::new()),
            Some(Value::String(s)) => Ok(s.clone()),
            Some(_) => Err(self.shape(key, "a string")),
        }
    }

    fn strings(&mut self, key: &'a str) -> Result<Vec<String>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<_>>()
                .ok_or_else(|| self.shape(key, "strings")),
            Some(_) => Err(self.shape(key, "an array")),
        }
    }

    fn bool(&mut self, key: &'a str) -> Result<bool> {
        match self.get(key) {
            None => Ok(false),
            Some(v) => v.as_bool().ok_or_else(|| self.shape(key, "a boolean")),
        }
    }

    fn f64(&mut self, key: &'a str) -> Result<f64> {
        match self.get(key) {
            None => Ok(0.0),
            Some(v) => v.as_f64().ok_or_else(|| self.shape(key, "a number")),
        }
    }

    fn i64(&mut self, key: &'a str) -> Result<i64> {
        match self.get(key) {
            None => Ok(0),
            Some(v) => v.as_i64().ok_or_else(|| self.shape(key, "an integer")),
        }
    }

    fn any(&mut self, key: &'a str) -> Result<Option<Any>> {
        let at = self.at(key);
        self.get(key).map(|v| any(at, v)).transpose()
    }

    fn anys(&mut self, key: &'a str) -> Result<Vec<Any>> {
        match self.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| any(format!("{}/{i}", self.at(key)), v))
                .collect(),
            Some(_) => Err(self.shape(key, "an array")),
        }
    }

    /// A nested object, read by `f` (which receives the object's own path).
    fn message<T>(
        &mut self,
        key: &'a str,
        f: impl FnOnce(String, &'a Value) -> Result<T>,
    ) -> Result<Option<T>> {
        let at = self.at(key);
        self.get(key).map(|v| f(at, v)).transpose()
    }

    /// Every entry of a nested object, in order, each read by `f`.
    fn named<T>(
        &mut self,
        key: &'a str,
        f: impl Fn(String, &'a Value) -> Result<T>,
    ) -> Result<Option<Vec<(String, T)>>> {
        let at = self.at(key);
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        let m = v.as_object().ok_or_else(|| self.shape(key, "an object"))?;
        m.iter()
            .map(|(k, v)| Ok((k.clone(), f(format!("{at}/{k}"), v)?)))
            .collect::<Result<_>>()
            .map(Some)
    }

    /// The `x-…` keys, as vendor extensions.
    fn extensions(&mut self) -> Result<Vec<NamedAny>> {
        let mut out = Vec::new();
        let map = self.map;
        for (k, v) in map.iter().filter(|(k, _)| k.starts_with("x-")) {
            self.seen.insert(k);
            out.push(NamedAny {
                name: k.clone(),
                value: Some(any(self.at(k), v)?),
            });
        }
        Ok(out)
    }

    fn finish(self) -> Result<()> {
        match self.map.keys().find(|k| !self.seen.contains(k.as_str())) {
            Some(key) => Err(Error::UnknownKey {
                at: self.at,
                key: key.clone(),
            }),
            None => Ok(()),
        }
    }
}

fn any(at: String, v: &Value) -> Result<Any> {
    serde_norway::to_string(v)
        .map(|yaml| Any { yaml })
        .map_err(|source| Error::Yaml { at, source })
}

/// The protobuf form of a served Swagger 2.0 document.
pub fn from_json(doc: &Value) -> Result<Document> {
    let mut f = Fields::new(String::new(), doc)?;
    let out = Document {
        swagger: f.string("swagger")?,
        info: f.message("info", info)?,
        schemes: f.strings("schemes")?,
        consumes: f.strings("consumes")?,
        produces: f.strings("produces")?,
        paths: f.message("paths", paths)?,
        definitions: f.named("definitions", schema)?.map(|v| Definitions {
            additional_properties: named_schemas(v),
        }),
        security: match f.get("security") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, r)| security_requirement(format!("/security/{i}"), r))
                .collect::<Result<_>>()?,
            Some(_) => return Err(f.shape("security", "an array")),
        },
        security_definitions: f
            .named("securityDefinitions", security_definition)?
            .map(|v| SecurityDefinitions {
                additional_properties: v
                    .into_iter()
                    .map(|(name, v)| NamedSecurityDefinitionsItem {
                        name,
                        value: Some(v),
                    })
                    .collect(),
            }),
        vendor_extension: f.extensions()?,
    };
    f.finish()?;
    Ok(out)
}

fn info(at: String, v: &Value) -> Result<Info> {
    let mut f = Fields::new(at, v)?;
    let out = Info {
        title: f.string("title")?,
        version: f.string("version")?,
        description: f.string("description")?,
        vendor_extension: f.extensions()?,
    };
    f.finish()?;
    Ok(out)
}

fn paths(at: String, v: &Value) -> Result<Paths> {
    let mut f = Fields::new(at, v)?;
    let vendor_extension = f.extensions()?;
    let mut path = Vec::new();
    let map = f.map;
    for (k, v) in map.iter().filter(|(k, _)| k.starts_with('/')) {
        f.seen.insert(k);
        path.push(NamedPathItem {
            name: k.clone(),
            value: Some(path_item(f.at(k), v)?),
        });
    }
    f.finish()?;
    Ok(Paths {
        vendor_extension,
        path,
    })
}

fn path_item(at: String, v: &Value) -> Result<PathItem> {
    let mut f = Fields::new(at, v)?;
    let out = PathItem {
        get: f.message("get", operation)?,
        put: f.message("put", operation)?,
        post: f.message("post", operation)?,
        delete: f.message("delete", operation)?,
        options: f.message("options", operation)?,
        head: f.message("head", operation)?,
        patch: f.message("patch", operation)?,
        parameters: parameters(&mut f)?,
        vendor_extension: f.extensions()?,
    };
    f.finish()?;
    Ok(out)
}

fn parameters<'a>(f: &mut Fields<'a>) -> Result<Vec<ParametersItem>> {
    let at = f.at("parameters");
    match f.get("parameters") {
        None => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .enumerate()
            .map(|(i, p)| {
                parameter(format!("{at}/{i}"), p).map(|p| ParametersItem {
                    oneof: Some(ParametersItemOneof::Parameter(p)),
                })
            })
            .collect(),
        Some(_) => Err(f.shape("parameters", "an array")),
    }
}

fn operation(at: String, v: &Value) -> Result<Operation> {
    let mut f = Fields::new(at, v)?;
    let out = Operation {
        tags: f.strings("tags")?,
        summary: f.string("summary")?,
        description: f.string("description")?,
        operation_id: f.string("operationId")?,
        produces: f.strings("produces")?,
        consumes: f.strings("consumes")?,
        parameters: parameters(&mut f)?,
        responses: f.message("responses", responses)?,
        schemes: f.strings("schemes")?,
        deprecated: f.bool("deprecated")?,
        vendor_extension: f.extensions()?,
    };
    f.finish()?;
    Ok(out)
}

fn parameter(at: String, v: &Value) -> Result<Parameter> {
    let mut f = Fields::new(at, v)?;
    let place = f.string("in")?;
    let oneof = match place.as_str() {
        "body" => ParameterOneof::BodyParameter(Box::new(BodyParameter {
            description: f.string("description")?,
            name: f.string("name")?,
            r#in: place,
            required: f.bool("required")?,
            schema: f.message("schema", schema)?,
            vendor_extension: f.extensions()?,
        })),
        "query" => ParameterOneof::NonBodyParameter(NonBodyParameter {
            oneof: Some(NonBodyParameterOneof::QueryParameterSubSchema(
                QueryParameter {
                    required: f.bool("required")?,
                    r#in: place,
                    description: f.string("description")?,
                    name: f.string("name")?,
                    allow_empty_value: f.bool("allowEmptyValue")?,
                    r#type: f.string("type")?,
                    format: f.string("format")?,
                    default: f.any("default")?,
                    unique_items: f.bool("uniqueItems")?,
                    r#enum: f.anys("enum")?,
                    vendor_extension: f.extensions()?,
                },
            )),
        }),
        "path" | "header" => {
            let p = SimpleParameter {
                required: f.bool("required")?,
                r#in: place.clone(),
                description: f.string("description")?,
                name: f.string("name")?,
                r#type: f.string("type")?,
                format: f.string("format")?,
                default: f.any("default")?,
                unique_items: f.bool("uniqueItems")?,
                r#enum: f.anys("enum")?,
                vendor_extension: f.extensions()?,
            };
            ParameterOneof::NonBodyParameter(NonBodyParameter {
                oneof: Some(if place == "path" {
                    NonBodyParameterOneof::PathParameterSubSchema(p)
                } else {
                    NonBodyParameterOneof::HeaderParameterSubSchema(p)
                }),
            })
        }
        _ => return Err(f.shape("in", "body, query, path or header")),
    };
    f.finish()?;
    Ok(Parameter { oneof: Some(oneof) })
}

fn responses(at: String, v: &Value) -> Result<Responses> {
    let mut f = Fields::new(at, v)?;
    let vendor_extension = f.extensions()?;
    let mut response_code = Vec::new();
    let map = f.map;
    for (k, v) in map.iter().filter(|(k, _)| !k.starts_with("x-")) {
        f.seen.insert(k);
        let mut r = Fields::new(f.at(k), v)?;
        let response = Response {
            description: r.string("description")?,
            schema: r.message("schema", schema)?.map(|s| SchemaItem {
                oneof: Some(SchemaItemOneof::Schema(s)),
            }),
            vendor_extension: r.extensions()?,
        };
        r.finish()?;
        response_code.push(NamedResponseValue {
            name: k.clone(),
            value: Some(ResponseValue {
                oneof: Some(ResponseValueOneof::Response(response)),
            }),
        });
    }
    f.finish()?;
    Ok(Responses {
        response_code,
        vendor_extension,
    })
}

fn named_schemas(v: Vec<(String, Schema)>) -> Vec<NamedSchema> {
    v.into_iter()
        .map(|(name, s)| NamedSchema {
            name,
            value: Some(s),
        })
        .collect()
}

fn schema(at: String, v: &Value) -> Result<Schema> {
    let mut f = Fields::new(at, v)?;
    let out = Schema {
        r#ref: f.string("$ref")?,
        format: f.string("format")?,
        title: f.string("title")?,
        description: f.string("description")?,
        default: f.any("default")?,
        multiple_of: f.f64("multipleOf")?,
        maximum: f.f64("maximum")?,
        exclusive_maximum: f.bool("exclusiveMaximum")?,
        minimum: f.f64("minimum")?,
        exclusive_minimum: f.bool("exclusiveMinimum")?,
        max_length: f.i64("maxLength")?,
        min_length: f.i64("minLength")?,
        pattern: f.string("pattern")?,
        max_items: f.i64("maxItems")?,
        min_items: f.i64("minItems")?,
        unique_items: f.bool("uniqueItems")?,
        max_properties: f.i64("maxProperties")?,
        min_properties: f.i64("minProperties")?,
        required: f.strings("required")?,
        r#enum: f.anys("enum")?,
        additional_properties: match f.get("additionalProperties") {
            None => None,
            Some(Value::Bool(b)) => Some(AdditionalPropertiesOneof::Boolean(*b)),
            Some(v) => Some(AdditionalPropertiesOneof::Schema(Box::new(schema(
                f.at("additionalProperties"),
                v,
            )?))),
        }
        .map(|o| Box::new(AdditionalPropertiesItem { oneof: Some(o) })),
        r#type: match f.get("type") {
            None => None,
            Some(Value::String(s)) => Some(vec![s.clone()]),
            Some(_) => Some(f.strings("type")?),
        }
        .map(|value| TypeItem { value }),
        items: match f.get("items") {
            None => None,
            Some(Value::Array(a)) => Some(
                a.iter()
                    .enumerate()
                    .map(|(i, s)| schema(format!("{}/{i}", f.at("items")), s))
                    .collect::<Result<_>>()?,
            ),
            Some(s) => Some(vec![schema(f.at("items"), s)?]),
        }
        .map(|schema| ItemsItem { schema }),
        all_of: match f.get("allOf") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, s)| schema(format!("{}/{i}", f.at("allOf")), s))
                .collect::<Result<_>>()?,
            Some(_) => return Err(f.shape("allOf", "an array")),
        },
        properties: f.named("properties", schema)?.map(|v| Properties {
            additional_properties: named_schemas(v),
        }),
        read_only: f.bool("readOnly")?,
        example: f.any("example")?,
        vendor_extension: f.extensions()?,
    };
    f.finish()?;
    Ok(out)
}

fn security_definition(at: String, v: &Value) -> Result<SecurityDefinitionsItem> {
    let mut f = Fields::new(at, v)?;
    if f.string("type")? != "apiKey" {
        return Err(f.shape("type", "apiKey"));
    }
    let out = ApiKeySecurity {
        r#type: "apiKey".into(),
        name: f.string("name")?,
        r#in: f.string("in")?,
        description: f.string("description")?,
        vendor_extension: f.extensions()?,
    };
    f.finish()?;
    Ok(SecurityDefinitionsItem {
        oneof: Some(SecurityDefinitionsOneof::ApiKeySecurity(out)),
    })
}

fn security_requirement(at: String, v: &Value) -> Result<SecurityRequirement> {
    let m = v.as_object().ok_or(Error::Shape {
        at: at.clone(),
        expected: "an object",
    })?;
    let additional_properties = m
        .iter()
        .map(|(name, scopes)| {
            let value = scopes
                .as_array()
                .and_then(|a| {
                    a.iter()
                        .map(|s| s.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                })
                .ok_or_else(|| Error::Shape {
                    at: format!("{at}/{name}"),
                    expected: "strings",
                })?;
            Ok(NamedStringArray {
                name: name.clone(),
                value: Some(StringArray { value }),
            })
        })
        .collect::<Result<_>>()?;
    Ok(SecurityRequirement {
        additional_properties,
    })
}

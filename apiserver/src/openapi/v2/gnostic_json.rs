//! The Swagger 2.0 JSON document ↔ gnostic's messages, as gnostic's compiler maps them
//! (`openapi_v2.ParseDocument`, which kube-openapi uses to write the protobuf form): maps
//! become ordered `Named…` pairs, `x-…` keys vendor extensions, and free values (`default`,
//! `example`, `enum` entries, extensions) `Any`s holding YAML text.
//!
//! # Guarantees
//! - [`from_json`] refuses a key it does not model ([`Error::UnknownKey`]) instead of dropping
//!   it, so what is served as JSON is all in the protobuf form.
//! - [`to_json`] ∘ [`from_json`] is the identity on served documents, except for the values
//!   proto3 cannot tell from absent (`false`, `0`, `""`), which no served document carries.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::gnostic::*;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{at}: {key:?} is not part of the served Swagger 2.0 subset")]
    UnknownKey { at: String, key: String },
    #[error("{at}: expected {expected}")]
    Shape { at: String, expected: &'static str },
    #[error("{at}: a value as YAML")]
    Yaml {
        at: String,
        #[source]
        source: serde_norway::Error,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

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
        "body" => ParameterOneof::BodyParameter(BodyParameter {
            description: f.string("description")?,
            name: f.string("name")?,
            r#in: place,
            required: f.bool("required")?,
            schema: f.message("schema", schema)?,
            vendor_extension: f.extensions()?,
        }),
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
            Some(v) => Some(AdditionalPropertiesOneof::Schema(schema(
                f.at("additionalProperties"),
                v,
            )?)),
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

// ---- back to JSON ----

/// Builds a JSON object from optional entries (absent and proto3-default values left out).
#[derive(Default)]
struct Out(Map<String, Value>);

impl Out {
    fn str(mut self, k: &str, v: &str) -> Out {
        if !v.is_empty() {
            self.0.insert(k.into(), v.into());
        }
        self
    }
    fn strs(mut self, k: &str, v: &[String]) -> Out {
        if !v.is_empty() {
            self.0.insert(k.into(), v.into());
        }
        self
    }
    fn bool(mut self, k: &str, v: bool) -> Out {
        if v {
            self.0.insert(k.into(), v.into());
        }
        self
    }
    fn f64(mut self, k: &str, v: f64) -> Out {
        if v != 0.0 {
            self.0.insert(k.into(), number(v));
        }
        self
    }
    fn i64(mut self, k: &str, v: i64) -> Out {
        if v != 0 {
            self.0.insert(k.into(), v.into());
        }
        self
    }
    fn value(mut self, k: &str, v: Option<Value>) -> Out {
        if let Some(v) = v {
            self.0.insert(k.into(), v);
        }
        self
    }
    fn extensions(mut self, v: &[NamedAny]) -> Result<Out> {
        for e in v {
            self.0.insert(e.name.clone(), any_json(e.value.as_ref())?);
        }
        Ok(self)
    }
    fn done(self) -> Value {
        Value::Object(self.0)
    }
}

/// A whole number as an integer (as JSON wrote it), others as floats.
fn number(v: f64) -> Value {
    if v.fract() == 0.0 && v.abs() < 9.0e15 {
        Value::from(v as i64)
    } else {
        Value::from(v)
    }
}

fn any_json(a: Option<&Any>) -> Result<Value> {
    let yaml = a.map(|a| a.yaml.as_str()).unwrap_or("null");
    serde_norway::from_str(yaml).map_err(|source| Error::Yaml {
        at: String::new(),
        source,
    })
}

fn anys_json(v: &[Any]) -> Result<Option<Value>> {
    if v.is_empty() {
        return Ok(None);
    }
    v.iter()
        .map(|a| any_json(Some(a)))
        .collect::<Result<Vec<_>>>()
        .map(|v| Some(Value::Array(v)))
}

/// The JSON document a protobuf form stands for.
pub fn to_json(d: &Document) -> Result<Value> {
    let definitions = d
        .definitions
        .as_ref()
        .map(|defs| named_schemas_json(&defs.additional_properties))
        .transpose()?;
    let security = (!d.security.is_empty()).then(|| {
        d.security
            .iter()
            .map(|r| {
                r.additional_properties
                    .iter()
                    .map(|n| {
                        let scopes = n.value.as_ref().map(|s| s.value.clone());
                        (n.name.clone(), Value::from(scopes.unwrap_or_default()))
                    })
                    .collect::<Map<_, _>>()
                    .into()
            })
            .collect::<Vec<Value>>()
            .into()
    });
    let security_definitions = d.security_definitions.as_ref().map(|s| {
        s.additional_properties
            .iter()
            .filter_map(|n| {
                let Some(SecurityDefinitionsOneof::ApiKeySecurity(k)) =
                    n.value.as_ref().and_then(|v| v.oneof.as_ref())
                else {
                    return None;
                };
                let v = Out::default()
                    .str("type", &k.r#type)
                    .str("name", &k.name)
                    .str("in", &k.r#in)
                    .str("description", &k.description)
                    .done();
                Some((n.name.clone(), v))
            })
            .collect::<Map<_, _>>()
            .into()
    });
    let info = d
        .info
        .as_ref()
        .map(|i| {
            Out::default()
                .str("title", &i.title)
                .str("version", &i.version)
                .str("description", &i.description)
                .extensions(&i.vendor_extension)
                .map(Out::done)
        })
        .transpose()?;
    let paths = d.paths.as_ref().map(paths_json).transpose()?;
    Out::default()
        .str("swagger", &d.swagger)
        .value("info", info)
        .strs("schemes", &d.schemes)
        .strs("consumes", &d.consumes)
        .strs("produces", &d.produces)
        .value("paths", paths)
        .value("definitions", definitions)
        .value("security", security)
        .value("securityDefinitions", security_definitions)
        .extensions(&d.vendor_extension)
        .map(Out::done)
}

fn paths_json(p: &Paths) -> Result<Value> {
    let mut out = Out::default().extensions(&p.vendor_extension)?;
    for n in &p.path {
        let item = n.value.clone().unwrap_or_default();
        let mut o = Out::default();
        for (verb, op) in [
            ("get", &item.get),
            ("put", &item.put),
            ("post", &item.post),
            ("delete", &item.delete),
            ("options", &item.options),
            ("head", &item.head),
            ("patch", &item.patch),
        ] {
            o = o.value(verb, op.as_ref().map(operation_json).transpose()?);
        }
        let v = o
            .value("parameters", parameters_json(&item.parameters)?)
            .extensions(&item.vendor_extension)?
            .done();
        out.0.insert(n.name.clone(), v);
    }
    Ok(out.done())
}

fn parameters_json(ps: &[ParametersItem]) -> Result<Option<Value>> {
    if ps.is_empty() {
        return Ok(None);
    }
    let mut out = Vec::new();
    for p in ps {
        let Some(ParametersItemOneof::Parameter(p)) = &p.oneof else {
            continue;
        };
        let v = match &p.oneof {
            Some(ParameterOneof::BodyParameter(b)) => Out::default()
                .str("description", &b.description)
                .str("name", &b.name)
                .str("in", &b.r#in)
                .bool("required", b.required)
                .value("schema", b.schema.as_ref().map(schema_json).transpose()?)
                .extensions(&b.vendor_extension)?,
            Some(ParameterOneof::NonBodyParameter(n)) => match &n.oneof {
                Some(NonBodyParameterOneof::QueryParameterSubSchema(q)) => Out::default()
                    .bool("required", q.required)
                    .str("in", &q.r#in)
                    .str("description", &q.description)
                    .str("name", &q.name)
                    .bool("allowEmptyValue", q.allow_empty_value)
                    .str("type", &q.r#type)
                    .str("format", &q.format)
                    .value(
                        "default",
                        q.default.as_ref().map(|a| any_json(Some(a))).transpose()?,
                    )
                    .bool("uniqueItems", q.unique_items)
                    .value("enum", anys_json(&q.r#enum)?)
                    .extensions(&q.vendor_extension)?,
                Some(
                    NonBodyParameterOneof::PathParameterSubSchema(s)
                    | NonBodyParameterOneof::HeaderParameterSubSchema(s),
                ) => Out::default()
                    .bool("required", s.required)
                    .str("in", &s.r#in)
                    .str("description", &s.description)
                    .str("name", &s.name)
                    .str("type", &s.r#type)
                    .str("format", &s.format)
                    .value(
                        "default",
                        s.default.as_ref().map(|a| any_json(Some(a))).transpose()?,
                    )
                    .bool("uniqueItems", s.unique_items)
                    .value("enum", anys_json(&s.r#enum)?)
                    .extensions(&s.vendor_extension)?,
                None => Out::default(),
            },
            None => Out::default(),
        };
        out.push(v.done());
    }
    Ok(Some(Value::Array(out)))
}

fn operation_json(op: &Operation) -> Result<Value> {
    let responses = op
        .responses
        .as_ref()
        .map(|r| -> Result<Value> {
            let mut out = Out::default().extensions(&r.vendor_extension)?;
            for n in &r.response_code {
                let Some(ResponseValueOneof::Response(resp)) =
                    n.value.as_ref().and_then(|v| v.oneof.as_ref())
                else {
                    continue;
                };
                let schema = match resp.schema.as_ref().and_then(|s| s.oneof.as_ref()) {
                    Some(SchemaItemOneof::Schema(s)) => Some(schema_json(s)?),
                    None => None,
                };
                let v = Out::default()
                    .str("description", &resp.description)
                    .value("schema", schema)
                    .extensions(&resp.vendor_extension)?
                    .done();
                out.0.insert(n.name.clone(), v);
            }
            Ok(out.done())
        })
        .transpose()?;
    Out::default()
        .strs("tags", &op.tags)
        .str("summary", &op.summary)
        .str("description", &op.description)
        .str("operationId", &op.operation_id)
        .strs("produces", &op.produces)
        .strs("consumes", &op.consumes)
        .value("parameters", parameters_json(&op.parameters)?)
        .value("responses", responses)
        .strs("schemes", &op.schemes)
        .bool("deprecated", op.deprecated)
        .extensions(&op.vendor_extension)
        .map(Out::done)
}

fn named_schemas_json(v: &[NamedSchema]) -> Result<Value> {
    v.iter()
        .map(|n| {
            let s = n.value.as_ref().map(schema_json).transpose()?;
            Ok((
                n.name.clone(),
                s.unwrap_or_else(|| Value::Object(Map::new())),
            ))
        })
        .collect::<Result<Map<_, _>>>()
        .map(Value::Object)
}

fn schema_json(s: &Schema) -> Result<Value> {
    let additional = match s
        .additional_properties
        .as_ref()
        .and_then(|a| a.oneof.as_ref())
    {
        Some(AdditionalPropertiesOneof::Boolean(b)) => Some(Value::Bool(*b)),
        Some(AdditionalPropertiesOneof::Schema(s)) => Some(schema_json(s)?),
        None => None,
    };
    let ty = s.r#type.as_ref().map(|t| match t.value.as_slice() {
        [one] => Value::from(one.as_str()),
        many => Value::from(many.to_vec()),
    });
    let items = s
        .items
        .as_ref()
        .map(|i| -> Result<Value> {
            let mut v = i
                .schema
                .iter()
                .map(schema_json)
                .collect::<Result<Vec<_>>>()?;
            Ok(if v.len() == 1 {
                v.remove(0)
            } else {
                Value::Array(v)
            })
        })
        .transpose()?;
    let all_of = (!s.all_of.is_empty())
        .then(|| s.all_of.iter().map(schema_json).collect::<Result<Vec<_>>>())
        .transpose()?
        .map(Value::Array);
    let properties = s
        .properties
        .as_ref()
        .map(|p| named_schemas_json(&p.additional_properties))
        .transpose()?;
    Out::default()
        .str("$ref", &s.r#ref)
        .str("format", &s.format)
        .str("title", &s.title)
        .str("description", &s.description)
        .value(
            "default",
            s.default.as_ref().map(|a| any_json(Some(a))).transpose()?,
        )
        .f64("multipleOf", s.multiple_of)
        .f64("maximum", s.maximum)
        .bool("exclusiveMaximum", s.exclusive_maximum)
        .f64("minimum", s.minimum)
        .bool("exclusiveMinimum", s.exclusive_minimum)
        .i64("maxLength", s.max_length)
        .i64("minLength", s.min_length)
        .str("pattern", &s.pattern)
        .i64("maxItems", s.max_items)
        .i64("minItems", s.min_items)
        .bool("uniqueItems", s.unique_items)
        .i64("maxProperties", s.max_properties)
        .i64("minProperties", s.min_properties)
        .strs("required", &s.required)
        .value("enum", anys_json(&s.r#enum)?)
        .value("additionalProperties", additional)
        .value("type", ty)
        .value("items", items)
        .value("allOf", all_of)
        .value("properties", properties)
        .bool("readOnly", s.read_only)
        .value(
            "example",
            s.example.as_ref().map(|a| any_json(Some(a))).transpose()?,
        )
        .extensions(&s.vendor_extension)
        .map(Out::done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use serde_json::json;

    fn small() -> Value {
        json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": {
                "/api/v1/namespaces/{namespace}/pods/{name}": {
                    "parameters": [
                        {"name": "name", "in": "path", "required": true, "type": "string", "uniqueItems": true, "description": "name of the Pod"},
                        {"name": "pretty", "in": "query", "type": "string", "uniqueItems": true},
                    ],
                    "patch": {
                        "consumes": ["application/merge-patch+json"],
                        "produces": ["application/json"],
                        "schemes": ["https"],
                        "tags": ["core_v1"],
                        "operationId": "patchCoreV1NamespacedPod",
                        "parameters": [
                            {"name": "body", "in": "body", "required": true, "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}},
                            {"name": "fieldValidation", "in": "query", "type": "string", "uniqueItems": true},
                        ],
                        "responses": {
                            "200": {"description": "OK", "schema": {"$ref": "#/definitions/io.k8s.api.core.v1.Pod"}},
                            "401": {"description": "Unauthorized"},
                        },
                        "x-kubernetes-action": "patch",
                        "x-kubernetes-group-version-kind": {"group": "", "kind": "Pod", "version": "v1"},
                    },
                },
            },
            "definitions": {
                "io.k8s.api.core.v1.Pod": {
                    "description": "Pod is a collection of containers.",
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", "default": {}},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "ports": {"type": "array", "items": {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535}, "x-kubernetes-list-type": "set"},
                        "policy": {"type": "string", "enum": ["Always", "Never"], "default": "Always"},
                        "ratio": {"type": "number", "multipleOf": 0.5},
                        "free": {"x-kubernetes-preserve-unknown-fields": true},
                        "closed": {"type": "object", "additionalProperties": false},
                    },
                    "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}],
                },
            },
            "securityDefinitions": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header", "description": "Bearer Token authentication"}},
            "security": [{"BearerToken": []}],
        })
    }

    #[test]
    fn round_trip_through_protobuf_bytes() {
        let doc = small();
        let bytes = from_json(&doc).unwrap().encode_to_vec();
        let back = to_json(&Document::decode(bytes.as_slice()).unwrap()).unwrap();
        assert_eq!(back, doc);
    }

    #[test]
    fn fields_carry_gnostic_numbers_and_yaml_extensions() {
        let d = from_json(&small()).unwrap();
        let pod = &d.definitions.as_ref().unwrap().additional_properties[0];
        assert_eq!(pod.name, "io.k8s.api.core.v1.Pod");
        let pod = pod.value.as_ref().unwrap();
        assert_eq!(pod.r#type.as_ref().unwrap().value, ["object"]);
        assert_eq!(
            pod.vendor_extension[0].name,
            "x-kubernetes-group-version-kind"
        );
        assert_eq!(
            pod.vendor_extension[0].value.as_ref().unwrap().yaml,
            "- group: ''\n  kind: Pod\n  version: v1\n"
        );
        // Document.swagger is field 1, a string: tag byte 0x0a, then the length.
        let bytes = d.encode_to_vec();
        assert_eq!(&bytes[..5], b"\x0a\x032.0");
        let item = d.paths.unwrap().path[0].value.clone().unwrap();
        let Some(ParametersItemOneof::Parameter(p)) = &item.parameters[1].oneof else {
            panic!("a parameter")
        };
        assert!(matches!(
            &p.oneof,
            Some(ParameterOneof::NonBodyParameter(NonBodyParameter {
                oneof: Some(NonBodyParameterOneof::QueryParameterSubSchema(q))
            })) if q.name == "pretty" && q.unique_items
        ));
    }

    #[test]
    fn unmodelled_keys_are_refused_not_dropped() {
        let mut doc = small();
        doc["definitions"]["io.k8s.api.core.v1.Pod"]["nullable"] = json!(true);
        let e = from_json(&doc).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/definitions/io.k8s.api.core.v1.Pod: \"nullable\" is not part of the served Swagger 2.0 subset"
        );
        let mut doc = small();
        doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]["parameters"][0]["in"] =
            json!("cookie");
        assert!(matches!(from_json(&doc), Err(Error::Shape { .. })));
    }
}

//! gnostic's messages → JSON.

use serde_json::{Map, Value};

use super::{Error, Result};
use crate::openapi::v2::gnostic::*;

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

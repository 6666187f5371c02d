//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), which kubectl and
//! client-go's typed clients speak for every built-in kind.
//!
//! The envelope is `k8s\0` + `runtime.Unknown{typeMeta{apiVersion, kind}, raw,
//! contentEncoding, contentType}`; `raw` is the object in the field numbering of upstream's
//! `generated.proto`. The codec is table-driven ([`schema`], generated from upstream): every
//! field of every Kubernetes 1.35 message is decoded into the JSON upstream's `json.Marshal`
//! makes of the same object, so a protobuf body is stored exactly as its JSON twin.
//!
//! # Guarantees
//! - Nothing is dropped: a field number the table does not know is refused with 415, a field
//!   of the wrong wire type or a truncated body with 400.
//! - Responses are encoded only when every JSON key maps to a field ([`encode`] is `None`
//!   otherwise and the caller answers in JSON, which client-go accepts as well).
//! - Watch streams of built-in resources are framed `WatchEvent`s ([`watch`]).

mod decode;
mod encode;
mod list;
mod respond;
pub mod schema;
mod special;
pub mod watch;
mod wire;

use serde_json::Value;

use k3rs_apimachinery::status::{ApiError, ApiResult};

pub use list::ListFrames;
pub use respond::{preferred, respond};
use schema::{Message, Schema};
use wire::{Reader, Writer};

pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body could not be decoded (or an object encoded).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("malformed protobuf body: {0}")]
    Malformed(String),
    #[error("protobuf field {tag} of {message} is not known to this server")]
    UnknownField { message: String, tag: u32 },
    #[error("protobuf field {tag} of {message} has the wrong wire type {wire_type}")]
    WireType {
        message: String,
        tag: u32,
        wire_type: u64,
    },
    #[error("no protobuf encoding for {api_version} {kind}")]
    UnknownKind { api_version: String, kind: String },
    #[error("the body's content encoding {0:?} is not supported")]
    ContentEncoding(String),
    #[error("JSON key {key:?} of {message} has no protobuf field")]
    UnknownJson { message: String, key: String },
    #[error("JSON does not fit the protobuf schema: {0}")]
    Json(String),
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        match e {
            Error::UnknownField { .. } | Error::UnknownKind { .. } | Error::ContentEncoding(_) => {
                ApiError::new(415, "UnsupportedMediaType", e.to_string())
            }
            _ => ApiError::bad_request(format!("failed to decode protobuf body: {e}")),
        }
    }
}

/// The message of a top-level object; meta/v1's (DeleteOptions, Status) under any group.
fn kind_message<'s>(schema: &'s Schema, api_version: &str, kind: &str) -> Option<&'s Message> {
    schema
        .kind(api_version, kind)
        .or_else(|| schema.message(&format!("apimachinery.pkg.apis.meta.v1.{kind}")))
}

/// Decodes a protobuf body into the object's JSON form.
pub fn decode(bytes: &[u8]) -> ApiResult<Value> {
    Ok(decode_object(bytes)?)
}

fn decode_object(bytes: &[u8]) -> Result<Value, Error> {
    let body = bytes
        .strip_prefix(MAGIC)
        .ok_or_else(|| Error::Malformed("missing the k8s protobuf prefix".into()))?;
    let envelope = Envelope::read(body)?;
    if !envelope.content_encoding.is_empty() {
        return Err(Error::ContentEncoding(envelope.content_encoding));
    }
    let schema = Schema::get();
    let msg = kind_message(schema, &envelope.api_version, &envelope.kind).ok_or_else(|| {
        Error::UnknownKind {
            api_version: envelope.api_version.clone(),
            kind: envelope.kind.clone(),
        }
    })?;
    let mut obj = decode::message(schema, msg, envelope.raw)?;
    if let Value::Object(o) = &mut obj {
        o.insert("apiVersion".into(), envelope.api_version.into());
        o.insert("kind".into(), envelope.kind.into());
    }
    Ok(obj)
}

/// The protobuf form of a JSON object with `apiVersion` and `kind`, `None` when some part of
/// it has no protobuf field (custom resources, unknown kinds, fields newer than the table).
pub fn encode(obj: &Value) -> Option<Vec<u8>> {
    encode_object(obj).ok()
}

fn encode_object(obj: &Value) -> Result<Vec<u8>, Error> {
    let text = |k: &str| obj.get(k).and_then(Value::as_str).unwrap_or_default();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let schema = Schema::get();
    let msg = kind_message(schema, api_version, kind).ok_or_else(|| Error::UnknownKind {
        api_version: api_version.into(),
        kind: kind.into(),
    })?;
    let raw = encode::message(schema, msg, obj, &["apiVersion", "kind"])?;
    let mut type_meta = Writer::default();
    type_meta.put_bytes(1, api_version.as_bytes());
    type_meta.put_bytes(2, kind.as_bytes());
    let mut unknown = Writer::default();
    unknown.put_bytes(1, &type_meta.buf);
    unknown.put_bytes(2, &raw);
    unknown.put_bytes(3, b"");
    unknown.put_bytes(4, b"");
    Ok([MAGIC, unknown.buf.as_slice()].concat())
}

/// runtime.Unknown.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
}

impl<'a> Envelope<'a> {
    fn read(bytes: &'a [u8]) -> Result<Self, Error> {
        let mut envelope = Envelope {
            api_version: String::new(),
            kind: String::new(),
            raw: &[],
            content_encoding: String::new(),
        };
        let text = |b: &[u8]| {
            String::from_utf8(b.to_vec())
                .map_err(|_| Error::Malformed("a string is not UTF-8".into()))
        };
        let mut reader = Reader::new(bytes);
        while let Some((tag, value)) = reader.next_field()? {
            match (tag, value) {
                (1, wire::Value::Bytes(type_meta)) => {
                    let mut tm = Reader::new(type_meta);
                    while let Some((tag, value)) = tm.next_field()? {
                        match (tag, value) {
                            (1, wire::Value::Bytes(v)) => envelope.api_version = text(v)?,
                            (2, wire::Value::Bytes(k)) => envelope.kind = text(k)?,
                            _ => return Err(Error::Malformed("bad typeMeta".into())),
                        }
                    }
                }
                (2, wire::Value::Bytes(raw)) => envelope.raw = raw,
                (3, wire::Value::Bytes(enc)) => envelope.content_encoding = text(enc)?,
                (4, wire::Value::Bytes(_)) => {}
                _ => return Err(Error::Malformed("bad runtime.Unknown envelope".into())),
            }
        }
        Ok(envelope)
    }
}

#[cfg(test)]
mod tests;

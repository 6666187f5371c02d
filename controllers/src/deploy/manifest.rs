//! One manifest file: its checksum and the objects it declares (multi-document YAML or JSON;
//! `List` kinds flattened), as k3s's deploy controller reads them. Pure: text in, objects out.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Which object a manifest declares, as written (the namespace is `None` when the document
/// gives none; the applier then uses [`super::DEFAULT_NAMESPACE`] for namespaced kinds).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// Why a manifest file's objects could not be read (the Event's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("reading the file: {0}")]
    Read(String),
    /// The file is not UTF-8.
    #[error("not UTF-8: {0}")]
    Utf8(#[from] std::str::Utf8Error),
    /// A document is not YAML (the parser's message).
    #[error("document {doc}: {reason}")]
    Yaml {
        /// The document's number, from 1.
        doc: usize,
        /// The parser's message.
        reason: String,
    },
    /// A document is not an object (it, as JSON).
    #[error("document {doc}: not an object: {value}")]
    NotObject {
        /// The document's number, from 1.
        doc: usize,
        /// The document.
        value: Value,
    },
    /// A `…List` whose `items` is not a list.
    #[error("document {doc}: {kind}.items is not a list")]
    Items {
        /// The document's number, from 1.
        doc: usize,
        /// The list's kind.
        kind: String,
    },
    /// A required field is missing or empty.
    #[error("document {doc}: {field} is missing")]
    Missing {
        /// The document's number, from 1.
        doc: usize,
        /// `apiVersion`, `kind` or `metadata.name`.
        field: &'static str,
    },
}

/// A manifest file as read: its path under the manifests dir, the sha256 of its bytes, and
/// its objects or why they could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Manifest {
    pub source: String,
    pub checksum: String,
    pub objects: Result<Vec<(ObjectRef, Value)>, ManifestError>,
}

impl Manifest {
    /// Reads `bytes` of the file at `source`.
    pub fn parse(source: &str, bytes: &[u8]) -> Manifest {
        Manifest {
            source: source.to_string(),
            checksum: checksum(bytes),
            objects: objects(bytes),
        }
    }
}

/// Hex sha256 of a file's bytes: a file whose checksum is the recorded one is not applied
/// again.
pub fn checksum(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The objects of a YAML (or JSON) stream, in order: empty documents skipped, `List` kinds
/// (`kind: List` or `…List` with `items`) replaced by their items.
pub fn objects(bytes: &[u8]) -> Result<Vec<(ObjectRef, Value)>, ManifestError> {
    let text = std::str::from_utf8(bytes)?;
    let mut out = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc).map_err(|e| ManifestError::Yaml {
            doc: i + 1,
            reason: e.to_string(),
        })?;
        collect(value, i + 1, &mut out)?;
    }
    Ok(out)
}

fn collect(
    value: Value,
    doc: usize,
    out: &mut Vec<(ObjectRef, Value)>,
) -> Result<(), ManifestError> {
    let obj = match value {
        Value::Null => return Ok(()),
        Value::Object(o) => o,
        value => return Err(ManifestError::NotObject { doc, value }),
    };
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind.ends_with("List") && obj.get("items").is_some() {
        let Some(Value::Array(items)) = obj.get("items").cloned() else {
            return Err(ManifestError::Items {
                doc,
                kind: kind.to_string(),
            });
        };
        for item in items {
            collect(item, doc, out)?;
        }
        return Ok(());
    }
    let field = |name: &'static str| {
        obj.get(name)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or(ManifestError::Missing { doc, field: name })
    };
    let meta = obj.get("metadata");
    let text = |key: &str| {
        meta.and_then(|m| m.get(key))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let r = ObjectRef {
        api_version: field("apiVersion")?,
        kind: field("kind")?,
        namespace: text("namespace"),
        name: text("name").ok_or(ManifestError::Missing {
            doc,
            field: "metadata.name",
        })?,
    };
    out.push((r, Value::Object(obj)));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> ObjectRef {
        ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(Into::into),
            name: name.into(),
        }
    }

    fn refs(text: &str) -> Result<Vec<ObjectRef>, String> {
        objects(text.as_bytes())
            .map(|v| v.into_iter().map(|(r, _)| r).collect())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn multi_document_yaml_with_empty_documents_and_lists() {
        let text = "---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo\n---\n---\n\
                    apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  \
                    metadata: {name: a, namespace: demo}\n- apiVersion: v1\n  kind: ConfigMap\n  \
                    metadata: {name: b}\n";
        assert_eq!(
            refs(text).unwrap(),
            vec![
                r("v1", "Namespace", None, "demo"),
                r("v1", "ConfigMap", Some("demo"), "a"),
                r("v1", "ConfigMap", None, "b"),
            ]
        );
    }

    #[test]
    fn json_is_read_too() {
        let text = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"x"}}"#;
        assert_eq!(
            refs(text).unwrap(),
            vec![r("apps/v1", "Deployment", Some("x"), "web")]
        );
    }

    #[test]
    fn errors_name_the_document() {
        assert_eq!(
            refs("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: Secret\nmetadata: {name: s}\n"),
            Err("document 2: apiVersion is missing".to_string())
        );
        assert_eq!(
            refs("apiVersion: v1\nkind: ConfigMap\nmetadata: {}\n"),
            Err("document 1: metadata.name is missing".to_string())
        );
        assert_eq!(
            refs("- a\n- b\n"),
            Err("document 1: not an object: [\"a\",\"b\"]".to_string())
        );
        let bad = refs("apiVersion: v1\nkind: [unclosed\n").unwrap_err();
        assert!(bad.starts_with("document 1: "), "{bad}");
    }

    #[test]
    fn checksum_is_sha256_hex() {
        assert_eq!(
            checksum(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}

//! The durable record of what one manifest file applied: a ConfigMap in `kube-system`
//! labelled [`LABEL`], holding the file's path, the checksum last applied in full and the
//! objects applied from it. Pruning reads it, so it survives restarts and leader changes
//! (k3s keeps an `Addon` object per file for the same purpose).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::manifest::{checksum, ObjectRef};

/// Label every record carries (`true`).
pub const LABEL: &str = "deploy.k3rs.io/manifest-record";
/// Annotation every record carries: the file's path under the manifests dir.
const SOURCE: &str = "deploy.k3rs.io/source";

/// What a file applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The file's path under the manifests dir.
    pub source: String,
    /// The checksum of the content last applied without errors ("" if none was).
    pub checksum: String,
    /// Every object applied from the file and not pruned since.
    pub objects: Vec<ObjectRef>,
}

/// The record's ConfigMap name for `source`: `k3rs-manifest-<readable part>-<hash>`, a valid
/// name (at most 63 characters) for any path, distinct for distinct paths.
pub fn name(source: &str) -> String {
    let mut readable: String = source
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    readable.truncate(38);
    let readable = readable.trim_matches('-');
    let hash = &checksum(source.as_bytes())[..10];
    if readable.is_empty() {
        format!("k3rs-manifest-{hash}")
    } else {
        format!("k3rs-manifest-{readable}-{hash}")
    }
}

impl Record {
    /// The ConfigMap holding this record.
    pub fn to_config_map(&self, namespace: &str) -> ConfigMap {
        let objects = serde_json::to_string(&self.objects).unwrap_or_else(|_| "[]".into());
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name(&self.source)),
                namespace: Some(namespace.to_string()),
                labels: Some(BTreeMap::from([(LABEL.to_string(), "true".to_string())])),
                annotations: Some(BTreeMap::from([(SOURCE.to_string(), self.source.clone())])),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([
                ("source".to_string(), self.source.clone()),
                ("checksum".to_string(), self.checksum.clone()),
                ("objects".to_string(), objects),
            ])),
            ..ConfigMap::default()
        }
    }

    /// The record a ConfigMap holds; `None` for one that is not a readable record.
    pub fn from_config_map(cm: &ConfigMap) -> Option<Record> {
        let data = cm.data.as_ref()?;
        Some(Record {
            source: data.get("source")?.clone(),
            checksum: data.get("checksum").cloned().unwrap_or_default(),
            objects: serde_json::from_str(data.get("objects")?).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_distinct() {
        assert_eq!(
            name("apps/Web App.yaml"),
            format!(
                "k3rs-manifest-apps-web-app-yaml-{}",
                &checksum(b"apps/Web App.yaml")[..10]
            )
        );
        assert_ne!(name("a.yaml"), name("a.yml"));
        assert_eq!(
            name("..."),
            format!("k3rs-manifest-{}", &checksum(b"...")[..10])
        );
        assert!(name(&"x".repeat(300)).len() <= 63);
    }

    #[test]
    fn round_trips_through_its_config_map() {
        let rec = Record {
            source: "a.yaml".into(),
            checksum: "c1".into(),
            objects: vec![ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("demo".into()),
                name: "cm".into(),
            }],
        };
        let cm = rec.to_config_map("kube-system");
        assert_eq!(cm.metadata.namespace.as_deref(), Some("kube-system"));
        assert_eq!(
            cm.data.as_ref().unwrap()["objects"],
            r#"[{"apiVersion":"v1","kind":"ConfigMap","namespace":"demo","name":"cm"}]"#
        );
        assert_eq!(Record::from_config_map(&cm), Some(rec));
        assert_eq!(Record::from_config_map(&ConfigMap::default()), None);
    }
}

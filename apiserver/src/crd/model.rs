//! What the server needs of a CustomResourceDefinition, read from its (validated) JSON:
//! names, scope and the served versions with their schema, subresources and printer columns.

use serde_json::Value;

/// `spec.versions[].subresources.scale`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSpec {
    /// Dotted paths such as `.spec.replicas`.
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// `spec.versions[].additionalPrinterColumns[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    /// `integer`, `number`, `string`, `boolean` or `date`.
    pub kind: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// One served version of a custom resource, as the API server handles it.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomVersion {
    /// `metadata.name` of the CRD (`<plural>.<group>`).
    pub crd_name: String,
    pub group: String,
    pub version: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// `openAPIV3Schema` (None: anything is accepted and nothing pruned).
    pub schema: Option<Value>,
    pub status: bool,
    pub scale: Option<ScaleSpec>,
    pub columns: Vec<PrinterColumn>,
    /// The version objects are stored in (every served version shares the storage key; with
    /// conversion strategy None only `apiVersion` differs).
    pub storage_version: String,
    pub deprecation_warning: Option<String>,
    /// The CRD is being deleted: its custom resources can be read and deleted, not created.
    pub terminating: bool,
}

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Kubernetes version priority (`kube-aware` sort): GA before beta before alpha, higher
/// numbers first; other names after, alphabetically.
pub fn version_priority(a: &str, b: &str) -> std::cmp::Ordering {
    fn key(v: &str) -> (u8, i64, i64, String) {
        let parse = || -> Option<(u8, i64, i64)> {
            let rest = v.strip_prefix('v')?;
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            let major: i64 = digits.parse().ok()?;
            let tail = &rest[digits.len()..];
            if tail.is_empty() {
                return Some((0, -major, 0));
            }
            let (class, n) = if let Some(n) = tail.strip_prefix("beta") {
                (1, n)
            } else if let Some(n) = tail.strip_prefix("alpha") {
                (2, n)
            } else {
                return None;
            };
            let minor: i64 = n.parse().ok()?;
            Some((class, -major, -minor))
        };
        match parse() {
            Some((c, m, n)) => (c, m, n, String::new()),
            None => (3, 0, 0, v.to_string()),
        }
    }
    key(a).cmp(&key(b))
}

/// The served versions of a CRD (in version priority order), or none when the CRD is not
/// established yet or is being deleted.
pub fn served_versions(crd: &Value) -> Vec<CustomVersion> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let group = s(&spec["group"]);
    let storage_version = spec["versions"]
        .as_array()
        .and_then(|vs| vs.iter().find(|v| v["storage"] == true))
        .map(|v| s(&v["name"]))
        .unwrap_or_default();
    let mut out: Vec<CustomVersion> = spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"] == true)
        .map(|v| {
            let sub = &v["subresources"];
            let scale = sub
                .get("scale")
                .filter(|s| s.is_object())
                .map(|sc| ScaleSpec {
                    spec_replicas_path: s(&sc["specReplicasPath"]),
                    status_replicas_path: s(&sc["statusReplicasPath"]),
                    label_selector_path: sc["labelSelectorPath"].as_str().map(str::to_string),
                });
            let columns = v["additionalPrinterColumns"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| PrinterColumn {
                    name: s(&c["name"]),
                    kind: s(&c["type"]),
                    format: s(&c["format"]),
                    description: s(&c["description"]),
                    priority: c["priority"].as_i64().unwrap_or(0),
                    json_path: s(&c["jsonPath"]),
                })
                .collect();
            CustomVersion {
                crd_name: s(&crd["metadata"]["name"]),
                group: group.clone(),
                version: s(&v["name"]),
                kind: s(&names["kind"]),
                list_kind: names["listKind"]
                    .as_str()
                    .map_or_else(|| format!("{}List", s(&names["kind"])), str::to_string),
                plural: s(&names["plural"]),
                singular: names["singular"]
                    .as_str()
                    .filter(|x| !x.is_empty())
                    .map_or_else(|| s(&names["kind"]).to_lowercase(), str::to_string),
                namespaced: spec["scope"] == "Namespaced",
                short_names: strings(&names["shortNames"]),
                categories: strings(&names["categories"]),
                schema: v["schema"].get("openAPIV3Schema").cloned(),
                status: sub.get("status").is_some_and(Value::is_object),
                scale,
                columns,
                storage_version: storage_version.clone(),
                deprecation_warning: (v["deprecated"] == true).then(|| {
                    v["deprecationWarning"].as_str().map_or_else(
                        || {
                            format!(
                                "{group}/{} {} is deprecated",
                                s(&v["name"]),
                                s(&names["kind"])
                            )
                        },
                        str::to_string,
                    )
                }),
                terminating: crd["metadata"]
                    .get("deletionTimestamp")
                    .is_some_and(|d| !d.is_null()),
            }
        })
        .collect();
    out.sort_by(|a, b| version_priority(&a.version, &b.version));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn versions_sort_like_kubernetes() {
        let mut v = vec!["v1beta1", "foo", "v1", "v2alpha1", "v2", "v1beta2", "v10"];
        v.sort_by(|a, b| version_priority(a, b));
        assert_eq!(
            v,
            ["v10", "v2", "v1", "v1beta2", "v1beta1", "v2alpha1", "foo"]
        );
    }

    #[test]
    fn reads_served_versions() {
        let crd = json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1beta1", "served": true, "storage": false},
                {"name": "v1", "served": true, "storage": true,
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                 "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]},
                {"name": "v0", "served": false, "storage": false}]}});
        let vs = served_versions(&crd);
        assert_eq!(vs.len(), 2);
        assert_eq!(vs[0].version, "v1");
        assert_eq!(vs[0].singular, "widget");
        assert_eq!(vs[0].list_kind, "WidgetList");
        assert!(vs[0].status && !vs[1].status);
        assert_eq!(
            vs[0].scale.as_ref().unwrap().spec_replicas_path,
            ".spec.replicas"
        );
        assert_eq!(vs[0].columns[0].json_path, ".spec.size");
        assert_eq!(vs[1].storage_version, "v1");
        assert!(vs[0].namespaced);
        assert!(!vs[0].terminating);
        let mut deleting = crd.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert!(served_versions(&deleting).iter().all(|v| v.terminating));
    }
}

//! Generic object-metadata validation (`apimachinery/pkg/api/validation`): names, labels,
//! annotations, with kube-apiserver's messages and field paths.

use serde_json::Value;

use crate::catalog::NameRule;
use crate::names;
use crate::names::DNS1123_SUBDOMAIN_MSG;
pub use crate::names::{is_dns1035_label, is_dns1123_label, is_dns1123_subdomain};
use crate::status::Cause;

const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Total size of all annotations (kube: 256 KiB).
pub const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
}

/// Why `key` is not a valid label/annotation key (`[prefix/]name`), if it is not.
pub fn label_key_error(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() {
            return Some("prefix part must be non-empty".into());
        }
        if !is_dns1123_subdomain(p) {
            return Some(format!("prefix part {DNS1123_SUBDOMAIN_MSG}"));
        }
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    if !is_qualified_name_part(name) {
        return Some(QUALIFIED_NAME_MSG.into());
    }
    None
}

/// Why `v` is not a valid label value, if it is not.
pub fn label_value_error(v: &str) -> Option<String> {
    if v.is_empty() {
        return None;
    }
    if v.len() > 63 {
        return Some("must be no more than 63 characters".into());
    }
    (!is_qualified_name_part(v)).then(|| LABEL_VALUE_MSG.to_string())
}

/// Problems with a name under `rule`, at field `field` (one cause per failed rule, as
/// `ValidateObjectMeta`).
pub fn validate_name(name: &str, rule: NameRule, field: &str) -> Vec<Cause> {
    names::name_errors(name, rule, false)
        .iter()
        .map(|msg| Cause::invalid(field, name, msg))
        .collect()
}

/// Problems with `metadata.generateName` under `rule` (checked as a prefix: it may end with
/// a dash).
pub fn validate_generate_name(prefix: &str, rule: NameRule) -> Vec<Cause> {
    names::name_errors(prefix, rule, true)
        .iter()
        .map(|msg| Cause::invalid("metadata.generateName", prefix, msg))
        .collect()
}

/// Validates `metadata.labels` and `metadata.annotations` of `obj`.
pub fn validate_labels_and_annotations(obj: &Value) -> Vec<Cause> {
    validate_meta_labels_and_annotations(&obj["metadata"], "metadata")
}

/// Validates the `labels` and `annotations` of the object metadata `meta` found at the
/// field path `at` (`metadata`, or a template's `spec.template.metadata`).
pub fn validate_meta_labels_and_annotations(meta: &Value, at: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    let labels_at = format!("{at}.labels");
    let annotations_at = format!("{at}.annotations");
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(e) = label_key_error(k) {
                causes.push(Cause::invalid(&labels_at, k, &e));
            }
            match v.as_str() {
                Some(v) => {
                    if let Some(e) = label_value_error(v) {
                        causes.push(Cause::invalid(&labels_at, v, &e));
                    }
                }
                None => causes.push(Cause::invalid(
                    &labels_at,
                    k,
                    "label values must be strings",
                )),
            }
        }
    }
    if let Some(ann) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0;
        for (k, v) in ann {
            if let Some(e) = label_key_error(&k.to_lowercase()) {
                causes.push(Cause::invalid(&annotations_at, k, &e));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > TOTAL_ANNOTATION_SIZE {
            causes.push(Cause::too_long(&annotations_at, TOTAL_ANNOTATION_SIZE));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names() {
        assert!(is_dns1123_subdomain("example.com"));
        assert!(!is_dns1123_subdomain("Bad_Name"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(is_dns1123_label("kube-system"));
        assert!(!is_dns1123_label("a.b"));
        assert!(!is_dns1035_label("1abc"));
        assert!(is_dns1123_label(&"a".repeat(63)));
        assert!(!is_dns1123_label(&"a".repeat(64)));
        let c = validate_generate_name("web-", NameRule::Subdomain);
        assert!(c.is_empty(), "{c:?}");
        let c = validate_generate_name("Web-", NameRule::Subdomain);
        assert_eq!(c[0].field, "metadata.generateName");
        let c = validate_name(&"n".repeat(254), NameRule::Subdomain, "metadata.name");
        assert_eq!(c.len(), 1);
        assert!(c[0]
            .message
            .ends_with("must be no more than 253 characters"));
        assert!(validate_name(&"n".repeat(200), NameRule::Subdomain, "x").is_empty());
        let c = validate_name("Bad_Name", NameRule::Subdomain, "metadata.name");
        assert_eq!(c[0].field, "metadata.name");
        assert!(c[0]
            .message
            .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"));
    }

    #[test]
    fn labels_and_annotations() {
        assert_eq!(label_key_error("app.kubernetes.io/name"), None);
        assert!(label_key_error("/x").is_some());
        assert!(label_key_error("a/b/c").is_some());
        assert!(label_key_error(&"k".repeat(64)).is_some());
        assert_eq!(label_value_error(""), None);
        assert!(label_value_error("has space").is_some());
        let obj = json!({"metadata": {"labels": {"ok": "v", "bad key": "v", "k": "-bad"}}});
        let causes = validate_labels_and_annotations(&obj);
        assert_eq!(causes.len(), 2);
        assert!(causes.iter().all(|c| c.field == "metadata.labels"));
        let template = json!({"labels": {"job-name": "j".repeat(64)}});
        let causes = validate_meta_labels_and_annotations(&template, "spec.template.metadata");
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.template.metadata.labels");
        assert!(causes[0]
            .message
            .ends_with("must be no more than 63 characters"));
        let big = json!({"metadata": {"annotations": {"a": "x".repeat(TOTAL_ANNOTATION_SIZE)}}});
        assert_eq!(
            validate_labels_and_annotations(&big)[0].reason,
            "FieldValueTooLong"
        );
    }
}

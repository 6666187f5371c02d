//! Generic object-metadata validation (`apimachinery/pkg/api/validation`): names, labels,
//! annotations, with kube-apiserver's messages and field paths.

use serde_json::Value;

use crate::catalog::NameRule;
use crate::status::Cause;

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// Total size of all annotations (kube: 256 KiB).
pub const TOTAL_ANNOTATION_SIZE: usize = 256 * 1024;

fn lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// Whether `s` is an RFC 1123 label (lowercase alphanumerics and `-`, at most 63).
pub fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && lower_alnum(b[0])
        && lower_alnum(b[b.len() - 1])
        && b.iter().all(|&c| lower_alnum(c) || c == b'-')
}

/// Whether `s` is an RFC 1123 subdomain (dot-separated labels, at most 253).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

/// Whether `s` is an RFC 1035 label (an RFC 1123 label starting with a letter).
pub fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.as_bytes()[0].is_ascii_lowercase()
}

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

/// Problems with a name under `rule`, at field `field`.
pub fn validate_name(name: &str, rule: NameRule, field: &str) -> Vec<Cause> {
    let ok = match rule {
        NameRule::Subdomain => is_dns1123_subdomain(name),
        NameRule::Label => is_dns1123_label(name),
        NameRule::Rfc1035Label => is_dns1035_label(name),
        NameRule::PathSegment => {
            !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%'])
        }
    };
    if ok {
        return Vec::new();
    }
    let msg = match rule {
        NameRule::Subdomain if name.len() > 253 => "must be no more than 253 characters",
        NameRule::Label | NameRule::Rfc1035Label if name.len() > 63 => {
            "must be no more than 63 characters"
        }
        NameRule::Subdomain => DNS1123_SUBDOMAIN_MSG,
        NameRule::Label => DNS1123_LABEL_MSG,
        NameRule::Rfc1035Label => DNS1035_LABEL_MSG,
        NameRule::PathSegment => "may not be '.' or '..' and may not contain '/' or '%'",
    };
    vec![Cause::invalid(field, name, msg)]
}

/// Validates `metadata.labels` and `metadata.annotations` of `obj`.
pub fn validate_labels_and_annotations(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let meta = &obj["metadata"];
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(e) = label_key_error(k) {
                causes.push(Cause::invalid("metadata.labels", k, &e));
            }
            match v.as_str() {
                Some(v) => {
                    if let Some(e) = label_value_error(v) {
                        causes.push(Cause::invalid("metadata.labels", v, &e));
                    }
                }
                None => causes.push(Cause::invalid(
                    "metadata.labels",
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
                causes.push(Cause::invalid("metadata.annotations", k, &e));
            }
            total += k.len() + v.as_str().map_or(0, str::len);
        }
        if total > TOTAL_ANNOTATION_SIZE {
            causes.push(Cause::too_long(
                "metadata.annotations",
                TOTAL_ANNOTATION_SIZE,
            ));
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
        let big = json!({"metadata": {"annotations": {"a": "x".repeat(TOTAL_ANNOTATION_SIZE)}}});
        assert_eq!(
            validate_labels_and_annotations(&big)[0].reason,
            "FieldValueTooLong"
        );
    }
}

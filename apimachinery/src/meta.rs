//! Reading and stamping `metadata`: names, resourceVersion, uid, timestamps, generateName.

use std::collections::BTreeMap;

use rand::Rng;
use serde_json::{json, Value};

/// `metadata.name` (`""` when absent).
pub fn name(obj: &Value) -> &str {
    obj["metadata"]["name"].as_str().unwrap_or("")
}

/// `metadata.namespace` (`""` when absent).
pub fn namespace(obj: &Value) -> &str {
    obj["metadata"]["namespace"].as_str().unwrap_or("")
}

/// `metadata.uid` (`""` when absent).
pub fn uid(obj: &Value) -> &str {
    obj["metadata"]["uid"].as_str().unwrap_or("")
}

/// `metadata.resourceVersion` (`""` when absent).
pub fn resource_version(obj: &Value) -> &str {
    obj["metadata"]["resourceVersion"].as_str().unwrap_or("")
}

/// `metadata.labels` (non-string values left out).
pub fn labels(obj: &Value) -> BTreeMap<String, String> {
    obj["metadata"]["labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.finalizers`.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj["metadata"]["deletionTimestamp"].is_string()
}

/// Makes sure `obj.metadata` is an object and returns it.
pub fn metadata_mut(obj: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    obj["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

/// Sets `metadata.resourceVersion` to `rev`.
pub fn set_resource_version(obj: &mut Value, rev: i64) {
    if obj.is_object() {
        metadata_mut(obj).insert("resourceVersion".into(), json!(rev.to_string()));
    }
}

/// ObjectMeta's `omitempty` collections, which Go drops when they are empty or null.
const OMIT_EMPTY: &[&str] = &[
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
    "managedFields",
];

/// Drops empty or null `labels`, `annotations`, `finalizers`, `ownerReferences` and
/// `managedFields` from the metadata, as kube-apiserver's decoding does (`omitempty`): a
/// client-side apply or `kubectl diff` sending `annotations: {}` leaves no trace.
pub fn drop_empty_collections(obj: &mut Value) {
    let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    m.retain(|k, v| {
        let empty = v.is_null()
            || v.as_object().is_some_and(|o| o.is_empty())
            || v.as_array().is_some_and(|a| a.is_empty());
        !(empty && OMIT_EMPTY.contains(&k.as_str()))
    });
}

/// RFC 3339 UTC with second precision, as metav1.Time marshals (`2026-11-21T10:55:03Z`).
pub fn now_rfc3339() -> String {
    rfc3339(std::time::SystemTime::now())
}

/// `t` as RFC 3339 in UTC with second precision, as Kubernetes writes times.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
        .min(MAX_TIME_SECONDS);
    // Civil arithmetic rather than a timestamp type: it reaches the end of year 9999.
    let (days, tod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let epoch = jiff::civil::date(1970, 1, 1);
    let date = jiff::Span::new()
        .try_days(days)
        .ok()
        .and_then(|span| epoch.checked_add(span).ok())
        .unwrap_or(epoch);
    format!(
        "{date}T{:02}:{:02}:{:02}Z",
        tod / 3600,
        tod % 3600 / 60,
        tod % 60
    )
}

/// The last second every client can read back (`9999-12-30T22:00:00Z`, the end of jiff's
/// range, which k8s-openapi and so kube-rs use; Go's reaches a day further): times past it
/// saturate there, since one unreadable timestamp would stall every kube-rs watcher of the kind.
pub const MAX_TIME_SECONDS: i64 = 253_402_207_200;

/// `base` plus `secs` seconds (negative counts as 0), saturating at [`MAX_TIME_SECONDS`]:
/// `terminationGracePeriodSeconds: 9223372036854775807` is a valid (if endless) grace period.
pub fn seconds_after(base: std::time::SystemTime, secs: i64) -> std::time::SystemTime {
    let max = std::time::UNIX_EPOCH + std::time::Duration::from_secs(MAX_TIME_SECONDS as u64);
    base.checked_add(std::time::Duration::from_secs(secs.max(0) as u64))
        .map_or(max, |t| t.min(max))
}

/// `base` plus `secs` seconds for jiff timestamps, saturating at the largest timestamp.
pub fn timestamp_after(
    base: k8s_openapi::jiff::Timestamp,
    secs: i64,
) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::SignedDuration::try_from(std::time::Duration::from_secs(secs.max(0) as u64))
        .ok()
        .and_then(|d| base.checked_add(d).ok())
        .unwrap_or(k8s_openapi::jiff::Timestamp::MAX)
}

/// generateName's suffix: 5 characters of `[a-z0-9]` without vowels-lookalikes (like
/// apimachinery's `utilrand.String`).
pub fn random_suffix() -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHANUMS[rng.random_range(0..ALPHANUMS.len())] as char)
        .collect()
}

/// A fresh random UUID (v4) for `metadata.uid`.
pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Seconds since the Unix epoch of an RFC 3339 timestamp (`metav1.Time`, `MicroTime`).
pub fn parse_time(v: &Value) -> Option<i64> {
    let s = v.as_str()?;
    s.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_saturate_instead_of_overflowing() {
        use std::time::{Duration, UNIX_EPOCH};
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        assert_eq!(
            rfc3339(seconds_after(now, i64::MAX)),
            "9999-12-30T22:00:00Z"
        );
        assert_eq!(
            MAX_TIME_SECONDS,
            k8s_openapi::jiff::Timestamp::MAX.as_second()
        );
        let back: k8s_openapi::jiff::Timestamp = rfc3339(seconds_after(now, i64::MAX))
            .parse()
            .expect("kube-rs reads the saturated time");
        assert_eq!(back.as_second(), MAX_TIME_SECONDS);
        assert_eq!(rfc3339(seconds_after(now, -5)), rfc3339(now));
        assert_eq!(rfc3339(seconds_after(now, 30)), "2027-01-15T08:00:30Z");
        let ts = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap();
        assert_eq!(
            timestamp_after(ts, i64::MAX),
            k8s_openapi::jiff::Timestamp::MAX
        );
        assert_eq!(timestamp_after(ts, 30).as_second(), 1_800_000_030);
    }

    #[test]
    fn timestamps_and_suffixes() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        assert_eq!(rfc3339(t), "2027-01-15T08:00:00Z");
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(s
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()));
        assert_eq!(new_uid().len(), 36);
    }

    #[test]
    fn empty_metadata_collections_are_dropped() {
        let mut obj = json!({"metadata": {"name": "a", "labels": {}, "annotations": null,
            "finalizers": [], "ownerReferences": [], "managedFields": [],
            "generateName": ""}, "data": {}});
        drop_empty_collections(&mut obj);
        assert_eq!(
            obj,
            json!({"metadata": {"name": "a", "generateName": ""}, "data": {}})
        );
        let mut kept = json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["f"]}});
        let before = kept.clone();
        drop_empty_collections(&mut kept);
        assert_eq!(kept, before);
    }
}

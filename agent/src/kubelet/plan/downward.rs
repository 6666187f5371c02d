//! Downward API values (upstream's `podFieldSelectorRuntimeValue`, `ExtractFieldPathAsString`
//! and `ExtractContainerResourceValue`): what `fieldRef` and `resourceFieldRef` env vars (and,
//! later, downwardAPI volume files) read.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

use k3rs_apimachinery::quantity::Quantity;

/// The node's allocatable resources: the limits of containers that set none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Allocatable {
    pub cpu: Quantity,
    pub memory: Quantity,
    pub ephemeral_storage: Quantity,
}

/// A string as Go's `%q` prints it (for the `key="value"` lines of label/annotation maps).
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A label or annotation map as upstream's `FormatMap`: sorted `key="value"` lines.
pub fn format_map(m: Option<&BTreeMap<String, String>>) -> String {
    m.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `metadata.labels['key']` → `("labels", "key")`.
fn subscript(path: &str) -> Option<(&str, &str)> {
    let (map, rest) = path.strip_prefix("metadata.")?.split_once("['")?;
    let key = rest.strip_suffix("']")?;
    Some((map, key))
}

/// A downward API reference the kubelet does not support (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DownwardError {
    /// A `fieldRef.fieldPath` outside the supported set.
    #[error("unsupported fieldPath: {0}")]
    FieldPath(String),
    /// A `resourceFieldRef.resource` outside the supported set.
    #[error("unsupported container resource : {0}")]
    Resource(String),
}

/// The value of a `fieldRef`. `host_ips`/`pod_ips`: the node's and the pod's IPs, primary first.
pub fn field_value(
    pod: &Pod,
    field_path: &str,
    host_ips: &[String],
    pod_ips: &[String],
) -> Result<String, DownwardError> {
    let m = &pod.metadata;
    let spec = pod.spec.as_ref();
    let value = match field_path {
        "metadata.name" => m.name.clone(),
        "metadata.namespace" => m.namespace.clone(),
        "metadata.uid" => m.uid.clone(),
        "metadata.labels" => Some(format_map(m.labels.as_ref())),
        "metadata.annotations" => Some(format_map(m.annotations.as_ref())),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()),
        "status.hostIP" => host_ips.first().cloned(),
        "status.hostIPs" => Some(host_ips.join(",")),
        "status.podIP" => pod_ips.first().cloned(),
        "status.podIPs" => Some(pod_ips.join(",")),
        p => match subscript(p) {
            Some(("labels", key)) => m.labels.as_ref().and_then(|l| l.get(key).cloned()),
            Some(("annotations", key)) => m.annotations.as_ref().and_then(|a| a.get(key).cloned()),
            _ => return Err(DownwardError::FieldPath(p.to_string())),
        },
    };
    Ok(value.unwrap_or_default())
}

fn amount(c: &Container, limits: bool, name: &str) -> Option<Quantity> {
    let r = c.resources.as_ref()?;
    let list = if limits {
        r.limits.as_ref()
    } else {
        r.requests.as_ref()
    };
    list?.get(name).map(Quantity::of)
}

/// The value of a `resourceFieldRef` (`limits.cpu`, `requests.memory`, …) for container `c`,
/// in units of `divisor` (default 1), rounded up. Unset limits read as the node's allocatable.
pub fn resource_value(
    c: &Container,
    resource: &str,
    divisor: Option<&ApiQuantity>,
    allocatable: &Allocatable,
) -> Result<String, DownwardError> {
    let divisor = divisor
        .map(Quantity::of)
        .filter(|d| !d.is_zero())
        .unwrap_or(Quantity::from_value(1));
    let (limits, name) = match resource.split_once('.') {
        Some(("limits", n)) => (true, n),
        Some(("requests", n)) => (false, n),
        _ => return Err(DownwardError::Resource(resource.to_string())),
    };
    let default = match name {
        "cpu" => allocatable.cpu,
        "memory" => allocatable.memory,
        "ephemeral-storage" => allocatable.ephemeral_storage,
        _ => return Err(DownwardError::Resource(resource.to_string())),
    };
    let q = amount(c, limits, name).unwrap_or(if limits { default } else { Quantity::ZERO });
    let v = if name == "cpu" {
        ceil_ratio(q.milli_value(), divisor.milli_value())
    } else {
        ceil_ratio(q.value(), divisor.value())
    };
    Ok(v.to_string())
}

fn ceil_ratio(a: i64, b: i64) -> i64 {
    if b <= 0 {
        return 0;
    }
    let (q, r) = (a / b, a % b);
    if r > 0 {
        q + 1
    } else {
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::spec::containers;
    use crate::kubelet::plan::spec::tests::pod;
    use serde_json::json;

    fn p() -> Pod {
        pod(json!({
            "metadata": {"labels": {"app": "web", "tier": "front"},
                "annotations": {"note": "say \"hi\"\nbye"}},
            "spec": {"serviceAccountName": "sa",
                "containers": [{"name": "c", "image": "i", "resources": {
                    "requests": {"cpu": "250m", "memory": "64Mi"},
                    "limits": {"memory": "128Mi"}}}]},
        }))
    }

    #[test]
    fn field_refs() {
        let hosts = vec!["192.0.2.10".to_string(), "2001:db8::10".to_string()];
        let pods = vec!["10.42.0.5".to_string()];
        let f = |path: &str| field_value(&p(), path, &hosts, &pods);
        assert_eq!(f("metadata.name").unwrap(), "web");
        assert_eq!(f("metadata.namespace").unwrap(), "default");
        assert_eq!(f("metadata.uid").unwrap(), "u1");
        assert_eq!(f("metadata.labels['app']").unwrap(), "web");
        assert_eq!(f("metadata.labels['nope']").unwrap(), "");
        assert_eq!(
            f("metadata.annotations['note']").unwrap(),
            "say \"hi\"\nbye"
        );
        assert_eq!(f("metadata.labels").unwrap(), "app=\"web\"\ntier=\"front\"");
        assert_eq!(
            f("metadata.annotations").unwrap(),
            "note=\"say \\\"hi\\\"\\nbye\""
        );
        assert_eq!(f("spec.nodeName").unwrap(), "n1");
        assert_eq!(f("spec.serviceAccountName").unwrap(), "sa");
        assert_eq!(f("status.hostIP").unwrap(), "192.0.2.10");
        assert_eq!(f("status.hostIPs").unwrap(), "192.0.2.10,2001:db8::10");
        assert_eq!(f("status.podIP").unwrap(), "10.42.0.5");
        assert_eq!(f("status.podIPs").unwrap(), "10.42.0.5");
        assert_eq!(
            f("spec.hostname").map_err(|e| e.to_string()),
            Err("unsupported fieldPath: spec.hostname".into())
        );
    }

    #[test]
    fn resource_refs() {
        let pod = p();
        let c = &containers(&pod)[0];
        let alloc = Allocatable {
            cpu: Quantity::parse("4").unwrap(),
            memory: Quantity::parse("8Gi").unwrap(),
            ephemeral_storage: Quantity::parse("100Gi").unwrap(),
        };
        let q = |s: &str| ApiQuantity(s.into());
        let r = |res: &str, d: Option<&ApiQuantity>| resource_value(c, res, d, &alloc);
        assert_eq!(r("requests.cpu", None).unwrap(), "1");
        assert_eq!(r("requests.cpu", Some(&q("1m"))).unwrap(), "250");
        assert_eq!(r("limits.cpu", None).unwrap(), "4");
        assert_eq!(r("limits.cpu", Some(&q("1m"))).unwrap(), "4000");
        assert_eq!(r("requests.memory", None).unwrap(), "67108864");
        assert_eq!(r("limits.memory", Some(&q("1Mi"))).unwrap(), "128");
        assert_eq!(r("limits.memory", Some(&q("1G"))).unwrap(), "1");
        assert_eq!(
            r("limits.ephemeral-storage", Some(&q("1Gi"))).unwrap(),
            "100"
        );
        assert_eq!(r("requests.ephemeral-storage", None).unwrap(), "0");
        // A zero divisor means 1.
        assert_eq!(r("limits.cpu", Some(&q("0"))).unwrap(), "4");
        assert_eq!(
            r("limits.gpu", None).map_err(|e| e.to_string()),
            Err("unsupported container resource : limits.gpu".into())
        );
    }
}

//! What an evicted pod's status says (upstream's `evictionMessage` in
//! `pkg/kubelet/eviction/helpers.go`): reason `Evicted` and
//! "The node was low on resource: <resource>. Threshold quantity: <q>, available: <a>. "
//! followed by one "Container <name> was using <usage>, request is <request>, has larger
//! consumption of <resource>. " per container whose usage exceeds its request (memory: the
//! working set; ephemeral storage: writable layer and logs). Quantities are printed as
//! upstream's binary-SI quantities print (`1Mi`, `1536Ki`, `1000`). Pure.

use k8s_openapi::api::core::v1::Pod;

use super::rank::PodUsage;

/// The pod status reason of an evicted pod.
pub const REASON: &str = "Evicted";

/// A byte (or inode) count as a binary-SI quantity prints in Go (`resource.Quantity.String`):
/// the largest binary suffix that divides it exactly, small numbers as decimal SI.
pub fn binary_si(v: u64) -> String {
    if v < 1024 {
        // Go prints these in decimal SI: 1000 is "1k".
        return if v == 1000 {
            "1k".into()
        } else {
            v.to_string()
        };
    }
    let mut n = v;
    let mut suffix = 0;
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    while n.is_multiple_of(1024) && suffix < SUFFIXES.len() - 1 {
        n /= 1024;
        suffix += 1;
    }
    format!("{n}{}", SUFFIXES[suffix])
}

/// The eviction message for `pod` starved of `resource`; `threshold`: the threshold met's
/// amount and the available amount observed.
pub fn eviction_message(
    resource: &str,
    pod: &Pod,
    usage: Option<&PodUsage>,
    threshold: Option<(u64, u64)>,
) -> String {
    let mut message = format!("The node was low on resource: {resource}. ");
    if let Some((quantity, available)) = threshold {
        message += &format!(
            "Threshold quantity: {}, available: {}. ",
            binary_si(quantity),
            binary_si(available)
        );
    }
    let Some(usage) = usage else {
        return message;
    };
    let containers = pod
        .spec
        .as_ref()
        .map(|s| s.containers.as_slice())
        .unwrap_or_default();
    for stats in &usage.containers {
        let Some(c) = containers.iter().find(|c| c.name == stats.name) else {
            continue;
        };
        let used = match resource {
            "memory" => stats.memory,
            "ephemeral-storage" => stats.rootfs_bytes.zip(stats.logs_bytes).map(|(r, l)| r + l),
            _ => None,
        };
        let request = c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get(resource));
        let request_bytes = super::rank::request(c, resource);
        if let Some(used) = used.filter(|u| i128::from(*u) > i128::from(request_bytes)) {
            message += &format!(
                "Container {} was using {}, request is {}, has larger consumption of {resource}. ",
                c.name,
                binary_si(used),
                request.map_or("0", |q| q.0.as_str()),
            );
        }
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::eviction::rank::ContainerUsage;
    use serde_json::json;

    #[test]
    fn quantities_print_as_go_prints_binary_si() {
        assert_eq!(binary_si(0), "0");
        assert_eq!(binary_si(512), "512");
        assert_eq!(binary_si(1000), "1k");
        assert_eq!(binary_si(1024), "1Ki");
        assert_eq!(binary_si(1536 * 1024), "1536Ki");
        assert_eq!(binary_si(100 * 1024 * 1024), "100Mi");
        assert_eq!(binary_si(1025), "1025");
        assert_eq!(binary_si(3 << 30), "3Gi");
    }

    #[test]
    fn the_message_names_the_resource_the_threshold_and_the_greedy_containers() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [
                {"name": "writer", "image": "i"},
                {"name": "modest", "image": "i",
                 "resources": {"requests": {"ephemeral-storage": "10Mi"}}},
            ]}
        }))
        .unwrap();
        let usage = PodUsage {
            containers: vec![
                ContainerUsage {
                    name: "writer".into(),
                    rootfs_bytes: Some(150 * 1024 * 1024),
                    logs_bytes: Some(4096),
                    ..Default::default()
                },
                ContainerUsage {
                    name: "modest".into(),
                    rootfs_bytes: Some(1024 * 1024),
                    logs_bytes: Some(0),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            eviction_message(
                "ephemeral-storage",
                &pod,
                Some(&usage),
                Some((20 * 1024 * 1024, 5 * 1024 * 1024))
            ),
            "The node was low on resource: ephemeral-storage. Threshold quantity: 20Mi, \
             available: 5Mi. Container writer was using 153604Ki, request is 0, has larger \
             consumption of ephemeral-storage. "
        );
        assert_eq!(
            eviction_message("memory", &pod, None, None),
            "The node was low on resource: memory. "
        );
    }
}

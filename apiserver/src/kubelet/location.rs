//! Where on which kubelet a pod subresource goes (upstream's `LogLocation`, `ExecLocation`,
//! `AttachLocation`, `PortForwardLocation` and the kubelet connection info), without I/O.
//!
//! # Guarantees
//! - Container checks and messages are upstream's: no name with several containers is a 400
//!   listing them, a name the pod lacks is a 400 `container X is not valid for pod P`.
//! - A hollow node ([`HOLLOW_NODE_ANNOTATION`]) is never dialed: its addresses are made up.
//! - The node is dialed at its first address of k3s's preferred types (InternalIP,
//!   ExternalIP, Hostname) and `status.daemonEndpoints.kubeletEndpoint.Port` (10250 when 0).

use serde_json::Value;

use k3rs_apimachinery::labels::HOLLOW_NODE_ANNOTATION;
use k3rs_apimachinery::request_info::QueryParams;
use k3rs_apimachinery::status::ApiError;

/// The kubelet's default port, when the Node does not report one.
pub const DEFAULT_KUBELET_PORT: u16 = 10250;

/// k3s's `--kubelet-preferred-address-types`.
pub const PREFERRED_ADDRESS_TYPES: &[&str] = &["InternalIP", "ExternalIP", "Hostname"];

/// A kubelet to dial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletAddress {
    /// The address of the preferred type the Node reports.
    pub host: String,
    /// The Node's `daemonEndpoints.kubeletEndpoint.Port`, or [`DEFAULT_KUBELET_PORT`].
    pub port: u16,
}

/// The kubelet address of `node` (a Node object); a hollow node (one with
/// [`HOLLOW_NODE_ANNOTATION`]) has none.
pub fn kubelet_address(node: &Value) -> Result<KubeletAddress, ApiError> {
    if node["metadata"]["annotations"][HOLLOW_NODE_ANNOTATION].is_string() {
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        return Err(ApiError::unavailable(format!(
            "node {name:?} is a hollow node (k3rs agent --hollow): it has no kubelet API"
        )));
    }
    let addresses = node["status"]["addresses"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let host = PREFERRED_ADDRESS_TYPES
        .iter()
        .find_map(|t| {
            addresses
                .iter()
                .find(|a| a["type"] == *t && a["address"].as_str().is_some_and(|s| !s.is_empty()))
                .and_then(|a| a["address"].as_str())
        })
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "no preferred addresses found; known addresses: {}",
                serde_json::to_string(&addresses).unwrap_or_default()
            ))
        })?;
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_KUBELET_PORT);
    Ok(KubeletAddress {
        host: host.to_string(),
        port,
    })
}

fn names(pod: &Value, field: &str) -> Vec<String> {
    pod["spec"][field]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect()
}

fn go_list(v: &[String]) -> String {
    format!("[{}]", v.join(" "))
}

/// The container a request means: the given one if the pod has it, else the only one.
pub fn container(pod: &Value, given: Option<&str>) -> Result<String, ApiError> {
    let pod_name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let containers = names(pod, "containers");
    let init = names(pod, "initContainers");
    let ephemeral = names(pod, "ephemeralContainers");
    match given.filter(|g| !g.is_empty()) {
        Some(c) => {
            if containers
                .iter()
                .chain(&init)
                .chain(&ephemeral)
                .any(|n| n == c)
            {
                Ok(c.to_string())
            } else {
                Err(ApiError::bad_request(format!(
                    "container {c} is not valid for pod {pod_name}"
                )))
            }
        }
        None if containers.len() == 1 => Ok(containers[0].clone()),
        None if containers.is_empty() => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {pod_name}"
        ))),
        None => {
            let mut msg = format!(
                "a container name must be specified for pod {pod_name}, choose one of: {}",
                go_list(&containers)
            );
            if !init.is_empty() {
                msg += &format!(" or one of the init containers: {}", go_list(&init));
            }
            if !ephemeral.is_empty() {
                msg += &format!(
                    " or one of the ephemeral containers: {}",
                    go_list(&ephemeral)
                );
            }
            Err(ApiError::bad_request(msg))
        }
    }
}

/// The node a pod runs on, or upstream's 400.
pub fn node_name(pod: &Value) -> Result<String, ApiError> {
    pod["spec"]["nodeName"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "pod {} does not have a host assigned",
                pod["metadata"]["name"].as_str().unwrap_or_default()
            ))
        })
}

fn encode(pairs: &[(&str, String)]) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

/// The kubelet path and query of a `pods/<sub>` request with `query` (the client's pairs).
pub fn kubelet_path(pod: &Value, sub: &str, query: &QueryParams) -> Result<String, ApiError> {
    let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let get = |k: &str| query.get(k);
    let seg = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    match sub {
        "log" => {
            let c = container(pod, get("container"))?;
            let mut pairs = Vec::new();
            for flag in ["follow", "previous", "timestamps"] {
                if query.flag(flag) {
                    pairs.push((flag, "true".to_string()));
                }
            }
            for (k, min) in [("sinceSeconds", 1), ("tailLines", 0), ("limitBytes", 1)] {
                if let Some(v) = get(k) {
                    let n: i64 = v
                        .parse()
                        .map_err(|_| ApiError::bad_request(format!("invalid {k} {v:?}")))?;
                    if n < min {
                        return Err(ApiError::bad_request(format!(
                            "{k}: Invalid value: {n}: must be greater than or equal to {min}"
                        )));
                    }
                    pairs.push((k, n.to_string()));
                }
            }
            if let Some(t) = get("sinceTime") {
                pairs.push(("sinceTime", t.to_string()));
            }
            let q = encode(&pairs);
            let path = format!("/containerLogs/{}/{}/{}", seg(ns), seg(name), seg(&c));
            Ok(if q.is_empty() {
                path
            } else {
                format!("{path}?{q}")
            })
        }
        "exec" | "attach" => {
            let c = container(pod, get("container"))?;
            let mut pairs = Vec::new();
            for (client, kubelet) in [
                ("stdin", "input"),
                ("stdout", "output"),
                ("stderr", "error"),
                ("tty", "tty"),
            ] {
                if query.flag(client) {
                    pairs.push((kubelet, "1".to_string()));
                }
            }
            if sub == "exec" {
                let commands: Vec<_> = query
                    .all("command")
                    .map(|v| ("command", v.to_string()))
                    .collect();
                if commands.is_empty() {
                    return Err(ApiError::bad_request("you must specify at least 1 command"));
                }
                pairs.extend(commands);
            }
            let verb = if sub == "exec" { "exec" } else { "attach" };
            Ok(format!(
                "/{verb}/{}/{}/{}?{}",
                seg(ns),
                seg(name),
                seg(&c),
                encode(&pairs)
            ))
        }
        "portforward" => {
            let ports: Vec<_> = query
                .all("ports")
                .flat_map(|v| {
                    v.split(',')
                        .map(|p| ("port", p.trim().to_string()))
                        .collect::<Vec<_>>()
                })
                .collect();
            let q = encode(&ports);
            let path = format!("/portForward/{}/{}", seg(ns), seg(name));
            Ok(if q.is_empty() {
                path
            } else {
                format!("{path}?{q}")
            })
        }
        _ => Err(ApiError::path_not_found()),
    }
}

/// How a kubelet's error answer is relayed (upstream's generic response checker): 400 keeps
/// the kubelet's text as a BadRequest, 500 as an internal error, others by code.
pub fn kubelet_error(code: u16, body: &str) -> ApiError {
    let body = body.trim().to_string();
    match code {
        400 => ApiError::bad_request(body),
        500 => ApiError::internal(format!("Internal error occurred: {body}")),
        401 => ApiError::new(401, "Unauthorized", body),
        403 => ApiError::new(403, "Forbidden", body),
        404 => ApiError::new(404, "NotFound", body),
        503 => ApiError::unavailable(body),
        c => ApiError::new(c, "", body),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: &[&str], init: &[&str]) -> Value {
        let cs: Vec<_> = containers.iter().map(|c| json!({"name": c})).collect();
        let is: Vec<_> = init.iter().map(|c| json!({"name": c})).collect();
        json!({"metadata": {"name": "p", "namespace": "ns"},
               "spec": {"nodeName": "n1", "containers": cs, "initContainers": is}})
    }

    fn q(pairs: &[(&str, &str)]) -> QueryParams {
        QueryParams::from_pairs(pairs.iter().copied())
    }

    #[test]
    fn containers_are_chosen_and_checked_like_upstream() {
        assert_eq!(container(&pod(&["a"], &[]), None), Ok("a".into()));
        assert_eq!(
            container(&pod(&["a", "b"], &["i"]), Some("i")),
            Ok("i".into())
        );
        assert_eq!(
            container(&pod(&["a", "b"], &["i"]), None).unwrap_err().message,
            "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [i]"
        );
        let e = container(&pod(&["a"], &[]), Some("z")).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "container z is not valid for pod p")
        );
    }

    #[test]
    fn log_exec_and_portforward_paths() {
        let p = pod(&["a"], &[]);
        assert_eq!(
            kubelet_path(
                &p,
                "log",
                &q(&[
                    ("follow", "true"),
                    ("tailLines", "2"),
                    ("timestamps", "false")
                ])
            )
            .unwrap(),
            "/containerLogs/ns/p/a?follow=true&tailLines=2"
        );
        assert_eq!(
            kubelet_path(&p, "log", &QueryParams::default()).unwrap(),
            "/containerLogs/ns/p/a"
        );
        assert_eq!(
            kubelet_path(&p, "log", &q(&[("tailLines", "-1")]))
                .unwrap_err()
                .message,
            "tailLines: Invalid value: -1: must be greater than or equal to 0"
        );
        assert_eq!(
            kubelet_path(
                &p,
                "exec",
                &q(&[
                    ("command", "sh"),
                    ("command", "-c"),
                    ("command", "echo hi"),
                    ("stdin", "true"),
                    ("stdout", "true"),
                    ("tty", "false")
                ])
            )
            .unwrap(),
            "/exec/ns/p/a?input=1&output=1&command=sh&command=-c&command=echo+hi"
        );
        assert_eq!(
            kubelet_path(&p, "exec", &q(&[("stdout", "true")]))
                .unwrap_err()
                .message,
            "you must specify at least 1 command"
        );
        assert_eq!(
            kubelet_path(&p, "attach", &q(&[("stdin", "1"), ("tty", "1")])).unwrap(),
            "/attach/ns/p/a?input=1&tty=1"
        );
        assert_eq!(
            kubelet_path(&p, "portforward", &q(&[("ports", "80,8080")])).unwrap(),
            "/portForward/ns/p?port=80&port=8080"
        );
    }

    #[test]
    fn the_node_is_dialed_at_its_preferred_address_and_port() {
        let n = json!({"metadata": {"name": "n1"}, "status": {
            "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.5"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10251}}}});
        assert_eq!(
            kubelet_address(&n).unwrap(),
            KubeletAddress {
                host: "10.0.0.5".into(),
                port: 10251
            }
        );
        let n = json!({"metadata": {"name": "n1"}, "status": {"addresses": [{"type": "Hostname", "address": "n1"}]}});
        assert_eq!(kubelet_address(&n).unwrap().port, 10250);
        let e = kubelet_address(&json!({"metadata": {"name": "n1"}})).unwrap_err();
        assert_eq!(e.code, 400);
    }

    #[test]
    fn a_hollow_node_is_never_dialed() {
        let n = json!({"metadata": {"name": "h1", "annotations": {"k3rs.io/hollow-node": "true"}},
            "status": {"addresses": [{"type": "InternalIP", "address": "198.18.0.2"}]}});
        let e = kubelet_address(&n).unwrap_err();
        assert_eq!(e.code, 503);
        assert!(
            e.message.contains("\"h1\" is a hollow node"),
            "{}",
            e.message
        );
    }

    #[test]
    fn kubelet_errors_keep_their_text() {
        let e = kubelet_error(
            400,
            "previous terminated container \"a\" in pod \"p\" not found\n",
        );
        assert_eq!((e.code, e.reason), (400, "BadRequest"));
        assert_eq!(
            e.message,
            "previous terminated container \"a\" in pod \"p\" not found"
        );
        assert_eq!(
            kubelet_error(500, "boom").message,
            "Internal error occurred: boom"
        );
        assert_eq!(kubelet_error(403, "no").reason, "Forbidden");
    }
}

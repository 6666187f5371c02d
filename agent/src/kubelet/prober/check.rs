//! Running one probe (upstream's `prober.runProbe`): exec through CRI `ExecSync`, httpGet
//! (200–399 succeeds), tcpSocket (a connection succeeds), each within `timeoutSeconds`, with
//! upstream's failure output (`HTTP probe failed with statuscode: 500`, the command's output,
//! `dial tcp …: connect: connection refused`). gRPC probes are not run (they error).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::http::{self, Target};
use crate::cri::RuntimeService;

/// A probe's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// Failed, with the output upstream reports.
    Failure(String),
    /// Could not be run (no result is stored).
    Error(String),
}

/// What a probe runs against.
pub struct Subject<'a> {
    pub container: &'a Container,
    pub container_id: &'a str,
    /// The pod's IP (the default host of httpGet and tcpSocket).
    pub pod_ip: &'a str,
}

/// A probe port that names no port of the container, or is out of range (upstream's words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// No container port has the name.
    #[error("couldn't find port: {name} in {container}")]
    Unknown {
        /// The port's name.
        name: String,
        /// The container.
        container: String,
    },
    /// Not in 1..=65535.
    #[error("invalid port number: {0}")]
    Invalid(i32),
}

/// A port given by number or by the name of one of the container's ports.
pub fn resolve_port(port: &IntOrString, c: &Container) -> Result<u16, PortError> {
    let n = match port {
        IntOrString::Int(n) => *n,
        IntOrString::String(name) => match name.parse::<i32>() {
            Ok(n) => n,
            Err(_) => c
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .map(|p| p.container_port)
                .ok_or_else(|| PortError::Unknown {
                    name: name.clone(),
                    container: c.name.clone(),
                })?,
        },
    };
    u16::try_from(n)
        .ok()
        .filter(|p| *p > 0)
        .ok_or(PortError::Invalid(n))
}

/// The GET an httpGet action makes.
pub fn http_target(get: &HTTPGetAction, c: &Container, pod_ip: &str) -> Result<Target, PortError> {
    Ok(Target {
        https: get
            .scheme
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("https")),
        host: get
            .host
            .clone()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| pod_ip.to_string()),
        port: resolve_port(&get.port, c)?,
        path: get.path.clone().unwrap_or_default(),
        headers: get
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect(),
    })
}

/// The outcome of an httpGet probe's status code.
pub fn http_outcome(code: u16) -> Outcome {
    if (200..400).contains(&code) {
        Outcome::Success
    } else {
        Outcome::Failure(format!("HTTP probe failed with statuscode: {code}"))
    }
}

/// Runs `cmd` in the container; `Ok(output)` when it exited 0, `Err((exit code, output))`
/// otherwise (code -1: it timed out or could not run).
pub async fn exec(
    runtime: &dyn RuntimeService,
    container_id: &str,
    cmd: Vec<String>,
    timeout: Duration,
) -> Result<String, (i32, String)> {
    let secs = timeout.as_secs().max(1) as i64;
    let joined = cmd.join(" ");
    let call = runtime.exec_sync(container_id.to_string(), cmd, secs);
    let timed_out = || (-1, format!("command \"{joined}\" timed out"));
    match tokio::time::timeout(timeout + Duration::from_secs(1), call).await {
        Err(_) => Err(timed_out()),
        Ok(Err(e)) => {
            let text = e.to_string();
            if text.contains("deadline") || text.contains("timeout") || text.contains("timed out") {
                Err(timed_out())
            } else {
                Err((-1, text))
            }
        }
        Ok(Ok(r)) => {
            let mut out = String::from_utf8_lossy(&r.stdout).to_string();
            out.push_str(&String::from_utf8_lossy(&r.stderr));
            if r.exit_code == 0 {
                Ok(out)
            } else {
                Err((r.exit_code, out))
            }
        }
    }
}

/// Runs `probe` once.
pub async fn run(runtime: &dyn RuntimeService, probe: &Probe, s: &Subject<'_>) -> Outcome {
    let timeout = Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64);
    if let Some(e) = &probe.exec {
        let cmd = e.command.clone().unwrap_or_default();
        return match exec(runtime, s.container_id, cmd, timeout).await {
            Ok(_) => Outcome::Success,
            Err((-1, m)) if m.ends_with("timed out") => Outcome::Failure(m),
            Err((-1, m)) => Outcome::Error(m),
            Err((_, out)) => Outcome::Failure(out),
        };
    }
    if let Some(g) = &probe.http_get {
        let target = match http_target(g, s.container, s.pod_ip) {
            Ok(t) => t,
            Err(e) => return Outcome::Error(e.to_string()),
        };
        return match http::get(&target, timeout).await {
            Ok(code) => http_outcome(code),
            Err(e) => Outcome::Failure(e.to_string()),
        };
    }
    if let Some(t) = &probe.tcp_socket {
        let port = match resolve_port(&t.port, s.container) {
            Ok(p) => p,
            Err(e) => return Outcome::Error(e.to_string()),
        };
        let host = t
            .host
            .clone()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| s.pod_ip.to_string());
        let target = Target {
            https: false,
            host,
            port,
            path: String::new(),
            headers: vec![],
        };
        let addr = target.authority();
        return match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(&addr)).await {
            Ok(Ok(_)) => Outcome::Success,
            Ok(Err(e)) => Outcome::Failure(format!("dial tcp {addr}: {e}")),
            Err(_) => Outcome::Failure(format!("dial tcp {addr}: i/o timeout")),
        };
    }
    if probe.grpc.is_some() {
        return Outcome::Error("gRPC probes are not supported by this kubelet".into());
    }
    Outcome::Error("missing probe handler".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ContainerPort, HTTPHeader};

    fn container() -> Container {
        Container {
            name: "web".into(),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..ContainerPort::default()
            }]),
            ..Container::default()
        }
    }

    #[test]
    fn ports_resolve_by_number_or_name() {
        let c = container();
        assert_eq!(resolve_port(&IntOrString::Int(80), &c), Ok(80));
        assert_eq!(resolve_port(&IntOrString::String("81".into()), &c), Ok(81));
        assert_eq!(
            resolve_port(&IntOrString::String("http".into()), &c),
            Ok(8080)
        );
        assert_eq!(
            resolve_port(&IntOrString::String("grpc".into()), &c).map_err(|e| e.to_string()),
            Err("couldn't find port: grpc in web".into())
        );
        assert_eq!(
            resolve_port(&IntOrString::Int(70000), &c).map_err(|e| e.to_string()),
            Err("invalid port number: 70000".into())
        );
    }

    #[test]
    fn an_http_action_targets_the_pod_ip_unless_it_names_a_host() {
        let get = HTTPGetAction {
            port: IntOrString::String("http".into()),
            path: Some("/ready".into()),
            scheme: Some("HTTPS".into()),
            http_headers: Some(vec![HTTPHeader {
                name: "X-A".into(),
                value: "b".into(),
            }]),
            ..HTTPGetAction::default()
        };
        assert_eq!(
            http_target(&get, &container(), "10.42.0.7"),
            Ok(Target {
                https: true,
                host: "10.42.0.7".into(),
                port: 8080,
                path: "/ready".into(),
                headers: vec![("X-A".into(), "b".into())],
            })
        );
        let named = HTTPGetAction {
            host: Some("127.0.0.1".into()),
            ..get
        };
        assert_eq!(
            http_target(&named, &container(), "10.42.0.7").unwrap().host,
            "127.0.0.1"
        );
    }

    #[test]
    fn codes_from_200_to_399_succeed() {
        assert_eq!(http_outcome(200), Outcome::Success);
        assert_eq!(http_outcome(302), Outcome::Success);
        assert_eq!(http_outcome(399), Outcome::Success);
        assert_eq!(
            http_outcome(404),
            Outcome::Failure("HTTP probe failed with statuscode: 404".into())
        );
        assert_eq!(
            http_outcome(199),
            Outcome::Failure("HTTP probe failed with statuscode: 199".into())
        );
    }
}

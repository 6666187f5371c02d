//! Lifecycle hooks (upstream's `lifecycle.handlerRunner`): exec through CRI `ExecSync`, httpGet
//! (only a failed connection fails it; the status code does not), and sleep, each within the
//! time the caller allows. A failure is upstream's message (`Exec lifecycle hook ([…]) for
//! Container "c" in Pod "name_ns(uid)" failed - error: …, message: "…"`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, LifecycleHandler, Pod};

use crate::kubelet::prober::check::{exec, http_target};
use crate::kubelet::prober::http;

/// A pod as upstream's messages print it: `name_namespace(uid)`.
pub fn pod_label(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// What a hook runs in.
pub struct HookTarget<'a> {
    pub runtime: &'a dyn crate::cri::RuntimeService,
    pub pod: &'a Pod,
    pub container: &'a Container,
    pub container_id: &'a str,
    /// The default host of httpGet hooks.
    pub pod_ip: &'a str,
}

/// A failed lifecycle hook (the kubelet's messages; `pod` is `name_namespace(uid)`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HookError {
    /// The exec handler failed or exited non-zero.
    #[error("Exec lifecycle hook ({command}) for Container {container:?} in Pod {pod:?} failed - error: {error}, message: {message:?}")]
    Exec {
        /// The command, bracketed.
        command: String,
        /// The container.
        container: String,
        /// The pod.
        pod: String,
        /// What failed.
        error: String,
        /// The command's output.
        message: String,
    },
    /// The httpGet handler failed.
    #[error("HTTP lifecycle hook ({path}) for Container {container:?} in Pod {pod:?} failed - error: {error}")]
    Http {
        /// The path.
        path: String,
        /// The container.
        container: String,
        /// The pod.
        pod: String,
        /// What failed.
        error: String,
    },
    /// No exec, httpGet or sleep handler.
    #[error("Cannot run handler: invalid handler for Container {container:?} in Pod {pod:?}")]
    NoHandler {
        /// The container.
        container: String,
        /// The pod.
        pod: String,
    },
}

/// Runs `handler` for at most `timeout`.
pub async fn run_hook(
    t: &HookTarget<'_>,
    handler: &LifecycleHandler,
    timeout: Duration,
) -> Result<(), HookError> {
    let c = &t.container.name;
    let pod = pod_label(t.pod);
    if let Some(e) = &handler.exec {
        let cmd = e.command.clone().unwrap_or_default();
        let shown = format!("[{}]", cmd.join(" "));
        let joined = cmd.join(" ");
        return match exec(t.runtime, t.container_id, cmd, timeout).await {
            Ok(_) => Ok(()),
            Err((code, out)) => {
                let error = if code == -1 {
                    out.clone()
                } else {
                    format!("command '{joined}' exited with {code}: {out}")
                };
                let message = if code == -1 { String::new() } else { out };
                Err(HookError::Exec {
                    command: shown,
                    container: c.clone(),
                    pod,
                    error,
                    message,
                })
            }
        };
    }
    if let Some(g) = &handler.http_get {
        let path = g.path.clone().unwrap_or_default();
        let fail = |e: &dyn std::fmt::Display| HookError::Http {
            path: path.clone(),
            container: c.clone(),
            pod: pod.clone(),
            error: e.to_string(),
        };
        let target = http_target(g, t.container, t.pod_ip).map_err(|e| fail(&e))?;
        return http::get(&target, timeout)
            .await
            .map(|_| ())
            .map_err(|e| fail(&e));
    }
    if let Some(s) = &handler.sleep {
        let d = Duration::from_secs(s.seconds.max(0) as u64).min(timeout);
        tokio::time::sleep(d).await;
        return Ok(());
    }
    Err(HookError::NoHandler {
        container: c.clone(),
        pod,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::FakeRuntime;
    use k8s_openapi::api::core::v1::{HTTPGetAction, SleepAction};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web".into()),
                namespace: Some("prod".into()),
                uid: Some("u1".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[tokio::test]
    async fn a_refused_http_hook_fails_with_upstreams_message_and_sleep_waits() {
        let runtime = FakeRuntime::default();
        let pod = pod();
        let c = Container {
            name: "c".into(),
            ..Container::default()
        };
        let t = HookTarget {
            runtime: &runtime,
            pod: &pod,
            container: &c,
            container_id: "id",
            pod_ip: "127.0.0.1",
        };
        // A port nothing listens on: bind one, then drop it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let handler = LifecycleHandler {
            http_get: Some(HTTPGetAction {
                path: Some("/start".into()),
                port: IntOrString::Int(port as i32),
                ..HTTPGetAction::default()
            }),
            ..LifecycleHandler::default()
        };
        let err = run_hook(&t, &handler, Duration::from_secs(5))
            .await
            .unwrap_err()
            .to_string();
        let want = format!(
            "HTTP lifecycle hook (/start) for Container \"c\" in Pod \"web_prod(u1)\" failed - \
             error: Get \"http://127.0.0.1:{port}/start\": dial tcp 127.0.0.1:{port}: "
        );
        assert!(err.starts_with(&want), "{err}");
        let sleep = LifecycleHandler {
            sleep: Some(SleepAction { seconds: 1 }),
            ..LifecycleHandler::default()
        };
        let started = std::time::Instant::now();
        assert_eq!(run_hook(&t, &sleep, Duration::from_secs(5)).await, Ok(()));
        assert!(started.elapsed() >= Duration::from_secs(1));
        let none = LifecycleHandler::default();
        assert_eq!(
            run_hook(&t, &none, Duration::from_secs(5))
                .await
                .map_err(|e| e.to_string()),
            Err(
                "Cannot run handler: invalid handler for Container \"c\" in Pod \"web_prod(u1)\""
                    .into()
            )
        );
    }
}

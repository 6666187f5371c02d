//! `/healthz`, `/livez`, `/readyz` with `?verbose`, like kube-apiserver: `[+]ping ok`,
//! `[+]etcd ok` (a datastore read), then `<x> check passed`; 500 when a check fails.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use k3rs_apimachinery::tasks;

use super::ApiState;

/// Why a check failed (logged; the body withholds it).
#[derive(Debug, thiserror::Error)]
enum CheckFailure {
    /// The datastore read failed.
    #[error(transparent)]
    Datastore(#[from] k3rs_datastore::Error),
    /// A named task is failing.
    #[error("restarted {restarts} times; {why}")]
    Task { restarts: u64, why: String },
}

async fn checks(st: &ApiState, what: &str) -> Vec<(String, Result<(), CheckFailure>)> {
    let etcd = st
        .registry
        .datastore()
        .get(b"/registry/health")
        .await
        .map(drop)
        .map_err(CheckFailure::from);
    let mut checks = vec![("ping".to_string(), Ok(())), ("etcd".to_string(), etcd)];
    if what == "readyz" {
        checks.extend(task_checks(&tasks::snapshot()));
    }
    checks
}

/// One `task/<name>` check per named task of the process: failed while the task is failing
/// (it panicked or returned early and has not run healthily since).
fn task_checks(
    tasks: &std::collections::BTreeMap<String, tasks::TaskState>,
) -> Vec<(String, Result<(), CheckFailure>)> {
    tasks
        .iter()
        .map(|(name, t)| {
            let r = match (&t.last_failure, t.failing) {
                (Some(why), true) => Err(CheckFailure::Task {
                    restarts: t.restarts,
                    why: why.clone(),
                }),
                _ => Ok(()),
            };
            (format!("task/{name}"), r)
        })
        .collect()
}

async fn report(st: &ApiState, what: &str, verbose: bool) -> Response {
    let results = checks(st, what).await;
    let ok = results.iter().all(|(_, r)| r.is_ok());
    let mut body = String::new();
    if verbose || !ok {
        for (name, r) in &results {
            match r {
                Ok(()) => body.push_str(&format!("[+]{name} ok\n")),
                Err(e) => {
                    tracing::warn!(check = name, error = %e, "{what} check failed");
                    body.push_str(&format!("[-]{name} failed: reason withheld\n"))
                }
            }
        }
    }
    let code = if ok {
        if verbose {
            body.push_str(&format!("{what} check passed\n"));
        } else {
            body.push_str("ok");
        }
        StatusCode::OK
    } else {
        body.push_str(&format!("{what} check failed\n"));
        StatusCode::INTERNAL_SERVER_ERROR
    };
    (
        code,
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// `?verbose` asks for every check's line.
fn verbose(req: &Request) -> bool {
    super::http::request::info_of(req).query.contains("verbose")
}

pub async fn healthz(State(st): State<Arc<ApiState>>, req: Request) -> Response {
    report(&st, "healthz", verbose(&req)).await
}

pub async fn livez(State(st): State<Arc<ApiState>>, req: Request) -> Response {
    report(&st, "livez", verbose(&req)).await
}

pub async fn readyz(State(st): State<Arc<ApiState>>, req: Request) -> Response {
    report(&st, "readyz", verbose(&req)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failing_tasks_fail_their_check() {
        let mut t = std::collections::BTreeMap::new();
        t.insert("controller/a".to_string(), tasks::TaskState::default());
        t.insert(
            "controller/b".to_string(),
            tasks::TaskState {
                restarts: 2,
                last_failure: Some("panicked: boom".into()),
                failing: true,
                running: true,
                runs: 3,
            },
        );
        let checks = task_checks(&t);
        let shown: Vec<(String, Result<(), String>)> = checks
            .into_iter()
            .map(|(name, r)| (name, r.map_err(|e| e.to_string())))
            .collect();
        assert_eq!(shown[0], ("task/controller/a".into(), Ok(())));
        assert_eq!(
            shown[1],
            (
                "task/controller/b".into(),
                Err("restarted 2 times; panicked: boom".into())
            )
        );
    }
}

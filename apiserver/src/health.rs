//! `/healthz`, `/livez`, `/readyz` with `?verbose`, like kube-apiserver: `[+]ping ok`,
//! `[+]etcd ok` (a datastore read), then `<x> check passed`; 500 when a check fails.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::ApiState;

async fn checks(st: &ApiState) -> Vec<(&'static str, Result<(), String>)> {
    let etcd = st
        .registry
        .datastore()
        .get(b"/registry/health")
        .await
        .map(drop)
        .map_err(|e| e.to_string());
    vec![("ping", Ok(())), ("etcd", etcd)]
}

async fn report(st: &ApiState, what: &str, verbose: bool) -> Response {
    let results = checks(st).await;
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

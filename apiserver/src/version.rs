//! `/version`: the Kubernetes version this server implements, in `version.Info`'s shape.

use axum::response::{IntoResponse, Response};
use serde_json::json;

pub use k3rs_apimachinery::version::{GIT_VERSION, KUBE_MAJOR, KUBE_MINOR};

/// This server's `version.Info`.
pub fn info() -> serde_json::Value {
    json!({
        "major": KUBE_MAJOR,
        "minor": KUBE_MINOR,
        "gitVersion": GIT_VERSION,
        "gitCommit": option_env!("K3RS_GIT_COMMIT").unwrap_or("unknown"),
        "gitTreeState": "clean",
        "buildDate": option_env!("K3RS_BUILD_DATE").unwrap_or("1970-01-01T00:00:00Z"),
        "goVersion": "n/a (rust)",
        "compiler": "rustc",
        "platform": platform(),
    })
}

/// `<os>/<arch>` with Go's architecture names (`version.Info.Platform`).
pub fn platform() -> String {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    format!("{}/{arch}", std::env::consts::OS)
}

pub async fn version() -> Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        info().to_string(),
    )
        .into_response()
}

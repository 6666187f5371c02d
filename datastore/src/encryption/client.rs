//! `k3rs secrets-encrypt status|reencrypt|rotate-keys`: asks the server (as its admin) and
//! renders the answer as k3s prints it.

use super::ops::render_status;

/// The subcommands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `k3rs secrets-encrypt status`.
    Status,
    /// `k3rs secrets-encrypt reencrypt`.
    Reencrypt,
    /// `k3rs secrets-encrypt rotate-keys`.
    RotateKeys,
}

impl Op {
    fn path(self) -> &'static str {
        match self {
            Op::Status => "/v1-k3rs/encrypt/status",
            Op::Reencrypt => "/v1-k3rs/encrypt/reencrypt",
            Op::RotateKeys => "/v1-k3rs/encrypt/rotate-keys",
        }
    }
}

/// Runs `op` against the server `client` talks to; the text to print.
pub async fn run(client: &kube::Client, op: Op) -> Result<String, kube::Error> {
    let builder = match op {
        Op::Status => axum::http::Request::get(op.path()),
        Op::Reencrypt | Op::RotateKeys => axum::http::Request::post(op.path()),
    };
    let req = builder
        .body(Vec::new())
        .expect("a request from a static path");
    let v: serde_json::Value = client.request(req).await?;
    Ok(render_status(&v))
}

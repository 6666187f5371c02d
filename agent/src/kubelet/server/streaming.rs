//! `/exec`, `/attach` and `/portForward`: the runtime's streaming server does the work (CRI
//! `Exec`/`Attach`/`PortForward` return a one-time URL on it); the kubelet forwards the
//! client's request there and, once the runtime answers `101 Switching Protocols`, splices
//! the two upgraded connections (SPDY/3.1 or WebSocket, whatever the client and runtime
//! agreed on). Any other answer of the runtime goes back to the client as it is, so a client
//! that offered a protocol the runtime lacks can fall back to another.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::Response;
use hyper_util::rt::TokioIo;

use super::logs::{choose, named, pod_containers};
use super::{text_error, Kubelet};
use crate::cri::{pb, StreamRequest};
use crate::kubelet::plan::labels;

/// The exec/attach query (upstream's `command`, `stdin`, `stdout`, `stderr`, `tty`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StreamOptions {
    pub command: Vec<String>,
    pub stdin: bool,
    pub stdout: bool,
    pub stderr: bool,
    pub tty: bool,
    pub ports: Vec<i32>,
}

fn truthy(v: &str) -> bool {
    matches!(v, "1" | "true" | "True" | "")
}

/// A `port` query value that is not a port (upstream's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unable to parse {0:?} as a port")]
pub struct BadPort(pub String);

/// Parses the query; `Err` is upstream's message for a bad one.
pub fn stream_options(query: &str) -> Result<StreamOptions, BadPort> {
    let mut o = StreamOptions::default();
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        match k.as_ref() {
            "command" => o.command.push(v.into_owned()),
            "input" | "stdin" => o.stdin = truthy(&v),
            "output" | "stdout" => o.stdout = truthy(&v),
            "error" | "stderr" => o.stderr = truthy(&v),
            "tty" => o.tty = truthy(&v),
            "port" => o.ports.push(v.parse().map_err(|_| BadPort(v.to_string()))?),
            _ => {}
        }
    }
    Ok(o)
}

type ExecPath = Path<(String, String, String)>;
type UidPath = Path<(String, String, String, String)>;

pub async fn exec(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod, c)): ExecPath,
    req: Request,
) -> Response {
    container_session(k, ns, pod, c, req, true).await
}

pub async fn exec_uid(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod, _uid, c)): UidPath,
    req: Request,
) -> Response {
    container_session(k, ns, pod, c, req, true).await
}

pub async fn attach(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod, c)): ExecPath,
    req: Request,
) -> Response {
    container_session(k, ns, pod, c, req, false).await
}

pub async fn attach_uid(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod, _uid, c)): UidPath,
    req: Request,
) -> Response {
    container_session(k, ns, pod, c, req, false).await
}

pub async fn port_forward(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod)): Path<(String, String)>,
    req: Request,
) -> Response {
    pod_session(k, ns, pod, req).await
}

pub async fn port_forward_uid(
    State(k): State<Arc<Kubelet>>,
    Path((ns, pod, _uid)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    pod_session(k, ns, pod, req).await
}

async fn container_session(
    k: Arc<Kubelet>,
    ns: String,
    pod: String,
    container: String,
    req: Request,
    is_exec: bool,
) -> Response {
    let opts = match stream_options(req.uri().query().unwrap_or_default()) {
        Ok(o) => o,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    if is_exec && opts.command.is_empty() {
        return text_error(
            StatusCode::BAD_REQUEST,
            "you must specify at least 1 command",
        );
    }
    let all = match pod_containers(&k, &ns, &pod).await {
        Ok(a) => a,
        Err(r) => return r,
    };
    let running = named(&all, &container)
        .into_iter()
        .filter(|c| c.state == pb::ContainerState::ContainerRunning as i32)
        .collect();
    let Some(c) = choose(running, false) else {
        return text_error(
            StatusCode::NOT_FOUND,
            format!("container not found (\"{container}\")"),
        );
    };
    let sr = if is_exec {
        StreamRequest::Exec(pb::ExecRequest {
            container_id: c.id,
            cmd: opts.command,
            tty: opts.tty,
            stdin: opts.stdin,
            stdout: opts.stdout,
            stderr: opts.stderr,
        })
    } else {
        StreamRequest::Attach(pb::AttachRequest {
            container_id: c.id,
            stdin: opts.stdin,
            tty: opts.tty,
            stdout: opts.stdout,
            stderr: opts.stderr,
        })
    };
    session(&k, sr, req).await
}

async fn pod_session(k: Arc<Kubelet>, ns: String, pod: String, req: Request) -> Response {
    let opts = match stream_options(req.uri().query().unwrap_or_default()) {
        Ok(o) => o,
        Err(e) => return text_error(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let filter = pb::PodSandboxFilter {
        label_selector: HashMap::from([
            (labels::POD_NAMESPACE.to_string(), ns.clone()),
            (labels::POD_NAME.to_string(), pod.clone()),
        ]),
        state: Some(pb::PodSandboxStateValue {
            state: pb::PodSandboxState::SandboxReady as i32,
        }),
        ..pb::PodSandboxFilter::default()
    };
    let sandboxes = match k.cri.list_pod_sandbox(Some(filter)).await {
        Ok(s) => s,
        Err(e) => return text_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let Some(sandbox) = sandboxes.into_iter().max_by_key(|s| s.created_at) else {
        return text_error(
            StatusCode::NOT_FOUND,
            format!("pod \"{ns}/{pod}\" does not exist"),
        );
    };
    let sr = StreamRequest::PortForward(pb::PortForwardRequest {
        pod_sandbox_id: sandbox.id,
        port: opts.ports,
    });
    session(&k, sr, req).await
}

async fn session(k: &Kubelet, sr: StreamRequest, req: Request) -> Response {
    let url = match k.cri.streaming_url(sr).await {
        Ok(u) => u,
        Err(e) => return text_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let target: Uri = match url.parse() {
        Ok(u) => u,
        Err(e) => {
            return text_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the runtime's streaming URL {url:?}: {e}"),
            )
        }
    };
    match forward(req, &target).await {
        Ok(r) => r,
        Err(e) => text_error(
            StatusCode::BAD_GATEWAY,
            format!("error dialing the runtime's streaming server: {e}"),
        ),
    }
}

/// Why the runtime's streaming server could not be reached.
#[derive(Debug, thiserror::Error)]
enum ForwardError {
    /// The streaming URL has no host.
    #[error("{0} has no host")]
    NoHost(Uri),
    /// Connecting failed.
    #[error("{0}")]
    Connect(#[from] std::io::Error),
    /// The HTTP exchange failed.
    #[error("{0}")]
    Http(#[from] hyper::Error),
    /// The request could not be built.
    #[error("{0}")]
    Request(#[from] axum::http::Error),
}

/// Sends `req` (method, upgrade headers, query) to `target` over plain HTTP/1.1 and relays
/// the answer; a `101` splices the client's and the runtime's upgraded connections.
async fn forward(mut req: Request, target: &Uri) -> Result<Response, ForwardError> {
    let authority = target
        .authority()
        .ok_or_else(|| ForwardError::NoHost(target.clone()))?
        .clone();
    let port = authority.port_u16().unwrap_or(80);
    let tcp = tokio::net::TcpStream::connect((authority.host(), port)).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    let path = match req.uri().query() {
        Some(q) => format!("{}?{q}", target.path()),
        None => target.path().to_string(),
    };
    let mut out = hyper::Request::builder()
        .method(req.method().clone())
        .uri(path);
    for (name, value) in req.headers() {
        if name != header::HOST && name != header::AUTHORIZATION {
            out = out.header(name, value);
        }
    }
    let out = out
        .header(header::HOST, authority.as_str())
        .body(http_body_util::Empty::<bytes::Bytes>::new())?;
    let downstream = hyper::upgrade::on(&mut req);
    let mut resp = sender.send_request(out).await?;
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS {
        let upstream = hyper::upgrade::on(&mut resp);
        tokio::spawn(async move {
            let (Ok(down), Ok(up)) = tokio::join!(downstream, upstream) else {
                return;
            };
            let _ =
                tokio::io::copy_bidirectional(&mut TokioIo::new(down), &mut TokioIo::new(up)).await;
        });
    }
    Ok(resp.map(Body::new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_command_and_streams() {
        let o = stream_options(
            "command=sh&command=-c&command=echo%20hi&stdin=true&stdout=1&stderr=false&tty=0",
        )
        .unwrap();
        assert_eq!(
            o,
            StreamOptions {
                command: vec!["sh".into(), "-c".into(), "echo hi".into()],
                stdin: true,
                stdout: true,
                ..StreamOptions::default()
            }
        );
        let o = stream_options("input=1&output=1&error=1&tty=1").unwrap();
        assert!(o.stdin && o.stdout && o.stderr && o.tty);
        assert_eq!(
            stream_options("port=80&port=8080").unwrap().ports,
            vec![80, 8080]
        );
        assert_eq!(
            stream_options("port=http").map_err(|e| e.to_string()),
            Err("unable to parse \"http\" as a port".into())
        );
    }
}

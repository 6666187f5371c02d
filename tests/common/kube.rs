//! A small Kubernetes API client for tests and benchmarks that need many concurrent requests
//! (thousands of watches) where spawning `kubectl` would not do: HTTP/2 (`h2`) over rustls
//! with the admin kubeconfig's client certificate. One [`KubeClient`] is one connection; its
//! requests are multiplexed streams (the server allows 1000 at once per connection).

use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context};
use base64::Engine;
use bytes::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;

/// What the admin kubeconfig holds.
#[derive(Debug, Clone)]
pub struct Kubeconfig {
    /// `127.0.0.1:<port>`.
    pub authority: String,
    pub ca_pem: Vec<u8>,
    pub cert_pem: Vec<u8>,
    pub key_pem: Vec<u8>,
}

impl Kubeconfig {
    /// Reads the kubeconfig k3rs writes (server URL and base64 PEM data fields).
    pub fn read(path: &Path) -> anyhow::Result<Kubeconfig> {
        let text = std::fs::read_to_string(path).with_context(|| format!("{path:?}"))?;
        let field = |name: &str| -> anyhow::Result<String> {
            text.lines()
                .find_map(|l| l.trim().strip_prefix(name).map(|v| v.trim().to_string()))
                .ok_or_else(|| anyhow!("{name} missing in {path:?}"))
        };
        let b64 = |name: &str| -> anyhow::Result<Vec<u8>> {
            Ok(base64::engine::general_purpose::STANDARD.decode(field(name)?)?)
        };
        let server = field("server:")?;
        let authority = server
            .strip_prefix("https://")
            .ok_or_else(|| anyhow!("server {server:?} is not https"))?
            .trim_end_matches('/')
            .to_string();
        Ok(Kubeconfig {
            authority,
            ca_pem: b64("certificate-authority-data:")?,
            cert_pem: b64("client-certificate-data:")?,
            key_pem: b64("client-key-data:")?,
        })
    }

    fn tls(&self) -> anyhow::Result<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&self.ca_pem) {
            roots.add(cert?)?;
        }
        let certs =
            CertificateDer::pem_slice_iter(&self.cert_pem).collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(&self.key_pem)?;
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(certs, key)?;
        config.alpn_protocols = vec![b"h2".to_vec()];
        Ok(config)
    }
}

/// One HTTP/2 connection to the API server.
#[derive(Debug, Clone)]
pub struct KubeClient {
    send: h2::client::SendRequest<Bytes>,
    authority: String,
}

impl KubeClient {
    pub async fn connect(cfg: &Kubeconfig) -> anyhow::Result<KubeClient> {
        let tcp = tokio::net::TcpStream::connect(&cfg.authority).await?;
        tcp.set_nodelay(true)?;
        let connector = tokio_rustls::TlsConnector::from(Arc::new(cfg.tls()?));
        let tls = connector
            .connect(ServerName::try_from("127.0.0.1")?.to_owned(), tcp)
            .await?;
        let (send, conn) = h2::client::Builder::new()
            .initial_window_size(1 << 20)
            .initial_connection_window_size(16 << 20)
            .handshake(tls)
            .await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(KubeClient {
            send,
            authority: cfg.authority.clone(),
        })
    }

    /// A request's head, for a body of `content_type`.
    fn head(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
    ) -> anyhow::Result<http::Request<()>> {
        Ok(http::Request::builder()
            .method(method)
            .uri(format!("https://{}{path}", self.authority))
            .header("content-type", content_type)
            .header("accept", "application/json")
            .body(())?)
    }

    /// `GET path` with `Accept: accept`: the status code, the answer's headers and its whole
    /// body as bytes (a watch ends with its `timeoutSeconds`).
    pub async fn get_accepting(
        &self,
        path: &str,
        accept: &str,
    ) -> anyhow::Result<(u16, http::HeaderMap, Vec<u8>)> {
        let mut req = self.head("GET", path, "application/json")?;
        req.headers_mut()
            .insert("accept", http::HeaderValue::from_str(accept)?);
        let mut send = self.send.clone().ready().await?;
        let (resp, _) = send.send_request(req, true)?;
        let (parts, recv) = resp.await?.into_parts();
        Ok((parts.status.as_u16(), parts.headers, read_all(recv).await?))
    }

    async fn start(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(http::response::Parts, h2::RecvStream)> {
        let body = body.map(serde_json::to_vec).transpose()?.map(Bytes::from);
        self.start_raw(method, path, "application/json", body).await
    }

    async fn start_raw(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<(http::response::Parts, h2::RecvStream)> {
        let req = self.head(method, path, content_type)?;
        let mut send = self.send.clone().ready().await?;
        let (resp, mut stream) = send.send_request(req, body.is_none())?;
        if let Some(body) = body {
            if let Err(e) = stream.send_data(body, true) {
                // HTTP/2 lets a server answer before it has read the body and then reset the
                // stream (a refusal on the URL or headers alone); that answer is the result.
                return match resp.await {
                    Ok(r) => Ok(r.into_parts()),
                    Err(_) => Err(e.into()),
                };
            }
        }
        Ok(resp.await?.into_parts())
    }

    /// `GET path`, answered: its head and its body still to read (unread, the server's
    /// sending stalls at the stream's flow-control window; dropping it resets the stream).
    pub async fn open(
        &self,
        path: &str,
    ) -> anyhow::Result<(http::response::Parts, h2::RecvStream)> {
        self.start("GET", path, None).await
    }

    /// One request with a body of any media type: the status code and the raw answer.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        content_type: &str,
        body: Option<Bytes>,
    ) -> anyhow::Result<(u16, Vec<u8>)> {
        let (parts, recv) = self.start_raw(method, path, content_type, body).await?;
        Ok((parts.status.as_u16(), read_all(recv).await?))
    }

    /// One request; the status code and the JSON body.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let (parts, recv) = self.start(method, path, body).await?;
        let code = parts.status.as_u16();
        let buf = read_all(recv).await?;
        let value = serde_json::from_slice(&buf)
            .with_context(|| format!("{method} {path}: {}", String::from_utf8_lossy(&buf)))?;
        Ok((code, value))
    }

    /// GETs `path` until the answer is 200, up to 100 times 100 ms apart (a new RBAC binding
    /// reaches the authorizer's cache, a server's own request frees the one read slot): the
    /// last code.
    pub async fn get_until_ok(&self, path: &str) -> anyhow::Result<u16> {
        let mut code = 0;
        for _ in 0..100 {
            code = self.request("GET", path, None).await?.0;
            if code == 200 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        Ok(code)
    }

    /// [`KubeClient::request`] with the answer's headers (the body as text).
    pub async fn request_with_headers(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(u16, http::HeaderMap, String)> {
        let (parts, recv) = self.start(method, path, body).await?;
        let buf = read_all(recv).await?;
        Ok((
            parts.status.as_u16(),
            parts.headers,
            String::from_utf8_lossy(&buf).into_owned(),
        ))
    }

    /// Starts a request whose body never comes: the server's handler waits for it while
    /// the stream stays open. Dropping the returned stream (with its connection) ends it.
    pub async fn start_without_body(
        &self,
        method: &str,
        path: &str,
    ) -> anyhow::Result<(h2::client::ResponseFuture, h2::SendStream<Bytes>)> {
        let req = self.head(method, path, "application/json")?;
        let mut send = self.send.clone().ready().await?;
        Ok(send.send_request(req, false)?)
    }

    /// Like [`KubeClient::request`] but fails unless the status is 2xx.
    pub async fn ok(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let (code, v) = self.request(method, path, body).await?;
        if !(200..300).contains(&code) {
            bail!("{method} {path}: {code} {v}");
        }
        Ok(v)
    }

    /// Opens a watch (`path` should include `watch=1`); fails unless the answer is 200.
    pub async fn watch(&self, path: &str) -> anyhow::Result<WatchLines> {
        let (parts, recv) = self.start("GET", path, None).await?;
        let code = parts.status.as_u16();
        if code != 200 {
            bail!("watch {path}: {code}");
        }
        Ok(WatchLines {
            recv,
            buf: Vec::new(),
        })
    }
}

/// The events of a watch response, one JSON line each.
#[derive(Debug)]
pub struct WatchLines {
    recv: h2::RecvStream,
    buf: Vec<u8>,
}

impl WatchLines {
    /// The next event; `None` when the server ended the stream.
    pub async fn next(&mut self) -> anyhow::Result<Option<Value>> {
        match self.next_line().await? {
            Some(line) => Ok(Some(serde_json::from_slice(&line)?)),
            None => Ok(None),
        }
    }

    /// The next event's raw JSON line (with its newline); `None` when the stream ended.
    pub async fn next_line(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                return Ok(Some(self.buf.drain(..=i).collect()));
            }
            match self.recv.data().await {
                Some(chunk) => {
                    let chunk = chunk?;
                    let _ = self.recv.flow_control().release_capacity(chunk.len());
                    self.buf.extend_from_slice(&chunk);
                }
                None if self.buf.is_empty() => return Ok(None),
                None => bail!(
                    "watch ended mid-line: {:?}",
                    String::from_utf8_lossy(&self.buf)
                ),
            }
        }
    }
}

/// The whole body of a response stream, releasing flow-control capacity as it goes.
async fn read_all(mut recv: h2::RecvStream) -> anyhow::Result<Vec<u8>> {
    let mut buf = Vec::new();
    while let Some(chunk) = recv.data().await {
        let chunk = chunk?;
        let _ = recv.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
    Ok(buf)
}

//! A tiny HTTPS server on loopback for tests that play a remote service (authentication and
//! authorization webhooks, an OIDC issuer, an extension API server): a CA and a serving
//! certificate made with `openssl`, optionally client certificates checked against a CA, one
//! thread per connection, one request per connection, and a log of every request received.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// One request received: method, path, headers (names lower-cased), body, and the common
/// name of the client certificate (servers that ask for one).
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
    pub client_cn: Option<String>,
}

impl Received {
    /// Every value of header `name` (lower-case).
    pub fn header(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .collect()
    }
}

/// What the handler answers: status and JSON body.
pub type Handler = dyn Fn(&Received) -> (u16, String) + Send + Sync;

/// A running server (it lives as long as the test process; its port is never reused).
pub struct TlsServer {
    pub port: u16,
    /// The CA that signed the serving certificate (PEM file).
    pub ca: PathBuf,
    pub received: Arc<Mutex<Vec<Received>>>,
    stopped: Arc<AtomicBool>,
}

impl TlsServer {
    /// Closes the listening socket: later connections are refused.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which sees the flag and drops the listener.
        let _ = std::net::TcpStream::connect(("127.0.0.1", self.port));
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// The requests received so far for which `pred` holds.
    pub fn count(&self, pred: impl Fn(&Received) -> bool) -> usize {
        self.received
            .lock()
            .unwrap()
            .iter()
            .filter(|r| pred(r))
            .count()
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new(super::require_program("openssl", "openssl"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("running openssl");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Makes `ca.crt`, `server.crt`, `server.key` (EC P-256) in `dir` for `127.0.0.1`.
pub fn make_certs(dir: &Path) {
    make_certs_for(dir, &["127.0.0.1"]);
}

/// Makes `ca.crt`, `server.crt`, `server.key` (EC P-256) in `dir` for `ips` (IP addresses,
/// or DNS names).
pub fn make_certs_for(dir: &Path, ips: &[&str]) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509", "-days", "2", "-subj", "/CN=test-ca"];
    ca.extend(ec);
    ca.extend(["-keyout", "ca.key", "-out", "ca.crt"]);
    openssl(dir, &ca);
    let subject = format!("/CN={}", ips[0]);
    let mut csr = vec!["req", "-new", "-subj", &subject];
    csr.extend(ec);
    csr.extend(["-keyout", "server.key", "-out", "server.csr"]);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("ext.cnf"),
        format!(
            "subjectAltName={}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
            ips.iter()
                .map(|ip| match ip.parse::<std::net::IpAddr>() {
                    Ok(_) => format!("IP:{ip}"),
                    Err(_) => format!("DNS:{ip}"),
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.crt",
        ],
    );
}

/// Starts serving with `handler` (certificates made in `dir`).
pub fn start(dir: &Path, handler: Arc<Handler>) -> TlsServer {
    start_with(dir, &["127.0.0.1"], None, handler)
}

/// Starts serving with `handler` as `names` (certificates made in `dir`), asking clients for
/// a certificate from `client_ca` when given (connections without one are refused).
pub fn start_with(
    dir: &Path,
    names: &[&str],
    client_ca: Option<&Path>,
    handler: Arc<Handler>,
) -> TlsServer {
    make_certs_for(dir, names);
    let certs = CertificateDer::pem_file_iter(dir.join("server.crt"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca).unwrap() {
                roots.add(c.unwrap()).unwrap();
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(roots.into(), provider)
                    .build()
                    .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let config = Arc::new(builder.with_single_cert(certs, key).unwrap());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    let stopped = Arc::new(AtomicBool::new(false));
    let stop = stopped.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            if stop.load(Ordering::SeqCst) {
                return;
            }
            let Ok(tcp) = conn else { continue };
            let (config, handler, log) = (config.clone(), handler.clone(), log.clone());
            std::thread::spawn(move || {
                let Ok(tls) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut stream = rustls::StreamOwned::new(tls, tcp);
                if let Some(mut req) = read_request(&mut stream) {
                    req.client_cn = stream
                        .conn
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .and_then(|leaf| k3rs_auth::authn::X509::user_of(leaf).ok())
                        .map(|u| u.username);
                    log.lock().unwrap().push(req.clone());
                    let (status, body) = handler(&req);
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.flush();
                    stream.conn.send_close_notify();
                    let _ = stream.flush();
                }
            });
        }
    });
    TlsServer {
        port,
        ca: dir.join("ca.crt"),
        received,
        stopped,
    }
}

fn read_request(stream: &mut impl Read) -> Option<Received> {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut length = 0usize;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().ok()?;
            }
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Received {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
        client_cn: None,
    })
}

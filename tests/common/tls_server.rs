//! A tiny HTTPS server on loopback for tests that play a remote service (authentication and
//! authorization webhooks, an OIDC issuer): a CA and a `127.0.0.1` serving certificate made
//! with `openssl`, one thread per connection, one request per connection, and a log of
//! every request received.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// One request received: method, path, body.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub body: String,
}

/// What the handler answers: status and JSON body.
pub type Handler = dyn Fn(&Received) -> (u16, String) + Send + Sync;

/// A running server (it lives as long as the test process; its port is never reused).
pub struct TlsServer {
    pub port: u16,
    /// The CA that signed the serving certificate (PEM file).
    pub ca: PathBuf,
    pub received: Arc<Mutex<Vec<Received>>>,
}

impl TlsServer {
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

/// Makes `ca.crt`, `server.crt`, `server.key` (EC P-256) in `dir` for `ips`: IP addresses,
/// or DNS names (anything that does not parse as an IP address).
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
                .map(|n| match n.parse::<std::net::IpAddr>() {
                    Ok(_) => format!("IP:{n}"),
                    Err(_) => format!("DNS:{n}"),
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
    make_certs(dir);
    let certs = CertificateDer::pem_file_iter(dir.join("server.crt"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = Arc::new(
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(tcp) = conn else { continue };
            let (config, handler, log) = (config.clone(), handler.clone(), log.clone());
            std::thread::spawn(move || {
                let Ok(tls) = rustls::ServerConnection::new(config) else {
                    return;
                };
                let mut stream = rustls::StreamOwned::new(tls, tcp);
                if let Some(req) = read_request(&mut stream) {
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
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some(Received {
        method,
        path,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

//! The built-in ingress controller end to end: `k3rs server` with its embedded agent, inside a
//! network namespace the test makes (the node IP on a veth pair, no route out), with the
//! images of `scripts/build-images.sh`. Two Deployments of `busybox httpd` (serving `a` and
//! `b`) behind their Services and one Ingress of the default class, reached with curl on the
//! node's ports 80 and 443:
//! - by host (`a.example.com`, `b.example.com`), by path (`/b` Prefix, `/a` Exact), and a
//!   backend by Service port name;
//! - over TLS with a Secret made from the test's own CA, checked by curl verifying the
//!   certificate (`--cacert --resolve`), over HTTP/2 (ALPN); a host whose Secret is missing
//!   gets the self-signed default certificate and the Ingress a Warning Event saying why;
//! - a WebSocket echo through it (a backend the test runs as a thread inside the namespace,
//!   behind a selectorless Service and a hand-made EndpointSlice; the upgrade handshake done
//!   by hand), which keeps working while the Ingress is changed (the table is swapped, the
//!   tunnel kept);
//! - `X-Forwarded-For/Proto/Host` as the backend sees them;
//! - a path to a missing Service answers 503 and gives a Warning Event;
//! - `status.loadBalancer.ingress` is the node's address, and the `k3rs` IngressClass is
//!   the default one.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, Kubectl};
use crate::common::node_lab::{NodeLab, FAST_STATUS};

const NODE: &str = "ing-1";
const NODE_IP: &str = "10.96.200.1";
/// The other end of the veth pair: where the test's echo backend listens.
const ECHO_IP: &str = "10.96.200.2";
const ECHO_PORT: u16 = 9001;

const WORKLOAD: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: app-a}
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: docker.io/library/busybox:1.35
        command: [sh, -c, "mkdir -p /www && echo a > /www/index.html && echo a > /www/a && exec httpd -f -p 80 -h /www"]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: app-b}
spec:
  selector: {matchLabels: {app: b}}
  template:
    metadata: {labels: {app: b}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: docker.io/library/busybox:1.35
        command: [sh, -c, "mkdir -p /www/b && echo b > /www/index.html && echo b > /www/b/index.html && exec httpd -f -p 8000 -h /www"]
---
apiVersion: v1
kind: Service
metadata: {name: a}
spec:
  selector: {app: a}
  ports: [{port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: b}
spec:
  selector: {app: b}
  ports: [{name: http, port: 8080, targetPort: 8000}]
---
apiVersion: v1
kind: Service
metadata: {name: echo}
spec:
  ports: [{port: 9001}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: echo-manual
  labels: {kubernetes.io/service-name: echo}
addressType: IPv4
ports: [{port: 9001, protocol: TCP}]
endpoints: [{addresses: [10.96.200.2], conditions: {ready: true}}]
"#;

fn ingress(extra_path: &str) -> String {
    format!(
        r#"
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: web}}
spec:
  tls:
  - {{hosts: [secure.example.com], secretName: secure-tls}}
  - {{hosts: [nosecret.example.com], secretName: no-such-secret}}
  rules:
  - host: a.example.com
    http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: a, port: {{number: 80}}}}}}}}]}}
  - host: b.example.com
    http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: b, port: {{name: http}}}}}}}}]}}
  - host: secure.example.com
    http: {{paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: a, port: {{number: 80}}}}}}}}]}}
  - http:
      paths:
      - {{path: /b, pathType: Prefix, backend: {{service: {{name: b, port: {{number: 8080}}}}}}}}
      - {{path: /a, pathType: Exact, backend: {{service: {{name: a, port: {{number: 80}}}}}}}}
      - {{path: /ws, pathType: Prefix, backend: {{service: {{name: echo, port: {{number: 9001}}}}}}}}
      - {{path: /headers, pathType: Exact, backend: {{service: {{name: echo, port: {{number: 9001}}}}}}}}
      - {{path: /missing, pathType: Prefix, backend: {{service: {{name: gone, port: {{number: 80}}}}}}}}
{extra_path}"#
    )
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `curl -s --max-time 5 <args>`: (exit code, stdout, stderr).
fn curl(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(common::require_program("curl", "curl"))
        .args(["-s", "--max-time", "5"])
        .args(args)
        .output()
        .expect("curl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The body of `GET http://NODE_IP<path>` with `Host: host`.
fn get(host: &str, path: &str) -> String {
    let (_, out, _) = curl(&[
        "-H",
        &format!("Host: {host}"),
        &format!("http://{NODE_IP}{path}"),
    ]);
    out.trim().to_string()
}

/// The status code of `GET http://NODE_IP<path>` with `Host: host`.
fn status(host: &str, path: &str) -> String {
    let (_, out, _) = curl(&[
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-H",
        &format!("Host: {host}"),
        &format!("http://{NODE_IP}{path}"),
    ]);
    out
}

/// The WebSocket accept value for `key` (RFC 6455: base64 of SHA-1 of key + GUID), with the
/// openssl CLI (no SHA-1 crate in the tree).
fn ws_accept(key: &str) -> String {
    let mut child = Command::new(common::require_program("openssl", "openssl"))
        .args(["dgst", "-sha1", "-binary"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("openssl");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, out.stdout)
}

/// Reads an HTTP head (through the empty line).
fn read_head(r: &mut impl BufRead) -> Vec<String> {
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            return lines;
        }
        let line = line.trim_end().to_string();
        if line.is_empty() {
            return lines;
        }
        lines.push(line);
    }
}

fn header<'a>(head: &'a [String], name: &str) -> Option<&'a str> {
    head.iter().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// One WebSocket frame: (opcode, payload); unmasks a masked one.
fn read_frame(r: &mut impl Read) -> Option<(u8, Vec<u8>)> {
    let mut h = [0u8; 2];
    r.read_exact(&mut h).ok()?;
    let masked = h[1] & 0x80 != 0;
    let mut len = u64::from(h[1] & 0x7f);
    if len == 126 {
        let mut b = [0u8; 2];
        r.read_exact(&mut b).ok()?;
        len = u64::from(u16::from_be_bytes(b));
    } else if len == 127 {
        let mut b = [0u8; 8];
        r.read_exact(&mut b).ok()?;
        len = u64::from_be_bytes(b);
    }
    let mut mask = [0u8; 4];
    if masked {
        r.read_exact(&mut mask).ok()?;
    }
    let mut payload = vec![0u8; usize::try_from(len).ok()?];
    r.read_exact(&mut payload).ok()?;
    if masked {
        for (i, b) in payload.iter_mut().enumerate() {
            *b ^= mask[i % 4];
        }
    }
    Some((h[0] & 0x0f, payload))
}

/// A frame with FIN set (`mask`: as a client sends it).
fn frame(opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    assert!(payload.len() < 126);
    let mut f = vec![0x80 | opcode, payload.len() as u8];
    match mask {
        Some(m) => {
            f[1] |= 0x80;
            f.extend_from_slice(&m);
            f.extend(payload.iter().enumerate().map(|(i, b)| b ^ m[i % 4]));
        }
        None => f.extend_from_slice(payload),
    }
    f
}

/// The test's backend at ECHO_IP:ECHO_PORT, one thread per connection: a WebSocket upgrade
/// is accepted and every text frame echoed; any other request is answered with its own head
/// (so the test sees the headers the proxy sent).
fn echo_backend() {
    let listener = TcpListener::bind((ECHO_IP, ECHO_PORT)).expect("bind the echo backend");
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                let head = read_head(&mut r);
                if let Some(key) = header(&head, "sec-websocket-key") {
                    let reply = format!(
                        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}\r\n\r\n",
                        ws_accept(key)
                    );
                    w.write_all(reply.as_bytes()).unwrap();
                    while let Some((op, payload)) = read_frame(&mut r) {
                        if op == 8 {
                            let _ = w.write_all(&frame(8, &[], None));
                            return;
                        }
                        if w.write_all(&frame(op, &payload, None)).is_err() {
                            return;
                        }
                    }
                } else {
                    let body = head.join("\n") + "\n";
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = w.write_all(reply.as_bytes());
                }
            });
        }
    });
}

/// A WebSocket client through the ingress at `/ws`: the 101 head and the stream.
fn websocket() -> (Vec<String>, BufReader<TcpStream>, TcpStream) {
    let s = TcpStream::connect((NODE_IP, 80)).expect("connect to the ingress");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let key = "dGhlIHNhbXBsZSBub25jZQ==";
    let req = format!(
        "GET /ws HTTP/1.1\r\nHost: ws.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    );
    let mut w = s.try_clone().unwrap();
    w.write_all(req.as_bytes()).unwrap();
    let mut r = BufReader::new(s);
    let head = read_head(&mut r);
    (head, r, w)
}

fn echo(r: &mut BufReader<TcpStream>, w: &mut TcpStream, text: &str) -> String {
    w.write_all(&frame(1, text.as_bytes(), Some([1, 2, 3, 4])))
        .unwrap();
    let (op, payload) = read_frame(r).expect("an echoed frame");
    assert_eq!(op, 1);
    String::from_utf8(payload).unwrap()
}

fn events_of(k: &Kubectl, reason: &str) -> Vec<String> {
    let ev = json(k, &["get", "events", "-o", "json"]);
    ev["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["involvedObject"]["kind"] == "Ingress" && e["involvedObject"]["name"] == "web"
        })
        .filter(|e| e["reason"] == reason && e["type"] == "Warning")
        .filter_map(|e| e["message"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn ingress_routes_by_host_and_path_with_tls_and_websockets() {
    NodeLab::run("ing", scenario);
}

fn scenario(lab: &NodeLab) {
    ip(&[
        "link", "add", "ing0", "type", "veth", "peer", "name", "ing1",
    ]);
    ip(&["addr", "add", &format!("{NODE_IP}/24"), "dev", "ing0"]);
    ip(&["link", "set", "ing0", "up"]);
    ip(&["link", "set", "ing1", "up"]);
    ip(&["addr", "add", &format!("{ECHO_IP}/32"), "dev", "ing1"]);
    echo_backend();
    let certs = tempfile::tempdir().unwrap();
    common::tls_server::make_certs_for(certs.path(), &["secure.example.com"]);

    let (mut server, k) = lab.start_server(NODE, NODE_IP, &FAST_STATUS, &[]);
    common::wait_for("the node to be Ready", Duration::from_secs(120), || {
        server.assert_running();
        let n = json(&k, &["get", "node", NODE, "-o", "json"]);
        n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
            .then_some(())
    });
    let class = common::wait_for("the k3rs IngressClass", Duration::from_secs(30), || {
        let out = k.run(&["get", "ingressclass", "k3rs", "-o", "json"]);
        out.ok
            .then(|| serde_json::from_str::<serde_json::Value>(&out.stdout).unwrap())
    });
    assert_eq!(class["spec"]["controller"], "k3rs.io/ingress");
    assert_eq!(
        class["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"],
        "true"
    );

    k.ok_stdin(&["apply", "-f", "-"], Some(WORKLOAD));
    let (crt, key) = (
        certs.path().join("server.crt"),
        certs.path().join("server.key"),
    );
    k.ok(&[
        "create",
        "secret",
        "tls",
        "secure-tls",
        "--cert",
        crt.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
    ]);
    k.ok_stdin(&["apply", "-f", "-"], Some(&ingress("")));

    // Host routing, once both Deployments' pods are ready.
    common::wait_for(
        "a and b through the ingress",
        Duration::from_secs(180),
        || {
            server.assert_running();
            (get("a.example.com", "/") == "a" && get("b.example.com", "/") == "b").then_some(())
        },
    );
    // Path routing on the host-less rule: Prefix element-wise, Exact exactly.
    assert_eq!(get("other.example.com", "/b/"), "b");
    assert_eq!(status("other.example.com", "/bb"), "404");
    assert_eq!(get("other.example.com", "/a"), "a");
    assert_eq!(status("other.example.com", "/a/"), "404");

    // A missing Service: 503 and a Warning Event.
    assert_eq!(status("other.example.com", "/missing/x"), "503");
    let (_, body, _) = curl(&[&format!("http://{NODE_IP}/missing")]);
    assert!(body.contains("service default/gone not found"), "{body}");
    common::wait_for("the ServiceNotFound event", Duration::from_secs(30), || {
        let m = events_of(&k, "ServiceNotFound");
        m.iter()
            .any(|m| m.contains("service default/gone not found"))
            .then_some(())
    });

    // The headers the backend sees.
    let (_, head, _) = curl(&[
        "-H",
        "Host: Web.Example.com:80",
        &format!("http://{NODE_IP}/headers"),
    ]);
    let head: Vec<String> = head.lines().map(str::to_string).collect();
    assert_eq!(head[0], "GET /headers HTTP/1.1", "{head:?}");
    assert_eq!(header(&head, "x-forwarded-for"), Some(NODE_IP), "{head:?}");
    assert_eq!(header(&head, "x-forwarded-proto"), Some("http"), "{head:?}");
    assert_eq!(
        header(&head, "x-forwarded-host"),
        Some("web.example.com"),
        "{head:?}"
    );
    assert_eq!(
        header(&head, "host"),
        Some("Web.Example.com:80"),
        "{head:?}"
    );

    // TLS with the Secret's certificate, verified against the test CA, over HTTP/2.
    let ca = certs.path().join("ca.crt");
    let resolve = format!("secure.example.com:443:{NODE_IP}");
    let tls = common::wait_for(
        "TLS with the Secret's certificate",
        Duration::from_secs(30),
        || {
            let (code, out, err) = curl(&[
                "--cacert",
                ca.to_str().unwrap(),
                "--resolve",
                &resolve,
                "--http2",
                "-w",
                "\n%{http_version}",
                "https://secure.example.com/",
            ]);
            (code == 0).then_some(out).or_else(|| {
                eprintln!("curl: {code} {err}");
                None
            })
        },
    );
    let lines: Vec<&str> = tls.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines, ["a", "2"], "{tls}");
    // A rotated certificate (a new CA) is served once the node reads the Secret again (at
    // least every 30 s: a node gets TLS Secrets by name, it cannot watch them all).
    let rotated = tempfile::tempdir().unwrap();
    common::tls_server::make_certs_for(rotated.path(), &["secure.example.com"]);
    let secret = k.ok(&[
        "create",
        "secret",
        "tls",
        "secure-tls",
        "--cert",
        rotated.path().join("server.crt").to_str().unwrap(),
        "--key",
        rotated.path().join("server.key").to_str().unwrap(),
        "--dry-run=client",
        "-o",
        "yaml",
    ]);
    k.ok_stdin(&["apply", "-f", "-"], Some(&secret));
    let new_ca = rotated.path().join("ca.crt");
    common::wait_for("the rotated certificate", Duration::from_secs(60), || {
        let (code, out, _) = curl(&[
            "--cacert",
            new_ca.to_str().unwrap(),
            "--resolve",
            &resolve,
            "https://secure.example.com/",
        ]);
        (code == 0 && out.trim() == "a").then_some(())
    });
    let ca = new_ca;
    // HTTP/1.1 over TLS too (a host-less rule, the default certificate), with
    // X-Forwarded-Proto https.
    let resolve_other = format!("other.example.com:443:{NODE_IP}");
    let (code, head, err) = curl(&[
        "-k",
        "--resolve",
        &resolve_other,
        "--http1.1",
        "https://other.example.com/headers",
    ]);
    assert_eq!(code, 0, "{err}");
    let head: Vec<String> = head.lines().map(str::to_string).collect();
    assert_eq!(
        header(&head, "x-forwarded-proto"),
        Some("https"),
        "{head:?}"
    );

    // A host whose Secret is missing: the default certificate, which the test CA does not
    // verify, and a Warning Event saying why.
    let resolve_missing = format!("nosecret.example.com:443:{NODE_IP}");
    let (code, _, _) = curl(&[
        "--cacert",
        ca.to_str().unwrap(),
        "--resolve",
        &resolve_missing,
        "https://nosecret.example.com/a",
    ]);
    assert_eq!(
        code, 60,
        "the default certificate must not verify (curl exit 60)"
    );
    let (code, body, err) = curl(&[
        "-k",
        "-v",
        "--resolve",
        &resolve_missing,
        "https://nosecret.example.com/a",
    ]);
    assert_eq!((code, body.trim()), (0, "a"), "{err}");
    assert!(err.contains("K3RS INGRESS DEFAULT CERT"), "{err}");
    common::wait_for("the SecretNotFound event", Duration::from_secs(30), || {
        events_of(&k, "SecretNotFound")
            .iter()
            .any(|m| m.contains("default/no-such-secret not found"))
            .then_some(())
    });

    // A WebSocket echo through the ingress; the tunnel survives an Ingress change.
    let (head, mut r, mut w) = websocket();
    assert_eq!(head[0], "HTTP/1.1 101 Switching Protocols", "{head:?}");
    assert_eq!(
        header(&head, "sec-websocket-accept"),
        Some(ws_accept("dGhlIHNhbXBsZSBub25jZQ==").as_str())
    );
    assert_eq!(echo(&mut r, &mut w, "hello"), "hello");
    assert_eq!(status("x", "/new"), "404");
    let extra = "      - {path: /new, pathType: Exact, backend: {service: {name: echo, port: {number: 9001}}}}\n";
    k.ok_stdin(&["apply", "-f", "-"], Some(&ingress(extra)));
    common::wait_for("the new path", Duration::from_secs(30), || {
        get("x", "/new")
            .starts_with("GET /new HTTP/1.1")
            .then_some(())
    });
    assert_eq!(echo(&mut r, &mut w, "still here"), "still here");
    w.write_all(&frame(8, &[], Some([0; 4]))).unwrap();

    // The status: the node's address, written by the server.
    let ing = common::wait_for("the Ingress status", Duration::from_secs(30), || {
        let i = json(&k, &["get", "ingress", "web", "-o", "json"]);
        (i["status"]["loadBalancer"]["ingress"][0]["ip"] == NODE_IP).then_some(i)
    });
    assert_eq!(
        ing["status"]["loadBalancer"]["ingress"]
            .as_array()
            .map(Vec::len),
        Some(1),
        "{ing}"
    );
    server.assert_running();
}

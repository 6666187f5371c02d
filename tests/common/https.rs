//! Plain HTTPS requests through `curl` (for endpoints kubectl and etcdctl do not reach, and
//! for requests without credentials, where kubectl would prompt for a password).

use std::path::Path;
use std::process::Command;

/// `method url` verified against `ca`, with the client certificate `(cert, key)` if given:
/// `(status code, body)`; code 0 when no HTTP answer came (e.g. the TLS handshake failed).
pub fn request(
    method: &str,
    url: &str,
    ca: &Path,
    client: Option<(&Path, &Path)>,
) -> (u16, String) {
    request_with_headers(method, url, ca, client, &[])
}

/// [`request`] with request `headers` (`Name: value`).
pub fn request_with_headers(
    method: &str,
    url: &str,
    ca: &Path,
    client: Option<(&Path, &Path)>,
    headers: &[&str],
) -> (u16, String) {
    let mut cmd = Command::new(super::require_program("curl", "curl"));
    for h in headers {
        cmd.arg("-H").arg(h);
    }
    cmd.args([
        "-sS",
        "--max-time",
        "20",
        "-X",
        method,
        "-w",
        "\n%{http_code}",
        "--cacert",
    ])
    .arg(ca);
    if let Some((cert, key)) = client {
        cmd.arg("--cert").arg(cert).arg("--key").arg(key);
    }
    let out = cmd.arg(url).output().expect("running curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

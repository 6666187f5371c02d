//! Kubeconfigs for identities other than the admin: client certificates signed by a test
//! server's client CA (`openssl`), bearer tokens, and no credentials at all.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::k3rs::K3rs;

/// The server URL and CA data of the admin kubeconfig.
fn cluster_of(server: &K3rs) -> (String, String) {
    let admin = std::fs::read_to_string(server.kubeconfig()).expect("admin kubeconfig");
    let field = |key: &str| {
        admin
            .lines()
            .find_map(|l| l.trim().strip_prefix(key).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("{key} in the admin kubeconfig"))
    };
    (field("server:"), field("certificate-authority-data:"))
}

fn write_kubeconfig(server: &K3rs, name: &str, user_yaml: &str) -> PathBuf {
    let (url, ca) = cluster_of(server);
    let path = server.data_dir().join(format!("kubeconfig-{name}.yaml"));
    let yaml = format!(
        "apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: {ca}
    server: {url}
  name: default
contexts:
- context:
    cluster: default
    user: u
  name: default
current-context: default
users:
- name: u
  user:{user_yaml}
"
    );
    std::fs::write(&path, yaml).expect("writing a kubeconfig");
    path
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .output()
        .expect("running openssl (apt-get install openssl)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A client certificate for `user` in `groups`, signed by the server's client CA; returns
/// `(cert, key)` paths in the server's data dir.
pub fn client_cert(server: &K3rs, user: &str, groups: &[&str]) -> (PathBuf, PathBuf) {
    let tls = server.data_dir().join("server/tls");
    let stem = user.replace([':', '/'], "_");
    let dir = server.data_dir().join("test-users");
    std::fs::create_dir_all(&dir).unwrap();
    let csr = dir.join(format!("{stem}.csr"));
    let cert = dir.join(format!("{stem}.crt"));
    let mut subject = format!("/CN={user}");
    for g in groups {
        subject.push_str(&format!("/O={g}"));
    }
    let p = |p: &Path| p.display().to_string();
    let (_, key) = certificate_request(server, &stem, &subject);
    // A v3 client certificate (rustls refuses v1 certificates, which `x509 -req` makes
    // when given no extensions).
    let ext = dir.join(format!("{stem}.ext"));
    std::fs::write(
        &ext,
        "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-extfile",
        &p(&ext),
        "-in",
        &p(&csr),
        "-CA",
        &p(&tls.join("client-ca.crt")),
        "-CAkey",
        &p(&tls.join("client-ca.key")),
        "-CAcreateserial",
        "-days",
        "2",
        "-out",
        &p(&cert),
    ]);
    (cert, key)
}

/// The server's admin [`Kubeconfig`](super::kube::Kubeconfig) with a client certificate
/// of `user` in `groups` instead (for the in-test HTTP/2 client).
pub fn client_config(server: &K3rs, user: &str, groups: &[&str]) -> super::kube::Kubeconfig {
    let admin = super::kube::Kubeconfig::read(&server.kubeconfig()).expect("admin kubeconfig");
    let (cert, key) = client_cert(server, user, groups);
    super::kube::Kubeconfig {
        cert_pem: std::fs::read(cert).expect("client certificate"),
        key_pem: std::fs::read(key).expect("client key"),
        ..admin
    }
}

/// A kubeconfig authenticating as `user` in `groups` with a client certificate.
pub fn cert_kubeconfig(server: &K3rs, user: &str, groups: &[&str]) -> PathBuf {
    let (cert, key) = client_cert(server, user, groups);
    let user_yaml = format!(
        "\n    client-certificate: {}\n    client-key: {}",
        cert.display(),
        key.display()
    );
    write_kubeconfig(server, &user.replace([':', '/'], "_"), &user_yaml)
}

/// A kubeconfig presenting the client certificate and key files `cert`, `key` (e.g. one the
/// cluster signed through the Certificates API).
pub fn cert_files_kubeconfig(server: &K3rs, name: &str, cert: &Path, key: &Path) -> PathBuf {
    let user_yaml = format!(
        "\n    client-certificate: {}\n    client-key: {}",
        cert.display(),
        key.display()
    );
    write_kubeconfig(server, name, &user_yaml)
}

/// A PEM certificate request for `subject` (e.g. `/O=system:nodes/CN=system:node:n1`) with a
/// new P-256 key; returns `(request PEM, key path)`, the key in the server's data dir.
pub fn certificate_request(server: &K3rs, name: &str, subject: &str) -> (String, PathBuf) {
    certificate_request_with_sans(server, name, subject, &[])
}

/// [`certificate_request`] asking also for the subjectAltNames `sans` (`DNS:x`, `IP:1.2.3.4`).
pub fn certificate_request_with_sans(
    server: &K3rs,
    name: &str,
    subject: &str,
    sans: &[&str],
) -> (String, PathBuf) {
    let dir = server.data_dir().join("test-users");
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join(format!("{name}.key"));
    let csr = dir.join(format!("{name}.csr"));
    let p = |p: &Path| p.display().to_string();
    openssl(&[
        "ecparam",
        "-name",
        "prime256v1",
        "-genkey",
        "-noout",
        "-out",
        &p(&key),
    ]);
    let san = format!("subjectAltName={}", sans.join(","));
    let (key_path, csr_path) = (p(&key), p(&csr));
    let mut args = vec![
        "req", "-new", "-key", &key_path, "-subj", subject, "-out", &csr_path,
    ];
    if !sans.is_empty() {
        args.extend(["-addext", &san]);
    }
    openssl(&args);
    (std::fs::read_to_string(&csr).unwrap(), key)
}

/// A kubeconfig presenting `token` as a bearer token.
pub fn token_kubeconfig(server: &K3rs, name: &str, token: &str) -> PathBuf {
    write_kubeconfig(server, name, &format!("\n    token: {token}"))
}

/// An HTTPS request with no credentials (kubectl prompts for a password when its kubeconfig
/// has none, so anonymous requests go through `curl`): `(status code, body)`.
pub fn anonymous_request(server: &K3rs, method: &str, path: &str) -> (u16, String) {
    let (url, _) = cluster_of(server);
    let ca = server.data_dir().join("server/tls/server-ca.crt");
    super::https::request(method, &format!("{url}{path}"), &ca, None)
}

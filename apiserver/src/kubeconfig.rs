//! The admin kubeconfig (`--write-kubeconfig`): the server CA and the admin client
//! certificate embedded, pointing at `https://127.0.0.1:<port>`.

use std::path::Path;

use base64::Engine;

/// The kubeconfig YAML.
pub fn render(server_url: &str, ca_pem: &[u8], cert_pem: &[u8], key_pem: &[u8]) -> String {
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    format!(
        "apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: {ca}
    server: {server_url}
  name: default
contexts:
- context:
    cluster: default
    user: default
  name: default
current-context: default
preferences: {{}}
users:
- name: default
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
",
        ca = b64(ca_pem),
        cert = b64(cert_pem),
        key = b64(key_pem),
    )
}

/// Writes the kubeconfig atomically with `mode`, creating the parent directory.
pub fn write(path: &Path, contents: &str, mode: u32) -> Result<(), k3rs_pki::Error> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|source| k3rs_pki::Error::Io {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    k3rs_pki::files::write_atomic(path, contents.as_bytes(), mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_yaml_kubectl_reads() {
        let y = render("https://127.0.0.1:6443", b"CA", b"CERT", b"KEY");
        let v: serde_json::Value = serde_norway::from_str(&y).unwrap();
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "https://127.0.0.1:6443"
        );
        assert_eq!(v["users"][0]["user"]["client-key-data"], "S0VZ");
        assert_eq!(v["current-context"], "default");
    }
}

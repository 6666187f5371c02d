//! The agent's credentials on disk, under `<data-dir>/agent/`:
//!
//! | file | what |
//! |---|---|
//! | `server-ca.crt` | the CA from the server's `/cacerts` (the one the join token pins) |
//! | `kubelet-client.crt` / `.key` | the node's client identity `system:node:<name>` |
//! | `serving-kubelet.crt` / `.key` | the kubelet's serving certificate (once issued) |
//! | `kubelet.kubeconfig` | server URL, the CA and the client certificate, for the kubelet |
//! | `node-password` | the node's password ([`super::password`]) |
//!
//! # Guarantees
//! - Every file is written atomically (temp file in the same directory, fsync, rename); keys
//!   and the kubeconfig are created with mode 0600 (never readable by others, even briefly),
//!   certificates 0644; directories are created 0700.
//! - A certificate and its key are written key first, certificate last, so a crash leaves
//!   either the old pair or a new key with the old certificate (which [`load_pair`] rejects as
//!   not matching), never a new certificate with an old key.

use std::fs;
use std::path::{Path, PathBuf};

/// Mode of keys and kubeconfigs.
pub const PRIVATE: u32 = 0o600;
/// Mode of certificates.
pub const PUBLIC: u32 = 0o644;

/// The agent's credential paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `<data-dir>/agent`.
    pub dir: PathBuf,
}

impl Layout {
    /// The layout under `<data_dir>/agent`.
    pub fn new(data_dir: &Path) -> Layout {
        Layout {
            dir: data_dir.join("agent"),
        }
    }
    /// The pinned server CA.
    pub fn server_ca(&self) -> PathBuf {
        self.dir.join("server-ca.crt")
    }
    /// The kubelet's client certificate.
    pub fn client_cert(&self) -> PathBuf {
        self.dir.join("kubelet-client.crt")
    }
    /// The kubelet's client key.
    pub fn client_key(&self) -> PathBuf {
        self.dir.join("kubelet-client.key")
    }
    /// The kubelet's serving certificate.
    pub fn serving_cert(&self) -> PathBuf {
        self.dir.join("serving-kubelet.crt")
    }
    /// The kubelet's serving key.
    pub fn serving_key(&self) -> PathBuf {
        self.dir.join("serving-kubelet.key")
    }
    /// The node's password (k3s's node password).
    pub fn node_password(&self) -> PathBuf {
        self.dir.join("node-password")
    }
    /// The kubelet's kubeconfig (the client certificate and the server CA).
    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.join("kubelet.kubeconfig")
    }
}

/// A file that could not be read or written.
#[derive(Debug, thiserror::Error)]
#[error("{op} {path}")]
pub struct IoError {
    /// `reading` or `writing`.
    pub op: &'static str,
    /// The file.
    pub path: PathBuf,
    /// What failed.
    #[source]
    pub source: std::io::Error,
}

/// Writes `contents` to `path` atomically with `mode`, creating parent directories (0700).
pub fn write_atomic(path: &Path, contents: &[u8], mode: u32) -> Result<(), IoError> {
    k3rs_apimachinery::fs::write_atomic(path, contents, mode).map_err(|(path, source)| IoError {
        op: "writing",
        path,
        source,
    })
}

/// Reads `path`, `None` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, IoError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(IoError {
            op: "reading",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Writes a key and its certificate (key first).
pub fn write_pair(cert: &Path, cert_pem: &[u8], key: &Path, key_pem: &[u8]) -> Result<(), IoError> {
    write_atomic(key, key_pem, PRIVATE)?;
    write_atomic(cert, cert_pem, PUBLIC)
}

/// The kubeconfig the kubelet uses: `server`, the CA and the client pair by path.
pub fn kubeconfig(server: &str, layout: &Layout) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: {server}
    certificate-authority: {ca}
users:
- name: kubelet
  user:
    client-certificate: {cert}
    client-key: {key}
contexts:
- name: local
  context:
    cluster: local
    user: kubelet
current-context: local
",
        ca = layout.server_ca().display(),
        cert = layout.client_cert().display(),
        key = layout.client_key().display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn pairs_are_written_with_their_modes_and_no_temp_file_is_left() {
        let d = tempfile::tempdir().unwrap();
        let l = Layout::new(d.path());
        write_pair(&l.client_cert(), b"cert", &l.client_key(), b"key").unwrap();
        write_pair(&l.client_cert(), b"cert2", &l.client_key(), b"key2").unwrap();
        assert_eq!(fs::read(l.client_cert()).unwrap(), b"cert2");
        assert_eq!(fs::read(l.client_key()).unwrap(), b"key2");
        assert_eq!(mode(&l.client_key()), 0o600);
        assert_eq!(mode(&l.client_cert()), 0o644);
        assert_eq!(mode(&l.dir), 0o700);
        let mut names: Vec<_> = fs::read_dir(&l.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["kubelet-client.crt", "kubelet-client.key"]);
        assert_eq!(read_optional(&l.serving_cert()).unwrap(), None);
    }

    #[test]
    fn the_kubeconfig_names_the_files() {
        let l = Layout::new(Path::new("/d"));
        let k = kubeconfig("https://10.0.0.1:6443", &l);
        assert!(k.contains("    server: https://10.0.0.1:6443\n"));
        assert!(k.contains("    certificate-authority: /d/agent/server-ca.crt\n"));
        assert!(k.contains("    client-certificate: /d/agent/kubelet-client.crt\n"));
        assert!(k.contains("    client-key: /d/agent/kubelet-client.key\n"));
    }
}

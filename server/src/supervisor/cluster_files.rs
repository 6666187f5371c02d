//! What servers of one cluster share, and what `/v1-k3rs/server-bootstrap` hands a joining
//! server: the CAs with their keys and the service-account signing key (never a server's own
//! serving or client certificates), the server token's secret, the etcd cluster ID and, when
//! the server encrypts Secrets, its key file (a joining server must decrypt what the others
//! stored).
//!
//! # Guarantees
//! - [`install`] writes keys mode 0600 and certificates 0644, atomically, and only files named
//!   in [`SHARED`] (a payload naming any other path is refused, so a malicious server cannot
//!   write outside the TLS directory).

use std::collections::BTreeMap;
use std::path::Path;

use base64::Engine;
use serde::{Deserialize, Serialize};

use k3rs_pki::files::{read_optional, write_atomic, PRIVATE, PUBLIC};

/// The cluster CAs, relative to `<data-dir>/server/tls/`.
pub const SHARED: &[&str] = &[
    "server-ca.crt",
    "server-ca.key",
    "client-ca.crt",
    "client-ca.key",
    "request-header-ca.crt",
    "request-header-ca.key",
    "etcd/server-ca.crt",
    "etcd/server-ca.key",
    "etcd/peer-ca.crt",
    "etcd/peer-ca.key",
    "service.key",
];

/// The body of `/v1-k3rs/server-bootstrap`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapData {
    /// The etcd cluster ID (hex), reported in every etcd response header.
    pub cluster_id: String,
    /// The server token's secret (`server:<secret>`), so every server hands out the same token.
    pub token_secret: String,
    /// Path under `tls/` → base64 of the file.
    pub files: BTreeMap<String, String>,
    /// Base64 of `<data-dir>/server/cred/encryption-config.json`, when the server has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption_config: Option<String>,
}

/// The secrets-encryption key file of the server whose TLS directory is `tls_dir`.
pub fn encryption_config_path(tls_dir: &Path) -> std::path::PathBuf {
    tls_dir
        .parent()
        .unwrap_or(tls_dir)
        .join("cred")
        .join(k3rs_datastore::encryption::config::FILE)
}

/// Why the bootstrap data could not be read or installed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    #[error(transparent)]
    Pki(#[from] k3rs_pki::Error),
    /// A cluster file is not on disk (or not in the bootstrap data).
    #[error("cluster file {0} is missing")]
    Missing(String),
    /// The bootstrap data has a file that is not a cluster file.
    #[error("bootstrap data names {0:?}, which is not a cluster file")]
    Unexpected(String),
    /// A file's content in the bootstrap data is not base64.
    #[error("bootstrap data: {0} is not valid base64")]
    Encoding(String),
}

/// Reads the shared files under `tls_dir`.
pub fn collect(
    tls_dir: &Path,
    cluster_id: u64,
    token_secret: &str,
) -> Result<BootstrapData, Error> {
    let mut files = BTreeMap::new();
    for name in SHARED {
        let text =
            read_optional(&tls_dir.join(name))?.ok_or_else(|| Error::Missing(name.to_string()))?;
        files.insert(
            name.to_string(),
            base64::engine::general_purpose::STANDARD.encode(text),
        );
    }
    let encryption_config = read_optional(&encryption_config_path(tls_dir))?
        .map(|text| base64::engine::general_purpose::STANDARD.encode(text));
    Ok(BootstrapData {
        cluster_id: format!("{cluster_id:016x}"),
        token_secret: token_secret.to_string(),
        files,
        encryption_config,
    })
}

/// Writes every shared file of `data` under `tls_dir` (all of them must be present).
pub fn install(tls_dir: &Path, data: &BootstrapData) -> Result<(), Error> {
    if let Some(other) = data.files.keys().find(|k| !SHARED.contains(&k.as_str())) {
        return Err(Error::Unexpected(other.clone()));
    }
    let mut decoded = Vec::new();
    for name in SHARED {
        let b64 = data
            .files
            .get(*name)
            .ok_or_else(|| Error::Missing(name.to_string()))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| Error::Encoding(name.to_string()))?;
        decoded.push((*name, bytes));
    }
    // Keys first: a certificate on disk always has its key.
    decoded.sort_by_key(|(name, _)| !name.ends_with(".key"));
    for (name, bytes) in decoded {
        let mode = if name.ends_with(".key") {
            PRIVATE
        } else {
            PUBLIC
        };
        write_atomic(&tls_dir.join(name), &bytes, mode)?;
    }
    if let Some(b64) = &data.encryption_config {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| Error::Encoding(k3rs_datastore::encryption::config::FILE.to_string()))?;
        write_atomic(&encryption_config_path(tls_dir), &bytes, PRIVATE)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn collects_the_cas_and_installs_them_elsewhere() {
        let a = tempfile::tempdir().unwrap();
        let pki = k3rs_pki::Pki::ensure(a.path(), &Default::default()).unwrap();
        let data = collect(pki.tls_dir(), 0xabc, "s3cret").unwrap();
        assert_eq!(data.cluster_id, "0000000000000abc");
        assert_eq!(data.files.len(), SHARED.len());
        assert!(!data.files.keys().any(|k| k.contains("serving")));

        let b = tempfile::tempdir().unwrap();
        let tls = b.path().join("tls");
        install(&tls, &data).unwrap();
        for name in SHARED {
            let got = std::fs::read(tls.join(name)).unwrap();
            assert_eq!(
                got,
                std::fs::read(pki.tls_dir().join(name)).unwrap(),
                "{name}"
            );
        }
        let mode = std::fs::metadata(tls.join("etcd/peer-ca.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // The joiner's own certificates are then signed by the cluster's CAs.
        let joined = k3rs_pki::Pki::ensure(b.path(), &Default::default()).unwrap();
        assert_eq!(
            std::fs::read(joined.server_ca_cert()).unwrap(),
            std::fs::read(pki.server_ca_cert()).unwrap()
        );
        // … and its service-account tokens verify on every server.
        assert_eq!(
            std::fs::read(joined.service_account_key()).unwrap(),
            std::fs::read(pki.service_account_key()).unwrap()
        );
    }

    #[test]
    fn the_secrets_encryption_keys_travel_when_present() {
        let a = tempfile::tempdir().unwrap();
        let pki = k3rs_pki::Pki::ensure(a.path(), &Default::default()).unwrap();
        let data = collect(pki.tls_dir(), 1, "s").unwrap();
        assert_eq!(data.encryption_config, None, "no key file, nothing sent");
        let keys = encryption_config_path(pki.tls_dir());
        assert!(keys.starts_with(a.path().join("cred")), "{keys:?}");
        std::fs::create_dir_all(keys.parent().unwrap()).unwrap();
        std::fs::write(&keys, "{\"keys\": 1}").unwrap();
        let data = collect(pki.tls_dir(), 1, "s").unwrap();
        let b = tempfile::tempdir().unwrap();
        let tls = b.path().join("tls");
        install(&tls, &data).unwrap();
        let installed = b
            .path()
            .join("cred")
            .join(k3rs_datastore::encryption::config::FILE);
        assert_eq!(
            std::fs::read_to_string(&installed).unwrap(),
            "{\"keys\": 1}"
        );
        let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn refuses_foreign_paths_and_missing_files() {
        let dir = tempfile::tempdir().unwrap();
        let mut data = BootstrapData {
            cluster_id: "1".into(),
            token_secret: "x".into(),
            files: BTreeMap::new(),
            encryption_config: None,
        };
        assert!(matches!(install(dir.path(), &data), Err(Error::Missing(_))));
        data.files.insert("../../etc/passwd".into(), "eA==".into());
        assert!(matches!(
            install(dir.path(), &data),
            Err(Error::Unexpected(p)) if p == "../../etc/passwd"
        ));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}

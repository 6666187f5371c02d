//! The service-account signing key, `<data-dir>/server/tls/service.key` (k3s's name): a
//! PKCS#8 ECDSA P-256 key that signs every service-account token (ES256, which
//! kube-apiserver accepts for `--service-account-signing-key-file`). Servers of one cluster
//! share it (it is a cluster file), so a token minted by one verifies on all.

use std::path::Path;

use super::files::{read_optional, write_atomic, PRIVATE};
use super::Error;

/// File name under `<data-dir>/server/tls/`.
pub const FILE: &str = "service.key";

/// Creates the key under `tls_dir` unless it exists; an existing key is kept as it is.
pub fn ensure(tls_dir: &Path) -> Result<(), Error> {
    let path = tls_dir.join(FILE);
    if read_optional(&path)?.is_some() {
        return Ok(());
    }
    let key = rcgen::KeyPair::generate().map_err(|source| Error::Generate {
        what: path.display().to_string(),
        source,
    })?;
    write_atomic(&path, key.serialize_pem().as_bytes(), PRIVATE)
}

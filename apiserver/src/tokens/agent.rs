//! The default agent token: `<data-dir>/server/agent-token` (mode 0600) holds
//! `K10<ca hash>::<id>.<secret>`, a bootstrap token without expiry that agents join with
//! (k3s keeps its agent token apart from the server token the same way; ours is a bootstrap
//! token, so it authenticates only as `system:bootstrap:<id>`, never as a server).
//!
//! # Guarantees
//! - The token is generated once and kept across restarts; the hash follows the CA file.
//! - While the file exists the server recreates the token's Secret at start if it is missing
//!   (to revoke the default token for good, delete the file and the Secret).

use std::path::Path;

use crate::registry::{Registry, Target, WriteOptions};
use k3rs_apimachinery::catalog;
use k3rs_apimachinery::status::ApiResult;
use k3rs_pki::files::{read_optional, write_atomic, PRIVATE};

use super::{secret_object, Token, TokenSpec, DEFAULT_GROUP, USAGES};

/// The description of the default agent token's Secret.
pub const DESCRIPTION: &str = "k3rs default agent token";

/// Loads the token in `path` or creates it; (re)writes the file only when its content changes.
pub fn ensure_file(path: &Path, ca_cert_file: &[u8]) -> Result<Token, k3rs_pki::Error> {
    let existing = read_optional(path)?;
    let token = existing
        .as_deref()
        .and_then(|s| Token::parse(s).ok())
        .unwrap_or_else(Token::generate);
    let text = format!("{}\n", token.full(ca_cert_file));
    if existing.as_deref() != Some(text.as_str()) {
        write_atomic(path, text.as_bytes(), PRIVATE)?;
    }
    Ok(token)
}

/// The default agent token's spec: no expiry, both usages, the default node token group.
pub fn spec() -> TokenSpec {
    TokenSpec {
        ttl: None,
        description: DESCRIPTION.into(),
        usages: USAGES.iter().map(|u| u.to_string()).collect(),
        groups: vec![DEFAULT_GROUP.into()],
    }
}

/// Creates the token's Secret unless it exists.
pub async fn ensure_secret(reg: &Registry, token: &Token) -> ApiResult<()> {
    let Some(secrets) = catalog::lookup("", "v1", "secrets") else {
        return Ok(());
    };
    let t = Target {
        resource: secrets,
        namespace: Some(k3rs_auth::bootstrap_token::NAMESPACE.into()),
        name: Some(token.secret_name()),
        subresource: None,
    };
    if reg.get(&t).await.is_ok() {
        return Ok(());
    }
    let obj = secret_object(token, &spec(), std::time::SystemTime::now());
    match reg.create(&t, obj, WriteOptions::default()).await {
        Err(e) if e.reason == "AlreadyExists" => Ok(()),
        r => r.map(|_| ()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_is_kept_and_follows_the_ca() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent-token");
        let a = ensure_file(&p, b"ca one").unwrap();
        assert_eq!(ensure_file(&p, b"ca one").unwrap(), a);
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, format!("{}\n", a.full(b"ca one")));
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(ensure_file(&p, b"ca two").unwrap(), a);
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            format!("{}\n", a.full(b"ca two"))
        );
    }
}

//! The server token: `K10<sha256 hex of the server CA certificate file>::server:<secret>`.
//!
//! The hash pins the cluster CA for joining nodes; the secret authenticates them. The secret is
//! generated once and kept; the hash is recomputed from the CA file on every start.

use std::path::Path;

use sha2::{Digest, Sha256};

use super::files::{read_optional, write_atomic, PRIVATE};
use super::Error;

const PREFIX: &str = "K10";

/// A parsed token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// sha256 hex of the CA certificate file, if the token is in the full form.
    pub ca_hash: Option<String>,
    /// The user part (`server` for server tokens).
    pub username: String,
    /// The secret part.
    pub password: String,
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(h) = &self.ca_hash {
            write!(f, "{PREFIX}{h}::")?;
        }
        write!(f, "{}:{}", self.username, self.password)
    }
}

/// sha256 hex of the CA certificate file's bytes (what the token pins).
pub fn ca_hash(ca_cert_file: &[u8]) -> String {
    hex::encode(Sha256::digest(ca_cert_file))
}

/// Parses `K10<hash>::<user>:<password>` or the short `<user>:<password>` form.
pub fn parse(s: &str) -> Option<Token> {
    let s = s.trim();
    let (ca_hash, creds) = match s.strip_prefix(PREFIX) {
        Some(rest) => {
            let (hash, creds) = rest.split_once("::")?;
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            (Some(hash.to_ascii_lowercase()), creds)
        }
        None => (None, s),
    };
    let (username, password) = creds.split_once(':')?;
    if username.is_empty() || password.is_empty() {
        return None;
    }
    Some(Token {
        ca_hash,
        username: username.to_string(),
        password: password.to_string(),
    })
}

/// Loads `path` (keeping its secret) or creates it, with the hash of `ca_cert_file`'s bytes.
/// The file is (re)written, mode 0600, only when its content would change.
pub fn ensure_server_token(path: &Path, ca_cert_file: &[u8]) -> Result<Token, Error> {
    let existing = read_optional(path)?;
    let password = existing
        .as_deref()
        .and_then(parse)
        .map(|t| t.password)
        .unwrap_or_else(|| hex::encode(rand::random::<[u8; 16]>()));
    let token = Token {
        ca_hash: Some(ca_hash(ca_cert_file)),
        username: "server".to_string(),
        password,
    };
    let text = format!("{token}\n");
    if existing.as_deref() != Some(text.as_str()) {
        write_atomic(path, text.as_bytes(), PRIVATE)?;
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_forms() {
        let h = "a".repeat(64);
        let t = parse(&format!("K10{h}::server:s3cret\n")).unwrap();
        assert_eq!(t.ca_hash.as_deref(), Some(h.as_str()));
        assert_eq!(
            (t.username.as_str(), t.password.as_str()),
            ("server", "s3cret")
        );
        assert_eq!(t.to_string(), format!("K10{h}::server:s3cret"));
        let short = parse("node:pw").unwrap();
        assert_eq!(short.ca_hash, None);
        assert_eq!(parse("K10abc::server:x"), None);
        assert_eq!(parse("nocolon"), None);
        assert_eq!(parse(":pw"), None);
    }

    #[test]
    fn keeps_secret_and_follows_ca() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        let a = ensure_server_token(&p, b"ca one").unwrap();
        let b = ensure_server_token(&p, b"ca one").unwrap();
        assert_eq!(a, b);
        let c = ensure_server_token(&p, b"ca two").unwrap();
        assert_eq!(a.password, c.password);
        assert_ne!(a.ca_hash, c.ca_hash);
        assert_eq!(a.password.len(), 32);
    }
}

//! The supervisor's authentication: HTTP basic auth with the server token's credentials
//! (`server:<secret>`), as k3s checks a joining server.

use base64::Engine;
use sha2::{Digest, Sha256};

/// Whether an `Authorization` header value carries `user:password`.
///
/// Compares digests, so the time taken does not depend on how much of the secret matched.
pub fn verify(header: Option<&str>, user: &str, password: &str) -> bool {
    let Some(given) = header.and_then(decode) else {
        return false;
    };
    let expected = format!("{user}:{password}");
    Sha256::digest(given.as_bytes()) == Sha256::digest(expected.as_bytes())
}

/// `Basic <base64>` → the decoded `user:password`.
fn decode(header: &str) -> Option<String> {
    let (scheme, value) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value.trim())
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// The `Authorization` header value for `user:password`.
pub fn header(user: &str, password: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_the_exact_credentials() {
        let h = header("server", "s3cret");
        assert!(verify(Some(&h), "server", "s3cret"));
        assert!(verify(
            Some(&h.replace("Basic", "basic")),
            "server",
            "s3cret"
        ));
        assert!(!verify(Some(&h), "server", "s3cre"));
        assert!(!verify(Some(&header("node", "s3cret")), "server", "s3cret"));
        assert!(!verify(None, "server", "s3cret"));
        assert!(!verify(Some("Bearer s3cret"), "server", "s3cret"));
        assert!(!verify(Some("Basic !!!"), "server", "s3cret"));
    }
}

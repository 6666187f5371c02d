//! The join token an agent is given: `K10<sha256 hex of the server CA file>::<id>.<secret>`
//! (what `<data-dir>/server/agent-token` and `k3rs token create` print), or the bare
//! `<id>.<secret>` bootstrap token (accepted with a warning: nothing pins the CA then).
//!
//! k3s also lets agents join with its server token (`K10…::server:<secret>`) or a node password
//! (`node:<password>`), which authenticate to k3s's own supervisor endpoints. k3rs agents join
//! through the Kubernetes TLS bootstrap only, so those forms are refused with a message naming
//! the token to use instead.

/// A parsed join token.
#[derive(Clone, PartialEq, Eq)]
pub struct JoinToken {
    /// sha256 hex (lower case) of the server CA file, when the token pins it.
    pub ca_hash: Option<String>,
    /// `<id>.<secret>`: the bearer token for the bootstrap requests.
    pub bearer: String,
}

impl std::fmt::Debug for JoinToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinToken")
            .field("ca_hash", &self.ca_hash)
            .finish_non_exhaustive()
    }
}

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Nothing was given.
    #[error("the token is empty")]
    Empty,
    /// `K10` is not followed by a sha256 and `::`.
    #[error(
        "invalid CA hash in the token: K10 must be followed by 64 hex digits (the sha256 of the \
         server CA) and '::'"
    )]
    CaHash,
    /// Other credentials than a bootstrap token (what they look like).
    #[error(
        "the token's credentials are {0}: k3rs agents join with a bootstrap token \
         (<id>.<secret>), the full form being in the server's <data-dir>/server/agent-token or \
         printed by `k3rs token create`"
    )]
    NotBootstrap(&'static str),
    /// Not `<id>.<secret>` of the right lengths and characters.
    #[error(
        "invalid bootstrap token: expected <id>.<secret> with a 6-character id and a \
         16-character secret of [a-z0-9]"
    )]
    Shape,
}

/// Parses a join token (surrounding whitespace ignored).
pub fn parse(s: &str) -> Result<JoinToken, TokenError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(TokenError::Empty);
    }
    let (ca_hash, creds) = match s.strip_prefix("K10") {
        Some(rest) => {
            let (hash, creds) = rest.split_once("::").ok_or(TokenError::CaHash)?;
            if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(TokenError::CaHash);
            }
            (Some(hash.to_ascii_lowercase()), creds)
        }
        None => (None, s),
    };
    if creds.starts_with("server:") {
        return Err(TokenError::NotBootstrap("the server token (server:…)"));
    }
    if creds.contains(':') {
        return Err(TokenError::NotBootstrap("a user:password pair"));
    }
    let (id, secret) = creds.split_once('.').ok_or(TokenError::Shape)?;
    let ok = |part: &str, len: usize| {
        part.len() == len
            && part
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    if !ok(id, 6) || !ok(secret, 16) {
        return Err(TokenError::Shape);
    }
    Ok(JoinToken {
        ca_hash,
        bearer: creds.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEARER: &str = "abcdef.0123456789abcdef";

    #[test]
    fn the_full_form_pins_the_ca() {
        let h = "AB".repeat(32);
        let t = parse(&format!("K10{h}::{BEARER}\n")).unwrap();
        assert_eq!(t.ca_hash, Some("ab".repeat(32)));
        assert_eq!(t.bearer, BEARER);
    }

    #[test]
    fn the_bare_form_has_no_hash() {
        let t = parse(BEARER).unwrap();
        assert_eq!((t.ca_hash, t.bearer.as_str()), (None, BEARER));
    }

    #[test]
    fn other_forms_are_refused() {
        let h = "a".repeat(64);
        assert_eq!(parse(" "), Err(TokenError::Empty));
        assert_eq!(parse("K10abc::x.y"), Err(TokenError::CaHash));
        assert_eq!(parse(&format!("K10{h}{BEARER}")), Err(TokenError::CaHash));
        assert_eq!(
            parse(&format!("K10{h}::server:s3cret")),
            Err(TokenError::NotBootstrap("the server token (server:…)"))
        );
        assert_eq!(
            parse("node:pw"),
            Err(TokenError::NotBootstrap("a user:password pair"))
        );
        assert_eq!(parse("abcdef.short"), Err(TokenError::Shape));
        assert_eq!(parse("ABCDEF.0123456789abcdef"), Err(TokenError::Shape));
        assert_eq!(parse("nodot"), Err(TokenError::Shape));
    }

    #[test]
    fn debug_hides_the_secret() {
        let t = parse(BEARER).unwrap();
        assert!(!format!("{t:?}").contains("0123456789abcdef"));
    }
}

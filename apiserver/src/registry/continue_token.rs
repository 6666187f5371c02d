//! List continue tokens, in kube-apiserver's format: base64 of
//! `{"v":"meta.k8s.io/v1","rv":<revision>,"start":"<key after the prefix>"}`.

use base64::Engine;
use serde::{Deserialize, Serialize};

use k3rs_apimachinery::status::ApiError;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Token {
    v: String,
    rv: i64,
    start: String,
}

const VERSION: &str = "meta.k8s.io/v1";

/// A token resuming a list at `revision` from `start` (relative to the list prefix).
pub fn encode(revision: i64, start: &str) -> String {
    let t = Token {
        v: VERSION.into(),
        rv: revision,
        start: start.into(),
    };
    let json = serde_json::to_vec(&t).unwrap_or_default();
    base64::engine::general_purpose::URL_SAFE.encode(json)
}

/// `(revision, start)` from a token; a malformed one is a 400.
pub fn decode(token: &str) -> Result<(i64, String), ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let engine = base64::engine::general_purpose::URL_SAFE;
    let bytes = engine
        .decode(token)
        .or_else(|_| base64::engine::general_purpose::STANDARD.decode(token))
        .map_err(|_| bad("incorrect encoding"))?;
    let t: Token = serde_json::from_slice(&bytes).map_err(|_| bad("incorrect encoding"))?;
    if t.v != VERSION {
        return Err(bad("server does not recognize this encoding"));
    }
    if t.rv <= 0 {
        return Err(bad(
            "incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        ));
    }
    // The start key must stay under the list prefix.
    if t.start.is_empty() || t.start.starts_with('/') || t.start.split('/').any(|s| s == "..") {
        return Err(bad("continue key is not valid"));
    }
    Ok((t.rv, t.start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let t = encode(42, "default/x\u{0}");
        assert_eq!(decode(&t).unwrap(), (42, "default/x\u{0}".to_string()));
    }

    #[test]
    fn kube_apiserver_tokens_decode() {
        // base64 of {"v":"meta.k8s.io/v1","rv":7,"start":"b\u0000"}
        let t = base64::engine::general_purpose::STANDARD
            .encode(br#"{"v":"meta.k8s.io/v1","rv":7,"start":"b\u0000"}"#);
        assert_eq!(decode(&t).unwrap(), (7, "b\u{0}".to_string()));
    }

    #[test]
    fn garbage_is_a_bad_request() {
        for t in [
            "!!!",
            "e30=",
            &encode(0, "a"),
            &encode(3, "/etc"),
            &encode(3, "../x"),
        ] {
            assert_eq!(decode(t).unwrap_err().code, 400, "{t}");
        }
    }
}

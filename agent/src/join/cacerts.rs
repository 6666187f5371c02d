//! The server CA an agent trusts: fetched from the server's anonymous `/cacerts` over a TLS
//! connection that cannot be verified yet, then pinned by the join token's sha256 (k3s's
//! scheme). Without a hash in the token, the CA is taken on trust with a warning, as k3s does.

use sha2::{Digest, Sha256};

/// sha256 hex of the CA file's bytes (what the token's `K10<hash>` covers).
pub fn ca_hash(ca_pem: &[u8]) -> String {
    hex::encode(Sha256::digest(ca_pem))
}

/// Why the fetched CA is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PinError {
    /// The CA's hash is not the token's.
    #[error(
        "the server's CA (sha256 {actual}) does not match the CA hash in the token ({expected}): \
         refusing to join; check --server and use the full token from the server's \
         <data-dir>/server/agent-token"
    )]
    Mismatch {
        /// The token's hash.
        expected: String,
        /// The fetched CA's hash.
        actual: String,
    },
    /// The answer is not a PEM certificate.
    #[error("the server's /cacerts answer holds no PEM certificate")]
    NotPem,
}

/// What checking the fetched CA against the token concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pinned {
    /// The hash matched.
    Verified,
    /// The token has no hash: trusted without verification (the caller warns).
    Unverified {
        /// The fetched CA's hash.
        actual: String,
    },
}

/// Checks `ca_pem` (the bytes `/cacerts` returned) against the token's `expected` hash.
pub fn check(ca_pem: &[u8], expected: Option<&str>) -> Result<Pinned, PinError> {
    let actual = ca_hash(ca_pem);
    match expected {
        Some(e) if !e.eq_ignore_ascii_case(&actual) => Err(PinError::Mismatch {
            expected: e.to_ascii_lowercase(),
            actual,
        }),
        _ if !String::from_utf8_lossy(ca_pem).contains("-----BEGIN CERTIFICATE-----") => {
            Err(PinError::NotPem)
        }
        Some(_) => Ok(Pinned::Verified),
        None => Ok(Pinned::Unverified { actual }),
    }
}

/// Fetches `<server>/cacerts` without verifying the server (nothing is trusted yet; the
/// answer is checked with [`check`] before any use).
pub async fn fetch(server: &str) -> Result<Vec<u8>, FetchError> {
    let url: http::Uri = server.parse().map_err(|source| FetchError::Url {
        url: server.to_string(),
        source,
    })?;
    let mut config = kube::Config::new(url);
    config.accept_invalid_certs = true;
    config.connect_timeout = Some(std::time::Duration::from_secs(10));
    config.read_timeout = Some(std::time::Duration::from_secs(10));
    let client = kube::Client::try_from(config).map_err(FetchError::Request)?;
    let req = http::Request::get("/cacerts")
        .body(Vec::new())
        .expect("a valid request");
    let text = client
        .request_text(req)
        .await
        .map_err(FetchError::Request)?;
    Ok(text.into_bytes())
}

/// Why `/cacerts` could not be fetched.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// `--server` does not parse.
    #[error("invalid server URL {url}")]
    Url {
        /// The URL given.
        url: String,
        /// Why it does not parse.
        #[source]
        source: http::uri::InvalidUri,
    },
    /// The request failed.
    #[error("fetching /cacerts from the server: {0}")]
    Request(#[source] kube::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    const CA: &[u8] = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";

    #[test]
    fn a_matching_hash_verifies_and_a_wrong_one_names_both() {
        let h = ca_hash(CA);
        assert_eq!(check(CA, Some(&h)), Ok(Pinned::Verified));
        assert_eq!(
            check(CA, Some(&h.to_ascii_uppercase())),
            Ok(Pinned::Verified)
        );
        let wrong = "0".repeat(64);
        let e = check(CA, Some(&wrong)).unwrap_err();
        assert_eq!(
            e,
            PinError::Mismatch {
                expected: wrong.clone(),
                actual: h.clone()
            }
        );
        let msg = e.to_string();
        assert!(msg.contains(&wrong) && msg.contains(&h), "{msg}");
    }

    #[test]
    fn no_hash_is_unverified_and_junk_is_refused() {
        assert_eq!(
            check(CA, None),
            Ok(Pinned::Unverified {
                actual: ca_hash(CA)
            })
        );
        assert_eq!(check(b"<html>", None), Err(PinError::NotPem));
        assert_eq!(
            check(b"<html>", Some(&ca_hash(b"<html>"))),
            Err(PinError::NotPem)
        );
    }
}

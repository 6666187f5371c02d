//! Joining a cluster by token (`k3rs server --server https://<existing>:6443 --token <token>`),
//! as k3s does:
//!
//! 1. download `/cacerts` without verifying the server (nothing secret is sent yet) and, for
//!    a full `K10<hash>::server:<secret>` token, refuse unless its sha256 is the token's hash
//!    (a bare secret skips the check, as in k3s);
//! 2. from then on trust only that CA; fetch `/v1-k3rs/server-bootstrap` with basic auth
//!    `server:<secret>` and install the cluster's CAs, token secret and cluster ID
//!    ([`install`]); the caller then creates this server's own certificates from them;
//! 3. ask the server to add this one as a member ([`add_member`]): a learner with its peer
//!    URL, promoted to voter by the leader once caught up.
//!
//! # Errors
//! A hash mismatch or a wrong secret is final ([`Error::CaHashMismatch`],
//! [`Error::Unauthorized`]); transport failures and 5xx answers are retried for a while (the
//! other server may still be starting or electing a leader).

use std::path::Path;
use std::time::Duration;

use k3rs_apimachinery::https::{self, Reply, ServerUrl, Trust};

use crate::supervisor::cluster_files::{self, BootstrapData};
use crate::supervisor::{basic_auth, JoinRequest, JoinResponse, BOOTSTRAP_PATH, MEMBERS_PATH};
use k3rs_pki::files::{write_atomic, PRIVATE};
use k3rs_pki::{token, Token};

/// How long transport failures and 5xx answers are retried.
const RETRY_FOR: Duration = Duration::from_secs(60);
const RETRY_EVERY: Duration = Duration::from_millis(500);

/// `--server` and `--token`.
#[derive(Debug, Clone)]
pub struct JoinConfig {
    /// `--server`: the URL of a server already in the cluster.
    pub server: String,
    /// `--token`: the cluster's token (full `K10…` or short form).
    pub token: String,
}

/// Why joining the cluster failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `--server` is not a usable URL.
    #[error("{0}")]
    Url(String),
    /// The server's CA does not match the hash in the token.
    #[error("token CA hash does not match the Cluster CA certificate hash: {expected} != {actual} (the token is not for the cluster at {server})")]
    CaHashMismatch {
        /// The server asked.
        server: String,
        /// The hash in the token.
        expected: String,
        /// The hash of the CA the server sent.
        actual: String,
    },
    /// The server answered 401 to the token's credentials.
    #[error("{server} refused the token: 401 Unauthorized (wrong secret)")]
    Unauthorized {
        /// The server asked.
        server: String,
    },
    /// The request did not get an answer (after retrying).
    #[error("{server}{path}: {reason}")]
    Transport {
        /// The server asked.
        server: String,
        /// The path requested.
        path: String,
        /// What failed.
        reason: String,
    },
    /// The server answered with an error status.
    #[error("{server}{path}: HTTP {status}: {message}")]
    Refused {
        /// The server asked.
        server: String,
        /// The path requested.
        path: String,
        /// The HTTP status code.
        status: u16,
        /// The answer's body.
        message: String,
    },
    /// The answer could not be decoded.
    #[error("{server}{path}: unreadable answer: {reason}")]
    Decode {
        /// The server asked.
        server: String,
        /// The path requested.
        path: String,
        /// Why it could not be decoded.
        reason: String,
    },
    /// Writing the cluster files the server handed out failed.
    #[error("installing the cluster files: {0}")]
    Install(#[from] cluster_files::Error),
    /// Reading or writing this server's PKI failed.
    #[error(transparent)]
    Pki(#[from] k3rs_pki::Error),
}

/// The token's credentials: `K10<hash>::<user>:<secret>`, `<user>:<secret>`, or a bare
/// secret (user `server`).
pub fn parse_token(s: &str) -> Token {
    token::parse(s).unwrap_or_else(|| Token {
        ca_hash: None,
        username: "server".into(),
        password: s.trim().to_string(),
    })
}

/// Refuses a CA whose sha256 is not the token's (full tokens only).
pub fn check_ca_hash(server: &str, token: &Token, ca_pem: &[u8]) -> Result<(), Error> {
    let Some(expected) = &token.ca_hash else {
        return Ok(());
    };
    let actual = token::ca_hash(ca_pem);
    if *expected == actual {
        Ok(())
    } else {
        Err(Error::CaHashMismatch {
            server: server.to_string(),
            expected: expected.clone(),
            actual,
        })
    }
}

/// A verified connection to the cluster: its CA and credentials.
#[derive(Debug, Clone)]
pub struct Cluster {
    server: String,
    url: ServerUrl,
    ca_pem: Vec<u8>,
    authorization: String,
}

impl Cluster {
    /// Steps 1 and 2: the CA (checked against the token) and the bootstrap data.
    pub async fn bootstrap(cfg: &JoinConfig) -> Result<(Cluster, BootstrapData), Error> {
        let url = ServerUrl::parse(&cfg.server).map_err(|e| Error::Url(e.to_string()))?;
        let token = parse_token(&cfg.token);
        let server = cfg.server.trim_end_matches('/').to_string();
        let reply = retrying(&server, "/cacerts", || {
            https::request(&url, &Trust::Any, "GET", "/cacerts", None, None)
        })
        .await?;
        let ca_pem = expect_ok(&server, "/cacerts", reply)?;
        check_ca_hash(&server, &token, &ca_pem)?;
        let cluster = Cluster {
            authorization: basic_auth::header(&token.username, &token.password),
            server,
            url,
            ca_pem,
        };
        let body = cluster.call("GET", BOOTSTRAP_PATH, None).await?;
        let data = serde_json::from_slice(&body).map_err(|e| Error::Decode {
            server: cluster.server.clone(),
            path: BOOTSTRAP_PATH.into(),
            reason: e.to_string(),
        })?;
        Ok((cluster, data))
    }

    /// Step 3: asks the cluster to add this server as a member.
    pub async fn add_member(&self, req: &JoinRequest) -> Result<JoinResponse, Error> {
        let body = serde_json::to_vec(req).expect("a join request always serializes");
        let body = self.call("POST", MEMBERS_PATH, Some(body)).await?;
        serde_json::from_slice(&body).map_err(|e| Error::Decode {
            server: self.server.clone(),
            path: MEMBERS_PATH.into(),
            reason: e.to_string(),
        })
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Vec<u8>, Error> {
        let trust = Trust::Ca(self.ca_pem.clone());
        let reply = retrying(&self.server, path, || {
            https::request(
                &self.url,
                &trust,
                method,
                path,
                Some(&self.authorization),
                body.clone(),
            )
        })
        .await?;
        expect_ok(&self.server, path, reply)
    }
}

/// Runs `send` until it gets an answer below 500, for up to [`RETRY_FOR`].
async fn retrying<F, Fut>(server: &str, path: &str, mut send: F) -> Result<Reply, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Reply, https::RequestError>>,
{
    let deadline = tokio::time::Instant::now() + RETRY_FOR;
    loop {
        let last = match send().await {
            Ok(r) if r.status < 500 => return Ok(r),
            Ok(r) => Ok(r),
            Err(reason) => Err(reason),
        };
        if tokio::time::Instant::now() >= deadline {
            return match last {
                Ok(r) => expect_ok(server, path, r).map(|body| Reply { status: 200, body }),
                Err(reason) => Err(Error::Transport {
                    server: server.into(),
                    path: path.into(),
                    reason: reason.to_string(),
                }),
            };
        }
        match &last {
            Ok(r) => tracing::info!(
                server,
                path,
                status = r.status,
                "join: server not ready; retrying"
            ),
            Err(reason) => {
                tracing::info!(server, path, %reason, "join: server unreachable; retrying")
            }
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

/// The body of a 2xx answer; a 401 or any other status is an error with the server's message.
fn expect_ok(server: &str, path: &str, reply: Reply) -> Result<Vec<u8>, Error> {
    match reply.status {
        200..=299 => Ok(reply.body),
        401 => Err(Error::Unauthorized {
            server: server.into(),
        }),
        status => {
            let text = String::from_utf8_lossy(&reply.body).into_owned();
            let message = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or(text);
            Err(Error::Refused {
                server: server.into(),
                path: path.into(),
                status,
                message,
            })
        }
    }
}

/// Writes the cluster's CAs under `<server_dir>/tls`, the token (same secret as the cluster's)
/// and the cluster ID, before the PKI creates this server's own certificates from them.
pub fn install(server_dir: &Path, data: &BootstrapData) -> Result<(), Error> {
    let tls = server_dir.join("tls");
    cluster_files::install(&tls, data)?;
    let ca = std::fs::read(tls.join("server-ca.crt")).map_err(|source| k3rs_pki::Error::Io {
        path: tls.join("server-ca.crt"),
        source,
    })?;
    let token = Token {
        ca_hash: Some(token::ca_hash(&ca)),
        username: "server".into(),
        password: data.token_secret.clone(),
    };
    write_atomic(
        &server_dir.join("token"),
        format!("{token}\n").as_bytes(),
        PRIVATE,
    )?;
    let id = u64::from_str_radix(&data.cluster_id, 16)
        .ok()
        .filter(|id| *id != 0)
        .ok_or_else(|| Error::Decode {
            server: String::new(),
            path: BOOTSTRAP_PATH.into(),
            reason: format!("cluster ID {:?} is not a hex number", data.cluster_id),
        })?;
    write_atomic(
        &server_dir.join("cluster-id"),
        format!("{id:016x}\n").as_bytes(),
        PRIVATE,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_forms() {
        let h = "b".repeat(64);
        let full = parse_token(&format!("K10{h}::server:abc"));
        assert_eq!(full.ca_hash.as_deref(), Some(h.as_str()));
        assert_eq!(full.password, "abc");
        let bare = parse_token("abc\n");
        assert_eq!(
            (bare.username.as_str(), bare.password.as_str()),
            ("server", "abc")
        );
        assert_eq!(bare.ca_hash, None);
    }

    #[test]
    fn ca_hash_is_checked_for_full_tokens_only() {
        let ca = b"-----BEGIN CERTIFICATE-----\n...";
        let good = parse_token(&format!("K10{}::server:x", token::ca_hash(ca)));
        assert!(check_ca_hash("https://s:6443", &good, ca).is_ok());
        let bad = parse_token(&format!("K10{}::server:x", "0".repeat(64)));
        let err = check_ca_hash("https://s:6443", &bad, ca).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("token CA hash does not match"), "{msg}");
        assert!(msg.contains(&token::ca_hash(ca)), "{msg}");
        assert!(check_ca_hash("https://s:6443", &parse_token("x"), ca).is_ok());
    }

    #[test]
    fn install_writes_token_and_cluster_id() {
        let a = tempfile::tempdir().unwrap();
        let pki = k3rs_pki::Pki::ensure(a.path(), &Default::default()).unwrap();
        let data =
            cluster_files::collect(pki.tls_dir(), 0x1234, &pki.server_token.password).unwrap();
        let b = tempfile::tempdir().unwrap();
        install(b.path(), &data).unwrap();
        let joined = k3rs_pki::Pki::ensure(b.path(), &Default::default()).unwrap();
        assert_eq!(joined.server_token, pki.server_token);
        let ids = crate::identity::load_or_create(b.path()).unwrap();
        assert_eq!(ids.cluster_id, 0x1234);
    }
}

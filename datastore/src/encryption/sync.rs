//! The same encryption keys on every server (HA). The configuration travels through the
//! datastore under [`CONFIG_KEY`], sealed with AES-256-GCM under a key derived from the cluster
//! token's secret (what every server of the cluster holds, as k3s seals its bootstrap data), so
//! the store (and a snapshot of it) never holds the keys in the clear. Each server installs what
//! it finds there and acknowledges the revision it installed under [`ACK_PREFIX`]`<server>`,
//! refreshed every [`HEARTBEAT`]. A rotation publishes the new key first (the old ones still
//! listed), waits until every live server has acknowledged it, and only then re-encrypts; a
//! publication is a compare-and-swap on the revision it was based on, so two rotations at once
//! cannot drop each other's keys.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use super::config::Config;
use super::transformer::{Key, Transformer};
use crate::{Datastore, GuardedOp, ListRequest, WriteOutcome};

/// Where the sealed configuration is kept.
pub const CONFIG_KEY: &[u8] = b"/k3rs/secrets-encryption/config";
/// `<prefix><server name>`: `{"revision": <installed>, "at": <unix seconds>}`.
pub const ACK_PREFIX: &[u8] = b"/k3rs/secrets-encryption/applied/";
/// How often a server refreshes its acknowledgement.
pub const HEARTBEAT: Duration = Duration::from_secs(20);
/// A server whose acknowledgement is older than this is taken to be gone (it installs the
/// published keys when it comes back, before it serves).
pub const STALE_AFTER: Duration = Duration::from_secs(90);

/// Why the keys could not be shared.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The datastore failed.
    #[error(transparent)]
    Store(#[from] crate::Error),
    /// The sealed configuration does not open with this token.
    #[error("the shared encryption configuration cannot be opened (another cluster token?)")]
    Unseal,
    /// The opened configuration is invalid (why).
    #[error("the shared encryption configuration is invalid: {0}")]
    Invalid(String),
    /// A concurrent rotation won.
    #[error("another server changed the encryption keys meanwhile; run the command again")]
    Raced,
    /// Servers (named) did not acknowledge within the wait.
    #[error("servers {0:?} did not install the new key within {1:?}; no Secret was re-encrypted with it")]
    NotApplied(Vec<String>, Duration),
}

/// One server's handle on the shared configuration.
pub struct KeySync {
    ds: Arc<dyn Datastore>,
    sealer: Transformer,
    server: String,
}

impl std::fmt::Debug for KeySync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeySync")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// The sealer for a cluster whose token secret is `secret`: the Secrets' own `aesgcm`
/// transformer, with one key derived from the secret and the config key as associated data.
fn sealer(secret: &str) -> Transformer {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(b"k3rs secrets-encryption config v1\0");
    ctx.update(secret.as_bytes());
    let key = Key::new("cluster-token", ctx.finish().as_ref())
        .expect("a SHA-256 digest is an AES-256 key");
    Transformer::new(vec![key], true)
}

/// `plain` sealed by `t`.
fn seal(t: &Transformer, plain: &[u8]) -> Result<Vec<u8>, SyncError> {
    t.encrypt(CONFIG_KEY, plain).map_err(|_| SyncError::Unseal)
}

/// The plain form of a value `t` sealed; anything else (plain, or another cluster's) fails.
fn unseal(t: &Transformer, sealed: &[u8]) -> Result<Vec<u8>, SyncError> {
    if !t.is_current(sealed) {
        return Err(SyncError::Unseal);
    }
    t.decrypt(CONFIG_KEY, sealed)
        .map(|p| p.into_owned())
        .map_err(|_| SyncError::Unseal)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The live servers (acknowledged within [`STALE_AFTER`] of `now`) that have not installed
/// `revision`; `acks` are `(server, {"revision", "at"})`.
pub fn laggards(acks: &[(String, Value)], revision: i64, now: u64) -> Vec<String> {
    acks.iter()
        .filter(|(_, a)| {
            let at = a["at"].as_u64().unwrap_or(0);
            now.saturating_sub(at) <= STALE_AFTER.as_secs()
        })
        .filter(|(_, a)| a["revision"].as_i64().unwrap_or(0) < revision)
        .map(|(s, _)| s.clone())
        .collect()
}

impl KeySync {
    /// `server`'s handle on `ds` (the raw store, not the encrypting one) for the cluster whose
    /// token secret is `secret`.
    pub fn new(ds: Arc<dyn Datastore>, secret: &str, server: &str) -> KeySync {
        KeySync {
            ds,
            sealer: sealer(secret),
            server: server.to_string(),
        }
    }

    /// The published configuration and its revision, if any.
    pub async fn fetch(&self) -> Result<Option<(Config, i64)>, SyncError> {
        let (kv, _) = self.ds.get(CONFIG_KEY).await?;
        let Some(kv) = kv else {
            return Ok(None);
        };
        Ok(Some((self.decode(&kv.value)?, kv.mod_revision)))
    }

    fn decode(&self, sealed: &[u8]) -> Result<Config, SyncError> {
        let plain = unseal(&self.sealer, sealed)?;
        let v: Value =
            serde_json::from_slice(&plain).map_err(|e| SyncError::Invalid(e.to_string()))?;
        Config::from_json("the shared configuration", &v)
            .map_err(|e| SyncError::Invalid(e.to_string()))
    }

    /// Publishes `config` if the shared one is still at `based_on` (0: none yet); its revision.
    pub async fn publish(&self, config: &Config, based_on: i64) -> Result<i64, SyncError> {
        let body = serde_json::to_vec(&config.to_json()).expect("JSON serializes");
        let op = GuardedOp::Put {
            value: seal(&self.sealer, &body)?,
            lease: 0,
        };
        match self.ds.guarded(CONFIG_KEY, based_on, op).await? {
            WriteOutcome::Done { revision } => Ok(revision),
            WriteOutcome::Conflict { .. } => Err(SyncError::Raced),
        }
    }

    /// Records that this server installed `revision` (and is alive).
    pub async fn acknowledge(&self, revision: i64) -> Result<(), SyncError> {
        let key = [ACK_PREFIX, self.server.as_bytes()].concat();
        let value = json!({"revision": revision, "at": now_secs()}).to_string();
        loop {
            let (current, _) = self.ds.get(&key).await?;
            let at = current.map_or(0, |kv| kv.mod_revision);
            let op = GuardedOp::Put {
                value: value.clone().into_bytes(),
                lease: 0,
            };
            if let WriteOutcome::Done { .. } = self.ds.guarded(&key, at, op).await? {
                return Ok(());
            }
        }
    }

    /// Waits until every live server has installed `revision`.
    pub async fn wait_applied(&self, revision: i64, timeout: Duration) -> Result<(), SyncError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let resp = self
                .ds
                .list(ListRequest {
                    key: ACK_PREFIX.to_vec(),
                    range_end: crate::prefix_end(ACK_PREFIX),
                    ..Default::default()
                })
                .await?;
            let acks: Vec<(String, Value)> = resp
                .kvs
                .iter()
                .map(|kv| {
                    let name = String::from_utf8_lossy(&kv.key[ACK_PREFIX.len()..]).into_owned();
                    (
                        name,
                        serde_json::from_slice(&kv.value).unwrap_or(Value::Null),
                    )
                })
                .collect();
            let late = laggards(&acks, revision, now_secs());
            if late.is_empty() {
                return Ok(());
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(SyncError::NotApplied(late, timeout));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The configurations published after `revision`, as `(config, revision)`, until the
    /// watch ends (the caller fetches again and resumes).
    pub async fn watch(
        &self,
        revision: i64,
    ) -> Result<futures::stream::BoxStream<'static, crate::WatchItem>, SyncError> {
        Ok(self
            .ds
            .watch(crate::WatchRequest {
                key: CONFIG_KEY.to_vec(),
                start_revision: revision + 1,
                ..Default::default()
            })
            .await?)
    }

    /// Decodes a watched value.
    pub fn open_value(&self, sealed: &[u8]) -> Result<Config, SyncError> {
        self.decode(sealed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_configurations_open_only_with_the_same_secret() {
        let key = sealer("s3cret");
        let sealed = seal(&key, b"{\"a\":1}").unwrap();
        assert!(
            !sealed.windows(5).any(|w| w == b"\"a\":1"),
            "not in the clear"
        );
        assert_eq!(unseal(&key, &sealed).unwrap(), b"{\"a\":1}");
        assert!(matches!(
            unseal(&sealer("other"), &sealed),
            Err(SyncError::Unseal)
        ));
        let mut tampered = sealed.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert!(unseal(&key, &tampered).is_err());
        assert!(unseal(&key, b"short").is_err());
        // A plain value planted in the store is not taken for a sealed one.
        assert!(unseal(&key, b"{\"a\":1}").is_err());
    }

    #[test]
    fn only_live_servers_behind_the_revision_are_waited_for() {
        let now = 10_000;
        let acks = vec![
            ("a".to_string(), json!({"revision": 7, "at": now - 5})),
            ("b".to_string(), json!({"revision": 5, "at": now - 5})),
            ("gone".to_string(), json!({"revision": 1, "at": now - 600})),
            ("junk".to_string(), Value::Null),
        ];
        assert_eq!(laggards(&acks, 7, now), vec!["b".to_string()]);
        assert_eq!(laggards(&acks, 5, now), Vec::<String>::new());
    }
}

//! What `k3rs secrets-encrypt` asks a server to do: report the keys, re-encrypt every Secret
//! with the current key, rotate to a fresh key. One operation at a time per server.

use std::path::PathBuf;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use serde_json::{json, Value};

use super::config::{Config, ConfigError};
use super::store::{reencrypt, Encrypted};
use super::sync::{KeySync, SyncError, HEARTBEAT};
use super::transformer::{TransformError, Transformer};
use crate::Datastore;

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OpError {
    /// The configuration file is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A key is unusable.
    #[error(transparent)]
    Key(#[from] TransformError),
    /// Re-encrypting the Secrets failed.
    #[error("re-encrypting the secrets: {0}")]
    Store(#[from] crate::Error),
    /// Sharing the keys failed.
    #[error("sharing the keys with the other servers: {0}")]
    Sync(#[from] SyncError),
}

/// How long a rotation waits for every live server to install a step.
pub const INSTALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A server's secrets encryption: its key file, the live transformer and the raw store.
pub struct SecretsEncryption {
    path: PathBuf,
    config: tokio::sync::Mutex<Config>,
    transformer: Arc<RwLock<Transformer>>,
    raw: Arc<dyn Datastore>,
    /// The other servers, once [`SecretsEncryption::share`] runs.
    sync: OnceLock<Arc<KeySync>>,
    /// The revision of the shared configuration installed here (0: none yet).
    installed: AtomicI64,
}

impl std::fmt::Debug for SecretsEncryption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretsEncryption")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SecretsEncryption {
    /// Loads `path` (creating it with a fresh key when missing) and wraps `raw`; returns the
    /// store the API server must use.
    pub fn open(
        path: PathBuf,
        raw: Arc<dyn Datastore>,
    ) -> Result<(Arc<SecretsEncryption>, Arc<dyn Datastore>), OpError> {
        let config = match Config::load(&path)? {
            Some(c) => c,
            None => {
                let c = Config::generate(&key_name());
                c.save(&path)?;
                c
            }
        };
        let transformer = Arc::new(RwLock::new(config.transformer()?));
        let store: Arc<dyn Datastore> = Arc::new(Encrypted::new(raw.clone(), transformer.clone()));
        let this = Arc::new(SecretsEncryption {
            path,
            config: tokio::sync::Mutex::new(config),
            transformer,
            raw,
            sync: OnceLock::new(),
            installed: AtomicI64::new(0),
        });
        Ok((this, store))
    }

    /// `{"enabled", "activeKey", "keys": [{"name", "type", "active"}]}`.
    pub async fn status(&self) -> Value {
        status_json(&*self.config.lock().await)
    }

    /// Rewrites every Secret not stored with the current key; how many were rewritten.
    pub async fn reencrypt(&self) -> Result<usize, OpError> {
        let _one_at_a_time = self.config.lock().await;
        Ok(reencrypt(&*self.raw, &self.transformer).await?)
    }

    /// A fresh key is added, made the write key, every Secret is re-encrypted with it, then
    /// the old keys are dropped. The key file is written before each step that depends on it,
    /// so a crash leaves a file that decrypts everything stored. With other servers (HA) each
    /// step is published and every live server must install it before the next: first the new
    /// key only to read, then to write, so that no server meets a Secret it cannot decrypt.
    pub async fn rotate_keys(&self) -> Result<Value, OpError> {
        let mut config = self.config.lock().await;
        let fresh = Config::generate(&key_name()).keys.remove(0);
        let mut readable = config.clone();
        readable.keys.push(fresh.clone());
        readable.encrypt = true;
        self.step(&mut config, readable, true).await?;
        let mut writing = config.clone();
        writing.keys.retain(|k| k.0 != fresh.0);
        writing.keys.insert(0, fresh);
        self.step(&mut config, writing, true).await?;
        let rewritten = reencrypt(&*self.raw, &self.transformer).await?;
        let mut last = config.clone();
        last.keys.truncate(1);
        self.step(&mut config, last, false).await?;
        let mut out = status_json(&config);
        out["reencrypted"] = json!(rewritten);
        Ok(out)
    }

    /// Installs `next` here and, when shared, on every server (waiting for them when `wait`).
    async fn step(&self, current: &mut Config, next: Config, wait: bool) -> Result<(), OpError> {
        let Some(sync) = self.sync.get() else {
            return self.install(current, next);
        };
        let revision = sync
            .publish(&next, self.installed.load(Ordering::SeqCst))
            .await?;
        self.install(current, next)?;
        self.installed.store(revision, Ordering::SeqCst);
        sync.acknowledge(revision).await?;
        if wait {
            sync.wait_applied(revision, INSTALL_TIMEOUT).await?;
        }
        Ok(())
    }

    /// Keeps this server's keys the cluster's until `stop`: adopts the shared configuration (or
    /// publishes this one when there is none yet), then installs every one published and
    /// acknowledges it. Returns on a store error (the caller restarts it).
    pub async fn share(&self, sync: Arc<KeySync>, stop: CancellationToken) -> Result<(), OpError> {
        let sync = self.sync.get_or_init(|| sync).clone();
        loop {
            let revision = {
                let mut config = self.config.lock().await;
                match sync.fetch().await? {
                    Some((shared, revision)) => {
                        self.adopt_config(&mut config, shared)?;
                        revision
                    }
                    None => match sync.publish(&config, 0).await {
                        Ok(r) => r,
                        Err(SyncError::Raced) => continue,
                        Err(e) => return Err(e.into()),
                    },
                }
            };
            self.installed.store(revision, Ordering::SeqCst);
            sync.acknowledge(revision).await?;
            let mut events = sync.watch(revision).await?;
            let mut beat = tokio::time::interval(HEARTBEAT);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return Ok(()),
                    _ = beat.tick() => sync.acknowledge(self.installed.load(Ordering::SeqCst)).await?,
                    item = events.next() => match item {
                        Some(crate::WatchItem::Events(evs)) => {
                            for ev in evs {
                                if let crate::Event::Put { kv, .. } = ev {
                                    self.adopt(&sync, &kv.value, kv.mod_revision).await?;
                                }
                            }
                        }
                        Some(crate::WatchItem::Progress { .. }) => {}
                        _ => break,
                    },
                }
            }
        }
    }

    /// Installs a published configuration unless this server already has it (its own step).
    async fn adopt(&self, sync: &KeySync, sealed: &[u8], revision: i64) -> Result<(), OpError> {
        if revision <= self.installed.load(Ordering::SeqCst) {
            return Ok(());
        }
        let shared = sync.open_value(sealed)?;
        let mut config = self.config.lock().await;
        if revision <= self.installed.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.adopt_config(&mut config, shared)?;
        self.installed.store(revision, Ordering::SeqCst);
        drop(config);
        sync.acknowledge(revision).await?;
        Ok(())
    }

    /// Installs the cluster's `shared` configuration unless this server has it already.
    fn adopt_config(&self, current: &mut Config, shared: Config) -> Result<(), OpError> {
        if shared == *current {
            return Ok(());
        }
        tracing::info!(keys = ?shared.key_names(), "secrets encryption: installing the cluster's keys");
        self.install(current, shared)
    }

    fn install(&self, current: &mut Config, next: Config) -> Result<(), OpError> {
        let t = next.transformer()?;
        next.save(&self.path)?;
        *self.transformer.write().expect("transformer lock") = t;
        *current = next;
        Ok(())
    }
}

/// A key name that sorts by creation: `aesgcmkey-<unix seconds>-<8 random hex digits>`.
fn key_name() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let salt = super::config::random_secret();
    let salt: String = salt[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("aesgcmkey-{secs}-{salt}")
}

fn status_json(c: &Config) -> Value {
    let keys: Vec<Value> = c
        .key_names()
        .iter()
        .enumerate()
        .map(|(i, n)| json!({"name": n, "type": "AES-GCM", "active": c.encrypt && i == 0}))
        .collect();
    json!({
        "enabled": c.encrypt,
        "activeKey": if c.encrypt { c.key_names().first().map(|s| s.to_string()) } else { None },
        "keys": keys,
    })
}

/// The status as `k3rs secrets-encrypt status` prints it (k3s's layout).
pub fn render_status(v: &Value) -> String {
    let enabled = v["enabled"].as_bool().unwrap_or(false);
    let mut out = format!(
        "Encryption Status: {}\n",
        if enabled { "Enabled" } else { "Disabled" }
    );
    if let Some(n) = v["reencrypted"].as_u64() {
        out.push_str(&format!("Secrets re-encrypted: {n}\n"));
    }
    out.push_str("\nActive  Key Type  Name\n------  --------  ----\n");
    for k in v["keys"].as_array().into_iter().flatten() {
        let active = if k["active"] == true { " *" } else { "  " };
        out.push_str(&format!(
            "{active:<8}{:<10}{}\n",
            k["type"].as_str().unwrap_or(""),
            k["name"].as_str().unwrap_or("")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_marks_the_write_key() {
        let c = Config {
            keys: vec![("new".into(), vec![1; 32]), ("old".into(), vec![2; 32])],
            encrypt: true,
        };
        let s = status_json(&c);
        assert_eq!(s["activeKey"], "new");
        assert_eq!(
            render_status(&s),
            "Encryption Status: Enabled\n\nActive  Key Type  Name\n------  --------  ----\n *      AES-GCM   new\n        AES-GCM   old\n"
        );
        let off = status_json(&Config {
            encrypt: false,
            ..c
        });
        assert_eq!(off["activeKey"], Value::Null);
        assert!(render_status(&off).starts_with("Encryption Status: Disabled\n"));
    }

    #[test]
    fn key_names_are_distinct() {
        assert!(key_name().starts_with("aesgcmkey-"));
        assert_ne!(key_name(), key_name());
    }
}

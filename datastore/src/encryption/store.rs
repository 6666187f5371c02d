//! A [`Datastore`] that encrypts the values of the keys under the encrypted prefixes (Secrets)
//! on the way in and decrypts them on the way out — gets, lists, conflicts and watch events —
//! as kube-apiserver's storage transformers do, so the rest of the API server sees plain
//! objects and the store (and anyone reading it with etcdctl) sees ciphertext.

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt, StreamExt};

use super::transformer::Transformer;
use crate::{
    Datastore, Error, Event, GuardedOp, KeyValue, ListRequest, ListResponse, Result, WatchItem,
    WatchRequest, WriteOutcome,
};

/// The storage prefix of the resources encrypted (kube-apiserver's key for Secrets).
pub const SECRETS_PREFIX: &[u8] = b"/registry/secrets/";

/// `inner` with Secrets encrypted by a swappable transformer.
pub struct Encrypted {
    inner: Arc<dyn Datastore>,
    transformer: Arc<RwLock<Transformer>>,
}

impl Encrypted {
    /// `inner` with Secrets encrypted by `transformer`.
    pub fn new(inner: Arc<dyn Datastore>, transformer: Arc<RwLock<Transformer>>) -> Encrypted {
        Encrypted { inner, transformer }
    }

    fn encrypt(&self, key: &[u8], value: Vec<u8>) -> Result<Vec<u8>> {
        if !key.starts_with(SECRETS_PREFIX) {
            return Ok(value);
        }
        let t = self.transformer.read().expect("transformer lock");
        t.encrypt(key, &value)
            .map_err(|e| Error::Unavailable(format!("encrypting {}: {e}", show(key))))
    }

    fn decrypt_kv(&self, kv: &mut KeyValue) -> Result<()> {
        decrypt_kv(&self.transformer, kv)
    }
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

fn decrypt_kv(t: &RwLock<Transformer>, kv: &mut KeyValue) -> Result<()> {
    if !kv.key.starts_with(SECRETS_PREFIX) || kv.value.is_empty() {
        return Ok(());
    }
    let t = t.read().expect("transformer lock");
    let plain = t
        .decrypt(&kv.key, &kv.value)
        .map_err(|e| Error::Unavailable(format!("decrypting {}: {e}", show(&kv.key))))?
        .into_owned();
    kv.value = plain;
    Ok(())
}

fn decrypt_event(t: &RwLock<Transformer>, e: &mut Event) -> Result<()> {
    match e {
        Event::Put { kv, prev } => {
            decrypt_kv(t, kv)?;
            if let Some(p) = prev {
                decrypt_kv(t, p)?;
            }
        }
        Event::Delete { prev, .. } => {
            if let Some(p) = prev {
                decrypt_kv(t, p)?;
            }
        }
    }
    Ok(())
}

impl Datastore for Encrypted {
    fn get(&self, key: &[u8]) -> BoxFuture<'_, Result<(Option<KeyValue>, i64)>> {
        let key = key.to_vec();
        async move {
            let (mut kv, rev) = self.inner.get(&key).await?;
            if let Some(kv) = &mut kv {
                self.decrypt_kv(kv)?;
            }
            Ok((kv, rev))
        }
        .boxed()
    }

    fn list(&self, req: ListRequest) -> BoxFuture<'_, Result<ListResponse>> {
        async move {
            let mut resp = self.inner.list(req).await?;
            for kv in &mut resp.kvs {
                self.decrypt_kv(kv)?;
            }
            Ok(resp)
        }
        .boxed()
    }

    fn guarded(
        &self,
        key: &[u8],
        mod_revision: i64,
        op: GuardedOp,
    ) -> BoxFuture<'_, Result<WriteOutcome>> {
        let key = key.to_vec();
        async move {
            let op = match op {
                GuardedOp::Put { value, lease } => GuardedOp::Put {
                    value: self.encrypt(&key, value)?,
                    lease,
                },
                GuardedOp::Delete => GuardedOp::Delete,
            };
            let mut outcome = self.inner.guarded(&key, mod_revision, op).await?;
            if let WriteOutcome::Conflict {
                current: Some(kv), ..
            } = &mut outcome
            {
                self.decrypt_kv(kv)?;
            }
            Ok(outcome)
        }
        .boxed()
    }

    fn watch(&self, req: WatchRequest) -> BoxFuture<'_, Result<BoxStream<'static, WatchItem>>> {
        async move {
            let stream = self.inner.watch(req).await?;
            let t = self.transformer.clone();
            let decrypted = stream.map(move |item| match item {
                WatchItem::Events(mut events) => {
                    for e in &mut events {
                        if let Err(err) = decrypt_event(&t, e) {
                            return WatchItem::Failed(err.to_string());
                        }
                    }
                    WatchItem::Events(events)
                }
                other => other,
            });
            Ok(decrypted.boxed())
        }
        .boxed()
    }

    fn grant_lease(&self, ttl: i64) -> BoxFuture<'_, Result<i64>> {
        self.inner.grant_lease(ttl)
    }

    fn current_revision(&self) -> BoxFuture<'_, Result<i64>> {
        self.inner.current_revision()
    }

    fn compact(&self, revision: i64) -> BoxFuture<'_, Result<()>> {
        self.inner.compact(revision)
    }
}

/// Rewrites every Secret of `inner` that is not stored with the current write key (or in
/// plain, when writes are plain); returns how many were rewritten. A Secret changed
/// concurrently is read again and retried.
pub async fn reencrypt(inner: &dyn Datastore, t: &RwLock<Transformer>) -> Result<usize> {
    let range_end = crate::prefix_end(SECRETS_PREFIX);
    let list = inner
        .list(ListRequest {
            key: SECRETS_PREFIX.to_vec(),
            range_end,
            limit: 0,
            revision: 0,
        })
        .await?;
    let mut rewritten = 0;
    for kv in list.kvs {
        let mut current = Some(kv);
        while let Some(kv) = current.take() {
            let value = {
                let t = t.read().expect("transformer lock");
                if t.is_current(&kv.value) {
                    break;
                }
                let plain = t.decrypt(&kv.key, &kv.value).map_err(|e| {
                    Error::Unavailable(format!("decrypting {}: {e}", show(&kv.key)))
                })?;
                t.encrypt(&kv.key, &plain)
                    .map_err(|e| Error::Unavailable(format!("encrypting {}: {e}", show(&kv.key))))?
            };
            let put = GuardedOp::Put {
                value,
                lease: kv.lease,
            };
            match inner.guarded(&kv.key, kv.mod_revision, put).await? {
                WriteOutcome::Done { .. } => rewritten += 1,
                WriteOutcome::Conflict { current: now, .. } => current = now,
            }
        }
    }
    Ok(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encryption::transformer::Key;

    #[test]
    fn only_secrets_are_transformed() {
        let t = RwLock::new(Transformer::new(
            vec![Key::new("k", &[7; 32]).unwrap()],
            true,
        ));
        let stored = t
            .read()
            .unwrap()
            .encrypt(b"/registry/secrets/ns/s", b"v")
            .unwrap();
        let mut secret = KeyValue {
            key: b"/registry/secrets/ns/s".to_vec(),
            value: stored.clone(),
            ..KeyValue::default()
        };
        decrypt_kv(&t, &mut secret).unwrap();
        assert_eq!(secret.value, b"v");
        // A ConfigMap holding the same bytes is left alone.
        let mut cm = KeyValue {
            key: b"/registry/configmaps/ns/s".to_vec(),
            value: stored.clone(),
            ..KeyValue::default()
        };
        decrypt_kv(&t, &mut cm).unwrap();
        assert_eq!(cm.value, stored);
    }
}

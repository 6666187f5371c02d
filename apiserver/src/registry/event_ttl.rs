//! Events expire: kube-apiserver writes them with a lease of `--event-ttl` (1 h), one lease
//! reused for a minute of events (its TTL extended by that minute), so the datastore deletes
//! them without a garbage collector.

use std::time::{Duration, Instant};

use super::Registry;
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::ApiResult;

/// How long events live.
pub const EVENT_TTL: Duration = Duration::from_secs(3600);
/// How long one lease is reused for new events.
const LEASE_REUSE: Duration = Duration::from_secs(60);

/// The lease currently handed to events.
#[derive(Debug, Default)]
pub struct EventLeases {
    current: tokio::sync::Mutex<Option<(i64, Instant)>>,
}

/// Core and events.k8s.io Events (the same stored objects).
fn is_event(r: &Resource) -> bool {
    (r.group.is_empty() || r.group == "events.k8s.io") && r.kind == "Event"
}

impl Registry {
    /// The lease to write an object of `r` with: 0 except for events.
    pub(super) async fn lease_for(&self, r: &Resource) -> ApiResult<i64> {
        if !is_event(r) {
            return Ok(0);
        }
        let mut current = self.event_leases.current.lock().await;
        if let Some((id, granted)) = *current {
            if granted.elapsed() < LEASE_REUSE {
                return Ok(id);
            }
        }
        let ttl = (EVENT_TTL + LEASE_REUSE).as_secs() as i64;
        let id = self.ds.grant_lease(ttl).await?;
        *current = Some((id, Instant::now()));
        Ok(id)
    }
}

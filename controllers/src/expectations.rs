//! Expectations (upstream's `ControllerExpectations`, keyed by object identity instead of
//! counts): the creations and deletions a controller made that its watch has not shown yet.
//! While any are outstanding the controller does not act on the (stale) cache, so one
//! reconcile never creates or deletes again what the previous one already did.
//!
//! # Guarantees
//! - An expectation is met when the cache holds the created object, or no longer holds the
//!   deleted one (or holds it with a deletionTimestamp).
//! - Expectations expire after [`TIMEOUT`] (upstream's 5 minutes), so a lost watch event
//!   delays a controller but never stalls it.
//! - The expectations of a deleted controller are dropped when the controller finds it gone
//!   ([`Expectations::forget_deleted`], upstream's `DeleteExpectations`), so a new one of the
//!   same name starts clean and nothing is kept for it.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use kube::runtime::controller;

/// How long unmet expectations hold a controller back.
pub const TIMEOUT: Duration = Duration::from_secs(300);

/// What the cache shows of an object (by uid; for pods, [`PodIndex::seen`](crate::pod_index::PodIndex::seen)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    Absent,
    Present,
    Terminating,
}

#[derive(Debug, Default)]
struct Pending {
    creates: HashSet<String>,
    deletes: HashSet<String>,
    since: Option<Instant>,
}

/// Outstanding creations and deletions per controller key.
#[derive(Debug, Default)]
pub struct Expectations {
    pending: HashMap<String, Pending>,
}

impl Expectations {
    /// Records that `key` created the object with `uid`.
    pub fn created(&mut self, key: &str, uid: String, now: Instant) {
        let p = self.pending.entry(key.to_string()).or_default();
        p.creates.insert(uid);
        p.since = Some(now);
    }

    /// Records that `key` deleted the object with `uid`.
    pub fn deleted(&mut self, key: &str, uid: String, now: Instant) {
        let p = self.pending.entry(key.to_string()).or_default();
        p.deletes.insert(uid);
        p.since = Some(now);
    }

    /// Drops what the cache (`seen`) now shows and says whether nothing is outstanding.
    pub fn satisfied(&mut self, key: &str, now: Instant, seen: impl Fn(&str) -> Seen) -> bool {
        let Some(p) = self.pending.get_mut(key) else {
            return true;
        };
        p.creates.retain(|uid| seen(uid) == Seen::Absent);
        p.deletes.retain(|uid| seen(uid) == Seen::Present);
        let expired = p.since.is_some_and(|s| now.duration_since(s) >= TIMEOUT);
        if expired || (p.creates.is_empty() && p.deletes.is_empty()) {
            self.pending.remove(key);
            return true;
        }
        false
    }

    /// Forgets `key` (its object was deleted).
    pub fn forget(&mut self, key: &str) {
        self.pending.remove(key);
    }

    /// Forgets the controller a run of the controller found deleted: kube-runtime reports an
    /// object that was queued (by a watch event of one of its pods) but is no longer in the
    /// cache as [`controller::Error::ObjectNotFound`] (upstream's sync on NotFound).
    pub fn forget_deleted<T, R, Q>(&mut self, result: &Result<T, controller::Error<R, Q>>)
    where
        R: std::error::Error + 'static,
        Q: std::error::Error + 'static,
    {
        if let Err(controller::Error::ObjectNotFound(gone)) = result {
            let ns = gone.namespace.as_deref().unwrap_or_default();
            self.forget(&format!("{ns}/{}", gone.name));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creations_wait_for_the_cache_deletions_for_their_disappearance() {
        let t0 = Instant::now();
        let mut e = Expectations::default();
        assert!(e.satisfied("ns/rs", t0, |_| Seen::Absent));
        e.created("ns/rs", "a".into(), t0);
        e.deleted("ns/rs", "b".into(), t0);
        // a not seen yet, b still there.
        let early = |uid: &str| {
            if uid == "a" {
                Seen::Absent
            } else {
                Seen::Present
            }
        };
        assert!(!e.satisfied("ns/rs", t0, early));
        let seen = |uid: &str| {
            if uid == "a" {
                Seen::Present
            } else {
                Seen::Terminating
            }
        };
        assert!(e.satisfied("ns/rs", t0, seen));
        assert!(e.satisfied("other", t0, |_| Seen::Absent));
    }

    #[test]
    fn a_deleted_controller_is_forgotten() {
        use k8s_openapi::api::apps::v1::ReplicaSet;
        use kube::runtime::reflector::ObjectRef;

        type RunResult = Result<(), controller::Error<std::fmt::Error, std::fmt::Error>>;
        let t0 = Instant::now();
        let mut e = Expectations::default();
        e.created("ns/rs", "a".into(), t0);
        e.created("ns/other", "b".into(), t0);
        let gone = |name: &str| -> RunResult {
            let r = ObjectRef::<ReplicaSet>::new(name).within("ns");
            Err(controller::Error::ObjectNotFound(Box::new(r.erase())))
        };
        e.forget_deleted(&gone("rs"));
        e.forget_deleted(&RunResult::Ok(()));
        assert!(e.satisfied("ns/rs", t0, |_| Seen::Absent));
        assert!(!e.satisfied("ns/other", t0, |_| Seen::Absent));
        e.forget_deleted(&gone("other"));
        assert!(e.satisfied("ns/other", t0, |_| Seen::Absent));
    }

    #[test]
    fn expectations_expire() {
        let t0 = Instant::now();
        let mut e = Expectations::default();
        e.created("k", "a".into(), t0);
        assert!(!e.satisfied("k", t0 + TIMEOUT - Duration::from_secs(1), |_| Seen::Absent));
        assert!(e.satisfied("k", t0 + TIMEOUT, |_| Seen::Absent));
    }
}

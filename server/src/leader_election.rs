//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `leaderelection`
//! package does it: only the holder of the Lease runs the components it guards (the controller
//! manager, the scheduler), so that one server of an HA cluster runs them.
//!
//! The decision ("create, take over, renew or wait") is [`try_acquire_or_renew`], a pure
//! function of the observed Lease and the clock; [`LeaderElector::run`] is the async shell
//! that reads and writes the Lease through the API.
//!
//! # Guarantees
//! - A Lease held by another identity is taken over only after it went unchanged for its
//!   `leaseDurationSeconds`, measured on the local clock from when this elector first saw that
//!   record (client-go's `observedTime`: no trust in the other server's clock).
//! - The guarded work is cancelled when the Lease could not be renewed within the renew
//!   deadline, before another elector can take it over (renew deadline < lease duration).
//! - On stop the Lease is released (empty holder, 1 s duration, as client-go's
//!   `ReleaseOnCancel`), so a successor does not wait for the full lease duration.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use tokio_util::sync::CancellationToken;

/// The timing of an elector (client-go's `LeaderElectionConfig`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long a Lease stays valid without renewal (what others wait before taking over).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down.
    pub renew_deadline: Duration,
    /// How often to retry acquiring, and to renew.
    pub retry_period: Duration,
}

impl Default for Timing {
    /// kube-controller-manager's and kube-scheduler's defaults: 15 s, 10 s, 2 s.
    fn default() -> Timing {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// The leader election record a Lease carries (client-go's `LeaderElectionRecord`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// The holder's identity (`holderIdentity`); empty when released.
    pub holder: String,
    /// How long the holder's claim lasts after each renewal (`leaseDurationSeconds`).
    pub lease_duration_seconds: i32,
    /// When the current holder acquired the Lease (`acquireTime`).
    pub acquire_time: Option<Timestamp>,
    /// When the holder last renewed it (`renewTime`).
    pub renew_time: Option<Timestamp>,
    /// How many times the Lease changed hands (`leaseTransitions`).
    pub lease_transitions: i32,
}

impl Record {
    /// The record in `lease` (an absent spec is an empty record).
    pub fn of(lease: &Lease) -> Record {
        let spec = lease.spec.clone().unwrap_or_default();
        Record {
            holder: spec.holder_identity.unwrap_or_default(),
            lease_duration_seconds: spec.lease_duration_seconds.unwrap_or(0),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            lease_transitions: spec.lease_transitions.unwrap_or(0),
        }
    }

    /// The Lease spec that carries this record.
    pub fn to_spec(&self) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.holder.clone()),
            lease_duration_seconds: Some(self.lease_duration_seconds),
            acquire_time: self.acquire_time.map(MicroTime),
            renew_time: self.renew_time.map(MicroTime),
            lease_transitions: Some(self.lease_transitions),
            ..LeaseSpec::default()
        }
    }
}

/// What the elector last saw of the Lease, and when (local clock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The record seen.
    pub record: Record,
    /// When this content was first seen or written (local clock).
    pub at: Timestamp,
}

/// The outcome of one attempt: the write to make, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// No Lease exists: create it with this record.
    Create(Record),
    /// Write this record (a renewal, or a takeover of an expired or released Lease).
    Update(Record),
    /// Another identity holds an unexpired Lease: try again after the retry period.
    HeldBy(String),
}

/// Decides one acquire-or-renew attempt of `me` at `now` (client-go's `tryAcquireOrRenew`).
///
/// `current` is the Lease's record as just read (`None`: no Lease); `observed` is what this
/// elector saw before, which dates the current record when it is unchanged.
pub fn try_acquire_or_renew(
    me: &str,
    timing: &Timing,
    now: Timestamp,
    current: Option<&Record>,
    observed: Option<&Observed>,
) -> Step {
    let duration = i32::try_from(timing.lease_duration.as_secs()).unwrap_or(i32::MAX);
    let fresh = Record {
        holder: me.to_string(),
        lease_duration_seconds: duration,
        acquire_time: Some(now),
        renew_time: Some(now),
        lease_transitions: 0,
    };
    let Some(current) = current else {
        return Step::Create(fresh);
    };
    if current.holder == me {
        return Step::Update(Record {
            renew_time: Some(now),
            lease_duration_seconds: duration,
            ..current.clone()
        });
    }
    // The record dates from when it was first seen unchanged; a new record from now.
    let seen_at = match observed {
        Some(o) if o.record == *current => o.at,
        _ => now,
    };
    let valid_until =
        seen_at + SignedDuration::from_secs(i64::from(current.lease_duration_seconds.max(0)));
    if !current.holder.is_empty() && valid_until > now {
        return Step::HeldBy(current.holder.clone());
    }
    Step::Update(Record {
        lease_transitions: current.lease_transitions + 1,
        ..fresh
    })
}

/// The record that releases a Lease held by this elector (client-go's release: empty holder,
/// 1 s duration, times kept).
pub fn released(current: &Record, now: Timestamp) -> Record {
    Record {
        holder: String::new(),
        lease_duration_seconds: 1,
        renew_time: Some(now),
        ..current.clone()
    }
}

/// `<hostname>_<uuid>`: the form of holder identity kube-controller-manager and kube-scheduler
/// use. Upstream draws a new UUID per process; k3rs derives it from the server's member and
/// cluster IDs (kept in its data dir), so a server restarted on the same data dir, even after
/// `kill -9`, holds its Leases again at once instead of waiting out its predecessor's 15 s.
/// Two live processes never share a data dir (the store locks it), so never an identity.
pub fn holder_identity(hostname: &str, member_id: u64, cluster_id: u64) -> String {
    format!(
        "{hostname}_{}",
        uuid::Uuid::from_u64_pair(cluster_id, member_id)
    )
}

/// How long the guarded work may take to return after its token is cancelled before it is
/// aborted, so that the elector competes again (supervised tasks give up after
/// [`k3rs_apimachinery::tasks::STOP_GRACE`]; this bound catches anything else).
const STEP_DOWN_GRACE: Duration = Duration::from_secs(15);

/// Waits for the guarded work `task` to return after its token was cancelled, aborting it
/// after [`STEP_DOWN_GRACE`].
async fn stepped_down(lease: &str, mut task: tokio::task::JoinHandle<()>) {
    if tokio::time::timeout(STEP_DOWN_GRACE, &mut task)
        .await
        .is_err()
    {
        tracing::error!(%lease, grace = ?STEP_DOWN_GRACE, "the work guarded by the lease did not stop in time; aborted");
        task.abort();
        let _ = task.await;
    }
}

/// An elector for one Lease.
pub struct LeaderElector {
    leases: Api<Lease>,
    name: String,
    identity: String,
    timing: Timing,
    observed: Option<Observed>,
}

impl LeaderElector {
    /// Competes for Lease `namespace/name` as `identity` through `client`.
    pub fn new(
        client: kube::Client,
        namespace: &str,
        name: &str,
        identity: String,
        timing: Timing,
    ) -> LeaderElector {
        LeaderElector {
            leases: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity,
            timing,
            observed: None,
        }
    }

    /// The identity this elector holds the Lease as.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Until `stop`: acquires the Lease, runs `lead(token)` while holding it, and cancels that
    /// token when leadership is lost (then competes again) or on stop (then releases the
    /// Lease). `lead` must return soon after its token is cancelled.
    pub async fn run<F, Fut>(mut self, stop: CancellationToken, mut lead: F)
    where
        F: FnMut(CancellationToken) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        while !stop.is_cancelled() {
            if !self.acquire(&stop).await {
                break;
            }
            tracing::info!(lease = %self.name, identity = %self.identity, "acquired lease; leading");
            let leading = stop.child_token();
            let task = tokio::spawn(lead(leading.clone()));
            self.renew(&stop).await;
            leading.cancel();
            stepped_down(&self.name, task).await;
            if stop.is_cancelled() {
                self.release().await;
            } else {
                tracing::warn!(lease = %self.name, identity = %self.identity, "leader election lost");
            }
        }
    }

    /// Retries every retry period until the Lease is ours; false when stopped first.
    async fn acquire(&mut self, stop: &CancellationToken) -> bool {
        loop {
            if self.attempt().await {
                return true;
            }
            tokio::select! {
                _ = stop.cancelled() => return false,
                _ = tokio::time::sleep(self.timing.retry_period) => {}
            }
        }
    }

    /// Renews every retry period; returns when stopped or when no renewal succeeded within
    /// the renew deadline.
    async fn renew(&mut self, stop: &CancellationToken) {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(self.timing.retry_period) => {}
            }
            let attempt = tokio::time::timeout(self.timing.renew_deadline, self.attempt());
            if matches!(attempt.await, Ok(true)) {
                last_renewed = tokio::time::Instant::now();
            } else if last_renewed.elapsed() >= self.timing.renew_deadline {
                return;
            }
        }
    }

    /// One read-decide-write round; true when this elector holds the Lease afterwards.
    async fn attempt(&mut self) -> bool {
        let now = Timestamp::now();
        let lease = match self.leases.get_opt(&self.name).await {
            Ok(l) => l,
            Err(e) => {
                tracing::debug!(error = %e, lease = %self.name, "reading lease failed");
                return false;
            }
        };
        let current = lease.as_ref().map(Record::of);
        let step = try_acquire_or_renew(
            &self.identity,
            &self.timing,
            now,
            current.as_ref(),
            self.observed.as_ref(),
        );
        if let Some(record) = current {
            if self.observed.as_ref().is_none_or(|o| o.record != record) {
                self.observed = Some(Observed { record, at: now });
            }
        }
        let written = match step {
            Step::HeldBy(_) => return false,
            Step::Create(record) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(record.to_spec()),
                };
                self.leases.create(&PostParams::default(), &lease).await
            }
            Step::Update(record) => {
                let mut lease = lease.unwrap_or_default();
                lease.spec = Some(record.to_spec());
                self.leases
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match written {
            Ok(lease) => {
                self.observed = Some(Observed {
                    record: Record::of(&lease),
                    at: now,
                });
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, lease = %self.name, "writing lease failed");
                false
            }
        }
    }

    /// Gives the Lease up if this elector still holds it.
    async fn release(&mut self) {
        let Ok(Some(mut lease)) = self.leases.get_opt(&self.name).await else {
            return;
        };
        let record = Record::of(&lease);
        if record.holder != self.identity {
            return;
        }
        lease.spec = Some(released(&record, Timestamp::now()).to_spec());
        if let Err(e) = self
            .leases
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            tracing::debug!(error = %e, lease = %self.name, "releasing lease failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn held(holder: &str, acquired: i64, renewed: i64, transitions: i32) -> Record {
        Record {
            holder: holder.into(),
            lease_duration_seconds: 15,
            acquire_time: Some(t(acquired)),
            renew_time: Some(t(renewed)),
            lease_transitions: transitions,
        }
    }

    #[test]
    fn no_lease_is_created_with_this_holder() {
        let step = try_acquire_or_renew("a", &Timing::default(), t(0), None, None);
        assert_eq!(step, Step::Create(held("a", 0, 0, 0)));
    }

    #[test]
    fn own_lease_is_renewed_keeping_acquire_time_and_transitions() {
        let cur = held("a", 0, 4, 3);
        let step = try_acquire_or_renew("a", &Timing::default(), t(6), Some(&cur), None);
        assert_eq!(step, Step::Update(held("a", 0, 6, 3)));
    }

    #[test]
    fn another_holder_is_waited_for_lease_duration_from_first_observation() {
        let timing = Timing::default();
        let cur = held("b", 0, 0, 0);
        // First seen now: valid for 15 s from now, whatever its renew time says.
        assert_eq!(
            try_acquire_or_renew("a", &timing, t(100), Some(&cur), None),
            Step::HeldBy("b".into())
        );
        let seen = Observed {
            record: cur.clone(),
            at: t(100),
        };
        assert_eq!(
            try_acquire_or_renew("a", &timing, t(114), Some(&cur), Some(&seen)),
            Step::HeldBy("b".into())
        );
        assert_eq!(
            try_acquire_or_renew("a", &timing, t(115), Some(&cur), Some(&seen)),
            Step::Update(held("a", 115, 115, 1))
        );
    }

    #[test]
    fn a_renewal_by_the_holder_restarts_the_wait() {
        let timing = Timing::default();
        let seen = Observed {
            record: held("b", 0, 0, 0),
            at: t(0),
        };
        let renewed = held("b", 0, 10, 0);
        assert_eq!(
            try_acquire_or_renew("a", &timing, t(20), Some(&renewed), Some(&seen)),
            Step::HeldBy("b".into())
        );
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let cur = released(&held("b", 0, 5, 2), t(6));
        assert_eq!(cur.holder, "");
        assert_eq!(cur.lease_duration_seconds, 1);
        assert_eq!(cur.acquire_time, Some(t(0)));
        let step = try_acquire_or_renew("a", &Timing::default(), t(6), Some(&cur), None);
        assert_eq!(step, Step::Update(held("a", 6, 6, 3)));
    }

    #[test]
    fn record_round_trips_through_the_lease_spec() {
        let r = held("host_1234", 1, 2, 7);
        let lease = Lease {
            spec: Some(r.to_spec()),
            ..Lease::default()
        };
        assert_eq!(Record::of(&lease), r);
        assert_eq!(Record::of(&Lease::default()), Record::default());
    }

    #[test]
    fn holder_identity_is_hostname_underscore_uuid_kept_per_member() {
        let id = holder_identity("node1", 7, 9);
        let (host, uuid) = id.split_once('_').unwrap();
        assert_eq!(host, "node1");
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
        assert_eq!(
            id,
            holder_identity("node1", 7, 9),
            "the same after a restart"
        );
        assert_ne!(id, holder_identity("node1", 8, 9), "another member");
    }

    #[test]
    fn a_restarted_holder_renews_its_own_unexpired_lease_at_once() {
        let timing = Timing::default();
        let now: Timestamp = "2026-01-01T00:00:10Z".parse().unwrap();
        let held = Record {
            holder: "me".into(),
            lease_duration_seconds: 15,
            acquire_time: Some("2026-01-01T00:00:00Z".parse().unwrap()),
            renew_time: Some("2026-01-01T00:00:08Z".parse().unwrap()),
            lease_transitions: 3,
        };
        // A new process has observed nothing yet.
        match try_acquire_or_renew("me", &timing, now, Some(&held), None) {
            Step::Update(r) => {
                assert_eq!(r.holder, "me");
                assert_eq!(r.lease_transitions, 3, "not a transition");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            try_acquire_or_renew("other", &timing, now, Some(&held), None),
            Step::HeldBy("me".into())
        );
    }
}

//! Lease deadlines: a pure clock ([`LeaseClock`]) and a thin shell ([`Lessor`]) with the expiry
//! loop.
//!
//! The replicated state knows which leases exist and their TTLs; *when* they expire is kept
//! only in memory and enforced by the leader, as in etcd. A grant starts the clock at
//! `now + ttl`; a keep-alive restarts it; when a node becomes leader every lease gets a fresh
//! deadline (etcd's refresh on leader change), so a lease never expires because of a leader
//! change. The leader proposes `LeaseRevoke` for expired leases; revocation, like any write,
//! goes through the log, so every replica deletes the same keys at the same revision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use k3rs_storage::{Command, CommandResponse, RequestError, Store};
use openraft::ServerState;
use tokio_util::sync::CancellationToken;

use crate::proposer::Proposer;
use crate::types::Raft;
use crate::NodeId;

/// How often the leader looks for expired leases.
pub const EXPIRY_TICK: Duration = Duration::from_millis(500);
/// At most this many revocations are proposed per tick (etcd rate-limits revocations too).
pub const MAX_REVOKES_PER_TICK: usize = 500;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Tracked {
    ttl: i64,
    deadline: Instant,
}

/// Deadlines of leases at explicit instants. No I/O, no clock: every method takes `now`.
#[derive(Debug, Default)]
pub struct LeaseClock {
    leases: HashMap<i64, Tracked>,
}

fn ttl_duration(ttl: i64) -> Duration {
    Duration::from_secs(ttl.max(0) as u64)
}

impl LeaseClock {
    /// A lease was granted (applied): it expires `ttl` seconds from `now`.
    pub fn granted(&mut self, id: i64, ttl: i64, now: Instant) {
        self.leases.insert(
            id,
            Tracked {
                ttl,
                deadline: now + ttl_duration(ttl),
            },
        );
    }

    /// A lease was revoked (or turned out not to exist): forget it.
    pub fn revoked(&mut self, id: i64) {
        self.leases.remove(&id);
    }

    /// Restarts the lease's clock. `ttl` is the lease's TTL from the store. Returns the TTL.
    pub fn keep_alive(&mut self, id: i64, ttl: i64, now: Instant) -> i64 {
        self.granted(id, ttl, now);
        ttl
    }

    /// Seconds left, rounded up (0 once expired); None for an unknown lease.
    pub fn remaining(&self, id: i64, now: Instant) -> Option<i64> {
        let t = self.leases.get(&id)?;
        let left = t.deadline.saturating_duration_since(now);
        Some(left.as_nanos().div_ceil(1_000_000_000) as i64)
    }

    /// Replaces every deadline with `now + extend + ttl` for the leases that exist (on becoming
    /// leader; `extend` gives clients an election timeout to find the new leader, as etcd does).
    pub fn refresh_all(
        &mut self,
        leases: impl IntoIterator<Item = (i64, i64)>,
        now: Instant,
        extend: Duration,
    ) {
        self.leases = leases
            .into_iter()
            .map(|(id, ttl)| {
                (
                    id,
                    Tracked {
                        ttl,
                        deadline: now + extend + ttl_duration(ttl),
                    },
                )
            })
            .collect();
    }

    /// The leases whose deadline is at or before `now`, earliest first, at most `max`.
    pub fn expired(&self, now: Instant, max: usize) -> Vec<i64> {
        let mut due: Vec<(Instant, i64)> = self
            .leases
            .iter()
            .filter(|(_, t)| t.deadline <= now)
            .map(|(id, t)| (t.deadline, *id))
            .collect();
        due.sort_unstable();
        due.into_iter().take(max).map(|(_, id)| id).collect()
    }
}

/// etcd's minimum lease TTL for an election timeout and heartbeat: `(3 * election_ticks / 2)`
/// heartbeats, in whole seconds rounded up (etcd `server.go`: `minTTL`), and at least 1.
pub fn min_lease_ttl(election_timeout: Duration, heartbeat: Duration) -> i64 {
    let heartbeat_ms = heartbeat.as_millis().max(1);
    let election_ticks = election_timeout.as_millis() / heartbeat_ms;
    let min_ms = (3 * election_ticks / 2) * heartbeat_ms;
    (min_ms.div_ceil(1000) as i64).max(1)
}

/// The shared lease clock of one node, fed by the state machine adapter (grants, revocations)
/// and by keep-alives.
#[derive(Debug)]
pub struct Lessor {
    clock: Mutex<LeaseClock>,
    /// Extra time given to every lease when this node becomes leader.
    leader_extend: Duration,
}

/// `tokio`'s clock, so that tests with a paused runtime control lease time too.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Lessor {
    pub fn new(leader_extend: Duration) -> Lessor {
        Lessor {
            clock: Mutex::new(LeaseClock::default()),
            leader_extend,
        }
    }

    fn clock(&self) -> MutexGuard<'_, LeaseClock> {
        self.clock.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Called by the state machine adapter for each applied command and its outcome.
    pub fn on_applied(&self, cmd: &Command, result: &Result<CommandResponse, RequestError>) {
        match (cmd, result) {
            (_, Ok(CommandResponse::LeaseGrant { id, ttl })) => {
                self.clock().granted(*id, *ttl, now())
            }
            // A revocation refused by a CORRUPT alarm leaves the lease in place: keep its
            // deadline so that expiry tries again.
            (Command::LeaseRevoke { .. }, Err(RequestError::Corrupt)) => {}
            (Command::LeaseRevoke { id }, _) => self.clock().revoked(*id),
            _ => {}
        }
    }

    /// Restarts the deadlines of every lease in `store` (leader change, snapshot install).
    pub fn refresh_from(&self, store: &Store) -> Result<(), k3rs_storage::Error> {
        let leases = store.leases()?;
        self.clock().refresh_all(
            leases.iter().map(|l| (l.id, l.ttl)),
            now(),
            self.leader_extend,
        );
        Ok(())
    }

    /// Keep-alive of a lease that exists in the store with `ttl`.
    pub fn keep_alive(&self, id: i64, ttl: i64) -> i64 {
        self.clock().keep_alive(id, ttl, now())
    }

    pub fn forget(&self, id: i64) {
        self.clock().revoked(id);
    }

    pub fn remaining(&self, id: i64) -> Option<i64> {
        self.clock().remaining(id, now())
    }

    fn expired(&self) -> Vec<i64> {
        self.clock().expired(now(), MAX_REVOKES_PER_TICK)
    }
}

/// Runs until `cancel`: refreshes deadlines whenever this node becomes leader, and while it is
/// leader proposes `LeaseRevoke` for expired leases. A failed proposal leaves the lease in the
/// clock, so it is retried on the next tick.
pub async fn run_expiry_loop(
    id: NodeId,
    raft: Raft,
    proposer: Proposer,
    store: Arc<Store>,
    lessor: Arc<Lessor>,
    cancel: CancellationToken,
) {
    let mut metrics = raft.metrics();
    let mut is_leader = false;
    let mut tick = tokio::time::interval(EXPIRY_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let on_tick = tokio::select! {
            _ = cancel.cancelled() => return,
            changed = metrics.changed() => if changed.is_err() { return } else { false },
            _ = tick.tick() => true,
        };
        let leader_now = {
            let m = metrics.borrow_and_update();
            m.state == ServerState::Leader && m.current_leader == Some(id)
        };
        if leader_now && !is_leader {
            if let Err(e) = lessor.refresh_from(&store) {
                tracing::error!(error = %e, "reading leases on becoming leader");
                continue;
            }
            tracing::info!("became leader: refreshed lease deadlines");
        }
        is_leader = leader_now;
        if !is_leader || !on_tick {
            continue;
        }
        // Proposed concurrently, so the proposer puts them in as few entries as possible.
        let mut revokes = tokio::task::JoinSet::new();
        for lease in lessor.expired() {
            let proposer = proposer.clone();
            revokes.spawn(async move {
                (
                    lease,
                    proposer.propose(Command::LeaseRevoke { id: lease }).await,
                )
            });
        }
        let drain = async {
            while let Some(done) = revokes.join_next().await {
                match done {
                    // Applying the revocation (even one answered LeaseNotFound) removed the
                    // lease from the clock, see `Lessor::on_applied`.
                    Ok((lease, Ok(_))) => tracing::debug!(lease, "revoked expired lease"),
                    Ok((lease, Err(e))) => {
                        tracing::warn!(lease, error = %e, "revoking an expired lease failed; will retry")
                    }
                    Err(e) => tracing::warn!(error = %e, "lease revocation task failed"),
                }
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = drain => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_expire_keep_alive() {
        let t0 = Instant::now();
        let mut c = LeaseClock::default();
        c.granted(1, 10, t0);
        c.granted(2, 5, t0);
        assert_eq!(c.expired(t0, 10), Vec::<i64>::new());
        assert_eq!(c.remaining(1, t0), Some(10));
        assert_eq!(c.remaining(1, t0 + Duration::from_millis(100)), Some(10));
        assert_eq!(c.remaining(1, t0 + Duration::from_secs(9)), Some(1));
        assert_eq!(c.expired(t0 + Duration::from_secs(5), 10), vec![2]);
        assert_eq!(c.expired(t0 + Duration::from_secs(11), 10), vec![2, 1]);
        assert_eq!(c.expired(t0 + Duration::from_secs(11), 1), vec![2]);
        assert_eq!(c.remaining(2, t0 + Duration::from_secs(60)), Some(0));
        assert_eq!(c.keep_alive(2, 5, t0 + Duration::from_secs(4)), 5);
        assert_eq!(
            c.expired(t0 + Duration::from_secs(8), 10),
            Vec::<i64>::new()
        );
        c.revoked(1);
        assert_eq!(c.remaining(1, t0), None);
        assert_eq!(c.expired(t0 + Duration::from_secs(100), 10), vec![2]);
    }

    #[test]
    fn refresh_replaces_every_deadline() {
        let t0 = Instant::now();
        let mut c = LeaseClock::default();
        c.granted(1, 1, t0);
        c.granted(9, 1, t0);
        let t1 = t0 + Duration::from_secs(100);
        c.refresh_all([(1, 10), (2, 3)], t1, Duration::from_secs(1));
        assert_eq!(c.remaining(9, t1), None);
        assert_eq!(c.remaining(1, t1), Some(11));
        assert_eq!(c.expired(t1 + Duration::from_secs(4), 10), vec![2]);
    }

    #[test]
    fn etcd_min_ttl() {
        let ms = Duration::from_millis;
        // etcd defaults: 100 ms heartbeat, 1000 ms election → 15 ticks × 100 ms = 1.5 s → 2.
        assert_eq!(min_lease_ttl(ms(1000), ms(100)), 2);
        assert_eq!(min_lease_ttl(ms(3000), ms(300)), 5);
        assert_eq!(min_lease_ttl(ms(50), ms(10)), 1);
    }
}

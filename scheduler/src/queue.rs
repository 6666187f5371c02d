//! The scheduling queue (upstream's `PriorityQueue`), time passed in: an active queue ordered
//! by priority then arrival, a backoff per pod (1 s doubling to 10 s with each attempt), and
//! an unschedulable pool that cluster events (a node added or changed, a pod deleted) move
//! back, and that is flushed after 5 minutes in any case.

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// The first retry delay of a failed pod.
pub const INITIAL_BACKOFF: Duration = Duration::from_secs(1);
/// The longest retry delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// How long an unschedulable pod waits without a cluster event before it is retried.
pub const UNSCHEDULABLE_FLUSH: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Active,
    /// Waiting until the instant, then active.
    Backoff(Instant),
    /// Failed to fit at the instant; waits for a cluster event.
    Unschedulable(Instant),
    /// Popped and being scheduled or bound.
    InFlight,
}

#[derive(Clone, Debug)]
struct Entry {
    priority: i32,
    /// Arrival order in the active queue.
    seq: u64,
    attempts: u32,
    state: State,
    /// The cluster-event count when popped: an event during the attempt sends a failed pod
    /// to backoff instead of the unschedulable pool.
    popped_at_event: u64,
}

/// Pods waiting to be scheduled, by `namespace/name` key.
///
/// Every state has its own index (the active queue, the backoff deadlines, the unschedulable
/// pool), so popping, ending backoffs and cluster events cost O(log n) per pod they move,
/// never a scan of every queued pod: a burst of 10,000 pending pods costs each decision no more
/// than a single pending pod does.
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    entries: HashMap<String, Entry>,
    active: BTreeSet<(Reverse<i32>, u64, String)>,
    /// Backed-off pods by the end of their backoff.
    backoff: BTreeSet<(Instant, String)>,
    /// The unschedulable pool.
    pool: BTreeSet<String>,
    seq: u64,
    events: u64,
}

/// How long a pod waits after `attempts` failed attempts.
pub fn backoff(attempts: u32) -> Duration {
    let shift = attempts.saturating_sub(1).min(8);
    (INITIAL_BACKOFF * (1u32 << shift)).min(MAX_BACKOFF)
}

impl SchedulingQueue {
    /// Moves `key` to `state`, keeping the indexes in step (every state change goes here).
    fn set_state(&mut self, key: &str, state: State) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        match e.state {
            State::Active => {
                self.active
                    .remove(&(Reverse(e.priority), e.seq, key.to_string()));
            }
            State::Backoff(until) => {
                self.backoff.remove(&(until, key.to_string()));
            }
            State::Unschedulable(_) => {
                self.pool.remove(key);
            }
            State::InFlight => {}
        }
        match state {
            State::Active => {
                self.seq += 1;
                e.seq = self.seq;
                self.active
                    .insert((Reverse(e.priority), e.seq, key.to_string()));
            }
            State::Backoff(until) => {
                self.backoff.insert((until, key.to_string()));
            }
            State::Unschedulable(_) => {
                self.pool.insert(key.to_string());
            }
            State::InFlight => {}
        }
        e.state = state;
    }

    /// A new pending pod: active unless already queued.
    pub fn add(&mut self, key: &str, priority: i32) {
        if self.entries.contains_key(key) {
            return;
        }
        self.entries.insert(
            key.to_string(),
            Entry {
                priority,
                seq: 0,
                attempts: 0,
                state: State::InFlight,
                popped_at_event: 0,
            },
        );
        self.set_state(key, State::Active);
    }

    /// A queued pod changed in a way that may let it fit: out of the unschedulable pool.
    pub fn update(&mut self, key: &str, now: Instant) {
        self.move_one(key, now);
    }

    /// The pod is gone or bound: forget it.
    pub fn delete(&mut self, key: &str) {
        self.set_state(key, State::InFlight);
        self.entries.remove(key);
    }

    /// Whether `key` is queued (in any state).
    pub fn contains(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// The next pod to schedule (highest priority, then earliest), after moving pods whose
    /// backoff ended to the active queue.
    pub fn pop(&mut self, now: Instant) -> Option<String> {
        self.flush_backoff(now);
        let (_, _, key) = self.active.first()?.clone();
        self.set_state(&key, State::InFlight);
        let events = self.events;
        if let Some(e) = self.entries.get_mut(&key) {
            e.attempts += 1;
            e.popped_at_event = events;
        }
        Some(key)
    }

    /// Moves the pods whose backoff ended to the active queue.
    pub fn flush_backoff(&mut self, now: Instant) {
        while let Some((until, key)) = self.backoff.first().cloned() {
            if until > now {
                break;
            }
            self.set_state(&key, State::Active);
        }
    }

    /// The pod fit nowhere: to the unschedulable pool, or to backoff if a cluster event came
    /// while it was being scheduled.
    pub fn unschedulable(&mut self, key: &str, now: Instant) {
        let events = self.events;
        let Some(e) = self.entries.get(key) else {
            return;
        };
        let state = if e.popped_at_event != events {
            State::Backoff(now + backoff(e.attempts))
        } else {
            State::Unschedulable(now)
        };
        self.set_state(key, state);
    }

    /// The attempt failed for another reason (binding, API errors): retry after backoff.
    pub fn error(&mut self, key: &str, now: Instant) {
        if let Some(e) = self.entries.get(key) {
            let until = now + backoff(e.attempts);
            self.set_state(key, State::Backoff(until));
        }
    }

    /// An unschedulable pod leaves the pool: to backoff while its backoff lasts, else active.
    fn move_one(&mut self, key: &str, now: Instant) {
        let Some(e) = self.entries.get(key) else {
            return;
        };
        let State::Unschedulable(since) = e.state else {
            return;
        };
        let until = since + backoff(e.attempts);
        if until > now {
            self.set_state(key, State::Backoff(until));
        } else {
            self.set_state(key, State::Active);
        }
    }

    /// A cluster event that may make unschedulable pods fit: all of them move to active (or
    /// to backoff while their backoff lasts).
    pub fn cluster_event(&mut self, now: Instant) {
        self.cluster_event_where(now, |_| true);
    }

    /// A cluster event that can only help some pods (`affected(key)`): only those move.
    pub fn cluster_event_where(&mut self, now: Instant, affected: impl Fn(&str) -> bool) {
        self.events += 1;
        if self.pool.is_empty() {
            return;
        }
        let keys: Vec<String> = self.pool.iter().filter(|k| affected(k)).cloned().collect();
        for key in keys {
            self.move_one(&key, now);
        }
    }

    /// Moves pods unschedulable for longer than [`UNSCHEDULABLE_FLUSH`].
    pub fn flush_unschedulable(&mut self, now: Instant) {
        let entries = &self.entries;
        let keys: Vec<String> = self
            .pool
            .iter()
            .filter(|k| {
                entries.get(*k).is_some_and(|e| {
                    matches!(e.state, State::Unschedulable(t) if now.duration_since(t) >= UNSCHEDULABLE_FLUSH)
                })
            })
            .cloned()
            .collect();
        for key in keys {
            self.move_one(&key, now);
        }
    }

    /// When the next backed-off pod becomes active, if any.
    pub fn next_backoff(&self) -> Option<Instant> {
        self.backoff.first().map(|(until, _)| *until)
    }

    /// Whether a pod is ready to pop now.
    pub fn has_active(&self) -> bool {
        !self.active.is_empty()
    }

    /// Whether every entry sits in exactly the index of its state (for tests).
    #[cfg(test)]
    fn indexes_agree(&self) -> bool {
        let counted = self.entries.iter().all(|(k, e)| match e.state {
            State::Active => self
                .active
                .contains(&(Reverse(e.priority), e.seq, k.clone())),
            State::Backoff(t) => self.backoff.contains(&(t, k.clone())),
            State::Unschedulable(_) => self.pool.contains(k),
            State::InFlight => true,
        });
        let in_state =
            |want: fn(&State) -> bool| self.entries.values().filter(|e| want(&e.state)).count();
        counted
            && self.active.len() == in_state(|s| matches!(s, State::Active))
            && self.backoff.len() == in_state(|s| matches!(s, State::Backoff(_)))
            && self.pool.len() == in_state(|s| matches!(s, State::Unschedulable(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_ten_seconds() {
        let got: Vec<u64> = (1..=6).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(got, vec![1, 2, 4, 8, 10, 10]);
    }

    #[test]
    fn pops_by_priority_then_arrival() {
        let now = Instant::now();
        let mut q = SchedulingQueue::default();
        q.add("ns/low", 0);
        q.add("ns/high", 100);
        q.add("ns/low2", 0);
        q.add("ns/high", 100); // already queued: keeps its place
        let order: Vec<_> = std::iter::from_fn(|| q.pop(now)).collect();
        assert_eq!(order, vec!["ns/high", "ns/low", "ns/low2"]);
    }

    #[test]
    fn unschedulable_pods_wait_for_events_and_backoff() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        q.add("ns/p", 0);
        assert_eq!(q.pop(t0).as_deref(), Some("ns/p"));
        q.unschedulable("ns/p", t0);
        assert_eq!(q.pop(t0 + Duration::from_secs(60)), None);
        // An event 0.5 s later: backoff (1 s after the first attempt) still runs.
        q.cluster_event(t0 + Duration::from_millis(500));
        assert_eq!(q.pop(t0 + Duration::from_millis(900)), None);
        assert_eq!(q.next_backoff(), Some(t0 + Duration::from_secs(1)));
        // Backed-off pods are not active until a flush at the end of their backoff.
        assert!(!q.has_active());
        q.flush_backoff(t0 + Duration::from_secs(1));
        assert!(q.has_active());
        assert_eq!(q.pop(t0 + Duration::from_secs(1)).as_deref(), Some("ns/p"));
        // Second failure, event during the attempt: straight to backoff (2 s).
        q.cluster_event(t0 + Duration::from_secs(1));
        q.unschedulable("ns/p", t0 + Duration::from_secs(1));
        assert_eq!(q.next_backoff(), Some(t0 + Duration::from_secs(3)));
        assert_eq!(q.pop(t0 + Duration::from_secs(3)).as_deref(), Some("ns/p"));
        // Third failure, no event: only the 5-minute flush brings it back.
        let t3 = t0 + Duration::from_secs(3);
        q.unschedulable("ns/p", t3);
        q.flush_unschedulable(t3 + Duration::from_secs(299));
        assert_eq!(q.pop(t3 + Duration::from_secs(299)), None);
        q.flush_unschedulable(t3 + UNSCHEDULABLE_FLUSH);
        assert_eq!(q.pop(t3 + UNSCHEDULABLE_FLUSH).as_deref(), Some("ns/p"));
        q.delete("ns/p");
        assert!(!q.contains("ns/p"));
    }

    #[test]
    fn errors_back_off() {
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        q.add("ns/p", 0);
        q.pop(t0);
        q.error("ns/p", t0);
        assert_eq!(q.pop(t0), None);
        assert_eq!(q.pop(t0 + Duration::from_secs(1)).as_deref(), Some("ns/p"));
    }

    #[test]
    fn indexes_follow_every_state_change() {
        // A generated mix of operations over 50 pods (a fixed linear congruential sequence).
        let t0 = Instant::now();
        let mut q = SchedulingQueue::default();
        let mut x: u64 = 7;
        let mut next = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        for step in 0..5_000u64 {
            let now = t0 + Duration::from_millis(step * 37);
            let key = format!("ns/p{}", next(50));
            match next(9) {
                0 => q.add(&key, next(3) as i32),
                1 => {
                    q.pop(now);
                }
                2 => q.unschedulable(&key, now),
                3 => q.error(&key, now),
                4 => q.cluster_event(now),
                5 => q.cluster_event_where(now, |k| k.ends_with('1')),
                6 => q.update(&key, now),
                7 => q.delete(&key),
                _ => q.flush_unschedulable(now),
            }
            assert!(q.indexes_agree(), "after step {step}");
        }
        // Everything queued comes out again once backoffs end and the pool is flushed.
        let late = t0 + Duration::from_secs(10_000);
        q.flush_unschedulable(late);
        let mut popped = 0;
        while q.pop(late).is_some() {
            popped += 1;
        }
        let waiting = q
            .entries
            .values()
            .filter(|e| e.state != State::InFlight)
            .count();
        assert_eq!(waiting, 0);
        assert!(popped > 0);
    }
}

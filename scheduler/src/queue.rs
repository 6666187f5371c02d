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
#[derive(Debug, Default)]
pub struct SchedulingQueue {
    entries: HashMap<String, Entry>,
    active: BTreeSet<(Reverse<i32>, u64, String)>,
    seq: u64,
    events: u64,
}

/// How long a pod waits after `attempts` failed attempts.
pub fn backoff(attempts: u32) -> Duration {
    let shift = attempts.saturating_sub(1).min(8);
    (INITIAL_BACKOFF * (1u32 << shift)).min(MAX_BACKOFF)
}

impl SchedulingQueue {
    fn activate(&mut self, key: &str) {
        self.seq += 1;
        let seq = self.seq;
        if let Some(e) = self.entries.get_mut(key) {
            e.seq = seq;
            e.state = State::Active;
            self.active
                .insert((Reverse(e.priority), seq, key.to_string()));
        }
    }

    fn deactivate(&mut self, key: &str) {
        if let Some(e) = self.entries.get(key) {
            self.active
                .remove(&(Reverse(e.priority), e.seq, key.to_string()));
        }
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
                state: State::Active,
                popped_at_event: 0,
            },
        );
        self.activate(key);
    }

    /// A queued pod changed in a way that may let it fit: out of the unschedulable pool.
    pub fn update(&mut self, key: &str, now: Instant) {
        if let Some(State::Unschedulable(_)) = self.entries.get(key).map(|e| e.state) {
            self.move_one(key, now);
        }
    }

    /// The pod is gone or bound: forget it.
    pub fn delete(&mut self, key: &str) {
        self.deactivate(key);
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
        let (_, _, key) = self.active.pop_first()?;
        let events = self.events;
        let e = self.entries.get_mut(&key).expect("active entries exist");
        e.state = State::InFlight;
        e.attempts += 1;
        e.popped_at_event = events;
        Some(key)
    }

    /// Moves the pods whose backoff ended to the active queue.
    pub fn flush_backoff(&mut self, now: Instant) {
        let expired: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.state, State::Backoff(t) if t <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in expired {
            self.activate(&key);
        }
    }

    /// The pod fit nowhere: to the unschedulable pool, or to backoff if a cluster event came
    /// while it was being scheduled.
    pub fn unschedulable(&mut self, key: &str, now: Instant) {
        let events = self.events;
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        e.state = if e.popped_at_event != events {
            State::Backoff(now + backoff(e.attempts))
        } else {
            State::Unschedulable(now)
        };
    }

    /// The attempt failed for another reason (binding, API errors): retry after backoff.
    pub fn error(&mut self, key: &str, now: Instant) {
        if let Some(e) = self.entries.get_mut(key) {
            e.state = State::Backoff(now + backoff(e.attempts));
        }
    }

    fn move_one(&mut self, key: &str, now: Instant) {
        let Some(e) = self.entries.get_mut(key) else {
            return;
        };
        let Some(since) = (match e.state {
            State::Unschedulable(t) => Some(t),
            _ => None,
        }) else {
            return;
        };
        let until = since + backoff(e.attempts);
        if until > now {
            e.state = State::Backoff(until);
        } else {
            self.activate(key);
        }
    }

    /// A cluster event that may make unschedulable pods fit: all of them move to active (or
    /// to backoff while their backoff lasts).
    pub fn cluster_event(&mut self, now: Instant) {
        self.events += 1;
        let keys: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| matches!(e.state, State::Unschedulable(_)))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.move_one(&key, now);
        }
    }

    /// A cluster event that can only help some pods (`affected(key)`): only those move.
    pub fn cluster_event_where(&mut self, now: Instant, affected: impl Fn(&str) -> bool) {
        self.events += 1;
        let keys: Vec<String> = self
            .entries
            .iter()
            .filter(|(k, e)| matches!(e.state, State::Unschedulable(_)) && affected(k))
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.move_one(&key, now);
        }
    }

    /// Moves pods unschedulable for longer than [`UNSCHEDULABLE_FLUSH`].
    pub fn flush_unschedulable(&mut self, now: Instant) {
        let keys: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, e)| {
                matches!(e.state, State::Unschedulable(t) if now.duration_since(t) >= UNSCHEDULABLE_FLUSH)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.move_one(&key, now);
        }
    }

    /// When the next backed-off pod becomes active, if any.
    pub fn next_backoff(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|e| match e.state {
                State::Backoff(t) => Some(t),
                _ => None,
            })
            .min()
    }

    /// Whether a pod is ready to pop now.
    pub fn has_active(&self) -> bool {
        !self.active.is_empty()
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
}

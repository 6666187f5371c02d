//! The failed-daemon-pod backoff (upstream's `flowcontrol.Backoff` with 1 s initial and
//! 15 min maximum, keyed by DaemonSet and node): a kubelet that keeps rejecting a daemon pod
//! must not make the controller delete and recreate it in a hot loop.

use std::collections::HashMap;
use std::time::{Duration, Instant};

pub const INITIAL: Duration = Duration::from_secs(1);
pub const MAX: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Clone, Copy)]
struct Entry {
    delay: Duration,
    last_update: Instant,
}

/// Per-key delays that double on every step.
#[derive(Debug, Default)]
pub struct Backoff {
    entries: HashMap<String, Entry>,
}

impl Backoff {
    /// Whether `key` stepped less than its current delay ago.
    pub fn in_backoff(&self, key: &str, now: Instant) -> bool {
        self.entries
            .get(key)
            .is_some_and(|e| now.duration_since(e.last_update) < e.delay)
    }

    /// What is left of `key`'s current delay at `now`.
    pub fn remaining(&self, key: &str, now: Instant) -> Option<Duration> {
        let e = self.entries.get(key)?;
        e.delay.checked_sub(now.duration_since(e.last_update))
    }

    /// Steps `key`: the initial delay the first time (or after twice the maximum without a
    /// step), else double the last one up to the maximum.
    pub fn next(&mut self, key: &str, now: Instant) {
        let delay = match self.entries.get(key) {
            Some(e) if now.duration_since(e.last_update) <= 2 * MAX => (e.delay * 2).min(MAX),
            _ => INITIAL,
        };
        self.entries.insert(
            key.to_string(),
            Entry {
                delay,
                last_update: now,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_maximum_and_reset_after_quiet() {
        let t0 = Instant::now();
        let mut b = Backoff::default();
        assert!(!b.in_backoff("ds/n1", t0));
        b.next("ds/n1", t0);
        assert!(b.in_backoff("ds/n1", t0));
        assert!(!b.in_backoff("ds/n1", t0 + INITIAL));
        b.next("ds/n1", t0 + INITIAL);
        assert_eq!(
            b.remaining("ds/n1", t0 + INITIAL),
            Some(Duration::from_secs(2))
        );
        assert!(b.in_backoff("ds/n1", t0 + Duration::from_secs(2)));
        assert!(!b.in_backoff("ds/n2", t0));
        let mut t = t0 + INITIAL;
        for _ in 0..20 {
            t += Duration::from_secs(1);
            b.next("ds/n1", t);
        }
        assert_eq!(b.remaining("ds/n1", t), Some(MAX));
        let later = t + 2 * MAX + Duration::from_secs(1);
        b.next("ds/n1", later);
        assert_eq!(b.remaining("ds/n1", later), Some(INITIAL));
    }
}

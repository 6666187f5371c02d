//! How long the supervisor waits before restarting a containerd that died: doubling from
//! [`INITIAL`] up to [`MAX`], back to [`INITIAL`] once a run lasted [`STABLE`].

use std::time::Duration;

/// The first delay.
pub const INITIAL: Duration = Duration::from_secs(1);
/// The longest delay.
pub const MAX: Duration = Duration::from_secs(30);
/// A run at least this long counts as healthy: the next crash restarts after [`INITIAL`].
pub const STABLE: Duration = Duration::from_secs(60);

/// Restart delays for one supervised process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: INITIAL }
    }
}

impl Backoff {
    /// The delay before the next start, given that the last run lasted `ran_for`
    /// (a failed spawn ran for zero).
    pub fn after_exit(&mut self, ran_for: Duration) -> Duration {
        if ran_for >= STABLE {
            self.next = INITIAL;
        }
        let delay = self.next;
        self.next = (self.next * 2).min(MAX);
        delay
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn doubles_up_to_the_cap() {
        let mut b = Backoff::default();
        let delays: Vec<_> = (0..7).map(|_| b.after_exit(secs(2))).collect();
        assert_eq!(
            delays,
            [
                secs(1),
                secs(2),
                secs(4),
                secs(8),
                secs(16),
                secs(30),
                secs(30)
            ]
        );
    }

    #[test]
    fn a_stable_run_resets_it() {
        let mut b = Backoff::default();
        b.after_exit(secs(0));
        b.after_exit(secs(0));
        assert_eq!(b.after_exit(secs(0)), secs(4));
        assert_eq!(b.after_exit(STABLE), secs(1));
        assert_eq!(b.after_exit(secs(59)), secs(2));
    }
}

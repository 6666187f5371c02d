//! Pacing of syncs whose cost grows with what they read: the ReplicaSet controller reads and
//! counts every pod of a ReplicaSet on each sync, and pod events arrive by the hundred per
//! second while a large one scales up, so back-to-back syncs of a 30,000-pod ReplicaSet kept
//! a core busy. A paced sync ends with a wait of [`DUTY`] times its cost (at most
//! [`MAX_WAIT`]); kube-runtime never runs two syncs of one object at once, so the events that
//! arrive meanwhile are handled by one next sync (as upstream's EndpointSlice and Job
//! controllers batch events by a period). A sync that costs microseconds (any small object)
//! is not held back noticeably.

use std::time::Duration;

/// The wait after a sync, in multiples of its cost: a controller spends at most
/// 1 / (1 + DUTY) of its time syncing one object.
pub const DUTY: u32 = 4;
/// The longest wait.
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// The wait after a sync that cost `cost`.
pub fn wait_after(cost: Duration) -> Duration {
    cost.saturating_mul(DUTY).min(MAX_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_a_multiple_of_the_cost_up_to_a_second() {
        assert_eq!(wait_after(Duration::ZERO), Duration::ZERO);
        assert_eq!(
            wait_after(Duration::from_micros(20)),
            Duration::from_micros(80)
        );
        assert_eq!(
            wait_after(Duration::from_millis(10)),
            Duration::from_millis(40)
        );
        assert_eq!(wait_after(Duration::from_secs(30)), MAX_WAIT);
        assert_eq!(wait_after(Duration::MAX), MAX_WAIT, "no overflow");
    }
}

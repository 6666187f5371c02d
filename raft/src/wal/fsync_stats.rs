//! Durations of the WAL's `fdatasync` calls, bucketed as etcd's
//! `etcd_disk_wal_fsync_duration_seconds` histogram (1 ms doubling to 8.192 s).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of etcd's buckets: `ExponentialBuckets(0.001, 2, 14)`.
pub const BUCKETS: [f64; 14] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192,
];

/// A lock-free histogram the sync thread observes into and scrapes read.
#[derive(Debug, Default)]
pub struct FsyncHistogram {
    /// Observations per bucket (not cumulative); the last slot is `+Inf` only.
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

/// A point-in-time copy, in Prometheus form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FsyncSnapshot {
    /// `(upper bound, cumulative count)` per bucket, without `+Inf` (that is `count`).
    pub buckets: Vec<(f64, u64)>,
    /// How many fsyncs.
    pub count: u64,
    /// Their total duration.
    pub sum_seconds: f64,
}

impl FsyncHistogram {
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let slot = BUCKETS
            .iter()
            .position(|&b| secs <= b)
            .unwrap_or(BUCKETS.len());
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> FsyncSnapshot {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(BUCKETS.len());
        for (bound, c) in BUCKETS.iter().zip(&self.counts) {
            cumulative += c.load(Ordering::Relaxed);
            buckets.push((*bound, cumulative));
        }
        let count = cumulative + self.counts[BUCKETS.len()].load(Ordering::Relaxed);
        FsyncSnapshot {
            buckets,
            count,
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_overflow_counts_only_in_the_total() {
        let h = FsyncHistogram::default();
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(1));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(10));
        let s = h.snapshot();
        assert_eq!(s.buckets[0], (0.001, 2));
        assert_eq!(s.buckets[1], (0.002, 2));
        assert_eq!(s.buckets[2], (0.004, 3));
        assert_eq!(s.buckets[13], (8.192, 3));
        assert_eq!(s.count, 4);
        assert!((s.sum_seconds - 10.0045).abs() < 1e-9, "{}", s.sum_seconds);
    }
}

//! Latency histograms: the WAL's `fdatasync` calls (etcd's
//! `etcd_disk_wal_fsync_duration_seconds`, 1 ms doubling to 8.192 s), the store's batch commits,
//! and the stages of a write (see `stages`).
//!
//! Observations go into finer buckets (1/16 ms doubling to 8.192 s) so that sub-millisecond
//! percentiles can be told apart; etcd's buckets are a subset of their bounds. The largest
//! observation is kept too: a stall shows there before it moves a percentile.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds (seconds) of etcd's buckets: `ExponentialBuckets(0.001, 2, 14)`.
pub const BUCKETS: [f64; 14] = [
    0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096,
    8.192,
];

/// Fine buckets below etcd's first: 1/16, 1/8, 1/4 and 1/2 ms.
const FINER: usize = 4;
/// Upper bounds (seconds) of the fine buckets: 62.5 µs doubling to 8.192 s.
const FINE: [f64; FINER + BUCKETS.len()] = {
    let mut b = [0.0; FINER + BUCKETS.len()];
    let mut i = 0;
    while i < b.len() {
        b[i] = 0.001 / 16.0 * (1u64 << i) as f64;
        i += 1;
    }
    b
};

/// A lock-free histogram the observing thread writes and scrapes read.
#[derive(Debug, Default)]
pub struct FsyncHistogram {
    /// Observations per fine bucket (not cumulative); the last slot is `+Inf` only.
    counts: [AtomicU64; FINE.len() + 1],
    sum_nanos: AtomicU64,
    max_nanos: AtomicU64,
}

/// A point-in-time copy, in Prometheus form.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FsyncSnapshot {
    /// `(upper bound, cumulative count)` per etcd bucket, without `+Inf` (that is `count`).
    pub buckets: Vec<(f64, u64)>,
    /// The same over the fine buckets.
    pub fine: Vec<(f64, u64)>,
    /// How many observations.
    pub count: u64,
    /// Their total duration.
    pub sum_seconds: f64,
    /// The longest one.
    pub max_seconds: f64,
}

impl FsyncHistogram {
    /// Records one run that took `d`.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let slot = FINE.iter().position(|&b| secs <= b).unwrap_or(FINE.len());
        self.counts[slot].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.max_nanos.fetch_max(nanos, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn snapshot(&self) -> FsyncSnapshot {
        let mut cumulative = 0;
        let mut fine = Vec::with_capacity(FINE.len());
        for (bound, c) in FINE.iter().zip(&self.counts) {
            cumulative += c.load(Ordering::Relaxed);
            fine.push((*bound, cumulative));
        }
        let count = cumulative + self.counts[FINE.len()].load(Ordering::Relaxed);
        FsyncSnapshot {
            buckets: fine[FINER..].to_vec(),
            fine,
            count,
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
            max_seconds: self.max_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

impl FsyncSnapshot {
    /// The upper bound of the fine bucket holding the `q` quantile (0 < q ≤ 1), at most the
    /// largest observation; 0 without observations.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = (q * self.count as f64).ceil().max(1.0) as u64;
        let bound = self
            .fine
            .iter()
            .find(|(_, n)| *n >= rank)
            .map_or(self.max_seconds, |(b, _)| *b);
        bound.min(self.max_seconds)
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
        assert_eq!(s.buckets.len(), BUCKETS.len());
        for ((b, _), want) in s.buckets.iter().zip(BUCKETS) {
            assert!((b - want).abs() < 1e-12, "{b} vs {want}");
        }
        assert_eq!(s.fine[0], (0.0000625, 0));
        assert_eq!(s.fine[3], (0.0005, 1));
        assert_eq!(s.count, 4);
        assert!((s.sum_seconds - 10.0045).abs() < 1e-9, "{}", s.sum_seconds);
        assert_eq!(s.max_seconds, 10.0);
    }

    #[test]
    fn quantiles_are_fine_bucket_bounds_capped_at_the_max() {
        let h = FsyncHistogram::default();
        assert_eq!(h.snapshot().quantile(0.5), 0.0);
        for _ in 0..98 {
            h.observe(Duration::from_micros(100));
        }
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_millis(150));
        let s = h.snapshot();
        assert_eq!(s.quantile(0.5), 0.000125);
        assert_eq!(s.quantile(0.99), 0.004);
        assert_eq!(s.quantile(1.0), 0.15);
    }
}

//! Automatic compaction in etcd's "periodic" mode, and space reclamation.
//!
//! [`Sampler`] is the pure core: fed `(time, revision)` samples, it decides which revision to
//! compact so that `retention` of history is kept. [`run`] is the thin async shell: on the
//! leader it samples the store's revision, proposes `Compact` through Raft, and defragments
//! when the file has grown well past the live data.
//!
//! # Guarantees
//! - Never compacts a revision observed less than `retention` ago.
//! - Compacts at most once per compaction interval (`retention`, capped at one hour, as etcd).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k3rs_raft::Node;
use k3rs_storage::{Command, RequestError};
use tokio_util::sync::CancellationToken;

/// etcd caps the compaction interval at one hour for long retentions.
const MAX_COMPACT_INTERVAL: Duration = Duration::from_secs(3600);

/// Decides compaction revisions from revision samples. Time is passed in (no clock inside).
#[derive(Debug, Clone)]
pub struct Sampler {
    retention: Duration,
    /// Oldest first. Holds just enough to answer "the revision `retention` ago".
    samples: VecDeque<(Instant, i64)>,
    last_compaction: Option<Instant>,
    last_revision: i64,
}

impl Sampler {
    /// A sampler keeping `retention` of revision samples.
    pub fn new(retention: Duration) -> Sampler {
        Sampler {
            retention,
            samples: VecDeque::new(),
            last_compaction: None,
            last_revision: 0,
        }
    }

    /// How often to sample: a tenth of the compaction interval, at least a second.
    pub fn sample_interval(&self) -> Duration {
        (self.compact_interval() / 10).max(Duration::from_secs(1))
    }

    /// How often to compact at most.
    pub fn compact_interval(&self) -> Duration {
        self.retention.min(MAX_COMPACT_INTERVAL)
    }

    /// Records that the store was at `revision` at `now`.
    pub fn record(&mut self, now: Instant, revision: i64) {
        self.samples.push_back((now, revision));
        // Keep the newest sample that is at least `retention` old, and everything after it.
        while self.samples.len() >= 2
            && now.saturating_duration_since(self.samples[1].0) >= self.retention
        {
            self.samples.pop_front();
        }
    }

    /// The revision to compact at `now`, if one is due: the newest revision sampled at least
    /// `retention` ago, once per compaction interval, and only if it moved forward.
    pub fn due(&self, now: Instant) -> Option<i64> {
        if let Some(last) = self.last_compaction {
            if now.saturating_duration_since(last) < self.compact_interval() {
                return None;
            }
        }
        let (_, revision) = self
            .samples
            .iter()
            .rev()
            .find(|(t, _)| now.saturating_duration_since(*t) >= self.retention)?;
        (*revision > self.last_revision).then_some(*revision)
    }

    /// Notes a compaction (successful, or already done by someone else) at `revision`.
    pub fn compacted(&mut self, now: Instant, revision: i64) {
        self.last_compaction = Some(now);
        self.last_revision = self.last_revision.max(revision);
    }

    /// Forgets the history (e.g. after losing leadership: another node compacts meanwhile).
    pub fn reset(&mut self) {
        self.samples.clear();
    }
}

/// Whether to defragment: the file is more than twice the live data and the difference is
/// worth a rewrite.
pub fn should_defragment(db_size: u64, in_use: u64, min_reclaim: u64) -> bool {
    db_size > in_use.saturating_mul(2) && db_size - in_use >= min_reclaim
}

/// Settings of the compaction loop.
#[derive(Debug, Clone)]
pub struct CompactorConfig {
    /// History to keep; zero disables automatic compaction.
    pub retention: Duration,
    /// Defragment only when at least this many bytes would be reclaimed.
    pub defrag_min_reclaim: u64,
    /// Minimum time between two automatic defragmentations.
    pub defrag_interval: Duration,
}

impl Default for CompactorConfig {
    fn default() -> Self {
        CompactorConfig {
            retention: Duration::from_secs(300),
            defrag_min_reclaim: 64 * 1024 * 1024,
            defrag_interval: Duration::from_secs(600),
        }
    }
}

/// Runs until `shutdown`: samples, compacts on the leader, defragments when worthwhile.
pub async fn run(node: Arc<Node>, cfg: CompactorConfig, shutdown: CancellationToken) {
    if cfg.retention.is_zero() {
        tracing::info!("automatic compaction disabled");
        return;
    }
    let mut sampler = Sampler::new(cfg.retention);
    let mut tick = tokio::time::interval(sampler.sample_interval());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_defrag: Option<Instant> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        if !node.is_leader() {
            sampler.reset();
            continue;
        }
        let now = Instant::now();
        sampler.record(now, node.store().current_revision());
        let Some(revision) = sampler.due(now) else {
            continue;
        };
        match node.write(Command::Compact { revision }).await {
            Ok(out) => match out.result {
                Ok(_) | Err(RequestError::Compacted { .. }) => {
                    tracing::info!(revision, "compacted history");
                    sampler.compacted(now, revision);
                }
                Err(e) => tracing::warn!(revision, error = %e, "automatic compaction refused"),
            },
            Err(e) => {
                tracing::warn!(revision, error = %e, "automatic compaction failed");
                continue;
            }
        }
        let store = node.store();
        let defrag_due =
            last_defrag.is_none_or(|t| now.saturating_duration_since(t) >= cfg.defrag_interval);
        if defrag_due
            && should_defragment(
                store.db_size(),
                store.db_size_in_use(),
                cfg.defrag_min_reclaim,
            )
        {
            last_defrag = Some(now);
            let (before, in_use) = (store.db_size(), store.db_size_in_use());
            match node.defragment().await {
                Ok(()) => tracing::info!(before, in_use, "defragmented the store"),
                Err(e) => tracing::warn!(error = %e, "defragmentation failed"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn compacts_the_revision_seen_retention_ago() {
        let t0 = Instant::now();
        let mut s = Sampler::new(5 * MIN);
        assert_eq!(s.sample_interval(), Duration::from_secs(30));
        // One sample every 30 s; the revision grows by 10 per sample.
        for i in 0..10u32 {
            let now = t0 + Duration::from_secs(30) * i;
            s.record(now, 100 + 10 * i64::from(i));
            assert_eq!(s.due(now), None, "nothing is 5 minutes old at {i}");
        }
        let now = t0 + 5 * MIN;
        s.record(now, 200);
        assert_eq!(s.due(now), Some(100));
        s.compacted(now, 100);
        // Not again before the next interval.
        let later = now + 4 * MIN;
        s.record(later, 280);
        assert_eq!(s.due(later), None);
        // After it: the revision seen 5 minutes before that moment.
        let t = now + 5 * MIN;
        s.record(t, 300);
        assert_eq!(s.due(t), Some(200));
    }

    #[test]
    fn no_compaction_without_new_writes() {
        let t0 = Instant::now();
        let mut s = Sampler::new(MIN);
        s.record(t0, 50);
        s.record(t0 + MIN, 50);
        assert_eq!(s.due(t0 + MIN), Some(50));
        s.compacted(t0 + MIN, 50);
        s.record(t0 + 2 * MIN, 50);
        assert_eq!(s.due(t0 + 2 * MIN), None);
    }

    #[test]
    fn samples_stay_bounded() {
        let t0 = Instant::now();
        let mut s = Sampler::new(MIN);
        for i in 0..10_000u32 {
            s.record(t0 + Duration::from_secs(u64::from(i)), i64::from(i));
        }
        assert!(s.samples.len() <= 62, "{}", s.samples.len());
        let now = t0 + Duration::from_secs(9_999);
        assert_eq!(s.due(now), Some(9_999 - 60));
    }

    #[test]
    fn long_retention_compacts_hourly() {
        let s = Sampler::new(Duration::from_secs(10 * 3600));
        assert_eq!(s.compact_interval(), Duration::from_secs(3600));
        assert_eq!(s.sample_interval(), Duration::from_secs(360));
    }

    #[test]
    fn reset_forgets_samples() {
        let t0 = Instant::now();
        let mut s = Sampler::new(MIN);
        s.record(t0, 10);
        s.reset();
        s.record(t0 + MIN, 20);
        assert_eq!(s.due(t0 + MIN), None);
    }

    #[test]
    fn defragment_decision() {
        const MB: u64 = 1024 * 1024;
        assert!(!should_defragment(100 * MB, 60 * MB, 16 * MB));
        assert!(should_defragment(300 * MB, 100 * MB, 16 * MB));
        assert!(!should_defragment(20 * MB, MB, 64 * MB));
        assert!(!should_defragment(0, 0, 0));
    }
}

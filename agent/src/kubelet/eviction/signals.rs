//! What the eviction manager observed of the node (upstream's `signalObservations`) and which
//! thresholds those observations meet (`thresholdsMet`). Pure; [`FsStats::of`] and
//! [`Observations::observe`] are the thin readers.

use std::collections::BTreeMap;
use std::path::Path;

use super::threshold::{Signal, Threshold};

/// One signal's observation: how much is available of how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    pub available: u64,
    pub capacity: u64,
}

/// Every signal observed (a signal that could not be read is absent and meets no threshold).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observations(pub BTreeMap<Signal, Observation>);

/// Bytes and inodes of one filesystem (statvfs, for unprivileged users).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FsStats {
    pub capacity_bytes: u64,
    pub available_bytes: u64,
    pub inodes: u64,
    pub inodes_free: u64,
}

impl FsStats {
    /// The filesystem holding `path`; `None` when it cannot be read.
    pub fn of(path: &Path) -> Option<FsStats> {
        let s = rustix::fs::statvfs(path).ok()?;
        Some(FsStats {
            capacity_bytes: s.f_blocks * s.f_frsize,
            available_bytes: s.f_bavail * s.f_frsize,
            inodes: s.f_files,
            inodes_free: s.f_favail,
        })
    }
}

impl Observations {
    /// The observations from the node's memory (`available` = capacity − working set, as the
    /// kubelet computes it), its filesystem (`nodefs`) and the runtime's image filesystem
    /// (`imagefs`; the same as nodefs when they share a filesystem).
    pub fn from_stats(
        memory: Option<(u64, u64)>,
        nodefs: Option<FsStats>,
        imagefs: Option<FsStats>,
    ) -> Observations {
        let mut m = BTreeMap::new();
        if let Some((available, capacity)) = memory.filter(|(_, c)| *c > 0) {
            m.insert(
                Signal::MemoryAvailable,
                Observation {
                    available,
                    capacity,
                },
            );
        }
        let fs = |m: &mut BTreeMap<Signal, Observation>, bytes, inodes, s: Option<FsStats>| {
            let Some(s) = s else { return };
            if s.capacity_bytes > 0 {
                m.insert(
                    bytes,
                    Observation {
                        available: s.available_bytes,
                        capacity: s.capacity_bytes,
                    },
                );
            }
            if s.inodes > 0 {
                m.insert(
                    inodes,
                    Observation {
                        available: s.inodes_free,
                        capacity: s.inodes,
                    },
                );
            }
        };
        fs(
            &mut m,
            Signal::NodeFsAvailable,
            Signal::NodeFsInodesFree,
            nodefs,
        );
        fs(
            &mut m,
            Signal::ImageFsAvailable,
            Signal::ImageFsInodesFree,
            imagefs.or(nodefs),
        );
        Observations(m)
    }

    /// Reads `/proc/meminfo` and statvfs of `node_dir` and `image_dir`.
    pub fn observe(node_dir: &Path, image_dir: Option<&Path>) -> Observations {
        let memory = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| crate::kubelet::stats::node::memory(&m))
            .map(|m| (m.available_bytes, m.available_bytes + m.working_set_bytes));
        Observations::from_stats(
            memory,
            FsStats::of(node_dir),
            image_dir.and_then(FsStats::of),
        )
    }

    /// The threshold's amount and the observed available amount, if its signal was observed.
    pub fn threshold_and_available(&self, t: &Threshold) -> Option<(u64, u64)> {
        let o = self.0.get(&t.signal)?;
        Some((t.value.quantity(o.capacity), o.available))
    }
}

/// The thresholds `observations` meet: those whose signal's available amount is below the
/// threshold's amount, in the order given.
pub fn thresholds_met(thresholds: &[Threshold], observations: &Observations) -> Vec<Threshold> {
    thresholds
        .iter()
        .filter(|t| {
            observations
                .threshold_and_available(t)
                .is_some_and(|(quantity, available)| quantity > available)
        })
        .copied()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::eviction::threshold::{defaults, ThresholdValue};

    fn fs(capacity: u64, available: u64, inodes: u64, free: u64) -> FsStats {
        FsStats {
            capacity_bytes: capacity,
            available_bytes: available,
            inodes,
            inodes_free: free,
        }
    }

    #[test]
    fn defaults_are_met_below_their_amounts() {
        let mi = 1024 * 1024;
        let ok = Observations::from_stats(
            Some((100 * mi, 1000 * mi)),
            Some(fs(1000, 151, 100, 5)),
            None,
        );
        assert_eq!(thresholds_met(&defaults(), &ok), vec![]);
        // The image filesystem is the node's: 15 % of it must stay free.
        let disk = Observations::from_stats(
            Some((100 * mi - 1, 1000 * mi)),
            Some(fs(1000, 149, 100, 4)),
            None,
        );
        let met: Vec<Signal> = thresholds_met(&defaults(), &disk)
            .iter()
            .map(|t| t.signal)
            .collect();
        assert_eq!(
            met,
            vec![
                Signal::MemoryAvailable,
                Signal::NodeFsInodesFree,
                Signal::ImageFsAvailable
            ]
        );
        let separate =
            Observations::from_stats(None, Some(fs(1000, 99, 0, 0)), Some(fs(1000, 500, 10, 10)));
        let met: Vec<Signal> = thresholds_met(&defaults(), &separate)
            .iter()
            .map(|t| t.signal)
            .collect();
        assert_eq!(met, vec![Signal::NodeFsAvailable]);
    }

    #[test]
    fn unobserved_signals_meet_nothing() {
        let t = [Threshold {
            signal: Signal::MemoryAvailable,
            value: ThresholdValue::Quantity(u64::MAX),
        }];
        assert_eq!(thresholds_met(&t, &Observations::default()), vec![]);
        assert_eq!(
            Observations::from_stats(Some((0, 0)), Some(FsStats::default()), None),
            Observations::default()
        );
    }

    #[test]
    fn the_data_dir_is_observed() {
        let o = Observations::observe(Path::new("/"), None);
        assert!(o.0.contains_key(&Signal::NodeFsAvailable), "{o:?}");
        assert!(o.0.contains_key(&Signal::ImageFsAvailable), "{o:?}");
    }
}

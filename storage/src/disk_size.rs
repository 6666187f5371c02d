//! The database's size on disk as a check on every write reads it: measured at most
//! [`MAX_AGE`] ago. Measuring asks the filesystem (sled's `size_on_disk`: a `stat` of its
//! file and a listing of its blob directory), which cost a put about 6 % of the server's CPU
//! when the quota check measured on every write; etcd reads a counter instead.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How old a measurement may be. The size moves in sled's allocation steps, and a write
/// admitted on a size this old overshoots the quota by at most what the member writes in
/// that time (etcd's quota is as soft: it admits a write on the size before it).
pub const MAX_AGE: Duration = Duration::from_millis(100);

/// One measurement: of which database generation, when, and the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Measured {
    gen: u64,
    at: Instant,
    bytes: u64,
}

/// The bytes of `m` if it still answers for generation `gen` at `now` (a new generation,
/// after a defragmentation or a snapshot import, is always measured afresh).
fn still_valid(m: Option<Measured>, gen: u64, now: Instant) -> Option<u64> {
    let m = m?;
    (m.gen == gen && now.saturating_duration_since(m.at) < MAX_AGE).then_some(m.bytes)
}

/// The last measurement, shared by every writer.
#[derive(Debug, Default)]
pub(crate) struct RecentSize {
    last: Mutex<Option<Measured>>,
}

impl RecentSize {
    /// The size of generation `gen`: the last measurement if still valid, else `measure()`.
    pub(crate) fn get(&self, gen: u64, now: Instant, measure: impl FnOnce() -> u64) -> u64 {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bytes) = still_valid(*last, gen, now) {
            return bytes;
        }
        let bytes = measure();
        *last = Some(Measured {
            gen,
            at: now,
            bytes,
        });
        bytes
    }

    /// The last measurement's bytes, however old and of whichever generation.
    pub(crate) fn last(&self) -> Option<u64> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.map(|m| m.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measurement_answers_for_its_generation_until_it_is_too_old() {
        let size = RecentSize::default();
        let t0 = Instant::now();
        assert_eq!(size.get(1, t0, || 10), 10);
        assert_eq!(
            size.get(1, t0 + MAX_AGE / 2, || panic!("measured again")),
            10
        );
        assert_eq!(size.get(1, t0 + MAX_AGE, || 20), 20, "too old");
        assert_eq!(size.get(2, t0 + MAX_AGE, || 30), 30, "another generation");
        assert_eq!(
            size.get(2, t0, || 40),
            30,
            "a clock read before the measurement"
        );
        assert_eq!(size.last(), Some(30));
    }

    #[test]
    fn nothing_measured_yet_has_no_last_size() {
        assert_eq!(RecentSize::default().last(), None);
    }
}

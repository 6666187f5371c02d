//! Per-key exponential back-off with upstream's semantics (client-go `flowcontrol.Backoff`):
//! the kubelet's crash-loop back-off (key: [`super::spec::backoff_key`]) and image-pull back-off
//! (key: pod UID + image), both 10 s doubling to 5 min. An entry not touched for twice the
//! maximum (10 min) counts as expired: the next failure starts again at 10 s.
//!
//! The table is plain data driven by an explicit `now`, so the planner and its tests own time.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// Upstream's kubelet back-off: initial 10 s.
pub const INITIAL: Duration = Duration::from_secs(10);
/// Upstream's `MaxContainerBackOff`: 300 s.
pub const MAX: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    backoff: Duration,
    last_update: Timestamp,
}

/// A back-off table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    entries: BTreeMap<String, Entry>,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(INITIAL, MAX)
    }
}

/// `later - earlier`, zero when `later` is not later.
fn since(later: Timestamp, earlier: Timestamp) -> Duration {
    later
        .duration_since(earlier)
        .try_into()
        .unwrap_or(Duration::ZERO)
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            entries: BTreeMap::new(),
        }
    }

    /// Forgets the entries expired by `now` (upstream's `Backoff.GC`: unchanged for more than
    /// twice the maximum), so the table does not grow with every container that ever failed.
    pub fn gc(&mut self, now: Timestamp) {
        let max = self.max;
        self.entries
            .retain(|_, e| since(now, e.last_update) <= max * 2);
    }

    /// How many keys the table holds.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether `event_time` is more than twice the maximum after the entry's last update.
    fn expired(&self, event_time: Timestamp, e: &Entry) -> bool {
        since(event_time, e.last_update) > self.max * 2
    }

    /// The current back-off of `key` (zero when it has none).
    pub fn get(&self, key: &str) -> Duration {
        self.entries
            .get(key)
            .map(|e| e.backoff)
            .unwrap_or(Duration::ZERO)
    }

    /// Whether `key` is still backing off from something that happened at `event_time`
    /// (upstream's `IsInBackOffSince`): `now - event_time` is shorter than its back-off, unless the
    /// entry expired by `event_time`.
    pub fn is_in_backoff_since(&self, key: &str, event_time: Timestamp, now: Timestamp) -> bool {
        match self.entries.get(key) {
            Some(e) if !self.expired(event_time, e) => since(now, event_time) < e.backoff,
            _ => false,
        }
    }

    /// Whether `key` is still backing off from its last update (`IsInBackOffSinceUpdate`).
    pub fn is_in_backoff_since_update(&self, key: &str, now: Timestamp) -> bool {
        match self.entries.get(key) {
            Some(e) if !self.expired(now, e) => since(now, e.last_update) < e.backoff,
            _ => false,
        }
    }

    /// Records another failure of `key` seen at `event_time` (upstream's `Next`): the back-off
    /// starts at the initial value (new or expired entry) or doubles up to the maximum; the
    /// entry's last update becomes `now`.
    pub fn next(&mut self, key: &str, event_time: Timestamp, now: Timestamp) {
        let backoff = match self.entries.get(key) {
            Some(e) if !self.expired(event_time, e) => (e.backoff * 2).min(self.max),
            _ => self.initial,
        };
        self.entries.insert(
            key.to_string(),
            Entry {
                backoff,
                last_update: now,
            },
        );
    }
}

/// A duration as Go's `time.Duration.String` prints it (`10s`, `1m20s`, `5m0s`, `1.5s`,
/// `500ms`), the form upstream's messages use.
pub fn go_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    if d < Duration::from_secs(1) {
        let ns = d.as_nanos();
        let (unit, scale) = if ns < 1_000 {
            ("ns", 1)
        } else if ns < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{}{unit}", fraction(ns, scale));
    }
    let total = d.as_secs();
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    let secs = fraction(
        u128::from(s) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        1_000_000_000,
    );
    match (h, m) {
        (0, 0) => format!("{secs}s"),
        (0, m) => format!("{m}m{secs}s"),
        (h, m) => format!("{h}h{m}m{secs}s"),
    }
}

/// `n / scale` with the fractional digits Go prints (trailing zeros dropped).
fn fraction(n: u128, scale: u128) -> String {
    let (int, frac) = (n / scale, n % scale);
    if frac == 0 {
        return int.to_string();
    }
    let width = scale.to_string().len() - 1;
    let digits = format!("{frac:0width$}");
    format!("{int}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: u64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s as i64).unwrap()
    }

    #[test]
    fn backoff_starts_at_10s_doubles_and_caps_at_5m() {
        let mut b = Backoff::default();
        let mut seen = vec![];
        for i in 0..8 {
            b.next("k", t(i), t(i));
            seen.push(b.get("k").as_secs());
        }
        assert_eq!(seen, vec![10, 20, 40, 80, 160, 300, 300, 300]);
    }

    #[test]
    fn in_backoff_since_an_event_until_the_backoff_passed() {
        let mut b = Backoff::default();
        assert!(!b.is_in_backoff_since("k", t(0), t(0)));
        b.next("k", t(0), t(0)); // 10 s
        assert!(b.is_in_backoff_since("k", t(5), t(5)));
        assert!(b.is_in_backoff_since("k", t(5), t(14)));
        assert!(!b.is_in_backoff_since("k", t(5), t(15)));
        assert!(!b.is_in_backoff_since("other", t(5), t(6)));
    }

    #[test]
    fn in_backoff_since_update() {
        let mut b = Backoff::default();
        assert!(!b.is_in_backoff_since_update("k", t(0)));
        b.next("k", t(0), t(100));
        assert!(b.is_in_backoff_since_update("k", t(109)));
        assert!(!b.is_in_backoff_since_update("k", t(110)));
    }

    #[test]
    fn ten_minutes_without_failure_resets_the_backoff() {
        let mut b = Backoff::default();
        for i in 0..5 {
            b.next("k", t(i), t(i));
        }
        assert_eq!(b.get("k"), Duration::from_secs(160));
        // Exactly twice the maximum after the last update: not expired yet.
        assert!(b.is_in_backoff_since("k", t(4 + 600), t(4 + 600)));
        b.next("k", t(4 + 601), t(4 + 601));
        assert_eq!(b.get("k"), Duration::from_secs(10));
        // An event 10 min + 1 s after the last update is not backed off.
        assert!(!b.is_in_backoff_since("k", t(5 + 1202), t(5 + 1202)));
    }

    #[test]
    fn gc_forgets_expired_entries() {
        let mut b = Backoff::default();
        b.next("old", t(0), t(0));
        b.next("new", t(500), t(500));
        b.gc(t(601));
        assert_eq!(b.len(), 1);
        assert_eq!(b.get("old"), Duration::ZERO);
        assert_eq!(b.get("new"), Duration::from_secs(10));
    }

    #[test]
    fn go_duration_strings() {
        let s = Duration::from_secs;
        assert_eq!(go_duration(s(0)), "0s");
        assert_eq!(go_duration(s(10)), "10s");
        assert_eq!(go_duration(s(20)), "20s");
        assert_eq!(go_duration(s(80)), "1m20s");
        assert_eq!(go_duration(s(160)), "2m40s");
        assert_eq!(go_duration(s(300)), "5m0s");
        assert_eq!(go_duration(s(3600)), "1h0m0s");
        assert_eq!(go_duration(s(3723)), "1h2m3s");
        assert_eq!(go_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(go_duration(Duration::from_millis(500)), "500ms");
        assert_eq!(go_duration(Duration::from_micros(1500)), "1.5ms");
        assert_eq!(go_duration(Duration::from_nanos(7)), "7ns");
    }
}

//! A TTL cache of webhook answers (upstream keeps the last answers per token or per review
//! spec for the configured TTLs; errors are never cached).
//!
//! # Guarantees
//! - An entry is returned only before its deadline; the clock is passed in, so tests decide
//!   what time it is.
//! - The cache holds at most [`MAX_ENTRIES`]; past that, expired entries are dropped and, if
//!   still full, everything (an answer is only ever a shortcut).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most entries kept.
pub const MAX_ENTRIES: usize = 4096;

/// Answers by key, each with its own deadline.
#[derive(Debug)]
pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K, V> Default for TtlCache<K, V> {
    fn default() -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    /// The answer for `key` if it is still fresh at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(key) {
            Some((v, deadline)) if now < *deadline => Some(v.clone()),
            Some(_) => {
                entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Keeps `value` for `ttl` from `now` (a zero TTL keeps nothing).
    pub fn insert(&self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (_, deadline)| now < *deadline);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (value, now + ttl));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_until_the_deadline_and_zero_ttl_keeps_nothing() {
        let c = TtlCache::default();
        let t0 = Instant::now();
        c.insert("a", 1, Duration::from_secs(10), t0);
        c.insert("b", 2, Duration::ZERO, t0);
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(9)), Some(1));
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(10)), None);
        assert_eq!(c.get(&"a", t0), None, "an expired entry is removed");
        assert_eq!(c.get(&"b", t0), None);
    }

    #[test]
    fn full_cache_drops_expired_first() {
        let c = TtlCache::default();
        let t0 = Instant::now();
        for i in 0..MAX_ENTRIES - 1 {
            c.insert(i, i, Duration::from_secs(1), t0);
        }
        c.insert(usize::MAX, 7, Duration::from_secs(100), t0);
        let later = t0 + Duration::from_secs(2);
        c.insert(usize::MAX - 1, 8, Duration::from_secs(100), later);
        assert_eq!(c.get(&usize::MAX, later), Some(7));
        assert_eq!(c.get(&(usize::MAX - 1), later), Some(8));
        assert_eq!(c.entries.lock().unwrap().len(), 2);
    }
}

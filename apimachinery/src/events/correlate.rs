//! client-go's `EventCorrelator` (tools/record/events_cache.go), as a pure state machine with
//! the clock passed in: what recording an Event writes, given the Events recorded before.
//!
//! # Guarantees
//! - **De-duplication**: an Event identical to one recorded before (same source, object with
//!   field path, type, reason and message) patches that Event's `count`, `lastTimestamp` and
//!   `message` instead of creating another one.
//! - **Aggregation**: once 10 Events about one object that differ only by message (same
//!   source, object, type, reason) are seen within 10 minutes of each other, further ones go
//!   to one Event whose message is `(combined from similar events): <latest message>`,
//!   counted like a repeat.
//! - **Spam filter**: each source, object, type, reason and message (a combined Event counts
//!   as one message) has a token bucket of 25 writes refilled with one every 5 minutes; past
//!   it, writes are skipped (the counts keep growing, so the next write that passes carries
//!   the full count). Another reason or message about the same object has its own bucket.
//! - Each cache is bounded to 4,096 keys (upstream's LRU size); when one is full it starts
//!   over, so a long-forgotten Event is created anew rather than patched.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Upstream's `maxLruCacheEntries`.
pub const MAX_KEYS: usize = 4096;
/// Distinct messages of similar Events before they are combined (`defaultAggregateMaxEvents`).
pub const AGGREGATE_MAX_EVENTS: usize = 10;
/// How long similar Events count towards aggregation (`defaultAggregateIntervalInSeconds`).
pub const AGGREGATE_INTERVAL: SignedDuration = SignedDuration::from_secs(600);
/// Writes a source may burst about one object (`defaultSpamBurst`).
pub const SPAM_BURST: u32 = 25;
/// One more write allowed per this long (`defaultSpamQPS` = 1/300).
pub const SPAM_REFILL: SignedDuration = SignedDuration::from_secs(300);

/// The prefix of an aggregated Event's message.
pub const COMBINED: &str = "(combined from similar events): ";

/// What recording an Event writes.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// A new Event.
    Create(Box<Event>),
    /// A merge patch of `count`, `lastTimestamp` and `message` onto the Event `name`; if it
    /// is gone (expired, deleted) the writer creates `event`, which carries the same name
    /// and count, as upstream's recorder does.
    Patch {
        /// The namespace of the Event patched.
        namespace: String,
        /// The name of the Event patched.
        name: String,
        /// The merge patch.
        patch: serde_json::Value,
        /// The whole Event, created if the patched one is gone.
        event: Box<Event>,
    },
}

/// The Events recorded so far, by what makes them identical, similar, or the same source and
/// object.
#[derive(Debug, Default)]
pub struct Correlator {
    aggregates: Bounded<Aggregate>,
    observed: Bounded<Observed>,
    spam: Bounded<TokenBucket>,
}

impl Correlator {
    /// What recording `event` at `now` writes, or `None` when the spam filter skips it.
    pub fn correlate(&mut self, event: Event, now: Timestamp) -> Option<Write> {
        let (event, key) = self.aggregate(event, now);
        let write = self.observe(event, key);
        let written = match &write {
            Write::Create(e) => e,
            Write::Patch { event, .. } => event,
        };
        let bucket = self
            .spam
            .entry(spam_key(written))
            .or_insert_with(|| TokenBucket::full(now));
        bucket.try_take(now).then_some(write)
    }

    /// The Event to observe and its de-duplication key: the event itself under its full key,
    /// or, once similar Events are too many, the combined Event under the aggregate key.
    fn aggregate(&mut self, event: Event, now: Timestamp) -> (Event, String) {
        let aggregate_key = aggregate_key(&event);
        let message = event.message.clone().unwrap_or_default();
        let record = self
            .aggregates
            .entry(aggregate_key.clone())
            .or_insert_with(|| Aggregate {
                messages: BTreeSet::new(),
                last: now,
            });
        if now.duration_since(record.last) > AGGREGATE_INTERVAL {
            record.messages.clear();
        }
        record.messages.insert(message.clone());
        record.last = now;
        if record.messages.len() < AGGREGATE_MAX_EVENTS {
            let key = event_key(&event);
            return (event, key);
        }
        record.messages.pop_first();
        let combined = Event {
            metadata: super::event_meta(&event.involved_object, now),
            message: Some(format!("{COMBINED}{message}")),
            count: Some(1),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            ..event
        };
        (combined, aggregate_key)
    }

    /// Counts `event` under `key`: a repeat becomes a patch of the first Event.
    fn observe(&mut self, mut event: Event, key: String) -> Write {
        let Some(seen) = self.observed.get_mut(&key) else {
            self.observed.entry(key).or_insert_with(|| Observed {
                name: event.metadata.name.clone().unwrap_or_default(),
                first: event.first_timestamp.clone(),
                count: event.count.unwrap_or(1),
            });
            return Write::Create(Box::new(event));
        };
        seen.count += 1;
        event.metadata.name = Some(seen.name.clone());
        event.first_timestamp = seen.first.clone();
        event.count = Some(seen.count);
        let patch = serde_json::json!({
            "count": seen.count,
            "lastTimestamp": event.last_timestamp,
            "message": event.message,
        });
        Write::Patch {
            namespace: event.metadata.namespace.clone().unwrap_or_default(),
            name: seen.name.clone(),
            patch,
            event: Box::new(event),
        }
    }
}

/// Similar Events seen lately about one object.
#[derive(Debug)]
struct Aggregate {
    messages: BTreeSet<String>,
    last: Timestamp,
}

/// The Event that repeats of one Event are counted on.
#[derive(Debug)]
struct Observed {
    name: String,
    first: Option<Time>,
    count: i32,
}

/// flowcontrol's passive token bucket: `SPAM_BURST` tokens, one more per `SPAM_REFILL`, kept
/// as exact nanoseconds of credit (one token is `SPAM_REFILL` of credit).
#[derive(Debug)]
struct TokenBucket {
    credit: i128,
    at: Timestamp,
}

impl TokenBucket {
    fn token() -> i128 {
        SPAM_REFILL.as_nanos()
    }

    fn full(now: Timestamp) -> TokenBucket {
        TokenBucket {
            credit: i128::from(SPAM_BURST) * Self::token(),
            at: now,
        }
    }

    fn try_take(&mut self, now: Timestamp) -> bool {
        let elapsed = now.duration_since(self.at).as_nanos().max(0);
        let capacity = i128::from(SPAM_BURST) * Self::token();
        self.credit = (self.credit + elapsed).min(capacity);
        self.at = now;
        if self.credit < Self::token() {
            return false;
        }
        self.credit -= Self::token();
        true
    }
}

/// A map of at most [`MAX_KEYS`] keys that starts over when full.
#[derive(Debug)]
struct Bounded<V>(HashMap<String, V>);

impl<V> Default for Bounded<V> {
    fn default() -> Self {
        Bounded(HashMap::new())
    }
}

impl<V> Bounded<V> {
    fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.0.get_mut(key)
    }

    fn entry(&mut self, key: String) -> std::collections::hash_map::Entry<'_, String, V> {
        if self.0.len() >= MAX_KEYS && !self.0.contains_key(&key) {
            self.0.clear();
        }
        self.0.entry(key)
    }
}

fn join(parts: &[&str]) -> String {
    parts.join("\u{0}")
}

/// Source and object (upstream's `getSpamKey`).
fn source_object(e: &Event) -> Vec<&str> {
    let source = e.source.as_ref();
    let o = &e.involved_object;
    vec![
        source.and_then(|s| s.component.as_deref()).unwrap_or(""),
        source.and_then(|s| s.host.as_deref()).unwrap_or(""),
        o.kind.as_deref().unwrap_or(""),
        o.namespace.as_deref().unwrap_or(""),
        o.name.as_deref().unwrap_or(""),
        o.uid.as_deref().unwrap_or(""),
        o.api_version.as_deref().unwrap_or(""),
    ]
}

/// Source, object, type, reason and message (upstream's `getSpamKey` since Kubernetes 1.31):
/// a burst of one Event does not silence a different one about the same object.
fn spam_key(e: &Event) -> String {
    let mut parts = source_object(e);
    parts.extend([
        e.type_.as_deref().unwrap_or(""),
        e.reason.as_deref().unwrap_or(""),
        e.message.as_deref().unwrap_or(""),
    ]);
    join(&parts)
}

/// What makes Events identical (upstream's `getEventKey`).
fn event_key(e: &Event) -> String {
    let mut parts = source_object(e);
    parts.extend([
        e.involved_object.field_path.as_deref().unwrap_or(""),
        e.type_.as_deref().unwrap_or(""),
        e.reason.as_deref().unwrap_or(""),
        e.message.as_deref().unwrap_or(""),
    ]);
    join(&parts)
}

/// What makes Events similar (upstream's `EventAggregatorByReasonFunc`).
fn aggregate_key(e: &Event) -> String {
    let mut parts = source_object(e);
    parts.extend([
        e.type_.as_deref().unwrap_or(""),
        e.reason.as_deref().unwrap_or(""),
        e.reporting_component.as_deref().unwrap_or(""),
        e.reporting_instance.as_deref().unwrap_or(""),
    ]);
    join(&parts)
}

#[cfg(test)]
mod tests;

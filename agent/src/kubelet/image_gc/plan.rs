//! The image garbage collector's decisions (upstream's `realImageGCManager`): what is known of
//! each image (first detected, last used), when the image filesystem must be freed and which
//! images go, without I/O.
//!
//! # Guarantees
//! - An image in use by any container the runtime has (running or not) or pinned by the
//!   runtime (the sandbox image) is never chosen.
//! - An image detected less than `min_age` ago is never chosen.
//! - Images go least recently used first (never-used ones before used ones), then the
//!   earliest detected first, until the bytes to free are reached.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use crate::kubelet::eviction::signals::FsStats;

/// `--kubelet-arg image-gc-high-threshold`, `image-gc-low-threshold`, `image-minimum-gc-age`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageGcPolicy {
    /// Image filesystem usage (percent) at or above which images are collected (85).
    pub high_threshold_percent: u8,
    /// Usage (percent) collection frees down to (80).
    pub low_threshold_percent: u8,
    /// Images detected more recently are kept (2m).
    pub min_age: Duration,
}

impl Default for ImageGcPolicy {
    fn default() -> Self {
        ImageGcPolicy {
            high_threshold_percent: 85,
            low_threshold_percent: 80,
            min_age: Duration::from_secs(120),
        }
    }
}

/// An image as the runtime lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageInfo {
    pub id: String,
    pub size: u64,
    /// Pinned by the runtime (never collected).
    pub pinned: bool,
}

/// What the collector remembers of an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageRecord {
    pub first_detected: Instant,
    /// When a container last used it (`None`: never seen in use).
    pub last_used: Option<Instant>,
    pub size: u64,
}

/// The images known, by ID.
#[derive(Debug, Clone, Default)]
pub struct ImageRecords(pub HashMap<String, ImageRecord>);

impl ImageRecords {
    /// Records the images listed at `now` (`in_use`: the image IDs containers use); images no
    /// longer listed are forgotten.
    pub fn detect(&mut self, images: &[ImageInfo], in_use: &BTreeSet<String>, now: Instant) {
        self.0.retain(|id, _| images.iter().any(|i| &i.id == id));
        for i in images {
            let r = self.0.entry(i.id.clone()).or_insert(ImageRecord {
                first_detected: now,
                last_used: None,
                size: i.size,
            });
            r.size = i.size;
            if in_use.contains(&i.id) {
                r.last_used = Some(now);
            }
        }
    }
}

/// The bytes to free on `fs` under `policy`: `None` below the high threshold, else down to
/// the low threshold (upstream's `GarbageCollect`). A high threshold of 100 % disables
/// collection, as documented upstream.
pub fn bytes_to_free(policy: ImageGcPolicy, fs: FsStats) -> Option<u64> {
    if fs.capacity_bytes == 0 || policy.high_threshold_percent >= 100 {
        return None;
    }
    let usage_percent = 100 - (fs.available_bytes * 100 / fs.capacity_bytes).min(100);
    if usage_percent < u64::from(policy.high_threshold_percent) {
        return None;
    }
    let keep_free = fs.capacity_bytes * (100 - u64::from(policy.low_threshold_percent)) / 100;
    Some(keep_free.saturating_sub(fs.available_bytes)).filter(|b| *b > 0)
}

/// The images to remove to free `bytes` at `now`, in order, and the bytes they free (less
/// than `bytes` when not enough images may go).
pub fn choose(
    records: &ImageRecords,
    images: &[ImageInfo],
    in_use: &BTreeSet<String>,
    bytes: u64,
    min_age: Duration,
    now: Instant,
) -> (Vec<String>, u64) {
    let mut candidates: Vec<(&String, &ImageRecord)> = images
        .iter()
        .filter(|i| !i.pinned && !in_use.contains(&i.id))
        .filter_map(|i| records.0.get_key_value(&i.id))
        .filter(|(_, r)| now.saturating_duration_since(r.first_detected) >= min_age)
        .collect();
    candidates.sort_by(|(ia, a), (ib, b)| {
        (a.last_used, a.first_detected, ia).cmp(&(b.last_used, b.first_detected, ib))
    });
    let mut freed = 0u64;
    let mut out = Vec::new();
    for (id, r) in candidates {
        if freed >= bytes {
            break;
        }
        out.push(id.clone());
        freed = freed.saturating_add(r.size);
    }
    (out, freed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(id: &str, size: u64, pinned: bool) -> ImageInfo {
        ImageInfo {
            id: id.into(),
            size,
            pinned,
        }
    }

    fn fs(capacity: u64, available: u64) -> FsStats {
        FsStats {
            capacity_bytes: capacity,
            available_bytes: available,
            ..FsStats::default()
        }
    }

    #[test]
    fn collection_starts_at_the_high_threshold_and_frees_to_the_low_one() {
        let p = ImageGcPolicy::default();
        // Percentages are whole, as upstream's: 15.1 % free is 85 % used.
        assert_eq!(bytes_to_free(p, fs(1000, 160)), None);
        assert_eq!(bytes_to_free(p, fs(1000, 151)), Some(49));
        assert_eq!(bytes_to_free(p, fs(1000, 150)), Some(50));
        assert_eq!(bytes_to_free(p, fs(1000, 0)), Some(200));
        assert_eq!(bytes_to_free(p, fs(0, 0)), None);
        let never = ImageGcPolicy {
            high_threshold_percent: 100,
            ..p
        };
        assert_eq!(bytes_to_free(never, fs(1000, 1)), None);
    }

    #[test]
    fn unused_images_go_least_recently_used_first_and_used_ones_stay() {
        let t0 = Instant::now();
        let min_age = Duration::from_secs(120);
        let images = vec![
            img("sha256:pause", 10, true),
            img("sha256:used", 100, false),
            img("sha256:old", 100, false),
            img("sha256:recent", 100, false),
            img("sha256:never", 100, false),
        ];
        let mut r = ImageRecords::default();
        let all_used: BTreeSet<String> = ["sha256:used", "sha256:old", "sha256:recent"]
            .map(String::from)
            .into();
        r.detect(&images, &all_used, t0);
        let later: BTreeSet<String> = ["sha256:used", "sha256:recent"].map(String::from).into();
        r.detect(&images, &later, t0 + Duration::from_secs(60));
        let now = t0 + Duration::from_secs(300);
        let in_use: BTreeSet<String> = ["sha256:used".to_string()].into();
        r.detect(&images, &in_use, now);
        assert_eq!(
            choose(&r, &images, &in_use, u64::MAX, min_age, now),
            (
                vec![
                    "sha256:never".to_string(),
                    "sha256:old".to_string(),
                    "sha256:recent".to_string()
                ],
                300
            )
        );
        assert_eq!(
            choose(&r, &images, &in_use, 150, min_age, now),
            (
                vec!["sha256:never".to_string(), "sha256:old".to_string()],
                200
            )
        );
        // Too young to go.
        assert_eq!(
            choose(&r, &images, &in_use, 150, Duration::from_secs(301), now),
            (vec![], 0)
        );
        // A removed image is forgotten.
        r.detect(&images[..2], &in_use, now);
        assert_eq!(r.0.len(), 2);
    }
}

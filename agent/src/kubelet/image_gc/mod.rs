//! Image garbage collection (upstream's image GC manager): every [`GC_PERIOD`] the runtime's
//! images are detected (first seen, last used by a container) and, when the image
//! filesystem's usage reached `image-gc-high-threshold` (85 %), unused images old enough
//! (`image-minimum-gc-age`, 2m) are removed, least recently used first, until usage is down to
//! `image-gc-low-threshold` (80 %). The eviction manager also asks it to remove every unused
//! image when the node is short of disk ([`ImageGc::delete_unused`]). [`plan`] decides; this
//! module reads the runtime and removes.
//!
//! # Guarantees
//! - Images of any container the runtime has (running or exited), images the runtime pins
//!   and the sandbox image are never removed.
//! - A failed removal is logged and the next image is tried.

pub mod plan;

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::cri::{self, pb, ImageService, RuntimeService};
use crate::kubelet::eviction::signals::FsStats;
use crate::report::error_chain;
pub use plan::{ImageGcPolicy, ImageInfo, ImageRecords};

/// How often images are detected and the image filesystem checked (upstream: 5 min; the
/// check is a statvfs, so k3rs looks more often and small disks fill less far).
pub const GC_PERIOD: Duration = Duration::from_secs(30);

/// Why a collection failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("listing the images")]
    ListImages(#[source] cri::Error),
    #[error("listing the containers")]
    ListContainers(#[source] cri::Error),
    #[error("reading the image filesystem of {0}")]
    FsStats(PathBuf),
    #[error(
        "Failed to garbage collect required amount of images. Attempted to free {wanted} \
         bytes, but only found {found} bytes eligible to free."
    )]
    NotEnough { wanted: u64, found: u64 },
}

/// The image garbage collector of one node.
pub struct ImageGc {
    pub runtime: Arc<dyn RuntimeService>,
    pub images: Arc<dyn ImageService>,
    pub policy: ImageGcPolicy,
    /// A directory on the runtime's image filesystem.
    pub image_dir: PathBuf,
    /// The pod sandbox image (kept even when the runtime does not pin it).
    pub sandbox_image: String,
    records: Mutex<ImageRecords>,
}

impl ImageGc {
    pub fn new(
        runtime: Arc<dyn RuntimeService>,
        images: Arc<dyn ImageService>,
        policy: ImageGcPolicy,
        image_dir: PathBuf,
        sandbox_image: String,
    ) -> ImageGc {
        ImageGc {
            runtime,
            images,
            policy,
            image_dir,
            sandbox_image,
            records: Mutex::new(ImageRecords::default()),
        }
    }

    /// Lists the images and the containers, records them at `now`; the images and the IDs
    /// in use.
    async fn detect(&self, now: Instant) -> Result<(Vec<ImageInfo>, BTreeSet<String>), Error> {
        let listed = self
            .images
            .list_images(None)
            .await
            .map_err(Error::ListImages)?;
        let containers = self
            .runtime
            .list_containers(None)
            .await
            .map_err(Error::ListContainers)?;
        let mut in_use: BTreeSet<String> = containers
            .iter()
            .flat_map(|c| {
                let spec = c.image.as_ref().map(|i| i.image.clone());
                [Some(c.image_ref.clone()), spec]
            })
            .flatten()
            .filter(|i| !i.is_empty())
            .collect();
        let images: Vec<ImageInfo> = listed
            .iter()
            .map(|i| {
                let names = i.repo_tags.iter().chain(&i.repo_digests);
                // A container may name its image by tag or digest: the image is in use.
                if names.clone().any(|n| in_use.contains(n)) {
                    in_use.insert(i.id.clone());
                }
                ImageInfo {
                    id: i.id.clone(),
                    size: i.size,
                    pinned: i.pinned || names.clone().any(|n| *n == self.sandbox_image),
                }
            })
            .collect();
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .detect(&images, &in_use, now);
        Ok((images, in_use))
    }

    /// Frees `bytes` by removing unused images at `now`; the bytes freed.
    async fn free_space(&self, bytes: u64, now: Instant) -> Result<u64, Error> {
        let (images, in_use) = self.detect(now).await?;
        let (chosen, _) = {
            let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
            plan::choose(&records, &images, &in_use, bytes, self.policy.min_age, now)
        };
        let mut freed = 0u64;
        for id in chosen {
            let size = images.iter().find(|i| i.id == id).map_or(0, |i| i.size);
            let spec = pb::ImageSpec {
                image: id.clone(),
                ..Default::default()
            };
            match self.images.remove_image(spec).await {
                Ok(()) => {
                    tracing::info!(image = %id, size, "image garbage collection: removed");
                    freed = freed.saturating_add(size);
                }
                Err(e) => {
                    tracing::warn!(image = %id, "removing an unused image: {}", error_chain(&e))
                }
            }
        }
        Ok(freed)
    }

    /// One collection: frees down to the low threshold when usage reached the high one; the
    /// bytes freed.
    pub async fn garbage_collect(&self, now: Instant) -> Result<u64, Error> {
        let fs =
            FsStats::of(&self.image_dir).ok_or_else(|| Error::FsStats(self.image_dir.clone()))?;
        let Some(wanted) = plan::bytes_to_free(self.policy, fs) else {
            self.detect(now).await?;
            return Ok(0);
        };
        tracing::info!(
            bytes = wanted,
            available = fs.available_bytes,
            capacity = fs.capacity_bytes,
            "image filesystem usage over the high threshold: collecting images"
        );
        let found = self.free_space(wanted, now).await?;
        if found < wanted {
            return Err(Error::NotEnough { wanted, found });
        }
        Ok(found)
    }

    /// Removes every unused image old enough (the eviction manager's reclaim); the bytes
    /// freed.
    pub async fn delete_unused(&self) -> Result<u64, Error> {
        self.free_space(u64::MAX, Instant::now()).await
    }

    /// Collects every [`GC_PERIOD`] until `stop`.
    pub async fn run(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(GC_PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            if let Err(e) = self.garbage_collect(Instant::now()).await {
                tracing::warn!("image garbage collection: {}", error_chain(&e));
            }
        }
    }
}

//! An [`ImageService`] that remembers which images the runtime has, so a burst of pods of one
//! image asks the runtime once instead of once per pod and sync (the kubelet reads an image's
//! presence before every start decision; upstream's image manager asks `ImageStatus` per
//! container start, its puller then skips the pull of a present image).
//!
//! # Guarantees
//! - Only presence is remembered: an image the runtime lacks, or an error, is asked again on
//!   the next call.
//! - A remembered answer is at most [`PRESENCE_TTL`] old, so an image removed behind the
//!   kubelet's back (`crictl rmi`) is noticed within that time.
//! - A removal through this service forgets everything remembered (the removed reference may
//!   be an id or a digest, not the name it was asked by); a pull forgets the pulled name.
//! - Listing, pulling and removing always go to the runtime.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::time::Instant;

use super::{pb, ImageService, Result};

/// How long a present image is believed present without asking again.
pub const PRESENCE_TTL: Duration = Duration::from_secs(10);

/// [`ImageService`] over `inner`, with image presence remembered (see the module docs).
pub struct ImagePresence {
    inner: Arc<dyn ImageService>,
    present: Mutex<HashMap<String, (Instant, pb::Image)>>,
}

impl ImagePresence {
    pub fn new(inner: Arc<dyn ImageService>) -> ImagePresence {
        ImagePresence {
            inner,
            present: Mutex::default(),
        }
    }

    fn present(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, pb::Image)>> {
        self.present.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn remembered(&self, image: &str) -> Option<pb::Image> {
        let mut present = self.present();
        match present.get(image) {
            Some((at, i)) if at.elapsed() < PRESENCE_TTL => Some(i.clone()),
            Some(_) => {
                present.remove(image);
                None
            }
            None => None,
        }
    }
}

impl ImageService for ImagePresence {
    fn list_images(
        &self,
        filter: Option<pb::ImageFilter>,
    ) -> BoxFuture<'_, Result<Vec<pb::Image>>> {
        self.inner.list_images(filter)
    }

    fn image_status(
        &self,
        image: pb::ImageSpec,
        verbose: bool,
    ) -> BoxFuture<'_, Result<Option<pb::Image>>> {
        Box::pin(async move {
            // Verbose answers carry runtime details a remembered one lacks.
            if !verbose {
                if let Some(i) = self.remembered(&image.image) {
                    return Ok(Some(i));
                }
            }
            let name = image.image.clone();
            let status = self.inner.image_status(image, verbose).await?;
            if let (Some(i), false) = (&status, verbose) {
                self.present().insert(name, (Instant::now(), i.clone()));
            }
            Ok(status)
        })
    }

    fn pull_image(
        &self,
        image: pb::ImageSpec,
        auth: Option<pb::AuthConfig>,
        sandbox_config: Option<pb::PodSandboxConfig>,
    ) -> BoxFuture<'_, Result<String>> {
        self.present().remove(&image.image);
        self.inner.pull_image(image, auth, sandbox_config)
    }

    fn remove_image(&self, image: pb::ImageSpec) -> BoxFuture<'_, Result<()>> {
        Box::pin(async move {
            let result = self.inner.remove_image(image).await;
            self.present().clear();
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cri::fake::{Call, FakeRuntime};

    const BUSYBOX: &str = "docker.io/library/busybox:1.35";

    fn spec(image: &str) -> pb::ImageSpec {
        pb::ImageSpec {
            image: image.into(),
            ..Default::default()
        }
    }

    fn status_calls(rt: &FakeRuntime) -> usize {
        rt.calls()
            .iter()
            .filter(|c| matches!(c, Call::ImageStatus(_)))
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn a_present_image_is_asked_once_per_ttl() {
        let rt = Arc::new(FakeRuntime::new());
        rt.add_image(BUSYBOX);
        let images = ImagePresence::new(rt.clone());
        for _ in 0..5 {
            assert!(images
                .image_status(spec(BUSYBOX), false)
                .await
                .unwrap()
                .is_some());
        }
        assert_eq!(status_calls(&rt), 1);
        tokio::time::advance(PRESENCE_TTL).await;
        assert!(images
            .image_status(spec(BUSYBOX), false)
            .await
            .unwrap()
            .is_some());
        assert_eq!(status_calls(&rt), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn absence_is_never_remembered() {
        let rt = Arc::new(FakeRuntime::new());
        let images = ImagePresence::new(rt.clone());
        assert_eq!(
            images.image_status(spec(BUSYBOX), false).await.unwrap(),
            None
        );
        assert_eq!(
            images.image_status(spec(BUSYBOX), false).await.unwrap(),
            None
        );
        assert_eq!(status_calls(&rt), 2);
        // Pulled meanwhile: the next call sees it.
        images.pull_image(spec(BUSYBOX), None, None).await.unwrap();
        assert!(images
            .image_status(spec(BUSYBOX), false)
            .await
            .unwrap()
            .is_some());
        assert_eq!(status_calls(&rt), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_removal_forgets_every_image() {
        let rt = Arc::new(FakeRuntime::new());
        rt.add_image(BUSYBOX);
        let images = ImagePresence::new(rt.clone());
        assert!(images
            .image_status(spec(BUSYBOX), false)
            .await
            .unwrap()
            .is_some());
        images.remove_image(spec(BUSYBOX)).await.unwrap();
        assert_eq!(
            images.image_status(spec(BUSYBOX), false).await.unwrap(),
            None
        );
        assert_eq!(status_calls(&rt), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn verbose_calls_go_to_the_runtime() {
        let rt = Arc::new(FakeRuntime::new());
        rt.add_image(BUSYBOX);
        let images = ImagePresence::new(rt.clone());
        images.image_status(spec(BUSYBOX), true).await.unwrap();
        images.image_status(spec(BUSYBOX), true).await.unwrap();
        assert_eq!(status_calls(&rt), 2);
    }
}

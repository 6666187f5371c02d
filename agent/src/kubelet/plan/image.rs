//! Whether a container's image must be pulled before it starts (upstream's image manager
//! `EnsureImageExists` before the pull itself).

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::jiff::Timestamp;

use super::backoff::Backoff;
use super::observed::{ObservedPod, Waiting};
use super::spec::uid;

/// A container's `imagePullPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

/// The policy in the spec, or the API default: `Always` for an image without a tag or with
/// `:latest` (and no digest), `IfNotPresent` otherwise.
pub fn pull_policy(c: &Container) -> PullPolicy {
    match c.image_pull_policy.as_deref() {
        Some("Always") => PullPolicy::Always,
        Some("IfNotPresent") => PullPolicy::IfNotPresent,
        Some("Never") => PullPolicy::Never,
        _ => {
            let image = c.image.as_deref().unwrap_or_default();
            if image.contains('@') {
                return PullPolicy::IfNotPresent;
            }
            let last = image.rsplit('/').next().unwrap_or(image);
            match last.split_once(':') {
                Some((_, "latest")) | None => PullPolicy::Always,
                Some(_) => PullPolicy::IfNotPresent,
            }
        }
    }
}

/// The key of an image's pull back-off for one pod (upstream: `<pod UID>_<image>`).
pub fn image_backoff_key(pod: &Pod, image: &str) -> String {
    format!("{}_{image}", uid(pod))
}

/// What must happen to the image before the container can start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageStep {
    /// The image is there and the policy does not ask for a pull.
    Present,
    /// Pull it first.
    Pull,
    /// The container cannot start now.
    Wait(Waiting),
}

/// Decides the image step for `c`.
pub fn image_step(
    pod: &Pod,
    c: &Container,
    observed: &ObservedPod,
    backoff: &Backoff,
    now: Timestamp,
) -> ImageStep {
    let image = c.image.as_deref().unwrap_or_default();
    let present = observed.images.contains(image);
    let pull = match pull_policy(c) {
        PullPolicy::Always => true,
        PullPolicy::IfNotPresent => !present,
        PullPolicy::Never => false,
    };
    if !pull {
        if present {
            return ImageStep::Present;
        }
        return ImageStep::Wait(Waiting::new(
            "ErrImageNeverPull",
            format!("Container image \"{image}\" is not present with pull policy of Never"),
        ));
    }
    if backoff.is_in_backoff_since_update(&image_backoff_key(pod, image), now) {
        return ImageStep::Wait(Waiting::new(
            "ImagePullBackOff",
            format!("Back-off pulling image \"{image}\""),
        ));
    }
    ImageStep::Pull
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kubelet::plan::spec::tests::pod;
    use serde_json::json;

    fn container(image: &str, policy: Option<&str>) -> Container {
        Container {
            name: "c".into(),
            image: Some(image.into()),
            image_pull_policy: policy.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn default_policy_follows_the_tag() {
        let p = |i: &str| pull_policy(&container(i, None));
        assert_eq!(p("busybox"), PullPolicy::Always);
        assert_eq!(p("busybox:latest"), PullPolicy::Always);
        assert_eq!(p("localhost:5000/busybox"), PullPolicy::Always);
        assert_eq!(p("busybox:1.35"), PullPolicy::IfNotPresent);
        assert_eq!(p("localhost:5000/busybox:1.35"), PullPolicy::IfNotPresent);
        assert_eq!(p("busybox@sha256:abcd"), PullPolicy::IfNotPresent);
        assert_eq!(
            pull_policy(&container("busybox", Some("Never"))),
            PullPolicy::Never
        );
    }

    fn now() -> Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn observed(images: &[&str]) -> ObservedPod {
        ObservedPod {
            images: images.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn steps_per_policy_and_presence() {
        let p = pod(json!({}));
        let b = Backoff::default();
        let step = |policy: &str, images: &[&str]| {
            image_step(
                &p,
                &container("busybox:1.35", Some(policy)),
                &observed(images),
                &b,
                now(),
            )
        };
        assert_eq!(step("Always", &["busybox:1.35"]), ImageStep::Pull);
        assert_eq!(step("Always", &[]), ImageStep::Pull);
        assert_eq!(step("IfNotPresent", &["busybox:1.35"]), ImageStep::Present);
        assert_eq!(step("IfNotPresent", &[]), ImageStep::Pull);
        assert_eq!(step("Never", &["busybox:1.35"]), ImageStep::Present);
        assert_eq!(
            step("Never", &[]),
            ImageStep::Wait(Waiting::new(
                "ErrImageNeverPull",
                "Container image \"busybox:1.35\" is not present with pull policy of Never"
            ))
        );
    }

    #[test]
    fn a_failed_pull_backs_off() {
        let p = pod(json!({}));
        let c = container("nope:1", None);
        let mut b = Backoff::default();
        b.next(&image_backoff_key(&p, "nope:1"), now(), now());
        let later = |s: i64| Timestamp::from_second(now().as_second() + s).unwrap();
        assert_eq!(
            image_step(&p, &c, &observed(&[]), &b, later(9)),
            ImageStep::Wait(Waiting::new(
                "ImagePullBackOff",
                "Back-off pulling image \"nope:1\""
            ))
        );
        assert_eq!(
            image_step(&p, &c, &observed(&[]), &b, later(10)),
            ImageStep::Pull
        );
        assert_eq!(image_backoff_key(&p, "nope:1"), "u1_nope:1");
    }
}

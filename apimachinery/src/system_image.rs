//! `--system-default-registry`: the registry the images k3rs itself runs (the agents' pod
//! sandbox image, the local-path provisioner's helper pods) are pulled from, as k3s prefixes
//! its system images. Shared by the agent and the controllers, which must agree on it.

/// `image` moved to `registry`: `docker.io/k3rs/pause:3.6` with `registry.local:5000` becomes
/// `registry.local:5000/k3rs/pause:3.6` (Docker Hub's name is dropped, the repository path
/// kept). An empty registry, or an image already under it, is returned unchanged.
pub fn with_registry(registry: &str, image: &str) -> String {
    let registry = registry.trim_end_matches('/');
    if registry.is_empty() || image.starts_with(&format!("{registry}/")) {
        return image.to_string();
    }
    let path = image.strip_prefix("docker.io/").unwrap_or(image);
    format!("{registry}/{path}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_the_repository_path() {
        assert_eq!(
            with_registry("registry.local:5000", "docker.io/k3rs/pause:3.6"),
            "registry.local:5000/k3rs/pause:3.6"
        );
        assert_eq!(
            with_registry("registry.local/", "docker.io/library/busybox:latest"),
            "registry.local/library/busybox:latest"
        );
        assert_eq!(
            with_registry("registry.local", "rancher/mirrored-pause:3.6"),
            "registry.local/rancher/mirrored-pause:3.6"
        );
    }

    #[test]
    fn leaves_images_alone_without_a_registry_or_already_under_it() {
        assert_eq!(
            with_registry("", "docker.io/k3rs/pause:3.6"),
            "docker.io/k3rs/pause:3.6"
        );
        assert_eq!(
            with_registry("registry.local", "registry.local/k3rs/pause:3.6"),
            "registry.local/k3rs/pause:3.6"
        );
    }
}

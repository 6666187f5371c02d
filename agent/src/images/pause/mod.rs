//! The pause image embedded in the binary: the pod sandbox image, so that a node starts pods
//! without reaching any registry.
//!
//! Guarantees:
//! - [`archive`] is the same bytes for the same architecture, in every build: a one-layer OCI
//!   image whose only file is `/pause` ([`program`]), named [`IMAGE`].
//! - The agent imports it into containerd's `k8s.io` namespace at start only when the
//!   configured sandbox image is [`IMAGE`] and containerd does not have it
//!   ([`needs_import`]): a restart costs one `ctr images ls`.
//! - [`IMAGE`]'s tag changes whenever the bytes do (a test pins the digests), so a node that
//!   has an older embedded image gets the new one.
//! - Architectures without an embedded program (anything but amd64 and arm64) use
//!   [`FALLBACK_IMAGE`], which containerd pulls like any image.

pub mod archive;
pub mod program;

use std::collections::BTreeSet;

pub use program::Arch;

/// The embedded image's name (the agent's default sandbox image where it exists).
pub const IMAGE: &str = "docker.io/k3rs/pause:3.10-k3rs1";

/// The sandbox image on architectures without an embedded pause (upstream's).
pub const FALLBACK_IMAGE: &str = "registry.k8s.io/pause:3.10";

/// The default sandbox image on this machine: [`IMAGE`] where it is embedded.
pub fn default_image() -> &'static str {
    if Arch::host().is_some() {
        IMAGE
    } else {
        FALLBACK_IMAGE
    }
}

/// The embedded image for `arch`, as an archive `ctr images import` takes.
pub fn archive(arch: Arch) -> archive::ImageArchive {
    let (repository, tag) = IMAGE.rsplit_once(':').expect("IMAGE has a tag");
    let pause = program::elf(arch);
    archive::image(&archive::ImageSpec {
        repository,
        tag,
        architecture: arch.oci(),
        files: &[("pause", 0o755, &pause)],
        entrypoint: &["/pause"],
    })
}

/// Whether the embedded image must be imported: the sandbox image is it, this machine has
/// it embedded, and containerd (`present`: its image names) does not have it.
pub fn needs_import(sandbox_image: &str, present: &BTreeSet<String>) -> Option<Arch> {
    if sandbox_image != IMAGE || present.contains(IMAGE) {
        return None;
    }
    Arch::host()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Changing the program or the archive changes these: then bump [`IMAGE`]'s tag, or nodes
    /// that imported the old image keep running it.
    #[test]
    fn the_digests_are_pinned_to_the_tag() {
        assert_eq!(IMAGE, "docker.io/k3rs/pause:3.10-k3rs1");
        assert_eq!(
            archive(Arch::Amd64).manifest_digest,
            "sha256:b42063ce8ec7074278ae38275c8bf988cb117a9b7865a5319060f99f14fcdd28"
        );
        assert_eq!(
            archive(Arch::Arm64).manifest_digest,
            "sha256:d6f0fa029edee8ceda1b5b6f52f21b7c87608cd673799186d2b26a4c09183b7d"
        );
    }

    #[test]
    fn imported_only_when_it_is_the_sandbox_image_and_missing() {
        let none = BTreeSet::new();
        let has: BTreeSet<String> = [IMAGE.to_string()].into();
        assert_eq!(needs_import(IMAGE, &none), Arch::host());
        assert_eq!(needs_import(IMAGE, &has), None);
        assert_eq!(needs_import("registry.k8s.io/pause:3.10", &none), None);
    }
}

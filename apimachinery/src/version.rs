//! The version k3rs reports everywhere (`/version`'s `gitVersion`, the nodes' kubelet
//! version, `k3rs --version`): the Kubernetes version it implements with k3rs's own release
//! as semver build metadata, the way k3s says `v1.33.0+k3s1`.
//!
//! # Guarantees
//! - [`GIT_VERSION`] is a semver release, not a pre-release: Helm's `kubeVersion: ">=1.33.0"`
//!   and client-go's version parsing see Kubernetes 1.33.0.
//! - Its major and minor are [`KUBE_MAJOR`] and [`KUBE_MINOR`].

/// `version.Info.major`.
pub const KUBE_MAJOR: &str = "1";
/// `version.Info.minor` (kubectl 1.32 accepts ±1).
pub const KUBE_MINOR: &str = "33";
/// `v<kubernetes>+k3rs<release>`: the release counts k3rs builds of this Kubernetes version.
pub const GIT_VERSION: &str = "v1.33.0+k3rs1";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_version_is_a_release_with_build_metadata() {
        let v = semver::Version::parse(GIT_VERSION.strip_prefix('v').unwrap()).unwrap();
        assert!(v.pre.is_empty(), "{v}");
        assert_eq!(v.build.as_str(), "k3rs1");
        assert_eq!(v.major.to_string(), KUBE_MAJOR);
        assert_eq!(v.minor.to_string(), KUBE_MINOR);
        // Helm's `kubeVersion` constraints compare the release part.
        assert!(semver::VersionReq::parse(">=1.33.0").unwrap().matches(&v));
        assert!(!semver::VersionReq::parse(">=1.34.0").unwrap().matches(&v));
        // The old form was a pre-release, which such constraints reject.
        let old = semver::Version::parse("1.33.0-k3rs0.1.0").unwrap();
        assert!(!semver::VersionReq::parse(">=1.33.0").unwrap().matches(&old));
    }
}

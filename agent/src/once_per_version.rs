//! Reporting a warning about an object once per version of it (the NetworkPolicy enforcer and
//! the ingress controller re-plan often; an Event per plan would flood the API).

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The (object version, warning) pairs already reported.
#[derive(Debug)]
pub struct OncePerVersion<W: Ord> {
    reported: BTreeSet<(String, W)>,
}

impl<W: Ord> Default for OncePerVersion<W> {
    fn default() -> Self {
        OncePerVersion {
            reported: BTreeSet::new(),
        }
    }
}

impl<W: Ord> OncePerVersion<W> {
    /// Whether `warning` about the object of `meta` (its uid and resourceVersion) is new;
    /// remembers it.
    pub fn first(&mut self, meta: &ObjectMeta, warning: W) -> bool {
        let version = format!(
            "{}/{}",
            meta.uid.as_deref().unwrap_or_default(),
            meta.resource_version.as_deref().unwrap_or_default()
        );
        self.reported.insert((version, warning))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn once_per_uid_and_resource_version() {
        let meta = |rv: &str| ObjectMeta {
            uid: Some("u".into()),
            resource_version: Some(rv.into()),
            ..ObjectMeta::default()
        };
        let mut seen = OncePerVersion::default();
        assert!(seen.first(&meta("1"), "w"));
        assert!(!seen.first(&meta("1"), "w"));
        assert!(seen.first(&meta("1"), "other"));
        assert!(seen.first(&meta("2"), "w"));
    }
}

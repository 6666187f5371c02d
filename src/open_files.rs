//! The open-file limit of a serving process: raised to its hard limit at start (as Go's
//! runtime does for kube-apiserver and the kubelet), so that the HTTPS servers' connection
//! caps (8192 each) and the datastore fit; the common soft default of 1024 would not.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The limit to set instead of `now`, if any: the soft limit raised to the hard one. An
/// unlimited hard limit is not a valid open-file limit, so the soft one then stays.
pub fn raised(now: &Rlimit) -> Option<Rlimit> {
    let maximum = now.maximum?;
    (now.current.is_some_and(|c| c < maximum)).then_some(Rlimit {
        current: Some(maximum),
        maximum: Some(maximum),
    })
}

/// Raises `RLIMIT_NOFILE`'s soft limit to the hard limit; a failure is logged, not fatal.
pub fn raise() {
    let now = getrlimit(Resource::Nofile);
    let Some(new) = raised(&now) else {
        return;
    };
    match setrlimit(Resource::Nofile, new) {
        Ok(()) => {
            tracing::debug!(from = ?now.current, to = ?new.current, "raised the open-file limit")
        }
        Err(e) => tracing::warn!(error = %e, soft = ?now.current, "raising the open-file limit"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(current: Option<u64>, maximum: Option<u64>) -> Rlimit {
        Rlimit { current, maximum }
    }

    #[test]
    fn soft_limit_goes_to_the_hard_one() {
        let r = raised(&limit(Some(1024), Some(524288))).unwrap();
        assert_eq!((r.current, r.maximum), (Some(524288), Some(524288)));
        assert!(raised(&limit(Some(524288), Some(524288))).is_none());
        assert!(raised(&limit(Some(1024), None)).is_none());
        assert!(raised(&limit(None, None)).is_none());
    }
}

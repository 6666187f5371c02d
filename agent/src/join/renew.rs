//! When the node's certificates are renewed: upstream kubelet's certificate manager picks a
//! rotation deadline at a jittered 70–90 % of the certificate's validity, so that nodes whose
//! certificates were issued together do not all renew at once. Pure; the jitter is an input.

/// A certificate's validity, in Unix seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// `notBefore`.
    pub not_before: i64,
    /// `notAfter`.
    pub not_after: i64,
}

/// What to do with a stored identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Keep using it until the deadline (Unix seconds).
    Use {
        /// The rotation deadline.
        renew_at: i64,
    },
    /// Valid, but past its rotation deadline: request a new one with the current identity.
    Renew,
    /// None usable (missing, not matching its key, not yet or no longer valid): bootstrap with
    /// the token again.
    Bootstrap,
}

/// The rotation deadline: `not_before + (0.7 + 0.2 * jitter) * validity`, `jitter` in
/// `[0, 1)` (clamped).
pub fn rotation_deadline(v: Validity, jitter: f64) -> i64 {
    let total = i128::from((v.not_after - v.not_before).max(0));
    let per_mille = 700 + (200.0 * jitter.clamp(0.0, 1.0)).round() as i128;
    v.not_before + (total * per_mille / 1000) as i64
}

/// The decision at `now` for a stored certificate (`None`: there is none usable).
pub fn decide(stored: Option<Validity>, now: i64, jitter: f64) -> Decision {
    let Some(v) = stored else {
        return Decision::Bootstrap;
    };
    if now >= v.not_after || now < v.not_before {
        return Decision::Bootstrap;
    }
    let renew_at = rotation_deadline(v, jitter);
    if now >= renew_at {
        Decision::Renew
    } else {
        Decision::Use { renew_at }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YEAR: Validity = Validity {
        not_before: 1_000,
        not_after: 1_000 + 1_000_000,
    };

    #[test]
    fn the_deadline_is_between_70_and_90_percent() {
        assert_eq!(rotation_deadline(YEAR, 0.0), 701_000);
        assert_eq!(rotation_deadline(YEAR, 0.5), 801_000);
        assert_eq!(rotation_deadline(YEAR, 1.0), 901_000);
        assert_eq!(rotation_deadline(YEAR, 7.0), 901_000);
    }

    #[test]
    fn decisions() {
        assert_eq!(decide(None, 5_000, 0.0), Decision::Bootstrap);
        assert_eq!(
            decide(Some(YEAR), 5_000, 0.0),
            Decision::Use { renew_at: 701_000 }
        );
        assert_eq!(
            decide(Some(YEAR), 700_999, 0.0),
            Decision::Use { renew_at: 701_000 }
        );
        assert_eq!(decide(Some(YEAR), 701_000, 0.0), Decision::Renew);
        assert_eq!(decide(Some(YEAR), 801_000, 0.5), Decision::Renew);
        assert_eq!(decide(Some(YEAR), 1_001_000, 0.0), Decision::Bootstrap);
        assert_eq!(decide(Some(YEAR), 999, 0.0), Decision::Bootstrap);
    }
}

//! NodePort allocation: the lowest free port of the range (kube-apiserver's
//! `--service-node-port-range`, 30000–32767).

use std::collections::HashSet;
use std::ops::RangeInclusive;

/// The default NodePort range.
pub const DEFAULT_RANGE: RangeInclusive<u16> = 30000..=32767;

/// The lowest port of `range` not in `used`.
pub fn next_free(range: RangeInclusive<u16>, used: &HashSet<u16>) -> Option<u16> {
    range.into_iter().find(|p| !used.contains(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowest_free() {
        let mut used = HashSet::new();
        assert_eq!(next_free(DEFAULT_RANGE, &used), Some(30000));
        used.insert(30000);
        assert_eq!(next_free(DEFAULT_RANGE, &used), Some(30001));
        assert_eq!(next_free(5..=5, &[5].into()), None);
    }
}

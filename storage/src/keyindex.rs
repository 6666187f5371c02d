//! The in-memory key index (etcd's `treeIndex`): key → generations of revisions.
//!
//! A generation is one life of a key: from its creation to its deletion (the tombstone is the
//! last revision of a closed generation). Only revisions live here, never values; a lookup
//! gives the revision whose record holds the value.

use std::collections::BTreeMap;
use std::ops::Bound;

use crate::revision::Rev;

/// One life of a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Generation {
    /// Main revision of the creation.
    pub created: i64,
    /// Version of the last revision in `revs` (counting the tombstone if closed).
    pub ver: i64,
    pub revs: Vec<Rev>,
    /// The last revision is a tombstone.
    pub closed: bool,
}

/// All retained revisions of one key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyIndex {
    pub gens: Vec<Generation>,
    /// Lease of the live version, 0 if none or deleted.
    pub lease: i64,
}

/// The state of a key at some revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KeyAt {
    /// Revision whose record holds the key's value.
    pub rev: Rev,
    pub created: i64,
    pub version: i64,
}

impl KeyIndex {
    /// The live version, if the key currently exists.
    pub(crate) fn live(&self) -> Option<KeyAt> {
        let g = self.gens.last()?;
        let rev = *g.revs.last()?;
        (!g.closed).then_some(KeyAt {
            rev,
            created: g.created,
            version: g.ver,
        })
    }

    /// The key's state at main revision `at`, `None` if it did not exist then.
    pub(crate) fn get(&self, at: i64) -> Option<KeyAt> {
        let g = self
            .gens
            .iter()
            .rev()
            .find(|g| g.revs.first().is_some_and(|r| r.main <= at))?;
        let n = g.revs.partition_point(|r| r.main <= at);
        let idx = n.checked_sub(1)?;
        if g.closed && idx + 1 == g.revs.len() {
            return None;
        }
        let behind = (g.revs.len() - 1 - idx) as i64;
        Some(KeyAt {
            rev: g.revs[idx],
            created: g.created,
            version: g.ver - behind,
        })
    }

    /// Records a put at `rev`; returns (create revision, version) of the new version.
    pub(crate) fn put(&mut self, rev: Rev) -> (i64, i64) {
        match self.gens.last_mut() {
            Some(g) if !g.closed => {
                g.ver += 1;
                g.revs.push(rev);
                (g.created, g.ver)
            }
            _ => {
                self.gens.push(Generation {
                    created: rev.main,
                    ver: 1,
                    revs: vec![rev],
                    closed: false,
                });
                (rev.main, 1)
            }
        }
    }

    /// Records the deletion of the live version at `rev`. Returns false if the key is not live.
    pub(crate) fn tombstone(&mut self, rev: Rev) -> bool {
        match self.gens.last_mut() {
            Some(g) if !g.closed && !g.revs.is_empty() => {
                g.ver += 1;
                g.revs.push(rev);
                g.closed = true;
                self.lease = 0;
                true
            }
            _ => false,
        }
    }

    /// Drops every revision with main <= `at` except the latest one if it is not a tombstone;
    /// pushes the dropped revisions to `removed`. Returns true if nothing is left.
    pub(crate) fn compact(&mut self, at: i64, removed: &mut Vec<Rev>) -> bool {
        // Position (generation, index) of the latest revision <= at.
        let mut keep: Option<(usize, usize)> = None;
        for (gi, g) in self.gens.iter().enumerate().rev() {
            let n = g.revs.partition_point(|r| r.main <= at);
            if n > 0 {
                keep = Some((gi, n - 1));
                break;
            }
        }
        let Some((gi, idx)) = keep else {
            return self.gens.is_empty();
        };
        let g = &self.gens[gi];
        let drop_kept = g.closed && idx + 1 == g.revs.len();
        for old in &self.gens[..gi] {
            removed.extend_from_slice(&old.revs);
        }
        self.gens.drain(..gi);
        let g = &mut self.gens[0];
        let cut = if drop_kept { idx + 1 } else { idx };
        removed.extend(g.revs.drain(..cut));
        if g.revs.is_empty() {
            self.gens.remove(0);
        }
        self.gens.is_empty()
    }
}

/// The ordered map of all keys.
pub(crate) type TreeIndex = BTreeMap<Vec<u8>, KeyIndex>;

/// Iterates the keys of `[key, end)` in `index` with etcd's range forms: `end` empty = `key`
/// alone; `end == [0]` = every key >= `key`.
pub(crate) fn range_iter<'a>(
    index: &'a TreeIndex,
    key: &'a [u8],
    end: &'a [u8],
) -> Box<dyn Iterator<Item = (&'a Vec<u8>, &'a KeyIndex)> + 'a> {
    if end.is_empty() {
        return Box::new(index.get_key_value(key).into_iter());
    }
    let upper = if end == [0] {
        Bound::Unbounded
    } else if end <= key {
        return Box::new(std::iter::empty());
    } else {
        Bound::Excluded(end)
    };
    Box::new(index.range::<[u8], _>((Bound::Included(key), upper)))
}

/// Whether `k` falls in etcd's range form `[key, end)`.
pub(crate) fn in_range(k: &[u8], key: &[u8], end: &[u8]) -> bool {
    if end.is_empty() {
        k == key
    } else if end == [0] {
        k >= key
    } else {
        k >= key && k < end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(main: i64) -> Rev {
        Rev::new(main, 0)
    }

    #[test]
    fn generations_and_versions() {
        let mut ki = KeyIndex::default();
        assert_eq!(ki.put(r(2)), (2, 1));
        assert_eq!(ki.put(r(4)), (2, 2));
        assert!(ki.tombstone(r(6)));
        assert!(!ki.tombstone(r(7)));
        assert_eq!(ki.put(r(8)), (8, 1));
        assert_eq!(ki.get(1), None);
        assert_eq!(
            ki.get(3),
            Some(KeyAt {
                rev: r(2),
                created: 2,
                version: 1
            })
        );
        assert_eq!(
            ki.get(5),
            Some(KeyAt {
                rev: r(4),
                created: 2,
                version: 2
            })
        );
        assert_eq!(ki.get(6), None);
        assert_eq!(ki.get(7), None);
        assert_eq!(
            ki.get(9),
            Some(KeyAt {
                rev: r(8),
                created: 8,
                version: 1
            })
        );
        assert_eq!(
            ki.live(),
            Some(KeyAt {
                rev: r(8),
                created: 8,
                version: 1
            })
        );
    }

    #[test]
    fn compaction_keeps_latest_live() {
        let mut ki = KeyIndex::default();
        ki.put(r(2));
        ki.put(r(3));
        ki.tombstone(r(4));
        ki.put(r(5));
        ki.put(r(6));
        let mut removed = vec![];
        assert!(!ki.compact(3, &mut removed));
        assert_eq!(removed, vec![r(2)]);
        assert_eq!(ki.get(3).unwrap().version, 2);
        removed.clear();
        assert!(!ki.compact(4, &mut removed));
        assert_eq!(removed, vec![r(3), r(4)]);
        assert_eq!(ki.get(4), None);
        removed.clear();
        assert!(!ki.compact(6, &mut removed));
        assert_eq!(removed, vec![r(5)]);
        assert_eq!(
            ki.get(6),
            Some(KeyAt {
                rev: r(6),
                created: 5,
                version: 2
            })
        );

        let mut dead = KeyIndex::default();
        dead.put(r(2));
        dead.tombstone(r(3));
        removed.clear();
        assert!(dead.compact(3, &mut removed));
        assert_eq!(removed, vec![r(2), r(3)]);
    }

    #[test]
    fn range_forms() {
        let mut idx = TreeIndex::new();
        for k in [&b"a"[..], b"b", b"c"] {
            idx.insert(k.to_vec(), KeyIndex::default());
        }
        let keys = |key: &[u8], end: &[u8]| -> Vec<Vec<u8>> {
            range_iter(&idx, key, end).map(|(k, _)| k.clone()).collect()
        };
        assert_eq!(keys(b"b", b""), vec![b"b".to_vec()]);
        assert_eq!(keys(b"a", b"c"), vec![b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(keys(b"b", &[0]), vec![b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(keys(&[0], &[0]).len(), 3);
        assert!(keys(b"c", b"a").is_empty());
        assert!(keys(b"c", b"c").is_empty());
        assert!(in_range(b"b", b"a", b"c") && !in_range(b"c", b"a", b"c"));
    }
}

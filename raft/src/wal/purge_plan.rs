//! Which segment files a purge deletes: the decision, without I/O.
//!
//! Deletions run late: on the purge thread after [`Wal::purge`](super::Wal::purge) returned
//! (possibly after later appends, truncations and rotations), or at the next
//! [`Wal::open`](super::Wal::open) after a crash or a failed deletion. So a file may be handed
//! over for deletion only if nothing the log does afterwards can need that path again.
//!
//! # Guarantees
//! A segment is deleted only if
//! - every entry it holds is at or below the purge point `upto` (a segment ends where the next
//!   one begins; the last one at the log's last index), and
//! - its first index is at or below `upto`. Segments are named after their first index, and
//!   after the purge every entry, so every segment the log creates, has an index above `upto`
//!   (the log's first present index only grows, and a truncation never cuts below it). So a
//!   deleted path is never created again, however late its deletion runs or if it fails.
//!
//! The second rule matters for one layout only: a truncation that cut a segment back to
//! nothing leaves it as the empty active segment named after the next index. A purge of the
//! whole log (up to its last entry) must keep it: the next append writes into it, and had it
//! been handed over, that append would start a segment of the same name while the old file
//! still waits for its deletion.

/// How many leading segments hold only entries at or below `upto` and are named at or below
/// it (see the module docs), given each segment's first index (sorted) and the log's last
/// index after the purge (`None` when unknown: the last segment then never counts, as its end
/// is not known without reading it).
pub fn purgeable(firsts: &[u64], last_index: Option<u64>, upto: u64) -> usize {
    let mut n = 0;
    for (i, &first) in firsts.iter().enumerate() {
        let seg_last = match firsts.get(i + 1) {
            Some(next) => next.saturating_sub(1),
            None => match last_index {
                Some(last) => last,
                None => break,
            },
        };
        if seg_last > upto || first > upto {
            break;
        }
        n = i + 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn counts_whole_segments() {
        // Segments 0..=9, 10..=19, 20..=last.
        let firsts = [0, 10, 20];
        assert_eq!(purgeable(&firsts, Some(25), 8), 0);
        assert_eq!(purgeable(&firsts, Some(25), 9), 1);
        assert_eq!(purgeable(&firsts, Some(25), 24), 2);
        assert_eq!(purgeable(&firsts, Some(25), 25), 3);
        // Past the end (a snapshot ahead of the log).
        assert_eq!(purgeable(&firsts, Some(100), 100), 3);
        // The last segment's end unknown: never purgeable.
        assert_eq!(purgeable(&firsts, None, 100), 2);
        assert_eq!(purgeable(&[], Some(5), 100), 0);
    }

    /// The case the WAL model test found: entries 0..=10 in segments 0, 5 and 10; a truncation
    /// at 5 deletes segment 10 and empties segment 5; a purge up to 4 (the whole log) must not
    /// hand segment 5 over, since the next append (index 5) writes into it.
    #[test]
    fn keeps_the_empty_active_segment_named_after_the_next_index() {
        assert_eq!(purgeable(&[0, 5], Some(4), 4), 1);
        // Only that segment left (the purge marker was at 4 already): kept too.
        assert_eq!(purgeable(&[5], Some(4), 4), 0);
        // Past the end, the next index is above the empty segment's name: it goes.
        assert_eq!(purgeable(&[0, 5], Some(50), 50), 2);
        assert_eq!(purgeable(&[5], Some(50), 50), 1);
    }

    /// A purge of the whole log whose last segment is not empty deletes it: its name is below
    /// the next index.
    #[test]
    fn a_whole_last_segment_goes() {
        assert_eq!(purgeable(&[0, 5], Some(7), 7), 2);
    }

    /// A log as the WAL keeps it: segments of `lens[i]` entries each, consecutive from
    /// `start`, of which only the last may be empty.
    fn layout() -> impl Strategy<Value = (u64, Vec<u64>)> {
        (0u64..20, proptest::collection::vec(1u64..6, 0..6), 0u64..2).prop_map(
            |(start, mut lens, empty_tail)| {
                if empty_tail == 1 {
                    lens.push(0);
                }
                (start, lens)
            },
        )
    }

    proptest! {
        /// Whatever the layout and purge point: every deleted segment's entries and name are at
        /// or below the purge point, so no later append can need the path, and every segment
        /// kept holds an entry above it or is named above it.
        #[test]
        fn never_deletes_a_name_the_log_can_create_again(
            (start, lens) in layout(),
            upto_off in 0u64..40,
            past_the_end in proptest::bool::ANY,
        ) {
            let mut firsts = Vec::new();
            let mut next = start;
            for len in &lens {
                firsts.push(next);
                next += len;
            }
            // `start` is the first index present; the purge goes up to at least `start - 1`.
            let last = next.checked_sub(1);
            let upto = if past_the_end {
                next + upto_off
            } else {
                (start + upto_off).min(next.saturating_sub(1))
            };
            let last_index = Some(last.map_or(upto, |l| l.max(upto)));
            for known in [last_index, None] {
                let n = purgeable(&firsts, known, upto);
                for (i, &first) in firsts.iter().enumerate() {
                    let seg_last = first + lens[i];
                    if i < n {
                        prop_assert!(first <= upto, "{firsts:?} {upto} deletes {first}");
                        prop_assert!(seg_last <= upto + 1);
                    } else if i == n && known.is_some() {
                        // The first kept one: something in it or its name is above `upto`.
                        prop_assert!(seg_last > upto + 1 || first > upto, "{firsts:?} {upto} {i}");
                    }
                }
            }
        }
    }
}

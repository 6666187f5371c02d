//! Compaction: drop every revision below the compact revision except the latest version of
//! each key live at it. Tombstones at or below it go too.
//!
//! The key index forgets the dropped revisions at once (reads and watches below the compact
//! revision fail from then on); their records become garbage that later batches delete from
//! sled a chunk at a time, so one compaction never stalls the apply loop. After a crash the
//! garbage is found again on open.

use crate::store::Result;
use crate::types::RequestError;
use crate::writer::Writer;

/// Applies `Compact { revision }`.
pub(crate) fn compact(w: &mut Writer<'_>, revision: i64) -> Result<Result<(), RequestError>> {
    if revision <= w.st.compact {
        return Ok(Err(RequestError::Compacted {
            compact_revision: w.st.reported_compact(),
        }));
    }
    if revision > w.st.rev {
        return Ok(Err(RequestError::FutureRevision));
    }
    let mut removed = Vec::new();
    let mut emptied = Vec::new();
    for (key, ki) in w.st.index.iter_mut() {
        if ki.compact(revision, &mut removed) {
            emptied.push(key.clone());
        }
    }
    for key in emptied {
        w.st.index.remove(&key);
    }
    for rev in removed {
        w.drop_record(rev);
    }
    w.st.compact = revision;
    Ok(Ok(()))
}

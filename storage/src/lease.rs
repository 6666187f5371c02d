//! LeaseGrant and LeaseRevoke.

use std::collections::BTreeSet;

use crate::state::LeaseEntry;
use crate::types::{CommandResponse, RequestError};
use crate::writer::Writer;

/// Grants lease `id` (0: the store picks an unused positive ID from its counter).
pub(crate) fn grant(
    w: &mut Writer<'_>,
    id: i64,
    ttl: i64,
) -> Result<CommandResponse, RequestError> {
    let id = if id == 0 {
        loop {
            w.st.lease_counter = w.st.lease_counter.wrapping_add(1);
            let candidate = (mix(w.st.lease_counter) >> 1) as i64;
            if candidate != 0 && !w.st.leases.contains_key(&candidate) {
                break candidate;
            }
        }
    } else if w.st.leases.contains_key(&id) {
        return Err(RequestError::LeaseExists);
    } else {
        id
    };
    w.st.leases.insert(
        id,
        LeaseEntry {
            ttl,
            keys: BTreeSet::new(),
        },
    );
    w.lease_writes.insert(id, Some(ttl));
    Ok(CommandResponse::LeaseGrant { id, ttl })
}

/// Revokes lease `id`: its keys are deleted in one revision (none if it has no keys).
pub(crate) fn revoke(w: &mut Writer<'_>, id: i64) -> Result<CommandResponse, RequestError> {
    let Some(lease) = w.st.leases.remove(&id) else {
        return Err(RequestError::LeaseNotFound);
    };
    w.begin();
    for key in &lease.keys {
        w.delete(key);
    }
    w.end();
    w.lease_writes.insert(id, None);
    Ok(CommandResponse::LeaseRevoke)
}

/// splitmix64: spreads a counter over the ID space.
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

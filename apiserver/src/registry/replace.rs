//! A compare-and-swap write of one object at the revision it was read at, for the
//! subresources that change an object as a side effect (`binding`, `eviction`) and bypass the
//! update strategy.

use serde_json::Value;

use super::encode;

use k3rs_apimachinery::meta;

use super::Registry;
use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::ApiResult;
use k3rs_datastore::{GuardedOp, WriteOutcome};

impl Registry {
    /// Stores `obj` at `key` if the key is still at `mod_revision`. `Some(stored)` (with its new
    /// resourceVersion) on success, `None` when someone else wrote first.
    pub(crate) async fn replace_at(
        &self,
        r: &Resource,
        key: &[u8],
        mod_revision: i64,
        mut obj: Value,
    ) -> ApiResult<Option<Value>> {
        let lease = self.lease_for(r).await?;
        let put = GuardedOp::Put {
            value: encode(&obj)?,
            lease,
        };
        match self.ds.guarded(key, mod_revision, put).await? {
            WriteOutcome::Done { revision } => {
                meta::set_resource_version(&mut obj, revision);
                Ok(Some(obj))
            }
            WriteOutcome::Conflict { .. } => Ok(None),
        }
    }
}

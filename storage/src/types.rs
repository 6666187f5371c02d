//! Request, response and command types of the store.
//!
//! These mirror etcd v3's `etcdserverpb`/`mvccpb` messages field for field (so the gRPC front
//! end converts one-to-one), but are plain Rust types that serialize with rmp-serde: a
//! [`Command`] is what a Raft log entry carries, and applying it is deterministic. Their byte
//! strings serialize as [`crate::bytes_form`] says (either form decodes).

use serde::{Deserialize, Serialize};

/// A key's state at one revision (etcd `mvccpb.KeyValue`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KeyValue {
    /// The key.
    #[serde(with = "crate::bytes_form")]
    pub key: Vec<u8>,
    /// Revision of the last creation of this key.
    pub create_revision: i64,
    /// Revision of the last modification; for a DELETE event, the delete revision.
    pub mod_revision: i64,
    /// 1 on creation, +1 per modification, 0 for a deletion tombstone.
    pub version: i64,
    /// The value.
    #[serde(with = "crate::bytes_form")]
    pub value: Vec<u8>,
    /// Lease attached to the key, 0 for none.
    pub lease: i64,
}

/// How a range is sorted (etcd `RangeRequest.SortOrder`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SortOrder {
    /// Key order, unsorted otherwise.
    #[default]
    None,
    /// Ascending by the target.
    Ascend,
    /// Descending by the target.
    Descend,
}

/// What a range is sorted by (etcd `RangeRequest.SortTarget`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SortTarget {
    /// The key.
    #[default]
    Key,
    /// The version.
    Version,
    /// The create revision.
    Create,
    /// The mod revision.
    Mod,
    /// The value.
    Value,
}

/// etcd `RangeRequest`. `range_end` empty = single key; `[0]` = every key >= `key`;
/// otherwise the half-open interval `[key, range_end)`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RangeRequest {
    /// The first key.
    #[serde(with = "crate::bytes_form")]
    pub key: Vec<u8>,
    /// The range end (see above).
    #[serde(with = "crate::bytes_form")]
    pub range_end: Vec<u8>,
    /// The most keys returned; 0 = no limit.
    pub limit: i64,
    /// 0 = current revision.
    pub revision: i64,
    /// The sort order.
    pub sort_order: SortOrder,
    /// The sort key.
    pub sort_target: SortTarget,
    /// Serve from the local member without a linearizable read.
    pub serializable: bool,
    /// Return keys without values.
    pub keys_only: bool,
    /// Return only the count.
    pub count_only: bool,
    /// Only keys modified at or after this revision (0: any).
    pub min_mod_revision: i64,
    /// Only keys modified at or before this revision (0: any).
    pub max_mod_revision: i64,
    /// Only keys created at or after this revision (0: any).
    pub min_create_revision: i64,
    /// Only keys created at or before this revision (0: any).
    pub max_create_revision: i64,
}

/// etcd `RangeResponse` (without the header).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RangeResponse {
    /// The keys, in the requested order.
    pub kvs: Vec<KeyValue>,
    /// Whether `limit` cut the result.
    pub more: bool,
    /// Number of keys in the range, ignoring `limit`.
    pub count: i64,
}

/// etcd `PutRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PutRequest {
    /// The key.
    #[serde(with = "crate::bytes_form")]
    pub key: Vec<u8>,
    /// The value.
    #[serde(with = "crate::bytes_form")]
    pub value: Vec<u8>,
    /// The lease to attach, 0 for none.
    pub lease: i64,
    /// Return the previous version.
    pub prev_kv: bool,
    /// Keep the current value (only the lease changes).
    pub ignore_value: bool,
    /// Keep the current lease (only the value changes).
    pub ignore_lease: bool,
}

/// etcd `PutResponse` (without the header).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PutResponse {
    /// The previous version, when asked and present.
    pub prev_kv: Option<KeyValue>,
}

/// etcd `DeleteRangeRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeleteRangeRequest {
    /// The first key.
    #[serde(with = "crate::bytes_form")]
    pub key: Vec<u8>,
    /// The range end (as in [`RangeRequest`]).
    #[serde(with = "crate::bytes_form")]
    pub range_end: Vec<u8>,
    /// Return the deleted versions.
    pub prev_kv: bool,
}

/// etcd `DeleteRangeResponse` (without the header).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeleteRangeResponse {
    /// How many keys were deleted.
    pub deleted: i64,
    /// The deleted versions, when asked.
    pub prev_kvs: Vec<KeyValue>,
}

/// A comparison's operator (etcd `Compare.CompareResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareResult {
    /// `==`
    Equal,
    /// `>`
    Greater,
    /// `<`
    Less,
    /// `!=`
    NotEqual,
}

/// What a [`Compare`] looks at, with the operand to compare against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareTarget {
    /// The key's version.
    Version(i64),
    /// The key's create revision.
    Create(i64),
    /// The key's mod revision.
    Mod(i64),
    /// The key's value.
    Value(#[serde(with = "crate::bytes_form")] Vec<u8>),
    /// The key's lease.
    Lease(i64),
}

/// One guard of a transaction (etcd `Compare`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    /// The operator.
    pub result: CompareResult,
    /// What is compared, with the operand.
    pub target: CompareTarget,
    /// The key (or the first of the range).
    #[serde(with = "crate::bytes_form")]
    pub key: Vec<u8>,
    /// Same forms as [`RangeRequest::range_end`]; every key in the range must satisfy it.
    #[serde(with = "crate::bytes_form")]
    pub range_end: Vec<u8>,
}

/// One operation of a transaction branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestOp {
    /// A read.
    Range(RangeRequest),
    /// A write.
    Put(PutRequest),
    /// A delete.
    DeleteRange(DeleteRangeRequest),
    /// A nested transaction.
    Txn(TxnRequest),
}

/// The answer to one [`RequestOp`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseOp {
    /// A read's answer.
    Range(RangeResponse),
    /// A write's answer.
    Put(PutResponse),
    /// A delete's answer.
    DeleteRange(DeleteRangeResponse),
    /// A nested transaction's answer.
    Txn(TxnResponse),
}

/// etcd `TxnRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TxnRequest {
    /// The guards; all must hold for `success` to run.
    pub compare: Vec<Compare>,
    /// Run when every guard holds.
    pub success: Vec<RequestOp>,
    /// Run otherwise.
    pub failure: Vec<RequestOp>,
}

/// etcd `TxnResponse` (without the header).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TxnResponse {
    /// Whether the guards held.
    pub succeeded: bool,
    /// The branch's answers, in order.
    pub responses: Vec<ResponseOp>,
}

/// A state-machine command: the payload of one Raft log entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A write.
    Put(PutRequest),
    /// A delete.
    DeleteRange(DeleteRangeRequest),
    /// A transaction.
    Txn(TxnRequest),
    /// Compact away every revision below `revision` (latest versions of live keys stay).
    Compact {
        /// Every revision below this one.
        revision: i64,
    },
    /// `id == 0`: the store picks an unused ID deterministically.
    LeaseGrant {
        /// The lease id.
        id: i64,
        /// Its TTL in seconds.
        ttl: i64,
    },
    /// Revoke (or expire) a lease: its keys are deleted in one revision.
    LeaseRevoke {
        /// The lease id.
        id: i64,
    },
    /// Raise or clear an alarm of one member (etcd's `Alarm` ACTIVATE/DEACTIVATE, applied
    /// through Raft like etcd's). Does not move the revision.
    Alarm {
        /// Raise or clear.
        action: AlarmAction,
        /// The member the alarm is about (etcd's member id).
        member_id: u64,
        /// Which alarm.
        alarm: AlarmType,
    },
}

/// etcd's `AlarmType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum AlarmType {
    /// No alarm: in a GET, every type.
    None,
    /// The backend quota is exhausted: writes that add data are refused.
    Nospace,
    /// A member's data differs from the others': writes are refused.
    Corrupt,
}

impl AlarmType {
    /// etcd's number of the type (`etcdserverpb.AlarmType`).
    pub fn number(self) -> u8 {
        match self {
            AlarmType::None => 0,
            AlarmType::Nospace => 1,
            AlarmType::Corrupt => 2,
        }
    }

    /// The type with etcd's number `n`.
    pub fn from_number(n: i64) -> Option<AlarmType> {
        match n {
            0 => Some(AlarmType::None),
            1 => Some(AlarmType::Nospace),
            2 => Some(AlarmType::Corrupt),
            _ => None,
        }
    }
}

/// What an alarm command does (etcd's ACTIVATE and DEACTIVATE; GET is a read,
/// [`crate::Store::alarms`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AlarmAction {
    /// Raise the alarm.
    Activate,
    /// Clear the alarm.
    Deactivate,
}

/// An alarm raised for one member (etcd `AlarmMember`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AlarmMember {
    /// The member the alarm is about.
    pub member_id: u64,
    /// Which alarm.
    pub alarm: AlarmType,
}

impl Command {
    /// Serializes with rmp-serde (the Raft log format), byte strings in the current
    /// [`crate::bytes_form::write_form`].
    pub fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec(self).expect("commands always serialize")
    }

    /// Decodes what [`Command::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Self, rmp_serde::decode::Error> {
        rmp_serde::from_slice(bytes)
    }

    /// Whether applying it may take time in proportion to the store rather than to the
    /// request: a delete or read of a key range (also inside a transaction), a compaction, a
    /// lease revocation (which deletes the lease's keys). One such command held the store for
    /// 3.7 s (etcdctl check perf's cleanup, one delete of 250,000 keys).
    pub fn may_touch_many_keys(&self) -> bool {
        match self {
            Command::DeleteRange(d) => !d.range_end.is_empty(),
            Command::Txn(t) => txn_touches_many_keys(t),
            Command::Compact { .. } | Command::LeaseRevoke { .. } => true,
            _ => false,
        }
    }
}

fn txn_touches_many_keys(t: &TxnRequest) -> bool {
    t.success.iter().chain(&t.failure).any(|op| match op {
        RequestOp::Range(r) => !r.range_end.is_empty(),
        RequestOp::Put(_) => false,
        RequestOp::DeleteRange(d) => !d.range_end.is_empty(),
        RequestOp::Txn(t) => txn_touches_many_keys(t),
    })
}

/// What applying a [`Command`] produced, when it succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandResponse {
    /// A write's answer.
    Put(PutResponse),
    /// A delete's answer.
    DeleteRange(DeleteRangeResponse),
    /// A transaction's answer.
    Txn(TxnResponse),
    /// The compaction was done.
    Compact,
    /// The lease granted.
    LeaseGrant {
        /// Its id.
        id: i64,
        /// Its TTL in seconds.
        ttl: i64,
    },
    /// The lease was revoked.
    LeaseRevoke,
    /// The alarm activated or deactivated; empty if the command changed nothing to report
    /// (deactivating an alarm that is not raised, activating `None`).
    Alarm {
        /// The alarms the command raised or cleared.
        alarms: Vec<AlarmMember>,
    },
}

/// The deterministic outcome of applying one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Output {
    /// The store's revision after the command (the response header revision).
    pub revision: i64,
    /// The answer, or the request's refusal.
    pub result: Result<CommandResponse, RequestError>,
}

/// A lease as the state machine knows it (deadlines live with the leader, not here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
    /// The lease id.
    pub id: i64,
    /// Granted TTL in seconds.
    pub ttl: i64,
    /// Keys currently attached, sorted.
    pub keys: Vec<Vec<u8>>,
}

/// Errors that are a deterministic answer to a request (part of the replicated outcome),
/// as opposed to storage failures. `Display` is etcd's exact message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum RequestError {
    /// The revision asked for was compacted away.
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted {
        /// The oldest revision still kept.
        compact_revision: i64,
    },
    /// The revision asked for is newer than the store.
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision,
    /// The lease does not exist.
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    /// A lease with the id exists.
    #[error("etcdserver: lease already exists")]
    LeaseExists,
    /// A transaction writes one key twice.
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    /// The key does not exist.
    #[error("etcdserver: key not found")]
    KeyNotFound,
    /// A transaction has more operations than allowed.
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    /// No key was given.
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    /// `ignore_value` with a non-empty value.
    #[error("etcdserver: value is provided")]
    ValueProvided,
    /// `ignore_lease` with a non-zero lease.
    #[error("etcdserver: lease is provided")]
    LeaseProvided,
    /// A NOSPACE alarm is raised: the command would add data.
    #[error("etcdserver: mvcc: database space exceeded")]
    NoSpace,
    /// A CORRUPT alarm is raised: the command would change data.
    #[error("etcdserver: corrupt cluster")]
    Corrupt,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delete(range_end: &[u8]) -> DeleteRangeRequest {
        DeleteRangeRequest {
            key: b"a".to_vec(),
            range_end: range_end.to_vec(),
            prev_kv: false,
        }
    }

    fn txn(success: Vec<RequestOp>) -> TxnRequest {
        TxnRequest {
            compare: Vec::new(),
            success,
            failure: Vec::new(),
        }
    }

    #[test]
    fn range_deletes_compactions_and_revocations_may_touch_many_keys() {
        let put = Command::Put(PutRequest {
            key: b"a".to_vec(),
            ..Default::default()
        });
        assert!(!put.may_touch_many_keys());
        assert!(!Command::DeleteRange(delete(b"")).may_touch_many_keys());
        assert!(Command::DeleteRange(delete(b"\0")).may_touch_many_keys());
        assert!(Command::Compact { revision: 1 }.may_touch_many_keys());
        assert!(Command::LeaseRevoke { id: 1 }.may_touch_many_keys());
        assert!(!Command::LeaseGrant { id: 1, ttl: 5 }.may_touch_many_keys());
    }

    #[test]
    fn a_transaction_touches_many_keys_through_any_branch_or_nesting() {
        let single = RequestOp::DeleteRange(delete(b""));
        assert!(!Command::Txn(txn(vec![single.clone()])).may_touch_many_keys());
        let prefix_read = RequestOp::Range(RangeRequest {
            key: b"a".to_vec(),
            range_end: b"b".to_vec(),
            ..Default::default()
        });
        assert!(Command::Txn(txn(vec![prefix_read])).may_touch_many_keys());
        let mut in_failure = txn(Vec::new());
        in_failure.failure = vec![RequestOp::DeleteRange(delete(b"\0"))];
        assert!(Command::Txn(in_failure).may_touch_many_keys());
        let nested = txn(vec![RequestOp::Txn(txn(vec![RequestOp::DeleteRange(
            delete(b"z"),
        )]))]);
        assert!(Command::Txn(nested).may_touch_many_keys());
    }
}

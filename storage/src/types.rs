//! Request, response and command types of the store.
//!
//! These mirror etcd v3's `etcdserverpb`/`mvccpb` messages field for field (so the gRPC front
//! end converts one-to-one), but are plain Rust types that serialize with rmp-serde: a
//! [`Command`] is what a Raft log entry carries, and applying it is deterministic.

use serde::{Deserialize, Serialize};

/// A key's state at one revision (etcd `mvccpb.KeyValue`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KeyValue {
    pub key: Vec<u8>,
    /// Revision of the last creation of this key.
    pub create_revision: i64,
    /// Revision of the last modification; for a DELETE event, the delete revision.
    pub mod_revision: i64,
    /// 1 on creation, +1 per modification, 0 for a deletion tombstone.
    pub version: i64,
    pub value: Vec<u8>,
    /// Lease attached to the key, 0 for none.
    pub lease: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SortOrder {
    #[default]
    None,
    Ascend,
    Descend,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SortTarget {
    #[default]
    Key,
    Version,
    Create,
    Mod,
    Value,
}

/// etcd `RangeRequest`. `range_end` empty = single key; `[0]` = every key >= `key`;
/// otherwise the half-open interval `[key, range_end)`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RangeRequest {
    pub key: Vec<u8>,
    pub range_end: Vec<u8>,
    pub limit: i64,
    /// 0 = current revision.
    pub revision: i64,
    pub sort_order: SortOrder,
    pub sort_target: SortTarget,
    pub serializable: bool,
    pub keys_only: bool,
    pub count_only: bool,
    pub min_mod_revision: i64,
    pub max_mod_revision: i64,
    pub min_create_revision: i64,
    pub max_create_revision: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RangeResponse {
    pub kvs: Vec<KeyValue>,
    /// Whether `limit` cut the result.
    pub more: bool,
    /// Number of keys in the range, ignoring `limit`.
    pub count: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PutRequest {
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub lease: i64,
    pub prev_kv: bool,
    pub ignore_value: bool,
    pub ignore_lease: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PutResponse {
    pub prev_kv: Option<KeyValue>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeleteRangeRequest {
    pub key: Vec<u8>,
    pub range_end: Vec<u8>,
    pub prev_kv: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct DeleteRangeResponse {
    pub deleted: i64,
    pub prev_kvs: Vec<KeyValue>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareResult {
    Equal,
    Greater,
    Less,
    NotEqual,
}

/// What a [`Compare`] looks at, with the operand to compare against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CompareTarget {
    Version(i64),
    Create(i64),
    Mod(i64),
    Value(Vec<u8>),
    Lease(i64),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compare {
    pub result: CompareResult,
    pub target: CompareTarget,
    pub key: Vec<u8>,
    /// Same forms as [`RangeRequest::range_end`]; every key in the range must satisfy it.
    pub range_end: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RequestOp {
    Range(RangeRequest),
    Put(PutRequest),
    DeleteRange(DeleteRangeRequest),
    Txn(TxnRequest),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResponseOp {
    Range(RangeResponse),
    Put(PutResponse),
    DeleteRange(DeleteRangeResponse),
    Txn(TxnResponse),
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TxnRequest {
    pub compare: Vec<Compare>,
    pub success: Vec<RequestOp>,
    pub failure: Vec<RequestOp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TxnResponse {
    pub succeeded: bool,
    pub responses: Vec<ResponseOp>,
}

/// A state-machine command: the payload of one Raft log entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    Put(PutRequest),
    DeleteRange(DeleteRangeRequest),
    Txn(TxnRequest),
    /// Compact away every revision below `revision` (latest versions of live keys stay).
    Compact {
        revision: i64,
    },
    /// `id == 0`: the store picks an unused ID deterministically.
    LeaseGrant {
        id: i64,
        ttl: i64,
    },
    /// Revoke (or expire) a lease: its keys are deleted in one revision.
    LeaseRevoke {
        id: i64,
    },
    /// Raise or clear an alarm of one member (etcd's `Alarm` ACTIVATE/DEACTIVATE, applied
    /// through Raft like etcd's). Does not move the revision.
    Alarm {
        action: AlarmAction,
        member_id: u64,
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
    Activate,
    Deactivate,
}

/// An alarm raised for one member (etcd `AlarmMember`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AlarmMember {
    pub member_id: u64,
    pub alarm: AlarmType,
}

impl Command {
    /// Serializes with rmp-serde (the Raft log format).
    pub fn encode(&self) -> Vec<u8> {
        rmp_serde::to_vec(self).expect("commands always serialize")
    }

    /// Decodes what [`Command::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Self, rmp_serde::decode::Error> {
        rmp_serde::from_slice(bytes)
    }
}

/// What applying a [`Command`] produced, when it succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandResponse {
    Put(PutResponse),
    DeleteRange(DeleteRangeResponse),
    Txn(TxnResponse),
    Compact,
    LeaseGrant {
        id: i64,
        ttl: i64,
    },
    LeaseRevoke,
    /// The alarm activated or deactivated; empty if the command changed nothing to report
    /// (deactivating an alarm that is not raised, activating `None`).
    Alarm {
        alarms: Vec<AlarmMember>,
    },
}

/// The deterministic outcome of applying one command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Output {
    /// The store's revision after the command (the response header revision).
    pub revision: i64,
    pub result: Result<CommandResponse, RequestError>,
}

/// A lease as the state machine knows it (deadlines live with the leader, not here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lease {
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
    #[error("etcdserver: mvcc: required revision has been compacted")]
    Compacted { compact_revision: i64 },
    #[error("etcdserver: mvcc: required revision is a future revision")]
    FutureRevision,
    #[error("etcdserver: requested lease not found")]
    LeaseNotFound,
    #[error("etcdserver: lease already exists")]
    LeaseExists,
    #[error("etcdserver: duplicate key given in txn request")]
    DuplicateKey,
    #[error("etcdserver: key not found")]
    KeyNotFound,
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
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

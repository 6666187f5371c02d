//! Errors of the etcd API front end, and their gRPC form: etcd's status codes and exact
//! messages (`api/v3rpc/rpctypes`), which etcd clients match on.

use k3rs_storage::RequestError;
use tonic::{Code, Status};

/// Why an etcd API call failed.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// The store's deterministic answer (compacted, future revision, unknown lease, …).
    #[error(transparent)]
    Request(#[from] RequestError),
    /// Raft failed (no leader, stopped, timed out).
    #[error(transparent)]
    Raft(#[from] k3rs_raft::Error),
    /// The store failed.
    #[error("etcdserver: {0}")]
    Storage(#[from] k3rs_storage::Error),
    /// The request is larger than etcd allows.
    #[error("etcdserver: request is too large")]
    RequestTooLarge,
    /// No key was given.
    #[error("etcdserver: key is not provided")]
    EmptyKey,
    /// A txn operation with no request set (etcd answers "key not found").
    #[error("etcdserver: key not found")]
    EmptyOp,
    /// A txn has more operations than etcd allows.
    #[error("etcdserver: too many operations in txn request")]
    TooManyOps,
    /// A sort option etcd does not define.
    #[error("etcdserver: invalid sort option")]
    InvalidSortOption,
    /// `ignore_value` with a value.
    #[error("etcdserver: value is provided")]
    ValueProvided,
    /// `ignore_lease` with a lease.
    #[error("etcdserver: lease is provided")]
    LeaseProvided,
    /// A lease TTL beyond etcd's maximum.
    #[error("etcdserver: too large lease TTL")]
    LeaseTtlTooLarge,
    /// No leader is known.
    #[error("etcdserver: no leader")]
    NoLeader,
    /// MoveLeader to a member that cannot lead.
    #[error("etcdserver: bad leader transferee")]
    BadLeaderTransferee,
    /// A request field holds a value etcd does not define (e.g. an unknown enum number).
    #[error("etcdserver: {0}")]
    InvalidArgument(String),
    /// An RPC k3rs does not implement (etcd's message).
    #[error("{0}")]
    Unimplemented(&'static str),
    /// Anything else (its message).
    #[error("etcdserver: {0}")]
    Internal(String),
}

impl EtcdError {
    /// The gRPC code etcd uses for this error.
    pub fn code(&self) -> Code {
        match self {
            EtcdError::Request(e) => request_code(e),
            EtcdError::Raft(e) => match e {
                k3rs_raft::Error::NoLeader
                | k3rs_raft::Error::Stopped
                | k3rs_raft::Error::Timeout
                // The member stops (fail-stop): clients go to another one.
                | k3rs_raft::Error::StorageFailed(_) => Code::Unavailable,
                k3rs_raft::Error::Fatal(_) | k3rs_raft::Error::Storage(_) => Code::Internal,
            },
            EtcdError::Storage(_) | EtcdError::Internal(_) => Code::Internal,
            EtcdError::RequestTooLarge
            | EtcdError::EmptyKey
            | EtcdError::EmptyOp
            | EtcdError::TooManyOps
            | EtcdError::InvalidSortOption
            | EtcdError::ValueProvided
            | EtcdError::LeaseProvided
            | EtcdError::InvalidArgument(_) => Code::InvalidArgument,
            EtcdError::LeaseTtlTooLarge => Code::OutOfRange,
            EtcdError::NoLeader => Code::Unavailable,
            EtcdError::BadLeaderTransferee => Code::FailedPrecondition,
            EtcdError::Unimplemented(_) => Code::Unimplemented,
        }
    }

    /// etcd's message for this error.
    pub fn message(&self) -> String {
        match self {
            EtcdError::Raft(k3rs_raft::Error::NoLeader) => "etcdserver: no leader".into(),
            EtcdError::Raft(k3rs_raft::Error::Stopped) => "etcdserver: server stopped".into(),
            EtcdError::Raft(k3rs_raft::Error::Timeout) => "etcdserver: request timed out".into(),
            EtcdError::Raft(e) => format!("etcdserver: {e}"),
            other => other.to_string(),
        }
    }
}

fn request_code(e: &RequestError) -> Code {
    #[allow(unreachable_patterns)] // new store answers default to InvalidArgument
    match e {
        RequestError::Compacted { .. } | RequestError::FutureRevision => Code::OutOfRange,
        RequestError::LeaseNotFound => Code::NotFound,
        RequestError::LeaseExists => Code::FailedPrecondition,
        RequestError::NoSpace => Code::ResourceExhausted,
        RequestError::Corrupt => Code::DataLoss,
        RequestError::DuplicateKey
        | RequestError::KeyNotFound
        | RequestError::TooManyOps
        | RequestError::EmptyKey
        | RequestError::ValueProvided
        | RequestError::LeaseProvided => Code::InvalidArgument,
        _ => Code::InvalidArgument,
    }
}

impl From<EtcdError> for Status {
    fn from(e: EtcdError) -> Status {
        if e.code() == Code::Internal {
            tracing::warn!(error = %e, "etcd api: internal error");
        }
        Status::new(e.code(), e.message())
    }
}

/// Result of an API call.
pub type ApiResult<T> = std::result::Result<T, EtcdError>;

#[cfg(test)]
mod tests {
    use super::*;

    fn status(e: impl Into<EtcdError>) -> (Code, String) {
        let s = Status::from(e.into());
        (s.code(), s.message().to_string())
    }

    #[test]
    fn alarm_refusals_map_to_etcd_codes_and_messages() {
        assert_eq!(
            status(RequestError::NoSpace),
            (
                Code::ResourceExhausted,
                "etcdserver: mvcc: database space exceeded".into()
            )
        );
        assert_eq!(
            status(RequestError::Corrupt),
            (Code::DataLoss, "etcdserver: corrupt cluster".into())
        );
    }

    #[test]
    fn store_answers_map_to_etcd_codes_and_messages() {
        assert_eq!(
            status(RequestError::Compacted {
                compact_revision: 5
            }),
            (
                Code::OutOfRange,
                "etcdserver: mvcc: required revision has been compacted".into()
            )
        );
        assert_eq!(
            status(RequestError::FutureRevision),
            (
                Code::OutOfRange,
                "etcdserver: mvcc: required revision is a future revision".into()
            )
        );
        assert_eq!(
            status(RequestError::LeaseNotFound),
            (
                Code::NotFound,
                "etcdserver: requested lease not found".into()
            )
        );
        assert_eq!(
            status(RequestError::LeaseExists),
            (
                Code::FailedPrecondition,
                "etcdserver: lease already exists".into()
            )
        );
        assert_eq!(
            status(RequestError::DuplicateKey),
            (
                Code::InvalidArgument,
                "etcdserver: duplicate key given in txn request".into()
            )
        );
        assert_eq!(
            status(RequestError::EmptyKey),
            (
                Code::InvalidArgument,
                "etcdserver: key is not provided".into()
            )
        );
        assert_eq!(
            status(RequestError::TooManyOps),
            (
                Code::InvalidArgument,
                "etcdserver: too many operations in txn request".into()
            )
        );
    }

    #[test]
    fn front_end_errors() {
        assert_eq!(
            status(EtcdError::RequestTooLarge),
            (
                Code::InvalidArgument,
                "etcdserver: request is too large".into()
            )
        );
        assert_eq!(
            status(EtcdError::NoLeader),
            (Code::Unavailable, "etcdserver: no leader".into())
        );
        assert_eq!(
            status(k3rs_raft::Error::NoLeader),
            (Code::Unavailable, "etcdserver: no leader".into())
        );
        assert_eq!(
            status(k3rs_raft::Error::Stopped),
            (Code::Unavailable, "etcdserver: server stopped".into())
        );
        assert_eq!(
            status(k3rs_raft::Error::Timeout),
            (Code::Unavailable, "etcdserver: request timed out".into())
        );
        assert_eq!(
            status(k3rs_raft::Error::StorageFailed(
                "No space left on device".into()
            )),
            (
                Code::Unavailable,
                "etcdserver: the datastore cannot write: No space left on device".into()
            )
        );
        assert_eq!(
            status(EtcdError::LeaseTtlTooLarge),
            (Code::OutOfRange, "etcdserver: too large lease TTL".into())
        );
        assert_eq!(
            status(EtcdError::EmptyOp),
            (Code::InvalidArgument, "etcdserver: key not found".into())
        );
    }
}

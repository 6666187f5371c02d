//! How a member learns that its Raft core stopped because the datastore's files failed.
//!
//! openraft stops its core for good on any storage error: a WAL append or fdatasync, saving
//! the vote, applying to the store, building or installing a snapshot (ENOSPC, EIO, a
//! poisoned store). It records why in its metrics' `running_state`; an orderly shutdown
//! records `Fatal::Stopped` there instead. A member whose core stopped answers nothing any
//! more, so the process must stop too (fail-stop, as etcd does on a WAL write error) rather
//! than keep accepting connections it can only fail.

use openraft::error::Fatal;

use crate::types::Raft;
use crate::NodeId;

/// Why the core stopped, if it stopped on a failure: `running_state` as openraft reports it,
/// and whether its metrics channel is closed (the core task is gone without saying why: it
/// panicked).
pub(crate) fn failure(running: &Result<(), Fatal<NodeId>>, closed: bool) -> Option<String> {
    match running {
        Err(Fatal::Stopped) => None,
        Err(e) => Some(e.to_string()),
        Ok(()) if closed => Some("the Raft core stopped without a cause".to_string()),
        Ok(()) => None,
    }
}

/// Resolves with the cause once the core stopped on a failure; never after an orderly
/// shutdown.
pub(crate) async fn wait(raft: &Raft) -> String {
    let mut metrics = raft.metrics();
    loop {
        let running = metrics.borrow_and_update().running_state.clone();
        if let Some(cause) = failure(&running, false) {
            return cause;
        }
        if running.is_err() || metrics.changed().await.is_err() {
            break;
        }
    }
    // Stopped in order, or the channel closed: its last value says which.
    let running = metrics.borrow().running_state.clone();
    match failure(&running, running.is_ok()) {
        Some(cause) => cause,
        None => std::future::pending().await,
    }
}

/// The cause if the core has stopped on a failure by now.
pub(crate) fn current(raft: &Raft) -> Option<String> {
    failure(&raft.metrics().borrow().running_state, false)
}

#[cfg(test)]
mod tests {
    use openraft::{AnyError, ErrorSubject, ErrorVerb, StorageError, StorageIOError};

    use super::*;

    #[test]
    fn a_storage_error_is_a_failure_and_a_shutdown_is_not() {
        let io = std::io::Error::from_raw_os_error(28);
        let e: StorageError<NodeId> =
            StorageIOError::new(ErrorSubject::Logs, ErrorVerb::Write, AnyError::new(&io)).into();
        let cause = failure(&Err(Fatal::StorageError(e)), true).unwrap();
        assert!(cause.contains("No space left on device"), "{cause}");
        assert_eq!(failure(&Err(Fatal::Stopped), true), None);
        assert_eq!(failure(&Ok(()), false), None);
        assert_eq!(
            failure(&Ok(()), true).as_deref(),
            Some("the Raft core stopped without a cause")
        );
        assert_eq!(
            failure(&Err(Fatal::Panicked), false).as_deref(),
            Some("panicked")
        );
    }
}

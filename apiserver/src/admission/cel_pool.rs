//! Running admission CEL (policies, webhook match conditions) on the process's CEL pool
//! ([`k3rs_cel::Pool`]) from async code: the request task awaits, no executor thread
//! blocks, and no thread is started per request.

use k3rs_cel::{pool::BACKSTOP, Pool, PoolError};

/// Runs `f` on the CEL pool and awaits its result, at most [`BACKSTOP`] (queueing
/// included); a full queue is [`PoolError::Busy`] at once.
pub async fn run<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, PoolError> {
    let pending = Pool::global().submit(f)?;
    let deadline = tokio::time::Instant::from_std(pending.deadline());
    tokio::time::timeout_at(deadline, pending)
        .await
        .unwrap_or(Err(PoolError::TimedOut(BACKSTOP)))
}

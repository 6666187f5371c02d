//! Background work that must not take the CPU from the write path: a whole-store snapshot
//! export reads and writes the entire store (seconds at hundreds of megabytes), and on a busy
//! machine it competed with the Raft core and the replication RPCs of the same process and of
//! its peers, long enough for heartbeats to time out and leaders to change.
//!
//! [`spawn`] runs a job on its own thread at a lowered CPU priority (`nice` [`NICE`]; on Linux
//! the priority of one thread). The thread ends with the job, so no pooled thread keeps the
//! lowered priority (raising it back needs a privilege the server may not have).

use tokio::sync::oneshot;

/// The `nice` value of background jobs (0 is normal, 19 the lowest priority).
pub const NICE: i32 = 10;

/// Runs `job` on a new thread named `name` at priority [`NICE`]; its result arrives on the
/// receiver (which closes without one if the job panicked or the thread could not start).
pub fn spawn<T, F>(name: &str, job: F) -> oneshot::Receiver<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = oneshot::channel();
    let started = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            lower_priority();
            let _ = tx.send(job());
        });
    if let Err(e) = started {
        tracing::error!(error = %e, "starting background thread {name}");
    }
    rx
}

/// Lowers the calling thread's CPU priority to [`NICE`]; a failure (a sandbox refusing the
/// call) only costs the priority, so it is logged, not returned.
fn lower_priority() {
    let me = rustix::thread::gettid();
    if let Err(e) = rustix::process::setpriority_process(Some(me), NICE) {
        tracing::debug!(error = %e, "lowering a background thread's priority");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_job_runs_at_the_lowered_priority_and_returns_its_result() {
        let rx = spawn("k3rs-test-low", || {
            let me = rustix::thread::gettid();
            (
                rustix::process::getpriority_process(Some(me)).unwrap(),
                std::thread::current().name().map(str::to_string),
            )
        });
        let (nice, name) = rx.await.unwrap();
        assert_eq!(nice, NICE);
        assert_eq!(name.as_deref(), Some("k3rs-test-low"));
    }

    #[tokio::test]
    async fn a_panicking_job_closes_the_receiver() {
        let rx = spawn("k3rs-test-panic", || -> u8 { panic!("job failed") });
        assert!(rx.await.is_err());
    }

    #[test]
    fn the_callers_priority_is_untouched() {
        let me = rustix::thread::gettid();
        let before = rustix::process::getpriority_process(Some(me)).unwrap();
        let rx = spawn("k3rs-test-caller", || ());
        rx.blocking_recv().unwrap();
        assert_eq!(
            rustix::process::getpriority_process(Some(me)).unwrap(),
            before
        );
    }
}

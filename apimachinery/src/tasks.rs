//! Supervised long-running tasks: every controller, informer and server loop of a k3rs
//! process runs under a name, through [`supervise`] (restarted) or [`spawn`] (run once).
//!
//! # Guarantees
//! - A task that panics is logged with its name and the panic message, never silently gone.
//! - A supervised task that panics or returns before its stop token is cancelled is started
//!   again after an exponential backoff (1 s doubling to 5 min, reset once a run lasted
//!   [`HEALTHY_RUN`]).
//! - Every named task's state is in one registry ([`snapshot`]) that `/readyz?verbose` and
//!   the metrics read: restarts, the last failure, and whether it is failing now (it failed
//!   and has not yet run for [`HEALTHY_RUN`] since).
//! - [`supervise`] returns at most [`STOP_GRACE`] after its stop token is cancelled: a run
//!   that does not return by then (stuck in an await that ignores the token) is aborted and
//!   logged by name. Whoever waits for it (a leader elector stepping down to compete again,
//!   the process shutting down) is never held forever by one task.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The first restart delay.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest restart delay.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// A run this long counts as healthy: the backoff and the failing state are reset.
pub const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// How long a supervised run may take to return after its stop token is cancelled before it
/// is aborted (below the 15 s lease duration, so a leader that lost its Lease competes again
/// before another server could have taken it over).
pub const STOP_GRACE: Duration = Duration::from_secs(10);

/// One named task as the registry sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskState {
    /// How many times it was started.
    pub runs: u64,
    /// How many times it was started again after failing.
    pub restarts: u64,
    /// The last failure (a panic message or "returned early").
    pub last_failure: Option<String>,
    /// It failed and has not run healthily since.
    pub failing: bool,
    /// It is running now.
    pub running: bool,
}

fn registry() -> &'static Mutex<BTreeMap<String, TaskState>> {
    static R: OnceLock<Mutex<BTreeMap<String, TaskState>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

fn update(name: &str, f: impl FnOnce(&mut TaskState)) {
    let mut r = registry().lock().unwrap_or_else(|p| p.into_inner());
    f(r.entry(name.to_string()).or_default());
}

/// Every named task of this process and its state, by name.
pub fn snapshot() -> BTreeMap<String, TaskState> {
    registry().lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Fault injection for the tests of this supervision: `K3RS_FAILPOINTS=<task>:<n>,…` makes
/// the first `n` runs of supervised task `<task>` panic at start (like etcd's gofail
/// failpoints). Unset in production: nothing happens.
pub const FAILPOINTS_ENV: &str = "K3RS_FAILPOINTS";

/// Whether run number `run` (1-based) of `name` must panic by [`FAILPOINTS_ENV`].
fn failpoint(name: &str, run: u64, spec: Option<&str>) -> bool {
    spec.unwrap_or_default().split(',').any(|entry| {
        let (task, n) = entry.rsplit_once(':').unwrap_or((entry, "1"));
        task == name && n.parse::<u64>().is_ok_and(|n| run <= n)
    })
}

/// The text of a panic payload.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Runs `fut` once as task `name`. A panic is logged with the name and recorded as the
/// task's failure; it does not take the process down.
pub fn spawn<F>(name: &str, fut: F) -> JoinHandle<()>
where
    F: Future<Output = ()> + Send + 'static,
{
    let name = name.to_string();
    update(&name, |s| {
        s.running = true;
        s.runs += 1;
    });
    tokio::spawn(async move {
        let outcome = std::panic::AssertUnwindSafe(fut).catch_unwind().await;
        update(&name, |s| {
            s.running = false;
            if let Err(p) = &outcome {
                let msg = panic_message(p.as_ref());
                tracing::error!(task = %name, panic = %msg, "task panicked");
                s.last_failure = Some(format!("panicked: {msg}"));
                s.failing = true;
            }
        });
    })
}

/// The delay before restart number `failures` (1-based) in a row.
pub fn backoff(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    FIRST_BACKOFF.saturating_mul(1 << exp).min(MAX_BACKOFF)
}

/// Runs `make(stop)` as task `name` until `stop` is cancelled, starting it again (after
/// [`backoff`]) whenever it panics or returns early. Returns once `stop` is cancelled and
/// the current run has returned.
pub async fn supervise<F, Fut>(name: &str, stop: CancellationToken, mut make: F)
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut failures = 0u32;
    loop {
        let started = Instant::now();
        let mut run = 0;
        update(name, |s| {
            s.running = true;
            s.runs += 1;
            run = s.runs;
        });
        if failures > 0 {
            // Healthy again once this run lasts long enough.
            let (name, watch) = (name.to_string(), stop.clone());
            tokio::spawn(async move {
                tokio::select! {
                    _ = watch.cancelled() => {}
                    _ = tokio::time::sleep(HEALTHY_RUN) => update(&name, |s| {
                        if s.running && s.runs == run {
                            s.failing = false;
                        }
                    }),
                }
            });
        }
        let inject = failpoint(name, run, std::env::var(FAILPOINTS_ENV).ok().as_deref());
        let fut = make(stop.clone());
        let handle = tokio::spawn(async move {
            if inject {
                panic!("failpoint {FAILPOINTS_ENV}");
            }
            fut.await
        });
        let Some(outcome) = join_or_abort(name, handle, &stop).await else {
            update(name, |s| {
                s.running = false;
                s.last_failure = Some(format!("did not stop within {STOP_GRACE:?}; aborted"));
            });
            return;
        };
        let why = match outcome {
            Ok(()) if stop.is_cancelled() => {
                update(name, |s| s.running = false);
                return;
            }
            Ok(()) => "returned early".to_string(),
            Err(e) if e.is_panic() => {
                format!("panicked: {}", panic_message(e.into_panic().as_ref()))
            }
            Err(e) => format!("was cancelled: {e}"),
        };
        if started.elapsed() >= HEALTHY_RUN {
            failures = 0;
        }
        failures += 1;
        let delay = backoff(failures);
        tracing::error!(task = %name, failure = %why, restart_in = ?delay, "task failed; restarting");
        update(name, |s| {
            s.running = false;
            s.restarts += 1;
            s.last_failure = Some(why);
            s.failing = true;
        });
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(delay) => {}
        }
    }
}

/// Waits for `handle`; once `stop` is cancelled, for at most [`STOP_GRACE`] more, then
/// aborts it (`None`).
async fn join_or_abort(
    name: &str,
    mut handle: JoinHandle<()>,
    stop: &CancellationToken,
) -> Option<Result<(), tokio::task::JoinError>> {
    tokio::select! {
        outcome = &mut handle => return Some(outcome),
        _ = stop.cancelled() => {}
    }
    match tokio::time::timeout(STOP_GRACE, &mut handle).await {
        Ok(outcome) => Some(outcome),
        Err(_) => {
            tracing::error!(task = %name, grace = ?STOP_GRACE, "task did not stop in time; aborted");
            handle.abort();
            let _ = handle.await;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(9), Duration::from_secs(256));
        assert_eq!(backoff(10), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }

    #[tokio::test(start_paused = true)]
    async fn a_panicking_task_is_restarted_with_backoff_and_recorded() {
        let runs = Arc::new(AtomicU32::new(0));
        let stop = CancellationToken::new();
        let counted = runs.clone();
        let supervisor = tokio::spawn(supervise("test-panics", stop.clone(), move |stop| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < 3 {
                    panic!("boom {n}");
                }
                stop.cancelled().await;
            }
        }));
        // Runs at t=0, 1 s, 1+2 s, 1+2+4 s: the fourth stays up.
        tokio::time::sleep(Duration::from_secs(8)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 4);
        let state = snapshot()["test-panics"].clone();
        assert_eq!(state.restarts, 3);
        assert_eq!(state.last_failure.as_deref(), Some("panicked: boom 2"));
        assert!(state.failing && state.running);
        tokio::time::sleep(HEALTHY_RUN + Duration::from_secs(1)).await;
        assert!(!snapshot()["test-panics"].failing);
        stop.cancel();
        supervisor.await.unwrap();
        assert!(!snapshot()["test-panics"].running);
    }

    #[tokio::test(start_paused = true)]
    async fn returning_early_counts_as_a_failure_but_stopping_does_not() {
        let stop = CancellationToken::new();
        let runs = Arc::new(AtomicU32::new(0));
        let counted = runs.clone();
        let supervisor = tokio::spawn(supervise("test-returns", stop.clone(), move |_| {
            counted.fetch_add(1, Ordering::SeqCst);
            async {}
        }));
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        assert_eq!(
            snapshot()["test-returns"].last_failure.as_deref(),
            Some("returned early")
        );
        stop.cancel();
        supervisor.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_that_ignores_its_stop_is_aborted_after_the_grace_period() {
        let stop = CancellationToken::new();
        let dropped = Arc::new(AtomicU32::new(0));
        let guard = dropped.clone();
        let supervisor = tokio::spawn(supervise("test-stuck", stop.clone(), move |_| {
            let guard = DropCounter(guard.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await
            }
        }));
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.cancel();
        let started = tokio::time::Instant::now();
        supervisor.await.unwrap();
        assert_eq!(started.elapsed(), STOP_GRACE);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "the stuck run was dropped"
        );
        let state = snapshot()["test-stuck"].clone();
        assert!(!state.running);
        assert_eq!(
            state.last_failure.as_deref(),
            Some("did not stop within 10s; aborted")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_that_stops_in_time_is_not_aborted() {
        let stop = CancellationToken::new();
        let supervisor = tokio::spawn(supervise(
            "test-slow-stop",
            stop.clone(),
            |stop| async move {
                stop.cancelled().await;
                tokio::time::sleep(STOP_GRACE / 2).await;
            },
        ));
        tokio::time::sleep(Duration::from_secs(1)).await;
        stop.cancel();
        supervisor.await.unwrap();
        assert_eq!(snapshot()["test-slow-stop"].last_failure, None);
    }

    /// Counts its drops.
    struct DropCounter(Arc<AtomicU32>);

    impl Drop for DropCounter {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn failpoints_name_a_task_and_its_first_runs() {
        let spec = Some("controller/a:2,scheduler");
        assert!(failpoint("controller/a", 1, spec));
        assert!(failpoint("controller/a", 2, spec));
        assert!(!failpoint("controller/a", 3, spec));
        assert!(failpoint("scheduler", 1, spec));
        assert!(!failpoint("scheduler", 2, spec));
        assert!(!failpoint("controller/b", 1, spec));
        assert!(!failpoint("controller/a", 1, None));
        assert!(!failpoint("x", 1, Some("x:bogus")));
    }

    #[tokio::test]
    async fn a_spawned_panic_is_recorded_not_propagated() {
        spawn("test-once", async { panic!("once") }).await.unwrap();
        let state = snapshot()["test-once"].clone();
        assert_eq!(state.last_failure.as_deref(), Some("panicked: once"));
        assert!(!state.running);
    }
}

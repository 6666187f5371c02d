//! The bounded pool CEL evaluations run on: a fixed set of worker threads fed by a queue
//! of bounded length, shared by the whole process.
//!
//! # Guarantees
//! - At most [`Pool::workers`] threads ever evaluate CEL, started once; a full queue
//!   refuses work ([`PoolError::Busy`]) rather than starting a thread.
//! - Waiting is bounded by a wall-clock backstop ([`BACKSTOP`]); a job that outlives it
//!   keeps its worker until it finishes (cost limits keep every job short, see
//!   [`crate::cost`]), and its result is dropped.
//! - [`Pool::submit`] returns a [`Pending`] that can be waited on from a thread
//!   ([`Pending::wait`]) or awaited from async code without blocking an executor thread.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// How long a caller waits for one job, queueing included.
pub const BACKSTOP: Duration = Duration::from_secs(5);

/// How many jobs may wait per worker.
const QUEUE_PER_WORKER: usize = 32;

/// Why a job produced no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// The queue is full.
    #[error("too many CEL evaluations are waiting; try again later")]
    Busy,
    /// The evaluation ran past the deadline (given).
    #[error("CEL evaluation did not finish within {0:?}")]
    TimedOut(Duration),
    /// The evaluation panicked.
    #[error("CEL evaluation failed unexpectedly")]
    Panicked,
}

type Job = Box<dyn FnOnce() + Send>;

struct Queue {
    jobs: Mutex<VecDeque<Job>>,
    ready: Condvar,
    capacity: usize,
}

/// A fixed set of worker threads and their queue.
pub struct Pool {
    queue: Arc<Queue>,
    workers: usize,
}

impl Pool {
    /// A pool of `workers` threads (at least one) named `<name>-<i>`, and a queue of
    /// `capacity` jobs.
    pub fn new(name: &str, workers: usize, capacity: usize) -> std::io::Result<Pool> {
        let workers = workers.max(1);
        let queue = Arc::new(Queue {
            jobs: Mutex::new(VecDeque::with_capacity(capacity)),
            ready: Condvar::new(),
            capacity,
        });
        for i in 0..workers {
            let q = queue.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || work(&q))?;
        }
        Ok(Pool { queue, workers })
    }

    /// The process's pool: `max(2, cores)` workers.
    pub fn global() -> &'static Pool {
        static POOL: OnceLock<Pool> = OnceLock::new();
        POOL.get_or_init(|| {
            let n = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
            Pool::new("cel", n, n * QUEUE_PER_WORKER).expect("starting the CEL evaluation threads")
        })
    }

    /// How many threads evaluate.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Queues `f`; [`PoolError::Busy`] when the queue is full.
    pub fn submit<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Pending<T>, PoolError> {
        let slot = Arc::new(Slot::default());
        let out = slot.clone();
        let job: Job = Box::new(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .map_err(|_| PoolError::Panicked);
            out.fill(r);
        });
        let mut jobs = self.queue.jobs.lock().unwrap_or_else(|e| e.into_inner());
        if jobs.len() >= self.queue.capacity {
            return Err(PoolError::Busy);
        }
        jobs.push_back(job);
        drop(jobs);
        self.queue.ready.notify_one();
        Ok(Pending {
            slot,
            deadline: Instant::now() + BACKSTOP,
        })
    }

    /// Runs `f` on the pool and waits for it (at most [`BACKSTOP`]).
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, PoolError> {
        self.submit(f)?.wait()
    }
}

fn work(q: &Queue) {
    loop {
        let job = {
            let mut jobs = q.jobs.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if let Some(j) = jobs.pop_front() {
                    break j;
                }
                jobs = q.ready.wait(jobs).unwrap_or_else(|e| e.into_inner());
            }
        };
        job();
    }
}

/// A job's result once it is there, and the task to wake then.
struct SlotState<T> {
    result: Option<Result<T, PoolError>>,
    waker: Option<Waker>,
}

struct Slot<T> {
    state: Mutex<SlotState<T>>,
    done: Condvar,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            state: Mutex::new(SlotState {
                result: None,
                waker: None,
            }),
            done: Condvar::new(),
        }
    }
}

impl<T> Slot<T> {
    fn fill(&self, r: Result<T, PoolError>) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.result = Some(r);
        if let Some(w) = s.waker.take() {
            w.wake();
        }
        drop(s);
        self.done.notify_all();
    }
}

/// A queued job's result, to wait for or await.
pub struct Pending<T> {
    slot: Arc<Slot<T>>,
    deadline: Instant,
}

impl<T> Pending<T> {
    /// Blocks the calling thread until the result comes or the backstop passes.
    pub fn wait(self) -> Result<T, PoolError> {
        let mut s = self.slot.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(r) = s.result.take() {
                return r;
            }
            let now = Instant::now();
            if now >= self.deadline {
                return Err(PoolError::TimedOut(BACKSTOP));
            }
            s = self
                .slot
                .done
                .wait_timeout(s, self.deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// When waiting gives up (for callers that bound an await with their own timer).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// Resolves when the job finished; the caller bounds the wait (e.g. with a timer until
/// [`Pending::deadline`]).
impl<T> Future for Pending<T> {
    type Output = Result<T, PoolError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut s = self.slot.state.lock().unwrap_or_else(|e| e.into_inner());
        match s.result.take() {
            Some(r) => Poll::Ready(r),
            None => {
                s.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads of this process whose name starts with `prefix`.
    fn threads(prefix: &str) -> usize {
        std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("comm")).ok())
            .filter(|c| c.starts_with(prefix))
            .count()
    }

    #[test]
    fn results_come_back_and_panics_are_errors() {
        let pool = Pool::new("cel-t1", 2, 8).unwrap();
        assert_eq!(pool.run(|| 7), Ok(7));
        assert_eq!(
            pool.run(|| -> i32 { panic!("boom") }),
            Err(PoolError::Panicked)
        );
        assert_eq!(pool.run(|| 8), Ok(8), "a panic does not take a worker down");
    }

    #[test]
    fn many_slow_jobs_never_add_threads_and_overflow_is_refused() {
        let pool = Pool::new("cel-t2", 2, 4).unwrap();
        // Threads name themselves as they start.
        for _ in 0..100 {
            if threads("cel-t2-") == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(threads("cel-t2-"), 2);
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let gate = Arc::new(Mutex::new(gate));
        let mut pending = Vec::new();
        let mut busy = 0;
        for _ in 0..50 {
            let g = gate.clone();
            match pool.submit(move || {
                let _ = g.lock().unwrap().recv_timeout(Duration::from_secs(10));
            }) {
                Ok(p) => pending.push(p),
                Err(e) => {
                    assert_eq!(e, PoolError::Busy);
                    busy += 1;
                }
            }
        }
        // Two running, four queued: the rest were refused, and no thread was started.
        assert!(pending.len() <= 6, "{}", pending.len());
        assert_eq!(busy, 50 - pending.len());
        assert_eq!(threads("cel-t2-"), 2, "no thread was started for the jobs");
        for _ in 0..pending.len() {
            release.send(()).unwrap();
        }
        for p in pending {
            assert_eq!(p.wait(), Ok(()));
        }
        assert_eq!(pool.run(|| 1), Ok(1));
    }

    #[test]
    fn a_pending_result_can_be_awaited() {
        let pool = Pool::new("cel-t3", 1, 2).unwrap();
        let p = pool.submit(|| 41 + 1).unwrap();
        let got = block_on(p);
        assert_eq!(got, Ok(42));
    }

    /// A minimal executor for one future (the crate has no async runtime).
    fn block_on<F: Future>(f: F) -> F::Output {
        struct Thread(std::thread::Thread);
        impl std::task::Wake for Thread {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let waker = Waker::from(Arc::new(Thread(std::thread::current())));
        let mut cx = Context::from_waker(&waker);
        let mut f = std::pin::pin!(f);
        loop {
            if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
                return v;
            }
            std::thread::park_timeout(Duration::from_millis(100));
        }
    }
}

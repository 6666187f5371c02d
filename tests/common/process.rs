//! A child process that we started and that dies with its guard.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Owns one child process. Dropping it SIGKILLs the child (by its PID) and reaps it.
#[derive(Debug)]
pub struct ChildGuard {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

impl ChildGuard {
    /// Spawns `cmd` with stdout and stderr appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> ChildGuard {
        let out = open_append(log);
        let err = out.try_clone().expect("dup log fd");
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {name}: {e}"));
        ChildGuard {
            name: name.to_string(),
            child: Some(child),
            log: log.to_path_buf(),
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// `Some(status)` if the child has exited (it is reaped then), `None` if it still runs.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        child.try_wait().expect("try_wait")
    }

    /// Panics with the log tail if the child is no longer running.
    pub fn assert_running(&mut self) {
        if let Some(status) = self.exited() {
            panic!(
                "{} exited unexpectedly ({status}); last log lines:\n{}",
                self.name,
                super::log_tail(&self.log, 40)
            );
        }
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (e.g. "TERM", "INT") to the child by its PID.
    pub fn signal(&self, signal: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(pid.to_string())
                .stderr(Stdio::null())
                .status();
        }
    }

    /// Waits up to `grace` for the child to exit by itself, then SIGKILLs it. Returns the exit
    /// status if it exited by itself.
    pub fn wait_exit(&mut self, grace: Duration) -> Option<ExitStatus> {
        let mut child = self.child.take()?;
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        None
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status if it exited by itself.
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.signal("TERM");
        self.wait_exit(grace)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

fn open_append(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("opening log {}: {e}", path.display()))
}

/// Runs `cmd` to completion with `stdin` fed in, killing it after `timeout`.
/// Returns (exit code or None if killed, stdout, stderr).
pub fn run_with_timeout(
    cmd: Command,
    stdin: Option<&[u8]>,
    timeout: Duration,
) -> (Option<i32>, String, String) {
    let mut bg = Background::spawn_with_stdin(cmd, stdin);
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline && bg.running() {
        std::thread::sleep(Duration::from_millis(5));
    }
    bg.stop()
}

/// A process that runs in the background with its output captured (e.g. `etcdctl watch`).
#[derive(Debug)]
pub struct Background {
    child: Option<Child>,
    out: Option<std::thread::JoinHandle<Vec<u8>>>,
    err: Option<std::thread::JoinHandle<Vec<u8>>>,
}

fn read_all(mut pipe: impl std::io::Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        buf
    })
}

impl Background {
    pub fn spawn(cmd: Command) -> Background {
        Background::spawn_with_stdin(cmd, None)
    }

    /// Spawns `cmd`, writes `stdin` to it (then closes it), and collects its output.
    pub fn spawn_with_stdin(mut cmd: Command, stdin: Option<&[u8]>) -> Background {
        use std::io::Write;
        cmd.stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().expect("stdin pipe");
            let input = input.to_vec();
            std::thread::spawn(move || {
                let _ = pipe.write_all(&input);
            });
        }
        let out = read_all(child.stdout.take().expect("stdout pipe"));
        let err = read_all(child.stderr.take().expect("stderr pipe"));
        Background {
            child: Some(child),
            out: Some(out),
            err: Some(err),
        }
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }

    /// Kills the process (if still running) and returns (exit code if it exited by itself,
    /// stdout, stderr).
    pub fn stop(mut self) -> (Option<i32>, String, String) {
        let mut child = self.child.take().expect("child");
        let code = match child.try_wait().expect("try_wait") {
            Some(status) => status.code(),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                None
            }
        };
        let out = self.out.take().expect("out").join().unwrap_or_default();
        let err = self.err.take().expect("err").join().unwrap_or_default();
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        (code, text(out), text(err))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

//! Runs the system `containerd` with the agent's generated config and keeps it running.
//!
//! Guarantees:
//! - [`Supervisor::start`] returns once containerd accepts connections on its socket, or fails
//!   (and leaves no process behind) if it exits or is not ready within the timeout.
//! - A containerd that dies is restarted after a [`Backoff`] delay, until [`Supervisor::stop`].
//! - [`Supervisor::stop`] sends SIGTERM to the process it started, waits up to the grace
//!   period, then SIGKILLs it; it signals no other process. Containers keep running across a
//!   containerd stop (their shims outlive it), as with any containerd.
//! - containerd gets its own process group, so a Ctrl-C meant for the agent reaches it only
//!   through the agent's shutdown.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::backoff::Backoff;
use super::Config;

/// Why containerd could not be started.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("containerd exited during startup ({status}); see {log}")]
    ExitedEarly { status: String, log: PathBuf },
    #[error("containerd did not listen on {address} within {timeout:?}; see {log}")]
    NotReady {
        address: PathBuf,
        timeout: Duration,
        log: PathBuf,
    },
}

/// How to run containerd.
#[derive(Debug, Clone)]
pub struct SupervisorOptions {
    /// The containerd binary (looked up on `PATH` when relative).
    pub containerd: PathBuf,
    /// Words put before the containerd command, e.g. `ip netns exec <ns>` (the prefix must exec
    /// containerd in place, so the PID the supervisor signals is containerd's).
    pub prefix: Vec<OsString>,
    /// How long [`Supervisor::start`] waits for the socket.
    pub ready_timeout: Duration,
    /// How long [`Supervisor::stop`] waits after SIGTERM before SIGKILL.
    pub stop_grace: Duration,
}

impl Default for SupervisorOptions {
    fn default() -> Self {
        SupervisorOptions {
            containerd: PathBuf::from("containerd"),
            prefix: Vec::new(),
            ready_timeout: Duration::from_secs(60),
            stop_grace: Duration::from_secs(10),
        }
    }
}

/// A running, supervised containerd.
#[derive(Debug)]
pub struct Supervisor {
    address: PathBuf,
    pid: Arc<Mutex<Option<u32>>>,
    cancel: CancellationToken,
    task: JoinHandle<()>,
}

/// The command line for one containerd run, and where its output goes.
#[derive(Debug, Clone)]
struct Launch {
    options: SupervisorOptions,
    config_file: PathBuf,
    log_file: PathBuf,
}

impl Launch {
    fn spawn(&self) -> Result<Child, Error> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_file)
            .map_err(|source| Error::Write {
                path: self.log_file.clone(),
                source,
            })?;
        let err_log = log.try_clone().map_err(|source| Error::Write {
            path: self.log_file.clone(),
            source,
        })?;
        let (program, args) = match self.options.prefix.split_first() {
            Some((first, rest)) => {
                let mut args = rest.to_vec();
                args.push(self.options.containerd.clone().into_os_string());
                (PathBuf::from(first), args)
            }
            None => (self.options.containerd.clone(), Vec::new()),
        };
        let mut cmd = Command::new(&program);
        cmd.args(args)
            .arg("--config")
            .arg(&self.config_file)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err_log)
            .process_group(0)
            .kill_on_drop(true);
        cmd.spawn().map_err(|source| Error::Spawn {
            program: program.display().to_string(),
            source,
        })
    }
}

impl Supervisor {
    /// Writes `config` to its config file, starts containerd and waits until its socket
    /// accepts connections. The supervisor keeps it running until [`Supervisor::stop`].
    pub async fn start(config: &Config, options: SupervisorOptions) -> Result<Supervisor, Error> {
        let layout = &config.layout;
        // 0600: the config holds registry credentials.
        k3rs_apimachinery::fs::write_atomic(&layout.config_file, config.render().as_bytes(), 0o600)
            .map_err(|(path, source)| Error::Write { path, source })?;
        super::registries::hosts::write_hosts_dir(&layout.registry_dir, &config.hosts_files())
            .map_err(|e| Error::Write {
                path: e.path,
                source: e.source,
            })?;
        for dir in [&layout.root, &layout.state, &layout.cni_conf_dir] {
            create_dir(dir)?;
        }
        if let Some(parent) = layout.log_file.parent() {
            create_dir(parent)?;
        }
        let launch = Launch {
            options: options.clone(),
            config_file: layout.config_file.clone(),
            log_file: layout.log_file.clone(),
        };
        let mut child = launch.spawn()?;
        if let Err(e) = wait_ready(&mut child, &layout.address, &launch).await {
            terminate(&mut child, options.stop_grace).await;
            return Err(e);
        }
        let pid = Arc::new(Mutex::new(child.id()));
        tracing::info!(pid = ?child.id(), address = %layout.address.display(), "containerd ready");
        let cancel = CancellationToken::new();
        let task = tokio::spawn(supervise(child, launch, pid.clone(), cancel.clone()));
        Ok(Supervisor {
            address: layout.address.clone(),
            pid,
            cancel,
            task,
        })
    }

    /// containerd's gRPC socket.
    pub fn address(&self) -> &Path {
        &self.address
    }

    /// The PID of the containerd now running (`None` between a crash and its restart).
    pub fn pid(&self) -> Option<u32> {
        *self.pid.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Stops containerd (SIGTERM, then SIGKILL after the grace period) and the supervision.
    pub async fn stop(mut self) {
        self.cancel.cancel();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Supervisor {
    /// A supervisor dropped without [`Supervisor::stop`] still stops containerd, in the
    /// background (if the runtime lives on; otherwise `kill_on_drop` SIGKILLs it).
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

fn create_dir(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Write {
        path: dir.to_path_buf(),
        source,
    })
}

/// Polls the socket until it accepts a connection; fails if the process exits first.
async fn wait_ready(child: &mut Child, address: &Path, launch: &Launch) -> Result<(), Error> {
    let deadline = Instant::now() + launch.options.ready_timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error::ExitedEarly {
                status: status.to_string(),
                log: launch.log_file.clone(),
            });
        }
        if tokio::net::UnixStream::connect(address).await.is_ok() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::NotReady {
                address: address.to_path_buf(),
                timeout: launch.options.ready_timeout,
                log: launch.log_file.clone(),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// SIGTERM, then SIGKILL after `grace`; reaps the process.
async fn terminate(child: &mut Child, grace: Duration) {
    if let Some(pid) = child
        .id()
        .and_then(|p| rustix::process::Pid::from_raw(p as i32))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
        tracing::warn!(
            pid = pid.as_raw_nonzero().get(),
            "containerd ignored SIGTERM; killing it"
        );
    }
    let _ = child.kill().await;
}

/// Restarts containerd whenever it exits, until `cancel`; then stops it.
async fn supervise(
    child: Child,
    launch: Launch,
    pid: Arc<Mutex<Option<u32>>>,
    cancel: CancellationToken,
) {
    let set_pid = |v: Option<u32>| *pid.lock().unwrap_or_else(|e| e.into_inner()) = v;
    let mut backoff = Backoff::default();
    let mut running = Some((child, Instant::now()));
    loop {
        let ran_for = match running.as_mut() {
            Some((child, started)) => {
                tokio::select! {
                    status = child.wait() => {
                        tracing::warn!(?status, log = %launch.log_file.display(), "containerd exited");
                        started.elapsed()
                    }
                    () = cancel.cancelled() => {
                        terminate(child, launch.options.stop_grace).await;
                        set_pid(None);
                        return;
                    }
                }
            }
            None => Duration::ZERO,
        };
        running = None;
        set_pid(None);
        let delay = backoff.after_exit(ran_for);
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = cancel.cancelled() => return,
        }
        match launch.spawn() {
            Ok(child) => {
                tracing::info!(pid = ?child.id(), "containerd restarted");
                set_pid(child.id());
                running = Some((child, Instant::now()));
            }
            Err(e) => tracing::error!(error = %e, "restarting containerd"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_containerd_that_exits_at_once_fails_start_with_its_log() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::new(&dir.path().join("agent"), "docker.io/k3rs/pause:3.6");
        // `true` ignores its arguments and exits 0 without ever listening.
        let options = SupervisorOptions {
            containerd: PathBuf::from("true"),
            ..SupervisorOptions::default()
        };
        let err = Supervisor::start(&config, options).await.unwrap_err();
        match err {
            Error::ExitedEarly { log, .. } => assert_eq!(log, config.layout.log_file),
            other => panic!("expected ExitedEarly, got {other:?}"),
        }
        // The config was written before the start.
        let written = std::fs::read_to_string(&config.layout.config_file).unwrap();
        assert_eq!(written, config.render());
    }

    #[tokio::test]
    async fn the_prefix_runs_before_containerd() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::new(&dir.path().join("agent"), "docker.io/k3rs/pause:3.6");
        // `sh -c 'echo "$@" >&2' k3rs-prefix containerd --config FILE`: logs the command line.
        let options = SupervisorOptions {
            containerd: PathBuf::from("containerd"),
            prefix: vec![
                "sh".into(),
                "-c".into(),
                "echo \"$@\" >&2".into(),
                "prefix".into(),
            ],
            ..SupervisorOptions::default()
        };
        let err = Supervisor::start(&config, options).await.unwrap_err();
        assert!(matches!(err, Error::ExitedEarly { .. }), "{err:?}");
        let log = std::fs::read_to_string(&config.layout.log_file).unwrap();
        assert_eq!(
            log,
            format!(
                "containerd --config {}\n",
                config.layout.config_file.display()
            )
        );
    }
}

//! The audit log backend (`--audit-log-path`): one JSON line per event, appended by a writer
//! thread to the file (rotated per [`super::rotation`]) or to stdout for `-`.
//!
//! # Guarantees
//! - Lines are written whole and in the order they were sent.
//! - The file is created with mode 0600 (kube-apiserver's), its directory if missing.
//! - A failing write is logged and the line dropped; requests never fail because of it.
//! - Memory is bounded: at most [`BUFFER`] lines wait for the writer (upstream's batch buffer
//!   size); beyond that lines are dropped and counted, as upstream's buffered backend drops
//!   events when its queue is blocked.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};

use super::rotation::{self, Limits};

/// Opening the log failed.
#[derive(Debug, thiserror::Error)]
#[error("opening the audit log {path}: {source}")]
pub struct OpenError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// How many lines may wait for the writer.
pub const BUFFER: usize = 10_000;

/// Where events go; cheap to clone.
#[derive(Debug, Clone)]
pub struct LogBackend {
    tx: mpsc::SyncSender<String>,
    dropped: Arc<AtomicU64>,
}

impl LogBackend {
    /// A backend whose lines go to the returned receiver (at most `capacity` waiting).
    fn queue(capacity: usize) -> (LogBackend, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::sync_channel::<String>(capacity);
        let backend = LogBackend {
            tx,
            dropped: Arc::default(),
        };
        (backend, rx)
    }

    /// Lines dropped because the writer was [`BUFFER`] lines behind.
    #[cfg(test)]
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Opens `path` (`-`: stdout) and starts its writer thread.
    pub fn open(path: &str, limits: Limits) -> Result<LogBackend, OpenError> {
        let (backend, rx) = LogBackend::queue(BUFFER);
        if path == "-" {
            std::thread::spawn(move || {
                let stdout = std::io::stdout();
                for line in rx {
                    let mut out = stdout.lock();
                    let _ = out.write_all(line.as_bytes());
                    let _ = out.write_all(b"\n");
                    let _ = out.flush();
                }
            });
            return Ok(backend);
        }
        let path = PathBuf::from(path);
        let file = open_file(&path).map_err(|source| OpenError {
            path: path.clone(),
            source,
        })?;
        let mut w = FileWriter {
            size: file.metadata().map(|m| m.len()).unwrap_or(0),
            file,
            path,
            limits,
        };
        std::thread::spawn(move || {
            for line in rx {
                if let Err(e) = w.write_line(&line) {
                    tracing::warn!(path = %w.path.display(), error = %e, "writing the audit log");
                }
            }
        });
        Ok(backend)
    }

    /// Queues one line (without its newline); drops it when the writer is too far behind.
    pub fn write(&self, line: String) {
        if let Err(mpsc::TrySendError::Full(_)) = self.tx.try_send(line) {
            let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_power_of_two() {
                tracing::warn!(dropped = n, "audit log writer is behind: events dropped");
            }
        }
    }
}

fn open_file(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

struct FileWriter {
    file: File,
    path: PathBuf,
    size: u64,
    limits: Limits,
}

impl FileWriter {
    fn write_line(&mut self, line: &str) -> std::io::Result<()> {
        let len = line.len() as u64 + 1;
        if self.limits.rotates(self.size, len) {
            self.rotate()?;
        }
        let mut buf = Vec::with_capacity(len as usize);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        self.file.write_all(&buf)?;
        self.size += len;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        let now = unix_millis();
        std::fs::rename(&self.path, rotation::backup_name(&self.path, now))?;
        self.file = open_file(&self.path)?;
        self.size = 0;
        let dir = match self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(d) => d.to_path_buf(),
            None => PathBuf::from("."),
        };
        let backups = std::fs::read_dir(&dir)?
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                rotation::backup_time(&self.path, &name).map(|t| (name, t))
            })
            .collect();
        for name in rotation::expired(backups, now, self.limits) {
            if let Err(e) = std::fs::remove_file(dir.join(&name)) {
                tracing::warn!(%name, error = %e, "removing an old audit log");
            }
        }
        Ok(())
    }
}

fn unix_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_drops_and_counts() {
        let (b, rx) = LogBackend::queue(2);
        for i in 0..5 {
            b.write(format!("line {i}"));
        }
        assert_eq!(b.dropped(), 3);
        assert_eq!(rx.try_iter().collect::<Vec<_>>(), ["line 0", "line 1"]);
        b.write("line 5".into());
        assert_eq!(
            rx.try_recv().as_deref(),
            Ok("line 5"),
            "room again once drained"
        );
        assert_eq!(b.dropped(), 3);
    }

    #[test]
    fn rotates_and_keeps_max_backup_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("logs/audit.log");
        let mut w = FileWriter {
            file: open_file(&path).unwrap(),
            path: path.clone(),
            size: 0,
            limits: Limits {
                max_size_mb: 1,
                max_backup: 1,
                max_age_days: 0,
            },
        };
        let big = "x".repeat(700 * 1024);
        for _ in 0..3 {
            w.write_line(&big).unwrap();
            // Backups are named by the millisecond.
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let mut names: Vec<String> = std::fs::read_dir(dir.path().join("logs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(names[1], "audit.log");
        assert!(names[0].starts_with("audit-") && names[0].ends_with(".log"));
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            big.len() as u64 + 1
        );
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}

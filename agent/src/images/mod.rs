//! Air-gap images: every `<data-dir>/agent/images/*.tar` is imported into containerd's `k8s.io`
//! namespace (where the CRI plugin looks) when the agent starts, with the `ctr` that ships with
//! containerd.
//!
//! Guarantees:
//! - A tarball is imported again only if it changed (size or mtime) since its last import, or
//!   if an image it brought is no longer in containerd (e.g. containerd's root was wiped).
//! - What was imported is recorded in `<images dir>/.k3rs-imported.json`; the record is
//!   rewritten after every successful import, so a crash loses at most one tarball's entry.
//! - Only this machine's platform is imported and unpacked (no `--all-platforms`): a
//!   multi-arch bundle needs just the node's blobs, and the CRI plugin runs only those. Layers
//!   are unpacked into the CRI plugin's snapshotter, so the first pod start does not unpack.
//! - A tarball `ctr` cannot import fails the whole step with `ctr`'s message (a broken air-gap
//!   bundle should stop the agent, not leave it half-provisioned).

pub mod plan;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use tokio::process::Command;

pub use plan::{plan_imports, Record, RecordEntry, Tarball};

/// containerd's namespace for Kubernetes (the CRI plugin's).
pub const NAMESPACE: &str = "k8s.io";

/// The record's file name, inside the images directory.
pub const RECORD_FILE: &str = ".k3rs-imported.json";

/// Why the images could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("writing {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("running {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("ctr {args} failed ({status}): {stderr}")]
    Ctr {
        args: String,
        status: String,
        stderr: String,
    },
}

/// How to reach containerd with `ctr`.
#[derive(Debug, Clone)]
pub struct Ctr {
    /// The `ctr` binary (looked up on `PATH` when relative).
    pub program: PathBuf,
    /// containerd's socket.
    pub address: PathBuf,
    /// The snapshotter to unpack into: the CRI plugin's.
    pub snapshotter: String,
}

impl Ctr {
    pub fn new(address: &Path, snapshotter: &str) -> Ctr {
        Ctr {
            program: PathBuf::from("ctr"),
            address: address.to_path_buf(),
            snapshotter: snapshotter.to_string(),
        }
    }

    async fn run(&self, args: &[OsString]) -> Result<String, Error> {
        let mut all: Vec<OsString> = vec![
            "--address".into(),
            self.address.clone().into(),
            "--namespace".into(),
            NAMESPACE.into(),
        ];
        all.extend_from_slice(args);
        let out = Command::new(&self.program)
            .args(&all)
            .output()
            .await
            .map_err(|source| Error::Spawn {
                program: self.program.display().to_string(),
                source,
            })?;
        if !out.status.success() {
            return Err(Error::Ctr {
                args: all
                    .iter()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" "),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The names of the images in the namespace.
    pub async fn list(&self) -> Result<BTreeSet<String>, Error> {
        let out = self
            .run(&["images".into(), "ls".into(), "-q".into()])
            .await?;
        Ok(out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    /// Imports one tarball (for this machine's platform); returns the image names it created.
    pub async fn import(&self, tarball: &Path) -> Result<Vec<String>, Error> {
        let out = self
            .run(&[
                "images".into(),
                "import".into(),
                "--snapshotter".into(),
                self.snapshotter.clone().into(),
                tarball.as_os_str().to_owned(),
            ])
            .await?;
        Ok(plan::imported_names(&out))
    }
}

/// What [`import_dir`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Tarballs imported now, with the images each brought.
    pub imported: Vec<(PathBuf, Vec<String>)>,
    /// Tarballs left alone: unchanged since their import, images still present.
    pub skipped: Vec<PathBuf>,
}

/// Imports the `*.tar` files of `dir` (a missing `dir` has none).
pub async fn import_dir(ctr: &Ctr, dir: &Path) -> Result<Report, Error> {
    let tarballs = scan(dir)?;
    if tarballs.is_empty() {
        return Ok(Report::default());
    }
    let record_path = dir.join(RECORD_FILE);
    let mut record = Record::load(&record_path);
    let present = ctr.list().await?;
    let todo = plan_imports(&tarballs, &record, &present);
    let mut report = Report::default();
    for t in &tarballs {
        if !todo.contains(&t.name) {
            report.skipped.push(dir.join(&t.name));
            continue;
        }
        let path = dir.join(&t.name);
        let images = ctr.import(&path).await?;
        tracing::info!(tarball = %path.display(), ?images, "imported images");
        record.insert(t, images.clone());
        record.save(&record_path).map_err(|source| Error::Write {
            path: record_path.clone(),
            source,
        })?;
        report.imported.push((path, images));
    }
    Ok(report)
}

/// The `*.tar` regular files of `dir`, sorted by name.
fn scan(dir: &Path) -> Result<Vec<Tarball>, Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Read {
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| Error::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".tar") || name.starts_with('.') {
            continue;
        }
        let path = entry.path();
        // Follows symlinks: a linked tarball counts.
        let meta = std::fs::metadata(&path).map_err(|source| Error::Read { path, source })?;
        if !meta.is_file() {
            continue;
        }
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        out.push(Tarball {
            name,
            size: meta.len(),
            mtime_ns,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_lists_only_tarballs_sorted() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["b.tar", "a.tar", "notes.txt", ".hidden.tar", RECORD_FILE] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        std::fs::create_dir(dir.path().join("d.tar")).unwrap();
        let names: Vec<_> = scan(dir.path())
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert_eq!(names, ["a.tar", "b.tar"]);
        assert!(scan(&dir.path().join("missing")).unwrap().is_empty());
    }
}

//! Images the agent provides without a registry, imported into containerd's `k8s.io`
//! namespace (where the CRI plugin looks) when the agent starts, with the `ctr` that ships with
//! containerd: the pause image embedded in the binary ([`pause`]) and the air-gap tarballs,
//! every `<data-dir>/agent/images/*.tar`.
//!
//! Guarantees:
//! - The embedded pause image is imported only when it is the sandbox image and containerd
//!   lacks it.
//! - A tarball is imported again only if it changed (size or mtime) since its last import, or
//!   if an image it brought is no longer in containerd (e.g. containerd's root was wiped).
//! - Tarballs are imported in parallel (at most [`PARALLEL_IMPORTS`] at once).
//! - What was imported is recorded in `<images dir>/.k3rs-imported.json`; the record is
//!   rewritten after every successful import, so a crash loses at most the imports in flight.
//! - Only this machine's platform is imported and unpacked (no `--all-platforms`): a
//!   multi-arch bundle needs just the node's blobs, and the CRI plugin runs only those. Layers
//!   are unpacked into the CRI plugin's snapshotter, so the first pod start does not unpack.
//! - A tarball `ctr` cannot import (corrupt, truncated, not an image) is skipped with a warning
//!   that names it and `ctr`'s message, and listed in [`Report::failed`]; it is not recorded,
//!   so a fixed file is imported at the next start. The agent starts anyway (a bad bundle is
//!   not a crash loop); only a `ctr` that cannot list images fails the step.

pub mod background;
pub mod pause;
pub(crate) mod plan;

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

pub(crate) use plan::{plan_imports, Record, Tarball};

/// containerd's namespace for Kubernetes (the CRI plugin's).
pub const NAMESPACE: &str = "k8s.io";

/// The record's file name, inside the images directory.
pub const RECORD_FILE: &str = ".k3rs-imported.json";

/// How many tarballs are imported at once.
pub const PARALLEL_IMPORTS: usize = 4;

/// Why the images could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The images directory or a tarball could not be read.
    #[error("reading {path}")]
    Read {
        /// The directory or tarball.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The import record could not be written.
    #[error("writing {path}")]
    Write {
        /// The record's file.
        path: PathBuf,
        /// Why it could not be written.
        #[source]
        source: std::io::Error,
    },
    /// `ctr` could not be started or waited for.
    #[error("running {program}")]
    Spawn {
        /// The `ctr` binary as configured ([`Ctr::program`]).
        program: String,
        /// Why it could not run.
        #[source]
        source: std::io::Error,
    },
    /// `ctr` ran and exited unsuccessfully.
    #[error("ctr {args} failed ({status}): {stderr}")]
    Ctr {
        /// Its whole command line after the program, `--address` and `--namespace` included.
        args: String,
        /// How it exited.
        status: String,
        /// Its standard error, trimmed.
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
    /// The `ctr` on `PATH`, talking to the containerd at `address` (its socket) and unpacking
    /// into `snapshotter`.
    pub fn new(address: &Path, snapshotter: &str) -> Ctr {
        Ctr {
            program: PathBuf::from("ctr"),
            address: address.to_path_buf(),
            snapshotter: snapshotter.to_string(),
        }
    }

    async fn run(&self, args: &[OsString], stdin: Option<&[u8]>) -> Result<String, Error> {
        let mut all: Vec<OsString> = vec![
            "--address".into(),
            self.address.clone().into(),
            "--namespace".into(),
            NAMESPACE.into(),
        ];
        all.extend_from_slice(args);
        let spawn_error = |source| Error::Spawn {
            program: self.program.display().to_string(),
            source,
        };
        let mut cmd = Command::new(&self.program);
        cmd.args(&all)
            .stdin(if stdin.is_some() {
                std::process::Stdio::piped()
            } else {
                std::process::Stdio::null()
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(spawn_error)?;
        if let (Some(data), Some(mut pipe)) = (stdin, child.stdin.take()) {
            // A write error means ctr exited early; its status and stderr say why.
            let _ = pipe.write_all(data).await;
        }
        let out = child.wait_with_output().await.map_err(spawn_error)?;
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
            .run(&["images".into(), "ls".into(), "-q".into()], None)
            .await?;
        Ok(out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect())
    }

    /// `ctr images import` of `source` (a path, or `-` with `stdin`), for this machine's
    /// platform; the image names it created.
    async fn import_from(
        &self,
        source: OsString,
        stdin: Option<&[u8]>,
    ) -> Result<Vec<String>, Error> {
        let args = [
            "images".into(),
            "import".into(),
            "--snapshotter".into(),
            self.snapshotter.clone().into(),
            source,
        ];
        Ok(plan::imported_names(&self.run(&args, stdin).await?))
    }

    /// Imports one tarball (for this machine's platform); returns the image names it created.
    pub async fn import(&self, tarball: &Path) -> Result<Vec<String>, Error> {
        self.import_from(tarball.as_os_str().to_owned(), None).await
    }

    /// Imports an image archive given as bytes (through `ctr`'s standard input).
    pub async fn import_bytes(&self, archive: &[u8]) -> Result<Vec<String>, Error> {
        self.import_from("-".into(), Some(archive)).await
    }
}

/// What [`provision`] or [`import_dir`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Tarballs imported now, with the images each brought, by name.
    pub imported: Vec<(PathBuf, Vec<String>)>,
    /// Tarballs left alone: unchanged since their import, images still present.
    pub skipped: Vec<PathBuf>,
    /// Tarballs `ctr` could not import, with its message (skipped; retried at the next start).
    pub failed: Vec<(PathBuf, String)>,
    /// The embedded pause image was imported now.
    pub embedded_pause: bool,
}

/// Everything the agent imports at start: the embedded pause image when `sandbox_image` is it
/// and containerd lacks it, then the tarballs of `dir` (if given).
pub async fn provision(
    ctr: &Ctr,
    dir: Option<&Path>,
    sandbox_image: &str,
) -> Result<Report, Error> {
    let present = ctr.list().await?;
    let mut report = Report::default();
    if let Some(arch) = pause::needs_import(sandbox_image, &present) {
        let archive = pause::archive(arch);
        match ctr.import_bytes(&archive.bytes).await {
            Ok(images) => {
                tracing::info!(?images, "imported the embedded pause image");
                report.embedded_pause = true;
            }
            // Sandboxes then fail with the CRI plugin's pull error, which names the image.
            Err(e) => tracing::warn!(
                image = pause::IMAGE,
                "importing the embedded pause image failed: {}",
                crate::report::error_chain(&e)
            ),
        }
    }
    if let Some(dir) = dir {
        let tarballs = import_tarballs(ctr, dir, &present).await?;
        report.imported = tarballs.imported;
        report.skipped = tarballs.skipped;
        report.failed = tarballs.failed;
    }
    Ok(report)
}

/// Imports the `*.tar` files of `dir` (a missing `dir` has none).
pub async fn import_dir(ctr: &Ctr, dir: &Path) -> Result<Report, Error> {
    if scan(dir)?.is_empty() {
        return Ok(Report::default());
    }
    let present = ctr.list().await?;
    import_tarballs(ctr, dir, &present).await
}

async fn import_tarballs(
    ctr: &Ctr,
    dir: &Path,
    present: &BTreeSet<String>,
) -> Result<Report, Error> {
    let tarballs = scan(dir)?;
    let mut report = Report::default();
    if tarballs.is_empty() {
        return Ok(report);
    }
    let record_path = dir.join(RECORD_FILE);
    let mut record = Record::load(&record_path);
    let todo = plan_imports(&tarballs, &record, present);
    let (to_import, unchanged): (Vec<&Tarball>, Vec<&Tarball>) =
        tarballs.iter().partition(|t| todo.contains(&t.name));
    report.skipped = unchanged.iter().map(|t| dir.join(&t.name)).collect();
    // Owned inputs, futures built up front: the stream's items borrow nothing but `ctr`.
    let imports: Vec<_> = to_import
        .into_iter()
        .cloned()
        .map(|t| {
            let path = dir.join(&t.name);
            async move {
                let result = ctr.import(&path).await;
                (t, path, result)
            }
        })
        .collect();
    let mut results = futures::stream::iter(imports).buffer_unordered(PARALLEL_IMPORTS);
    while let Some((t, path, result)) = results.next().await {
        match result {
            Ok(images) => {
                tracing::info!(tarball = %path.display(), ?images, "imported images");
                record.insert(&t, images.clone());
                record.save(&record_path).map_err(|source| Error::Write {
                    path: record_path.clone(),
                    source,
                })?;
                report.imported.push((path, images));
            }
            Err(e) => {
                let message = crate::report::error_chain(&e);
                tracing::warn!(
                    tarball = %path.display(),
                    "skipping the air-gap image tarball {}: ctr cannot import it: {message}",
                    path.display()
                );
                report.failed.push((path, message));
            }
        }
    }
    report.imported.sort();
    report.failed.sort();
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

    /// A fake `ctr` in `dir`: `images ls -q` prints `dir/present`; `images import PATH`
    /// prints an `unpacking` line per line of PATH, or fails like ctr on a broken archive when
    /// PATH holds `broken`; `images import -` saves its standard input as `dir/stdin`. Every
    /// call is appended to `dir/calls`.
    fn fake_ctr(dir: &Path) -> Ctr {
        use std::os::unix::fs::PermissionsExt;
        let d = dir.display();
        let script = format!(
            r#"#!/bin/sh
echo "$*" >>{d}/calls
shift 4
case "$1 $2" in
"images ls") cat {d}/present 2>/dev/null; exit 0 ;;
"images import")
    eval "f=\${{$#}}"
    if [ "$f" = - ]; then cat >{d}/stdin; echo "unpacking {image} (sha256:1)...done"; exit 0; fi
    if grep -q broken "$f"; then echo "ctr: unexpected EOF" >&2; exit 1; fi
    sed 's/.*/unpacking & (sha256:00)...done/' "$f" ;;
esac
"#,
            image = pause::IMAGE
        );
        let program = dir.join("ctr");
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        Ctr {
            program,
            address: dir.join("containerd.sock"),
            snapshotter: "overlayfs".into(),
        }
    }

    #[tokio::test]
    async fn a_broken_tarball_is_skipped_with_its_name_and_the_rest_imported() {
        let fake = tempfile::tempdir().unwrap();
        let ctr = fake_ctr(fake.path());
        let images = tempfile::tempdir().unwrap();
        let dir = images.path();
        std::fs::write(dir.join("a.tar"), "a:1\n").unwrap();
        std::fs::write(dir.join("b.tar"), "broken").unwrap();
        std::fs::write(dir.join("c.tar"), "c:1\nc:2\n").unwrap();
        let report = provision(&ctr, Some(dir), "example.com/pause:1")
            .await
            .unwrap();
        assert_eq!(
            report.imported,
            [
                (dir.join("a.tar"), vec!["a:1".to_string()]),
                (
                    dir.join("c.tar"),
                    vec!["c:1".to_string(), "c:2".to_string()]
                ),
            ]
        );
        assert_eq!(report.failed.len(), 1, "{report:?}");
        assert_eq!(report.failed[0].0, dir.join("b.tar"));
        assert!(
            report.failed[0].1.contains("ctr: unexpected EOF"),
            "{report:?}"
        );
        assert!(
            !report.embedded_pause,
            "not the sandbox image: not imported"
        );
        // Only the good ones are recorded: the broken one is tried again next time.
        let record = Record::load(&dir.join(RECORD_FILE));
        assert_eq!(
            record.tarballs.keys().collect::<Vec<_>>(),
            ["a.tar", "c.tar"]
        );
        std::fs::write(fake.path().join("present"), "a:1\nc:1\nc:2\n").unwrap();
        std::fs::remove_file(fake.path().join("calls")).unwrap();
        let again = provision(&ctr, Some(dir), "example.com/pause:1")
            .await
            .unwrap();
        assert_eq!(again.skipped, [dir.join("a.tar"), dir.join("c.tar")]);
        assert!(again.imported.is_empty());
        let calls = std::fs::read_to_string(fake.path().join("calls")).unwrap();
        let imports: Vec<&str> = calls.lines().filter(|l| l.contains(" import ")).collect();
        assert_eq!(imports.len(), 1, "{calls}");
        assert!(imports[0].ends_with("/b.tar"), "{calls}");
    }

    #[tokio::test]
    async fn the_embedded_pause_is_imported_through_stdin_only_when_missing() {
        let fake = tempfile::tempdir().unwrap();
        let ctr = fake_ctr(fake.path());
        let Some(arch) = pause::Arch::host() else {
            panic!("no embedded pause for this architecture");
        };
        let report = provision(&ctr, None, pause::IMAGE).await.unwrap();
        assert!(report.embedded_pause, "{report:?}");
        assert_eq!(
            std::fs::read(fake.path().join("stdin")).unwrap(),
            pause::archive(arch).bytes
        );
        let calls = std::fs::read_to_string(fake.path().join("calls")).unwrap();
        assert!(
            calls.contains("images import --snapshotter overlayfs -"),
            "{calls}"
        );
        std::fs::write(fake.path().join("present"), format!("{}\n", pause::IMAGE)).unwrap();
        let again = provision(&ctr, None, pause::IMAGE).await.unwrap();
        assert_eq!(again, Report::default());
    }
}

//! The store's directory: numbered database generations (`db-N`) and a `CURRENT` file naming
//! the live one. Snapshot import and defragmentation build a new generation next to the live
//! one and switch `CURRENT` atomically (write + fsync + rename), so a crash leaves either the
//! old or the new state, never a mix.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::store::{Error, Result};

const CURRENT: &str = "CURRENT";
const CACHE_BYTES: u64 = 256 << 20;
/// How many times (20 ms apart) to retry opening a database whose lock is still held.
const LOCK_RETRIES: u32 = 250;

fn dir_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Dir {
        path: path.to_path_buf(),
        source,
    }
}

/// Directory of generation `gen`.
pub(crate) fn db_path(dir: &Path, gen: u64) -> PathBuf {
    dir.join(format!("db-{gen}"))
}

/// Opens the live generation (creating the store if needed) and removes leftovers of
/// interrupted imports.
pub(crate) fn open_current(dir: &Path) -> Result<(sled::Db, u64)> {
    fs::create_dir_all(dir).map_err(dir_err(dir))?;
    let current = dir.join(CURRENT);
    let gen = match fs::read_to_string(&current) {
        Ok(s) => s
            .trim()
            .parse::<u64>()
            .map_err(|_| Error::Corrupt(format!("{}: {s:?}", current.display())))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
        Err(e) => return Err(dir_err(&current)(e)),
    };
    for entry in fs::read_dir(dir).map_err(dir_err(dir))? {
        let entry = entry.map_err(dir_err(dir))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name.strip_prefix("db-").and_then(|n| n.parse::<u64>().ok()) {
            if n != gen {
                remove_gen(dir, n);
            }
        }
    }
    Ok((open_db(&db_path(dir, gen))?, gen))
}

/// Opens a sled database. A just-dropped handle of the same database releases its file lock
/// only when sled's background flusher exits, so a lock conflict is retried for a while.
fn open_db(path: &Path) -> Result<sled::Db> {
    let config = sled::Config::new().path(path).cache_capacity(CACHE_BYTES);
    let mut attempts = 0;
    loop {
        match config.open() {
            Err(sled::Error::Io(e))
                if attempts < LOCK_RETRIES && e.to_string().contains("lock") =>
            {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.map_err(Error::Open),
        }
    }
}

/// Creates an empty database for generation `gen` (replacing any leftover) and fills it; if
/// filling fails, the generation is removed again.
pub(crate) fn build<T>(
    dir: &Path,
    gen: u64,
    fill: impl FnOnce(&sled::Db) -> Result<T>,
) -> Result<(sled::Db, T)> {
    let path = db_path(dir, gen);
    if path.exists() {
        fs::remove_dir_all(&path).map_err(dir_err(&path))?;
    }
    let db = open_db(&path)?;
    match fill(&db) {
        Ok(t) => Ok((db, t)),
        Err(e) => {
            drop(db);
            remove_gen(dir, gen);
            Err(e)
        }
    }
}

/// Makes generation `gen` the live one, durably.
pub(crate) fn switch_current(dir: &Path, gen: u64) -> Result<()> {
    let tmp = dir.join("CURRENT.tmp");
    let mut f = fs::File::create(&tmp).map_err(dir_err(&tmp))?;
    f.write_all(format!("{gen}\n").as_bytes())
        .map_err(dir_err(&tmp))?;
    f.sync_all().map_err(dir_err(&tmp))?;
    fs::rename(&tmp, dir.join(CURRENT)).map_err(dir_err(dir))?;
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(dir_err(dir))?;
    Ok(())
}

/// Deletes generation `gen`, best effort (a leftover is removed on the next open).
pub(crate) fn remove_gen(dir: &Path, gen: u64) {
    let path = db_path(dir, gen);
    if let Err(e) = fs::remove_dir_all(&path) {
        tracing::warn!(path = %path.display(), error = %e, "could not remove old database generation");
    }
}

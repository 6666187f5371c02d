//! Which image tarballs need importing: a pure decision over what is on disk, what was imported
//! before, and what containerd has.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

/// A tarball in the images directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tarball {
    /// The file name (not the path: the record survives moving the data dir).
    pub name: String,
    pub size: u64,
    pub mtime_ns: u128,
}

/// A tarball as it was when imported, and the images it brought.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordEntry {
    pub size: u64,
    pub mtime_ns: u128,
    pub images: Vec<String>,
}

/// What was imported, by tarball name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    pub tarballs: BTreeMap<String, RecordEntry>,
}

impl Record {
    /// The record at `path`; empty when missing or unreadable (everything is imported again,
    /// which is always safe).
    pub fn load(path: &Path) -> Record {
        std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Writes the record (through a temporary file and a rename).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_vec_pretty(self).expect("a record serializes");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)
    }

    pub fn insert(&mut self, t: &Tarball, images: Vec<String>) {
        self.tarballs.insert(
            t.name.clone(),
            RecordEntry {
                size: t.size,
                mtime_ns: t.mtime_ns,
                images,
            },
        );
    }
}

/// The names of the tarballs to import: those never imported, changed since (size or mtime),
/// or whose recorded images are not all `present` in containerd. In `tarballs`' order.
pub fn plan_imports(
    tarballs: &[Tarball],
    record: &Record,
    present: &BTreeSet<String>,
) -> Vec<String> {
    tarballs
        .iter()
        .filter(|t| match record.tarballs.get(&t.name) {
            None => true,
            Some(r) => {
                r.size != t.size
                    || r.mtime_ns != t.mtime_ns
                    || r.images.is_empty()
                    || !r.images.iter().all(|i| present.contains(i))
            }
        })
        .map(|t| t.name.clone())
        .collect()
}

/// The image names in `ctr images import`'s output
/// (`unpacking docker.io/library/busybox:1.35 (sha256:…)...done`).
pub fn imported_names(ctr_output: &str) -> Vec<String> {
    ctr_output
        .lines()
        .filter_map(|l| l.trim().strip_prefix("unpacking "))
        .filter_map(|rest| rest.split(" (").next())
        .map(String::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, size: u64, mtime_ns: u128) -> Tarball {
        Tarball {
            name: name.into(),
            size,
            mtime_ns,
        }
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn imports_new_changed_and_lost_tarballs_only() {
        let mut record = Record::default();
        record.insert(&t("same.tar", 10, 5), vec!["a:1".into()]);
        record.insert(&t("grown.tar", 10, 5), vec!["b:1".into()]);
        record.insert(&t("touched.tar", 10, 5), vec!["c:1".into()]);
        record.insert(&t("lost.tar", 10, 5), vec!["d:1".into(), "d:2".into()]);
        record.insert(&t("empty.tar", 10, 5), vec![]);
        let tarballs = [
            t("new.tar", 1, 1),
            t("same.tar", 10, 5),
            t("grown.tar", 11, 5),
            t("touched.tar", 10, 6),
            t("lost.tar", 10, 5),
            t("empty.tar", 10, 5),
        ];
        let present = set(&["a:1", "b:1", "c:1", "d:1"]);
        assert_eq!(
            plan_imports(&tarballs, &record, &present),
            [
                "new.tar",
                "grown.tar",
                "touched.tar",
                "lost.tar",
                "empty.tar"
            ]
        );
    }

    #[test]
    fn nothing_to_do_when_all_is_imported() {
        let mut record = Record::default();
        record.insert(&t("x.tar", 3, 4), vec!["x:1".into()]);
        assert!(plan_imports(&[t("x.tar", 3, 4)], &record, &set(&["x:1", "y"])).is_empty());
    }

    #[test]
    fn parses_ctr_import_output() {
        let out = "unpacking docker.io/library/busybox:1.35 (sha256:bdec24f3)...done\n\
                   unpacking docker.io/library/busybox:latest (sha256:bdec24f3)...done\n";
        assert_eq!(
            imported_names(out),
            [
                "docker.io/library/busybox:1.35",
                "docker.io/library/busybox:latest"
            ]
        );
        assert!(imported_names("").is_empty());
    }

    #[test]
    fn the_record_round_trips_and_a_broken_one_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let mut record = Record::default();
        record.insert(&t("x.tar", 3, 4), vec!["x:1".into()]);
        record.save(&path).unwrap();
        assert_eq!(Record::load(&path), record);
        std::fs::write(&path, "{not json").unwrap();
        assert_eq!(Record::load(&path), Record::default());
    }
}

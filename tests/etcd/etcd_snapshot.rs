//! Datastore snapshots end to end, with the real `k3rs` binary, `etcdctl` and `kubectl`:
//! - `k3rs etcd-snapshot save` while a writer keeps writing; restoring it with `k3rs server
//!   --cluster-reset --cluster-reset-restore-path` gives exactly the snapshot's revision: every
//!   key written at or before it has its value and revision, none written after exists, and
//!   writes continue at the next revision; the replaced member is kept in `db/etcd-old-*`;
//! - a snapshot with one flipped byte is refused with a clear message and the old data serves;
//! - `ls`, `delete`, `prune` (retention keeps the newest N of a name);
//! - a `* * * * *` schedule takes a snapshot and prunes to `--etcd-snapshot-retention`;
//! - snapshot files and their sidecars are 0600, their directories 0700 (an existing 0755
//!   directory is tightened);
//! - Kubernetes objects created before a snapshot are listed by kubectl after the restore,
//!   those created after it are not, and the API accepts writes again.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::client::{runtime, Clients};
use crate::common::etcdctl::etcdctl;
use crate::common::k3rs::{K3rs, AS_BARE_API};
use crate::common::kubectl::Kubectl;
use crate::common::process::run_with_timeout;
use k3rs_datastore::etcdpb as pb;

const WRITES: usize = 300;

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string()
}

/// `k3rs etcd-snapshot <args>` against `server`: (exit code, stdout, stderr).
fn snapshot_cli(server: &K3rs, args: &[&str]) -> (Option<i32>, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
    cmd.arg("etcd-snapshot")
        .args(args)
        .arg("--data-dir")
        .arg(server.data_dir())
        .args(["--etcd-client-port", &server.port().to_string()])
        .env("K3RS_CONFIG_FILE", "/dev/null")
        .env_remove("K3RS_DATA_DIR");
    run_with_timeout(cmd, None, Duration::from_secs(60))
}

fn snapshot_ok(server: &K3rs, args: &[&str]) -> String {
    let (code, out, err) = snapshot_cli(server, args);
    assert_eq!(code, Some(0), "k3rs etcd-snapshot {args:?}: {out}{err}");
    out
}

fn snapshot_dir(server: &K3rs) -> PathBuf {
    server.data_dir().join("server/db/snapshots")
}

/// `save --name <name>`: the saved file's path (from the "Saving etcd snapshot to" line).
fn save(server: &K3rs, name: &str) -> PathBuf {
    let out = snapshot_ok(server, &["save", "--name", name]);
    let path = out
        .lines()
        .find_map(|l| l.strip_prefix("Saving etcd snapshot to "))
        .unwrap_or_else(|| panic!("no path in save's output:\n{out}"));
    let path = PathBuf::from(path);
    let file = path.file_name().unwrap().to_str().unwrap();
    let prefix = format!("{name}-{}-", hostname());
    assert!(
        file.strip_prefix(&prefix)
            .is_some_and(|t| t.parse::<u64>().is_ok()),
        "{file} is not {prefix}<unix seconds>"
    );
    assert!(out.contains(&format!("Snapshot {file} saved")), "{out}");
    path
}

/// The permission bits of `path`.
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Snapshots hold every Secret: only the owner reads them.
fn assert_private(snapshot: &Path) {
    let dir = snapshot.parent().unwrap();
    let sidecar = dir.join(".metadata").join(snapshot.file_name().unwrap());
    assert_eq!(mode(snapshot), 0o600, "{}", snapshot.display());
    assert_eq!(mode(&sidecar), 0o600, "{}", sidecar.display());
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    assert_eq!(mode(&dir.join(".metadata")), 0o700);
}

/// The revision a snapshot's metadata records.
fn recorded_revision(path: &Path) -> i64 {
    let meta = path
        .parent()
        .unwrap()
        .join(".metadata")
        .join(path.file_name().unwrap());
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&meta).expect("snapshot metadata")).unwrap();
    let size = std::fs::metadata(path).unwrap().len();
    assert_eq!(json["size"], size, "{json}");
    json["revision"].as_i64().expect("revision")
}

/// Stops the server and restores `snapshot` into it: (exit status success, log of that run).
pub(crate) fn restore(server: &mut K3rs, snapshot: &Path) -> (bool, String) {
    let before = server.log().len();
    let status = server.run_once_with(
        &[
            "--cluster-reset",
            "--cluster-reset-restore-path",
            snapshot.to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    let log = server.log()[before..].to_string();
    (status.is_some_and(|s| s.success()), log)
}

fn old_members(server: &K3rs) -> Vec<String> {
    std::fs::read_dir(server.data_dir().join("server/db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with("etcd-old-"))
        .collect()
}

/// Every key under `prefix` with (value, mod revision), and the header revision.
fn dump(server: &K3rs, prefix: &str) -> (BTreeMap<String, (String, i64)>, i64) {
    let out = etcdctl(
        &server.endpoint(),
        &["get", prefix, "--prefix", "-w", "json"],
        None,
    )
    .expect_ok("etcdctl get");
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let b64 = |v: &serde_json::Value| {
        use base64::Engine;
        String::from_utf8(
            base64::engine::general_purpose::STANDARD
                .decode(v.as_str().unwrap())
                .unwrap(),
        )
        .unwrap()
    };
    let kvs = json["kvs"]
        .as_array()
        .map(|kvs| {
            kvs.iter()
                .map(|kv| {
                    (
                        b64(&kv["key"]),
                        (b64(&kv["value"]), kv["mod_revision"].as_i64().unwrap()),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    (kvs, json["header"]["revision"].as_i64().unwrap())
}

#[test]
fn snapshot_under_writes_restores_exactly_and_corrupt_ones_are_refused() {
    let host = hostname();
    let mut server = K3rs::start_with(&[
        "--etcd-auto-compaction-retention",
        "0",
        "--etcd-snapshot-schedule-cron",
        "* * * * *",
        "--etcd-snapshot-retention",
        "2",
    ]);
    // Two old scheduled snapshots: a scheduled one must prune the older.
    let dir = snapshot_dir(&server);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for t in [100, 200] {
        std::fs::write(dir.join(format!("etcd-snapshot-{host}-{t}")), b"old").unwrap();
    }

    // A writer puts WRITES keys while the snapshot is taken.
    let ep = server.endpoint();
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        runtime().block_on(async {
            let mut c = Clients::connect(&ep).await.unwrap();
            let mut written = BTreeMap::new();
            for i in 0..WRITES {
                let key = format!("load/{i:04}");
                let resp =
                    c.kv.put(pb::PutRequest {
                        key: key.clone().into_bytes(),
                        value: format!("v{i}").into_bytes(),
                        ..Default::default()
                    })
                    .await
                    .unwrap()
                    .into_inner();
                written.insert(key, (format!("v{i}"), resp.header.unwrap().revision));
                if i == 50 {
                    started_tx.send(()).unwrap();
                }
            }
            written
        })
    });
    started_rx.recv().unwrap();
    let snap = save(&server, "load");
    assert_private(&snap);
    let written = writer.join().unwrap();
    let at = recorded_revision(&snap);
    let (expected, missing): (BTreeMap<_, _>, BTreeMap<_, _>) =
        written.iter().partition(|(_, (_, rev))| *rev <= at);
    let expected: BTreeMap<String, (String, i64)> = expected
        .into_iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    println!(
        "snapshot at revision {at}: {} keys in it, {} after",
        expected.len(),
        missing.len()
    );
    assert!(!expected.is_empty() && !missing.is_empty());
    let (all_before, rev_before) = dump(&server, "load/");
    assert_eq!(all_before.len(), WRITES);

    // One flipped byte: refused, nothing touched, the old data still serves.
    let bad = server.dir().join("flipped");
    let mut bytes = std::fs::read(&snap).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x01;
    std::fs::write(&bad, &bytes).unwrap();
    let (ok, log) = restore(&mut server, &bad);
    assert!(!ok, "a corrupt snapshot was restored:\n{log}");
    assert!(
        log.contains("is corrupt or incomplete") && log.contains("flipped"),
        "no clear message:\n{log}"
    );
    assert!(old_members(&server).is_empty());
    // Truncated: refused too.
    std::fs::write(&bad, &std::fs::read(&snap).unwrap()[..mid]).unwrap();
    let (ok, log) = restore(&mut server, &bad);
    assert!(!ok && log.contains("is corrupt or incomplete"), "{log}");
    server.restart();
    assert_eq!(dump(&server, "load/"), (all_before, rev_before));

    // The real one: exactly the snapshot's state.
    let (ok, log) = restore(&mut server, &snap);
    assert!(ok, "restore failed:\n{log}");
    assert!(log.contains("restart without --cluster-reset"), "{log}");
    assert_eq!(old_members(&server).len(), 1);
    server.restart();
    let (restored, revision) = dump(&server, "load/");
    assert_eq!(
        revision, at,
        "the restored store is at the snapshot's revision"
    );
    assert_eq!(restored, expected);
    etcdctl(&server.endpoint(), &["put", "after-restore", "x"], None).expect_ok("put");
    let (after, revision) = dump(&server, "after-restore");
    assert_eq!((after["after-restore"].1, revision), (at + 1, at + 1));
    let members = etcdctl(&server.endpoint(), &["member", "list"], None).expect_ok("members");
    assert_eq!(members.stdout.lines().count(), 1, "{members:?}");

    // ls / delete / prune.
    for t in [1, 2, 3] {
        std::fs::write(dir.join(format!("keep-{host}-{t}")), b"x").unwrap();
    }
    let newest = save(&server, "keep");
    let newest_name = newest.file_name().unwrap().to_str().unwrap().to_string();
    let ls = snapshot_ok(&server, &["ls"]);
    let lines: Vec<&str> = ls.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["Name", "Location", "Size", "Created"], "{ls}");
    let row = lines
        .iter()
        .find(|l| l.starts_with(&format!("{newest_name} ")))
        .unwrap_or_else(|| panic!("{newest_name} not listed:\n{ls}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], format!("file://{}", newest.display()));
    assert_eq!(
        cells[2],
        std::fs::metadata(&newest).unwrap().len().to_string()
    );
    assert!(cells[3].ends_with('Z') && cells[3].contains('T'), "{row}");
    let out = snapshot_ok(
        &server,
        &["prune", "--name", "keep", "--snapshot-retention", "2"],
    );
    assert!(out.contains(&format!("keep-{host}-1")), "{out}");
    let names = |prefix: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with(prefix))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names("keep-"),
        [newest_name.clone(), format!("keep-{host}-3")]
    );
    snapshot_ok(&server, &["delete", &newest_name]);
    assert_eq!(names("keep-"), [format!("keep-{host}-3")]);
    assert!(!dir.join(".metadata").join(&newest_name).exists());
    let (code, _, err) = snapshot_cli(&server, &["delete", "no-such-snapshot"]);
    assert_ne!(code, Some(0));
    assert!(err.contains("no snapshot named no-such-snapshot"), "{err}");

    // The schedule fires every minute: a scheduled snapshot appears and the oldest goes.
    let scheduled = common::wait_for("a scheduled snapshot", Duration::from_secs(130), || {
        server.assert_running();
        let v = names("etcd-snapshot-");
        (v.len() == 2 && !v.contains(&format!("etcd-snapshot-{host}-100"))).then_some(v)
    });
    let taken = scheduled
        .iter()
        .find(|n| **n != format!("etcd-snapshot-{host}-200"))
        .unwrap();
    assert!(recorded_revision(&dir.join(taken)) > 1);
    assert_private(&dir.join(taken));
}

#[test]
fn kubernetes_objects_match_the_snapshot_point_after_restore() {
    let mut flags = AS_BARE_API.to_vec();
    flags.push("--etcd-disable-snapshots");
    let (mut server, k) = Kubectl::start_server(&flags);
    for i in 0..3 {
        k.ok(&[
            "create",
            "configmap",
            &format!("before-{i}"),
            "--from-literal=a=b",
        ]);
    }
    let snap = save(&server, "on-demand");
    for i in 0..3 {
        k.ok(&[
            "create",
            "configmap",
            &format!("after-{i}"),
            "--from-literal=a=b",
        ]);
    }
    let (ok, log) = restore(&mut server, &snap);
    assert!(ok, "restore failed:\n{log}");
    server.restart();
    let names = common::wait_for("the API after the restore", Duration::from_secs(60), || {
        let out = k.run(&["get", "configmaps", "-o", "name"]);
        out.ok.then_some(out.stdout)
    });
    let mut names: Vec<&str> = names
        .lines()
        .filter(|n| n.contains("before-") || n.contains("after-"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "configmap/before-0",
            "configmap/before-1",
            "configmap/before-2"
        ]
    );
    k.ok(&["create", "configmap", "after-restore", "--from-literal=a=b"]);
    k.ok(&["delete", "configmap", "before-0"]);
    let out = k.ok(&["get", "configmaps", "-o", "name"]);
    assert!(
        out.contains("configmap/after-restore") && !out.contains("before-0"),
        "{out}"
    );
    // No scheduled snapshots with --etcd-disable-snapshots.
    assert!(!snapshot_dir(&server).read_dir().unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .starts_with("etcd-snapshot-")));
}

//! etcd-format snapshots both ways, against the real tools (Debian's etcd 3.4 `etcdctl` and
//! `etcd`):
//! - k3rs with history (puts, overwrites, deletes, a txn, a lease with a key, a compaction, a
//!   value larger than a bbolt page, enough keys for branch pages) → `etcdctl snapshot save`
//!   against k3rs → `etcdctl snapshot status` (revision, key count) → `etcdctl snapshot
//!   restore` → a real etcd on the restored dir serves every key with the same value,
//!   create/mod revision, version and lease; old revisions and the compaction are the same;
//!   the lease keeps its TTL and key;
//! - the reverse: k3rs serving Kubernetes from a real etcd (`--datastore-endpoint`), objects
//!   made through kubectl, `etcdctl snapshot save` from that etcd, then `k3rs server
//!   --cluster-reset --cluster-reset-restore-path` on a fresh server: the objects read back
//!   through kubectl with the same resourceVersions, and etcd's keys with the same revisions.

use std::path::Path;
use std::time::Duration;

use crate::common;
use crate::common::client::{runtime, Clients};
use crate::common::etcdctl::{etcdctl, CtlOutput, Endpoint};
use crate::common::k3rs::{K3rs, AS_BARE_API};
use crate::common::kubectl::Kubectl;
use crate::common::Etcd;
use crate::etcd_snapshot::restore;
use k3rs_datastore::etcdpb as pb;

/// Keys written in bulk, enough for several leaf pages and a branch page in the `key` bucket.
const BULK: usize = 400;

fn ctl(ep: &Endpoint, args: &[&str]) -> CtlOutput {
    etcdctl(ep, args, None).expect_ok(&format!("etcdctl {args:?}"))
}

/// `etcdctl get "" --prefix -w json` (every key): the kvs array and the header revision.
fn all_keys(ep: &Endpoint) -> (serde_json::Value, i64) {
    let out = ctl(ep, &["get", "", "--prefix", "-w", "json"]);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    (
        json["kvs"].clone(),
        json["header"]["revision"].as_i64().unwrap(),
    )
}

/// `etcdctl get <key> --rev <rev> -w json`: the kvs, or the error text.
fn get_at(ep: &Endpoint, key: &str, rev: i64) -> Result<serde_json::Value, String> {
    let out = etcdctl(
        ep,
        &["get", key, "--rev", &rev.to_string(), "-w", "json"],
        None,
    );
    if !out.success() {
        return Err(out.stderr);
    }
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    Ok(json["kvs"].clone())
}

/// `etcdctl lease timetolive <id> --keys -w json`: (granted TTL, keys base64).
fn lease_info(ep: &Endpoint, id_hex: &str) -> (i64, serde_json::Value) {
    let out = ctl(ep, &["lease", "timetolive", id_hex, "--keys", "-w", "json"]);
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    (json["granted-ttl"].as_i64().unwrap(), json["keys"].clone())
}

fn revision_of(out: &CtlOutput) -> i64 {
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    json["header"]["revision"].as_i64().unwrap()
}

#[test]
fn etcdctl_snapshot_of_k3rs_restores_into_a_real_etcd() {
    let server = K3rs::start_with(&[
        "--etcd-auto-compaction-retention",
        "0",
        "--etcd-disable-snapshots",
    ]);
    let ep = server.endpoint();
    ctl(&ep, &["put", "h/a", "1"]); // 2
    ctl(&ep, &["put", "h/a", "2"]); // 3
    ctl(&ep, &["put", "h/b", "x"]); // 4
    ctl(&ep, &["del", "h/b"]); // 5
    ctl(&ep, &["put", "h/c", "keep"]); // 6
    ctl(&ep, &["compact", "5"]);
    ctl_txn(&ep); // 7
    let lease = ctl(&ep, &["lease", "grant", "3600"]);
    let lease_id = lease
        .stdout
        .split_whitespace()
        .nth(1)
        .expect("lease id")
        .to_string();
    ctl(&ep, &["put", "h/leased", "v", "--lease", &lease_id]);
    ctl(&ep, &["put", "h/a", "3"]);
    let big: String = (0..20_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    ctl(&ep, &["put", "h/big", &big]);
    runtime().block_on(async {
        let mut c = Clients::connect(&ep).await.unwrap();
        for i in 0..BULK {
            c.kv.put(pb::PutRequest {
                key: format!("m/{i:05}").into_bytes(),
                value: vec![b'0' + (i % 10) as u8; 100],
                ..Default::default()
            })
            .await
            .unwrap();
        }
    });
    let (before, revision) = all_keys(&ep);

    let snap = server.dir().join("from-k3rs.db");
    ctl(&ep, &["snapshot", "save", snap.to_str().unwrap()]);
    let size = std::fs::metadata(&snap).unwrap().len();
    assert_eq!(size % 4096, 32, "a bbolt database and its sha256 trailer");
    let status = ctl(
        &ep,
        &["snapshot", "status", snap.to_str().unwrap(), "-w", "json"],
    );
    let status: serde_json::Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(status["revision"], revision, "{status}");
    // Records: h/a@3, h/c@6, the txn's two, h/leased, h/a@9, h/big, the bulk keys; one
    // lease; meta (consistent_index, finished and scheduled compaction); auth; cluster.
    let records = 7 + BULK as i64;
    assert_eq!(status["totalKey"], records + 1 + 3 + 1 + 1, "{status}");
    assert_eq!(status["totalSize"], size - 32, "{status}");

    let etcd = Etcd::restore_and_start(&snap);
    let eep = etcd.endpoint();
    let (after, etcd_revision) = all_keys(&eep);
    assert_eq!(etcd_revision, revision);
    assert_eq!(
        after.as_array().map(Vec::len),
        before.as_array().map(Vec::len)
    );
    assert_eq!(
        after, before,
        "every key, value, revision, version and lease"
    );
    // History: the overwritten value at its revision; the compaction is kept.
    for rev in [5, 6, 8, revision] {
        let old = get_at(&ep, "h/a", rev).unwrap();
        assert_eq!(get_at(&eep, "h/a", rev).unwrap(), old, "at {rev}");
    }
    assert_eq!(
        get_at(&eep, "h/a", 8).unwrap()[0]["value"],
        "Mg==",
        "h/a was 2 before its overwrite at 9"
    );
    for rev in [2, 4] {
        let compacted = get_at(&eep, "h/a", rev).unwrap_err();
        assert!(compacted.contains("compacted"), "{compacted}");
        assert!(get_at(&ep, "h/a", rev).unwrap_err().contains("compacted"));
    }
    // The lease: its TTL and its key.
    let (ttl, keys) = lease_info(&eep, &lease_id);
    assert_eq!((ttl, keys), lease_info(&ep, &lease_id));
    assert_eq!(ttl, 3600);
    // The restored etcd takes writes at the next revision.
    let next = revision_of(&ctl(&eep, &["put", "h/new", "1", "-w", "json"]));
    assert_eq!(next, revision + 1);
}

/// A txn putting two keys in one revision (etcdctl's non-interactive form: compares, a blank
/// line, success requests, a blank line, failure requests).
fn ctl_txn(ep: &Endpoint) {
    let out = etcdctl(ep, &["txn"], Some("\nput h/t1 v1\nput h/t2 v2\n\n\n"));
    assert!(out.success() && out.stdout.contains("SUCCESS"), "{out:?}");
}

/// The resourceVersion kubectl reports for an object.
fn resource_version(k: &Kubectl, args: &[&str]) -> String {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend(["-o", "jsonpath={.metadata.resourceVersion}"]);
    k.ok(&all)
}

#[test]
fn an_etcd_snapshot_of_a_kubernetes_cluster_restores_into_k3rs() {
    let etcd = Etcd::start();
    let url = etcd.endpoint().url;
    let mut flags = AS_BARE_API.to_vec();
    flags.extend(["--etcd-disable-snapshots", "--datastore-endpoint", &url]);
    let (mut on_etcd, k) = Kubectl::start_server(&flags);
    k.ok(&["create", "namespace", "moved"]);
    k.ok(&[
        "create",
        "deployment",
        "web",
        "-n",
        "moved",
        "--image=registry.k8s.io/pause:3.10",
        "--replicas=2",
    ]);
    k.ok(&["scale", "deployment", "web", "-n", "moved", "--replicas=3"]);
    k.ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "-n",
        "moved",
        "--from-literal=password=s3cret",
    ]);
    k.ok(&[
        "create",
        "configmap",
        "gone",
        "-n",
        "moved",
        "--from-literal=a=b",
    ]);
    k.ok(&["delete", "configmap", "gone", "-n", "moved"]);
    let objects: [&[&str]; 3] = [
        &["namespace", "moved"],
        &["deployment", "web", "-n", "moved"],
        &["secret", "creds", "-n", "moved"],
    ];
    let versions: Vec<String> = objects.iter().map(|o| resource_version(&k, o)).collect();
    on_etcd.kill();

    let eep = etcd.endpoint();
    let (etcd_keys, etcd_revision) = all_keys(&eep);
    let snap = etcd.data_dir().parent().unwrap().join("from-etcd.db");
    ctl(&eep, &["snapshot", "save", snap.to_str().unwrap()]);
    restore_into_fresh_k3rs(&snap, etcd_keys.clone(), etcd_revision, &objects, &versions);
    // The same snapshot compressed as k3s's `--etcd-snapshot-compress` writes it: one
    // deflated member in a zip archive (made here with Python's zipfile).
    let zipped = snap.with_extension("zip");
    let made = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\n\
             with zipfile.ZipFile(sys.argv[2], 'w', zipfile.ZIP_DEFLATED) as z:\n\
             \x20   z.write(sys.argv[1], 'from-etcd')",
        ])
        .arg(&snap)
        .arg(&zipped)
        .status()
        .expect("python3");
    assert!(made.success());
    restore_into_fresh_k3rs(&zipped, etcd_keys, etcd_revision, &objects, &versions);
}

/// A fresh k3rs restored from `snap` holds exactly `etcd_keys` at `etcd_revision`, and
/// kubectl reads `objects` back at `versions`.
fn restore_into_fresh_k3rs(
    snap: &Path,
    etcd_keys: serde_json::Value,
    etcd_revision: i64,
    objects: &[&[&str]],
    versions: &[String],
) {
    let mut flags = AS_BARE_API.to_vec();
    flags.push("--etcd-disable-snapshots");
    let (mut server, k) = Kubectl::start_server(&flags);
    let (ok, log) = restore(&mut server, snap);
    assert!(ok, "restore failed:\n{log}");
    server.restart();
    let (keys, revision) = all_keys(&server.endpoint());
    // The restarted server may already have written (leader leases, events): compare what
    // the snapshot held at its revision.
    assert!(revision >= etcd_revision, "{revision} < {etcd_revision}");
    let out = ctl(
        &server.endpoint(),
        &[
            "get",
            "",
            "--prefix",
            "-w",
            "json",
            "--rev",
            &etcd_revision.to_string(),
        ],
    );
    let at: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(at["kvs"], etcd_keys, "every key at the snapshot's revision");
    assert!(keys.as_array().is_some_and(|a| !a.is_empty()));
    common::wait_for("the API after the restore", Duration::from_secs(60), || {
        k.run(&["get", "namespace", "moved"]).ok.then_some(())
    });
    for (o, v) in objects.iter().zip(versions) {
        assert_eq!(&resource_version(&k, o), v, "{o:?}");
    }
    let image = k.ok(&[
        "get",
        "deployment",
        "web",
        "-n",
        "moved",
        "-o",
        "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].image}",
    ]);
    assert_eq!(image, "3 registry.k8s.io/pause:3.10");
    let password = k.ok(&[
        "get",
        "secret",
        "creds",
        "-n",
        "moved",
        "-o",
        "jsonpath={.data.password}",
    ]);
    use base64::Engine;
    let password = base64::engine::general_purpose::STANDARD
        .decode(password.trim())
        .unwrap();
    assert_eq!(password, b"s3cret");
    assert!(!k.run(&["get", "configmap", "gone", "-n", "moved"]).ok);
    // Writes go on after the restored revision.
    k.ok(&[
        "create",
        "configmap",
        "after-restore",
        "-n",
        "moved",
        "--from-literal=a=b",
    ]);
    let v: i64 = resource_version(&k, &["configmap", "after-restore", "-n", "moved"])
        .parse()
        .unwrap();
    assert!(v > etcd_revision);
}

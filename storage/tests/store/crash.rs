//! Crash consistency: a child process applies batches until it is killed with SIGKILL; the
//! reopened store must hold a prefix of the batches, each with its meta.
use crate::common::*;
use k3rs_storage::*;

const CHILD_ENV: &str = "K3RS_STORAGE_CRASH_CHILD";

/// Runs in the child: applies batch `i` = puts of `k{i % 10}` and `n{i % 3}` = `i`, meta `i`.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let s = Store::open(std::path::Path::new(&dir)).unwrap();
    // Puts are written by another thread (as the Raft state machine does), compactions inline.
    let (commits, pending) = std::sync::mpsc::channel::<PendingCommit>();
    std::thread::spawn(move || pending.iter().for_each(|c| c.commit().unwrap()));
    for i in 1u64.. {
        let v = i.to_string();
        let (_, commit) = s
            .apply_batch_deferred(
                &[
                    put(&format!("k{}", i % 10), &v),
                    put(&format!("n{}", i % 3), &v),
                ],
                &i.to_be_bytes(),
            )
            .unwrap();
        commits.send(commit).unwrap();
        if i % 300 == 0 {
            let revision = s.current_revision() - 10;
            s.apply_batch(&[Command::Compact { revision }], &i.to_be_bytes())
                .unwrap();
        }
        if i % 500 == 0 {
            s.flush().unwrap();
        }
    }
}

/// The harness's name for [`crash_child`]: its path in this test binary, without the crate.
fn child_test() -> String {
    let (_crate, module) = module_path!()
        .split_once("::")
        .expect("a module of the test binary");
    format!("{module}::crash_child")
}

#[test]
fn kill_9_leaves_a_prefix_of_batches() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &child_test(), "--nocapture"])
            .env(CHILD_ENV, dir.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(700 + 300 * round));
        child.kill().unwrap();
        child.wait().unwrap();
        let s = Store::open(dir.path()).unwrap();
        let Some(meta) = s.applied_meta().unwrap() else {
            continue;
        };
        let last = u64::from_be_bytes(meta.try_into().unwrap());
        // Each run restarts at batch 1 over the previous state: check the latest run's keys.
        let value = |k: &str| {
            get(&s, k).map(|kv| String::from_utf8(kv.value).unwrap().parse::<u64>().unwrap())
        };
        assert_eq!(value(&format!("k{}", last % 10)), Some(last));
        assert_eq!(value(&format!("n{}", last % 3)), Some(last));
        for j in 1..10.min(last) {
            assert_eq!(
                value(&format!("k{}", (last - j) % 10)),
                Some(last - j),
                "batch {} after {}",
                last - j,
                last
            );
        }
        let r = s.range(&RangeRequest {
            key: "k".into(),
            range_end: "l".into(),
            revision: s.current_revision() - 1,
            ..Default::default()
        });
        assert!(r.unwrap().is_ok());
        // Every retained revision is readable (compacted records found again as garbage).
        for rev in s.compact_revision().max(30)..=s.current_revision() {
            let all = RangeRequest {
                key: vec![0],
                range_end: vec![0],
                revision: rev,
                ..Default::default()
            };
            assert_eq!(s.range(&all).unwrap().unwrap().1.count, 13);
        }
        drop(s);
    }
}

//! Container logs are bounded: `k3rs server` with its embedded agent and
//! `--kubelet-arg container-log-max-size=64Ki --kubelet-arg container-log-max-files=3` runs a
//! busybox pod that writes numbered lines steadily (about 25 KB/s) on the real containerd.
//!
//! Proven: the container's log directory never holds more than 3 files (rotations happen,
//! older rotated files are gzipped and the oldest removed, the newest rotated one stays plain);
//! a gzipped file holds consecutive CRI lines; `kubectl logs --tail=1` and `--tail=3` return
//! the newest lines (numbered past every rotated file's); the container keeps logging after
//! rotation (containerd reopened the file); a `kubectl logs -f --tail=1` started before the
//! rotations streams every line across them, without a gap. As root, inside a network namespace
//! the test makes (loopback only), with the images of `scripts/build-images.sh`.
//!
//! `k3rs crictl` (ps, pods, images, inspect, logs) and `k3rs ctr` are checked on the same pod.
//!
//! Missing prerequisites fail the test (`scripts/prereqs.sh test` installs them).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::kubectl::{json, Kubectl};
use crate::common::node_lab::{run, NodeLab, FAST_STATUS};

const NODE: &str = "logs-node";
const MAX_FILES: usize = 3;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: chatty}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: chatty
    image: docker.io/library/busybox:1.35
    command:
    - sh
    - -c
    - >-
      pad=$(printf '%0100d' 0); n=0;
      while true; do i=0;
      while [ $i -lt 10 ]; do i=$((i+1)); n=$((n+1)); echo "line-$n $pad"; done;
      sleep 0.05; done
"#;

#[test]
fn container_logs_are_rotated_and_tailed_from_the_end() {
    common::require_program("gzip", "gzip");
    NodeLab::run("logs", scenario);
}

/// The number of a `line-<n> …` line (a log line or a CRI file line).
fn number(line: &str) -> Option<u64> {
    let rest = &line[line.find("line-")? + 5..];
    rest.split(' ').next()?.parse().ok()
}

/// The numbers of the lines of `text`; every line must carry one.
fn numbers(text: &str) -> Vec<u64> {
    text.lines()
        .map(|l| number(l).unwrap_or_else(|| panic!("not a numbered line: {l:?}")))
        .collect()
}

fn assert_consecutive(ns: &[u64], what: &str) {
    for w in ns.windows(2) {
        assert_eq!(
            w[1],
            w[0] + 1,
            "{what}: a gap or repeat after line {}",
            w[0]
        );
    }
}

/// The file names in the container's log directory, `.tmp` files (a compression in
/// progress) left out.
fn log_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !n.ends_with(".tmp"))
        .collect()
}

fn kubelet_api_answers(k: &Kubectl, server: &mut common::K3rs) {
    let healthz = format!("/api/v1/nodes/{NODE}/proxy/healthz");
    common::wait_for("the kubelet API", Duration::from_secs(60), || {
        server.assert_running();
        k.run(&["get", "--raw", &healthz]).ok.then_some(())
    });
}

/// `k3rs crictl` and `k3rs ctr` see the node's containerd as k3s's do: the running pod and
/// container, its image, its status and its log, over the server's data dir.
fn runtime_tools_answer(server: &common::K3rs, log_dir: &Path) {
    let data_dir = server.data_dir().display().to_string();
    let k3rs = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_k3rs"))
            .args(args)
            .env("K3RS_DATA_DIR", &data_dir)
            .env_remove("CONTAINERD_ADDRESS")
            .env_remove("CONTAINERD_NAMESPACE")
            .output()
            .expect("running k3rs");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(out.status.success(), "k3rs {args:?}: {stdout}{stderr}");
        stdout
    };
    let ps = k3rs(&["crictl", "ps"]);
    let row = ps
        .lines()
        .find(|l| l.contains(" chatty "))
        .unwrap_or_else(|| panic!("the container in crictl ps: {ps}"));
    assert!(
        row.contains(" Running ") && row.ends_with(" chatty"),
        "{ps}"
    );
    let id = row.split_whitespace().next().expect("an id").to_string();
    let pods = k3rs(&["crictl", "pods"]);
    assert!(
        pods.lines()
            .any(|l| l.contains(" Ready ") && l.contains(" chatty ") && l.contains(" default ")),
        "{pods}"
    );
    let images = k3rs(&["crictl", "images"]);
    assert!(
        images
            .lines()
            .any(|l| l.starts_with("docker.io/library/busybox") && l.contains(" 1.35 ")),
        "{images}"
    );
    // inspect by the table's short id (a prefix), as crictl users do.
    let inspect: serde_json::Value =
        serde_json::from_str(&k3rs(&["crictl", "inspect", &id])).expect("inspect JSON");
    assert_eq!(inspect["status"]["state"], "CONTAINER_RUNNING", "{inspect}");
    assert_eq!(inspect["status"]["metadata"]["name"], "chatty");
    assert!(
        Path::new(inspect["status"]["logPath"].as_str().unwrap_or_default()).starts_with(log_dir),
        "{inspect}"
    );
    let tail = k3rs(&["crictl", "logs", "--tail", "2", &id]);
    assert_eq!(tail.lines().count(), 2, "{tail:?}");
    assert!(tail.lines().all(|l| number(l).is_some()), "{tail:?}");
    // ctr: containerd's own tool, pointed at the node's socket and the k8s.io namespace.
    let containers = k3rs(&["ctr", "containers", "ls", "-q"]);
    let full_id = inspect["status"]["id"].as_str().expect("an id");
    assert!(containers.lines().any(|l| l == full_id), "{containers}");
}

fn scenario(lab: &NodeLab) {
    let mut args = FAST_STATUS.to_vec();
    args.extend([
        "--kubelet-arg",
        "container-log-max-size=64Ki",
        "--kubelet-arg",
        "container-log-max-files=3",
    ]);
    let (mut server, k) = lab.start_server(NODE, "127.0.0.1", &args, &[]);
    k.ok_stdin(&["apply", "-f", "-"], Some(POD));
    let pod = common::wait_for("the pod to run", Duration::from_secs(150), || {
        server.assert_running();
        let p = json(&k, &["get", "pod", "chatty", "-o", "json"]);
        (p["status"]["phase"] == "Running").then_some(p)
    });
    let uid = pod["metadata"]["uid"].as_str().expect("a uid").to_string();
    let dir = PathBuf::from(format!("/var/log/pods/default_chatty_{uid}/chatty"));
    kubelet_api_answers(&k, &mut server);
    runtime_tools_answer(&server, &dir);

    // A follow stream from before the rotations.
    let before = log_files(&dir);
    let follow_out = lab.scratch.path().join("follow.log");
    let follow_err = lab.scratch.path().join("follow.err");
    let mut follow = k
        // No client timeout: the stream lasts longer than the helper's 20 s.
        .command(&["--request-timeout=0", "logs", "-f", "--tail=1", "chatty"])
        .stdout(std::fs::File::create(&follow_out).expect("follow log"))
        .stderr(std::fs::File::create(&follow_err).expect("follow stderr"))
        .spawn()
        .expect("kubectl logs -f");
    let followed = || std::fs::read_to_string(&follow_out).unwrap_or_default();
    common::wait_for("logs -f to start", Duration::from_secs(20), || {
        (!followed().is_empty()).then_some(())
    });

    // Rotations: watched every 250 ms until files were rotated, compressed and pruned.
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        server.assert_running();
        let now = log_files(&dir);
        assert!(
            now.len() <= MAX_FILES,
            "at most {MAX_FILES} log files: {now:?}"
        );
        seen.extend(now.iter().filter(|n| *n != "0.log").cloned());
        let pruned = seen
            .iter()
            .any(|n| !now.contains(n) && !now.contains(&format!("{n}.gz")));
        let gz = now.iter().any(|n| n.ends_with(".gz"));
        if pruned && gz && seen.len() >= 4 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "rotations within 2 minutes; seen {seen:?}, now {now:?}\n{}",
            common::log_tail(&server.log_path(), 40)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // Between two rotations: the live file reopened and the older plain file compressed (a
    // listing taken mid-rotation may miss `0.log` or show two plain files).
    let plain_rotated = |now: &BTreeSet<String>| -> Vec<String> {
        now.iter()
            .filter(|n| n.starts_with("0.log.") && !n.ends_with(".gz"))
            .cloned()
            .collect()
    };
    let now = common::wait_for(
        "the live file and one plain rotated file",
        Duration::from_secs(30),
        || {
            let now = log_files(&dir);
            (now.contains("0.log") && plain_rotated(&now).len() == 1).then_some(now)
        },
    );
    let newest_rotated = plain_rotated(&now).remove(0);
    assert!(
        !before.contains(&newest_rotated),
        "{newest_rotated} was rotated after logs -f started"
    );

    // A compressed file holds consecutive CRI lines.
    let gz = now.iter().find(|n| n.ends_with(".gz")).expect("a .gz");
    let text = run(Command::new("gzip").arg("-dc").arg(dir.join(gz)));
    for l in text.lines().take(3) {
        assert!(l.contains(" stdout F line-"), "a CRI line: {l:?}");
    }
    assert_consecutive(&numbers(&text), gz);

    // --tail reads the end of the live file: past every rotated line.
    let last_rotated = numbers(
        &std::fs::read_to_string(dir.join(&newest_rotated)).expect("the plain rotated file"),
    )
    .last()
    .copied()
    .expect("lines in the rotated file");
    let tail1 = k.ok(&["logs", "chatty", "--tail=1"]);
    assert_eq!(tail1.lines().count(), 1, "{tail1:?}");
    let n1 = numbers(&tail1)[0];
    assert!(n1 > last_rotated, "tail {n1} after rotated {last_rotated}");
    let tail3 = numbers(&k.ok(&["logs", "chatty", "--tail=3"]));
    assert_eq!(tail3.len(), 3);
    assert_consecutive(&tail3, "--tail=3");
    assert!(tail3[0] >= n1);

    // The container keeps logging into the reopened file.
    let n2 = common::wait_for("newer lines", Duration::from_secs(20), || {
        let n = numbers(&k.ok(&["logs", "chatty", "--tail=1"]))[0];
        (n > tail3[2]).then_some(n)
    });
    assert!(std::fs::metadata(dir.join("0.log")).expect("0.log").len() > 0);

    // logs -f went on across the rotations, every line once.
    let deadline = Instant::now() + Duration::from_secs(30);
    while followed().lines().last().and_then(number) < Some(n2) {
        let text = followed();
        assert!(
            Instant::now() < deadline,
            "logs -f to reach line {n2} (exited: {:?}, {:?}); it ends with {:?}\n{}",
            follow.try_wait(),
            std::fs::read_to_string(&follow_err),
            &text[text.len().saturating_sub(300)..],
            common::log_tail(&server.log_path(), 30)
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let _ = follow.kill();
    let _ = follow.wait();
    let streamed = followed();
    // The last line may be cut by the kill.
    let complete = &streamed[..=streamed.rfind('\n').expect("lines")];
    let ns = numbers(complete);
    assert_consecutive(&ns, "logs -f");
    assert!(
        ns[0] <= last_rotated && *ns.last().unwrap() > last_rotated,
        "logs -f spans the rotation of {newest_rotated}: {}..{}",
        ns[0],
        ns.last().unwrap()
    );

    k.ok(&["delete", "pod", "chatty", "--wait=false"]);
    common::wait_for("the log directory to go", Duration::from_secs(60), || {
        (!dir.exists()).then_some(())
    });
}

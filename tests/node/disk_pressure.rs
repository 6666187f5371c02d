//! Disk protection on a small disk: `k3rs server` with its embedded agent runs with its data
//! dir (the datastore, containerd's images and snapshots, the pods' volumes) on a 384 MiB
//! tmpfs the test mounts, with `--kubelet-arg image-gc-high-threshold=70`,
//! `image-gc-low-threshold=60`, `image-minimum-gc-age=0s`,
//! `eviction-hard=nodefs.available<20%` and `eviction-pressure-transition-period=20s`, on the
//! real containerd, inside a network namespace the test makes (loopback only).
//!
//! Proven:
//! - Image garbage collection: once the test fills the disk past 70 %, the unused image
//!   (`docker.io/k3rs/filler`, 32 MiB, imported at the start) is removed, while the image of
//!   the running pod (busybox) and the sandbox image stay.
//! - Eviction: the pod then writes into its own filesystem until less than 20 % is free; the
//!   node reports `DiskPressure=True` and gets the `node.kubernetes.io/disk-pressure`
//!   NoSchedule taint; the pod is failed with reason `Evicted`, upstream's message ("The node
//!   was low on resource: ephemeral-storage. Threshold quantity: …, available: …. Container
//!   writer was using …, request is 0, has larger consumption of ephemeral-storage. ") and a
//!   `DisruptionTarget` condition; its stopped container is removed by the node-level reclaim,
//!   the disk frees up, and after the transition period the condition turns False and the
//!   taint goes.
//!
//! Missing prerequisites fail the test (`scripts/prereqs.sh test` installs them).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, Kubectl};
use crate::common::node_lab::{run, NodeLab, FAST_STATUS};

const NODE: &str = "diskgc-node";
const TMPFS_SIZE: &str = "384m";
const MIB: u64 = 1024 * 1024;
const TAINT: &str = "node.kubernetes.io/disk-pressure";

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: writer}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: writer
    image: docker.io/library/busybox:1.35
    command: [sleep, "3600"]
"#;

#[test]
fn unused_images_are_collected_and_a_pod_filling_the_disk_is_evicted() {
    common::require_program("fallocate", "util-linux");
    common::require_program("tar", "tar");
    NodeLab::run("diskgc", scenario);
}

/// (available, capacity) bytes of the file system holding `dir`.
fn fs_space(dir: &Path) -> (u64, u64) {
    let out = run(Command::new("stat")
        .args(["-f", "--format=%a %b %S"])
        .arg(dir));
    let n: Vec<u64> = out
        .split_whitespace()
        .map(|v| v.parse().expect("a number"))
        .collect();
    (n[0] * n[2], n[1] * n[2])
}

/// Writes `docker.io/k3rs/filler:1.35` into `dest`: the busybox image of
/// `scripts/build-images.sh` built from a busybox binary padded with 32 MiB of noise (so it
/// is an image of its own, and a big one), renamed.
fn build_filler_image(work: &Path, dest: &Path) {
    std::fs::create_dir_all(work).expect("filler work dir");
    let busybox = work.join("busybox");
    let mut bytes = std::fs::read("/bin/busybox").expect("/bin/busybox (busybox-static)");
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..(32 * MIB / 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(&busybox, bytes).expect("padded busybox");
    run(Command::new("chmod").arg("0755").arg(&busybox));
    let out = work.join("out");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-images.sh");
    run(Command::new("bash")
        .arg(&script)
        .arg(&out)
        .env("BUSYBOX", &busybox));
    let layout = work.join("layout");
    std::fs::create_dir_all(&layout).expect("layout dir");
    run(Command::new("tar")
        .arg("-C")
        .arg(&layout)
        .arg("-xf")
        .arg(out.join("busybox.tar")));
    let index = layout.join("index.json");
    let text = std::fs::read_to_string(&index).expect("index.json");
    let renamed = text.replace("docker.io/library/busybox", "docker.io/k3rs/filler");
    assert_ne!(text, renamed, "the image name in {text}");
    std::fs::write(&index, renamed).expect("index.json");
    std::fs::create_dir_all(dest.parent().expect("a parent")).expect("images dir");
    run(Command::new("tar")
        .arg("-C")
        .arg(&layout)
        .arg("-cf")
        .arg(dest)
        .args(["oci-layout", "index.json", "blobs"]));
}

/// The image names containerd has.
fn images(data: &Path) -> Vec<String> {
    let socket = data.join("agent/containerd/containerd.sock");
    run(Command::new("ctr")
        .arg("--address")
        .arg(socket)
        .args(["-n", "k8s.io", "images", "ls", "-q"]))
    .lines()
    .map(str::to_string)
    .collect()
}

fn has_image(images: &[String], name: &str) -> bool {
    images.iter().any(|i| i.starts_with(name))
}

/// The node's DiskPressure status and whether it has the disk-pressure NoSchedule taint.
fn disk_pressure(k: &Kubectl) -> (String, bool) {
    let node = json(k, &["get", "node", NODE, "-o", "json"]);
    let status = node["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "DiskPressure")
        .and_then(|c| c["status"].as_str())
        .unwrap_or_default()
        .to_string();
    let tainted = node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|t| t["key"] == TAINT && t["effect"] == "NoSchedule");
    (status, tainted)
}

fn scenario(lab: &NodeLab) {
    let data = lab.scratch.path().join("small");
    std::fs::create_dir_all(&data).expect("mount point");
    run(Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            &format!("size={TMPFS_SIZE},mode=0700"),
            "tmpfs",
        ])
        .arg(&data));
    // The lab unmounts what is left under its scratch dir once its processes are gone.
    build_filler_image(
        &lab.scratch.path().join("filler"),
        &data.join("agent/images/filler.tar"),
    );
    let mut args = FAST_STATUS.to_vec();
    args.extend([
        "--kubelet-arg",
        "image-gc-high-threshold=70",
        "--kubelet-arg",
        "image-gc-low-threshold=60",
        "--kubelet-arg",
        "image-minimum-gc-age=0s",
        "--kubelet-arg",
        "eviction-hard=nodefs.available<20%",
        "--kubelet-arg",
        "eviction-pressure-transition-period=20s",
    ]);
    let (mut server, k) = lab.start_server_on(&data, NODE, "127.0.0.1", &args);
    common::wait_for("the filler image", Duration::from_secs(120), || {
        let listed = images(&data);
        has_image(&listed, "docker.io/k3rs/filler").then_some(())
    });
    k.ok_stdin(&["apply", "-f", "-"], Some(POD));
    common::wait_for("the pod to run", Duration::from_secs(150), || {
        server.assert_running();
        let p = json(&k, &["get", "pod", "writer", "-o", "json"]);
        (p["status"]["phase"] == "Running").then_some(())
    });
    assert_eq!(disk_pressure(&k), ("False".to_string(), false));

    // Image GC: 73 % used (27 % free) is past the high threshold, not yet eviction's 80 %.
    let (available, capacity) = fs_space(&data);
    let fill = available.saturating_sub(capacity * 27 / 100);
    assert!(
        fill > 0,
        "the disk is already {}% used before the test fills it\n{}",
        100 - available * 100 / capacity,
        common::log_tail(&server.log_path(), 60)
    );
    run(Command::new("fallocate")
        .args(["-l", &fill.to_string()])
        .arg(data.join("filler")));
    let listed = common::wait_for(
        "the unused image to be collected",
        Duration::from_secs(120),
        || {
            server.assert_running();
            let listed = images(&data);
            (!has_image(&listed, "docker.io/k3rs/filler")).then_some(listed)
        },
    );
    assert!(
        has_image(&listed, "docker.io/library/busybox:1.35"),
        "the pod's image stays: {listed:?}"
    );
    assert!(
        has_image(&listed, k3rs_agent::images::pause::IMAGE),
        "the sandbox image stays: {listed:?}"
    );
    let p = json(&k, &["get", "pod", "writer", "-o", "json"]);
    assert_eq!(
        p["status"]["phase"], "Running",
        "image GC evicts nothing: {p}"
    );

    // Eviction: the pod fills its own filesystem to 12 % free.
    let (available, capacity) = fs_space(&data);
    let write = available.saturating_sub(capacity * 12 / 100) / MIB;
    let dd = k.run(&[
        "exec",
        "writer",
        "--",
        "dd",
        "if=/dev/zero",
        "of=/fill",
        "bs=1M",
        &format!("count={write}"),
    ]);
    let (available, _) = fs_space(&data);
    assert!(
        available < capacity / 5,
        "the pod filled the disk ({} MiB free): {dd:?}",
        available / MIB
    );
    common::wait_for(
        "DiskPressure and its taint",
        Duration::from_secs(60),
        || {
            server.assert_running();
            (disk_pressure(&k) == ("True".to_string(), true)).then_some(())
        },
    );
    let evicted = common::wait_for("the pod to be evicted", Duration::from_secs(90), || {
        server.assert_running();
        let p = json(&k, &["get", "pod", "writer", "-o", "json"]);
        (p["status"]["phase"] == "Failed").then_some(p)
    });
    let status = &evicted["status"];
    assert_eq!(status["reason"], "Evicted", "{evicted}");
    let message = status["message"].as_str().unwrap_or_default();
    let prefix = "The node was low on resource: ephemeral-storage. Threshold quantity: ";
    assert!(message.starts_with(prefix), "{message:?}");
    assert!(message.contains(", available: "), "{message:?}");
    assert!(
        message.contains("Container writer was using ")
            && message.ends_with(", request is 0, has larger consumption of ephemeral-storage. "),
        "{message:?}"
    );
    let disruption = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "DisruptionTarget")
        .unwrap_or_else(|| panic!("a DisruptionTarget condition: {evicted}"));
    assert_eq!(disruption["status"], "True");
    assert_eq!(disruption["reason"], "TerminationByKubelet");

    // The evicted pod's container goes with the node-level reclaim; the pressure ends after
    // the transition period.
    common::wait_for("the disk to free up", Duration::from_secs(90), || {
        server.assert_running();
        let (available, capacity) = fs_space(&data);
        (available >= capacity / 5).then_some(())
    });
    common::wait_for(
        "DiskPressure and its taint to go",
        Duration::from_secs(120),
        || {
            server.assert_running();
            (disk_pressure(&k) == ("False".to_string(), false)).then_some(())
        },
    );
    let (_, tainted) = disk_pressure(&k);
    assert!(!tainted, "{}", common::log_tail(&server.log_path(), 60));
}

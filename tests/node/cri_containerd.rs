//! The container runtime boundary end to end, as root, with the real pieces: the images from
//! `scripts/build-images.sh`, the system containerd (1.6) under our supervisor, `ctr` imports,
//! runc, the CNI bridge/host-local/portmap plugins, and our CRI client over the unix socket.
//!
//! Everything runs inside a network namespace the test creates (a [`NodeLab`], no route
//! anywhere): containerd is started with an `nsenter --net=…` prefix (not `ip netns exec`,
//! which remounts /sys and so hides the cgroup mounts runc needs), so the CNI bridge, the
//! masquerade rules and the pods' veths live there. Containers run under the lab's cgroup
//! root. Dropping the lab (also on panic) kills every process in that netns and cgroup,
//! unmounts what is left under the scratch dir (the pod netns with it), deletes ours.
//!
//! Missing prerequisites (root, containerd, ctr, runc, nsenter, ip, iptables, the CNI plugins,
//! busybox-static) fail the test: `scripts/prereqs.sh test` installs them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::node_lab::{require_node_host, run, NodeLab};

use k3rs_agent::cni;
use k3rs_agent::containerd::{Config, Endpoint, Runtime, SupervisorOptions};
use k3rs_agent::cri::grpc::Cri;
use k3rs_agent::cri::pb;
use k3rs_agent::cri::{ImageService, RuntimeService};
use k3rs_agent::images;

const POD_CIDR: &str = "10.244.7.0/24";
const PAUSE: &str = "docker.io/k3rs/pause:3.6";
const BUSYBOX: &str = "docker.io/library/busybox:1.35";
/// The pod's web container listens here; the sandbox maps [`HOST_PORT`] of the node to it.
const WEB_PORT: i32 = 8080;
const HOST_PORT: i32 = 30080;

/// Prints the tail of containerd's log when the test fails (the lab then kills containerd).
struct LogOnPanic(PathBuf);

impl Drop for LogOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- last lines of {} ---\n{}",
                self.0.display(),
                common::log_tail(&self.0, 60)
            );
        }
    }
}

/// Polls `f` every 100 ms until it returns `Some`, panicking with `what` after `limit`.
async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn condition(status: &pb::StatusResponse, kind: &str) -> bool {
    status
        .status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.r#type == kind && c.status))
}

/// [`wait_for`] (20 s) on a blocking probe; on timeout shows the netns's NAT rules.
async fn wait_for_nat<T>(lab: &NodeLab, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = probe() {
            return v;
        }
        if Instant::now() >= deadline {
            let rules = Command::new("ip")
                .args(["netns", "exec", &lab.netns, "iptables-save", "-t", "nat"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            panic!("timed out after 20s waiting for {what}; NAT rules:\n{rules}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn container_status(cri: &Cri, id: &str) -> pb::ContainerStatus {
    cri.container_status(id.to_string(), false)
        .await
        .expect("ContainerStatus")
        .status
        .expect("container status")
}

fn sandbox_config(lab: &NodeLab, uid: &str) -> pb::PodSandboxConfig {
    pb::PodSandboxConfig {
        metadata: Some(pb::PodSandboxMetadata {
            name: "hello".into(),
            uid: uid.into(),
            namespace: "default".into(),
            attempt: 0,
        }),
        hostname: "hello-pod".into(),
        log_directory: lab
            .scratch
            .path()
            .join("pods")
            .join(uid)
            .display()
            .to_string(),
        labels: [("app".to_string(), "hello".to_string())].into(),
        port_mappings: vec![pb::PortMapping {
            protocol: pb::Protocol::Tcp as i32,
            container_port: WEB_PORT,
            host_port: HOST_PORT,
            host_ip: String::new(),
        }],
        linux: Some(pb::LinuxPodSandboxConfig {
            cgroup_parent: lab.cgroup_root.clone(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn containerd_runs_a_pod_through_cri() {
    require_node_host();
    for (program, package) in [
        ("containerd-shim-runc-v2", "containerd"),
        ("nsenter", "util-linux"),
        ("/bin/busybox", "busybox-static"),
    ] {
        common::require_program(program, package);
    }
    let lab = NodeLab::new("cri");
    let agent_dir = lab.scratch.path().join("agent");
    let _log = LogOnPanic(agent_dir.join("containerd/containerd.log"));
    let mut pod_namespaces = Vec::new();
    let mut config = Config::new(&agent_dir, PAUSE);
    // No CAP_SYS_RESOURCE, or a scratch dir on overlayfs (a run inside a container), change
    // the config; say so.
    for note in k3rs_agent::containerd::host::adapt(&mut config) {
        eprintln!("cri_containerd: {note}");
    }
    let images_dir = agent_dir.join("images");

    // The images, built from busybox-static.
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-images.sh");
    run(Command::new("bash").arg(&script).arg(&images_dir));

    // The CNI network for the node's pod CIDR.
    let cni_config = cni::Config::new(vec![POD_CIDR.parse().unwrap()], &agent_dir);
    cni::write(&cni_config, &config.layout.cni_conf_dir).expect("writing the conflist");

    // containerd inside our netns, under the supervisor; the images imported.
    let options = SupervisorOptions {
        prefix: vec![
            "nsenter".into(),
            format!("--net={}", lab.netns_path().display()).into(),
            "--".into(),
        ],
        ready_timeout: Duration::from_secs(30),
        stop_grace: Duration::from_secs(10),
        ..SupervisorOptions::default()
    };
    let runtime = Runtime::start(Endpoint::Supervised {
        config: config.clone(),
        options,
        images_dir: Some(images_dir.clone()),
    })
    .await
    .unwrap_or_else(|e| panic!("starting containerd: {e:#?}"));
    let supervisor = runtime.supervisor().expect("a supervised containerd");
    let first_pid = supervisor.pid().expect("containerd runs");
    let in_netns = std::fs::read_link(format!("/proc/{first_pid}/ns/net")).unwrap();
    let ours = std::fs::metadata(lab.netns_path()).unwrap();
    assert_eq!(
        in_netns.to_string_lossy(),
        format!("net:[{}]", std::os::unix::fs::MetadataExt::ino(&ours)),
        "containerd runs inside the test's netns"
    );

    // What the start imported; a second pass skips the unchanged tarballs.
    let report = &runtime.imported;
    let mut names: Vec<_> = report
        .imported
        .iter()
        .flat_map(|(_, n)| n.clone())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [PAUSE, BUSYBOX, "docker.io/library/busybox:latest"],
        "{report:?}"
    );
    assert!(report.skipped.is_empty());
    let ctr = images::Ctr::new(runtime.address(), &config.snapshotter);
    let again = images::import_dir(&ctr, &images_dir)
        .await
        .expect("re-importing");
    assert!(again.imported.is_empty(), "{again:?}");
    assert_eq!(
        again.skipped,
        [images_dir.join("busybox.tar"), images_dir.join("pause.tar")]
    );

    // CRI: version and status.
    let cri = runtime.cri.clone();
    let version = cri.version().await.expect("Version");
    assert_eq!(version.runtime_name, "containerd");
    assert_eq!(version.runtime_api_version, "v1");
    assert!(version.runtime_version.starts_with("1.6"), "{version:?}");
    wait_for(
        "RuntimeReady and NetworkReady",
        Duration::from_secs(30),
        || async {
            let status = cri.status(false).await.expect("Status");
            (condition(&status, "RuntimeReady") && condition(&status, "NetworkReady")).then_some(())
        },
    )
    .await;

    // CRI images: the imported ones are there.
    let spec = |image: &str| pb::ImageSpec {
        image: image.into(),
        ..Default::default()
    };
    let image = wait_for(
        "busybox in the CRI image store",
        Duration::from_secs(10),
        || async {
            cri.image_status(spec(BUSYBOX), false)
                .await
                .expect("ImageStatus")
        },
    )
    .await;
    assert!(image.repo_tags.contains(&BUSYBOX.to_string()), "{image:?}");
    let all = cri.list_images(None).await.expect("ListImages");
    assert!(
        all.iter().any(|i| i.repo_tags.contains(&PAUSE.to_string())),
        "{all:?}"
    );

    // A pod sandbox on the CNI network.
    let uid = format!("uid-{}", std::process::id());
    let sandbox = sandbox_config(&lab, &uid);
    let sandbox_id = cri
        .run_pod_sandbox(sandbox.clone(), String::new())
        .await
        .expect("RunPodSandbox");
    let status = cri
        .pod_sandbox_status(sandbox_id.clone(), true)
        .await
        .expect("PodSandboxStatus");
    // The pod's netns (containerd's verbose info carries the sandbox's OCI spec), checked gone
    // after RemovePodSandbox (should the test fail before, the lab removes it).
    let info: serde_json::Value =
        serde_json::from_str(status.info.get("info").expect("verbose sandbox info"))
            .expect("the sandbox info is JSON");
    let pod_netns = info["runtimeSpec"]["linux"]["namespaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|ns| ns["type"] == "network")
        .and_then(|ns| ns["path"].as_str())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("no network namespace path in the sandbox info: {info}"));
    assert!(pod_netns.exists(), "{}", pod_netns.display());
    // Under the agent's own state dir, not the host's /run/netns: the data dir's unmount
    // releases it whatever state the sandbox is left in.
    assert!(
        pod_netns.starts_with(&config.layout.pod_netns_dir),
        "the pod netns {} is under {}",
        pod_netns.display(),
        config.layout.pod_netns_dir.display()
    );
    pod_namespaces.push(pod_netns);
    let sb = status.status.expect("sandbox status");
    assert_eq!(sb.state, pb::PodSandboxState::SandboxReady as i32);
    let ip: std::net::Ipv4Addr = sb
        .network
        .as_ref()
        .expect("network status")
        .ip
        .parse()
        .expect("an IPv4 pod IP");
    let net: ipnet::Ipv4Net = POD_CIDR.parse().unwrap();
    assert!(net.contains(&ip), "pod IP {ip} is in {POD_CIDR}");
    assert_ne!(
        ip,
        std::net::Ipv4Addr::new(10, 244, 7, 1),
        "not the gateway"
    );
    let bridge = run(Command::new("ip").args(["-n", &lab.netns, "addr", "show", "cni0"]));
    assert!(
        bridge.contains("10.244.7.1/24"),
        "cni0 is the gateway: {bridge}"
    );

    // A busybox container in it.
    let container = pb::ContainerConfig {
        metadata: Some(pb::ContainerMetadata {
            name: "hello".into(),
            attempt: 0,
        }),
        image: Some(spec(BUSYBOX)),
        command: vec!["sh".into(), "-c".into(), "echo hello-k3rs; sleep 30".into()],
        log_path: "hello/0.log".into(),
        linux: Some(pb::LinuxContainerConfig::default()),
        ..Default::default()
    };
    let container_id = cri
        .create_container(sandbox_id.clone(), container, sandbox.clone())
        .await
        .expect("CreateContainer");
    cri.start_container(container_id.clone())
        .await
        .expect("StartContainer");
    let cs = container_status(&cri, &container_id).await;
    assert_eq!(cs.state, pb::ContainerState::ContainerRunning as i32);
    let log_path = Path::new(&sandbox.log_directory).join("hello/0.log");
    assert_eq!(cs.log_path, log_path.display().to_string());

    // Its output in the CRI log format: `<RFC 3339 time> stdout F hello-k3rs`.
    let line = wait_for(
        "the container's log line",
        Duration::from_secs(20),
        || async {
            let text = std::fs::read_to_string(&log_path).unwrap_or_default();
            text.lines().next().map(str::to_string)
        },
    )
    .await;
    let fields: Vec<&str> = line.splitn(4, ' ').collect();
    assert_eq!(fields.len(), 4, "{line:?}");
    assert_eq!(&fields[1..], ["stdout", "F", "hello-k3rs"], "{line:?}");
    let time = fields[0];
    assert!(
        time.len() > 20 && time.as_bytes()[4] == b'-' && time.as_bytes()[10] == b'T',
        "an RFC 3339 timestamp: {line:?}"
    );

    // A hostPort reaches a second container of the pod (the portmap plugin's DNAT): from the
    // node's own netns, to the node's bridge address. (The client is the host's curl:
    // busybox-static's wget segfaults here.)
    let web = pb::ContainerConfig {
        metadata: Some(pb::ContainerMetadata {
            name: "web".into(),
            attempt: 0,
        }),
        image: Some(spec(BUSYBOX)),
        command: vec![
            "sh".into(),
            "-c".into(),
            format!("mkdir -p /www && echo k3rs-web > /www/index.html && exec httpd -f -p {WEB_PORT} -h /www"),
        ],
        log_path: "web/0.log".into(),
        linux: Some(pb::LinuxContainerConfig::default()),
        ..Default::default()
    };
    let web_id = cri
        .create_container(sandbox_id.clone(), web, sandbox.clone())
        .await
        .expect("CreateContainer web");
    cri.start_container(web_id.clone())
        .await
        .expect("StartContainer web");
    // First straight to the pod (the server is up), then through the hostPort.
    for url in [
        format!("http://{ip}:{WEB_PORT}/"),
        format!("http://10.244.7.1:{HOST_PORT}/"),
    ] {
        let page = wait_for_nat(&lab, &format!("GET {url}"), || {
            let out = Command::new("nsenter")
                .arg(format!("--net={}", lab.netns_path().display()))
                .args(["--", "curl", "-s", "--max-time", "2", &url])
                .output()
                .expect("running curl");
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        })
        .await;
        assert_eq!(page, "k3rs-web\n", "{url}");
    }
    cri.stop_container(web_id.clone(), 2)
        .await
        .expect("StopContainer web");
    cri.remove_container(web_id)
        .await
        .expect("RemoveContainer web");

    // ExecSync.
    let exec = cri
        .exec_sync(
            container_id.clone(),
            vec!["cat".into(), "/etc/hostname".into()],
            10,
        )
        .await
        .expect("ExecSync");
    assert_eq!(exec.exit_code, 0, "{exec:?}");
    assert_eq!(String::from_utf8_lossy(&exec.stdout), "hello-pod\n");

    // The pause image's entrypoint exits 0 on SIGTERM (PID 1 needs its trap for that).
    // (A SIGTERM within milliseconds of the start, before the shell set its trap, kills it
    // with 143; containerd stops sandboxes with SIGKILL anyway.)
    let pause = pb::ContainerConfig {
        metadata: Some(pb::ContainerMetadata {
            name: "pause".into(),
            attempt: 0,
        }),
        image: Some(spec(PAUSE)),
        log_path: "pause/0.log".into(),
        linux: Some(pb::LinuxContainerConfig::default()),
        ..Default::default()
    };
    let pause_id = cri
        .create_container(sandbox_id.clone(), pause, sandbox.clone())
        .await
        .expect("CreateContainer pause");
    cri.start_container(pause_id.clone())
        .await
        .expect("StartContainer pause");
    // Wait until its PID 1 catches SIGTERM (bit 15 - 1 of SigCgt in /proc/1/status).
    wait_for("the pause trap", Duration::from_secs(20), || async {
        let cmd = ["/bin/busybox", "cat", "/proc/1/status"]
            .map(String::from)
            .to_vec();
        let out = cri
            .exec_sync(pause_id.clone(), cmd, 5)
            .await
            .expect("ExecSync cat");
        let status = String::from_utf8_lossy(&out.stdout).into_owned();
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
            .unwrap_or(0);
        (caught & (1 << 14) != 0).then_some(())
    })
    .await;
    cri.stop_container(pause_id.clone(), 20)
        .await
        .expect("StopContainer pause");
    let cs = container_status(&cri, &pause_id).await;
    assert_eq!(cs.state, pb::ContainerState::ContainerExited as i32);
    assert_eq!(cs.exit_code, 0, "pause exits cleanly on SIGTERM: {cs:?}");
    cri.remove_container(pause_id)
        .await
        .expect("RemoveContainer pause");

    // Tear down; the runtime has nothing left.
    cri.stop_container(container_id.clone(), 2)
        .await
        .expect("StopContainer");
    let cs = container_status(&cri, &container_id).await;
    assert_eq!(cs.state, pb::ContainerState::ContainerExited as i32);
    assert!(
        matches!(cs.exit_code, 137 | 143),
        "killed by SIGTERM or, after the timeout, SIGKILL: {cs:?}"
    );
    cri.remove_container(container_id.clone())
        .await
        .expect("RemoveContainer");
    let err = cri.container_status(container_id, false).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
    cri.stop_pod_sandbox(sandbox_id.clone())
        .await
        .expect("StopPodSandbox");
    cri.remove_pod_sandbox(sandbox_id)
        .await
        .expect("RemovePodSandbox");
    assert!(cri
        .list_containers(None)
        .await
        .expect("ListContainers")
        .is_empty());
    assert!(cri
        .list_pod_sandbox(None)
        .await
        .expect("ListPodSandbox")
        .is_empty());
    for ns in &pod_namespaces {
        assert!(!ns.exists(), "the pod netns {} is gone", ns.display());
    }

    // A containerd killed behind the supervisor's back is restarted; the client reconnects.
    let victim = rustix::process::Pid::from_raw(first_pid as i32).unwrap();
    rustix::process::kill_process(victim, rustix::process::Signal::KILL).unwrap();
    let second_pid = wait_for("containerd restarted", Duration::from_secs(20), || async {
        supervisor.pid().filter(|p| *p != first_pid)
    })
    .await;
    let version = wait_for("CRI after the restart", Duration::from_secs(30), || async {
        cri.version().await.ok()
    })
    .await;
    assert_eq!(version.runtime_name, "containerd");

    // Stop: the process is gone and the socket refuses.
    let address = runtime.address().to_path_buf();
    runtime.stop().await;
    assert!(
        !Path::new(&format!("/proc/{second_pid}")).exists(),
        "containerd {second_pid} is gone"
    );
    assert!(tokio::net::UnixStream::connect(&address).await.is_err());

    // The netns, and the bridge in it, vanish with the lab.
    let netns_path = lab.netns_path();
    drop(lab);
    assert!(!netns_path.exists(), "{} removed", netns_path.display());
}

//! A release installed the way users install it (issue 24's acceptance), end to end:
//! `scripts/release.sh --bin-from` packages the test build into `dist/` (binary, sha256 file,
//! air-gap images tarball, install.sh); a loopback HTTP server inside a network namespace the
//! test made serves it and a kubectl mirror; `curl -sfL …/install.sh | sh -` installs into a
//! scratch root (`INSTALL_K3RS_ROOT`: the machine's /etc, /usr/local and systemd are left
//! alone); the ExecStart of the installed unit, with its environment file, runs inside the
//! namespace as systemd would run it; its node turns Ready and runs a pod whose sandbox is the
//! pause image embedded in k3rs (the namespace reaches no registry, and `scripts/build-images.sh`'s
//! pause image is not there: only its busybox, from the air-gap directory, beside a truncated
//! tarball the agent skips with a warning naming it); the uninstall script then leaves the root
//! as it was.
//!
//! Needs root and a host that can run a node (`scripts/prereqs.sh test`); fails otherwise.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, pod_ready, Kubectl};
use crate::common::node_lab::{build_images, run, NodeLab};
use crate::common::process::ChildGuard;
use crate::install_sh::{arch, listing, names, serve, sha256_hex, text};

const BIN: &str = env!("CARGO_BIN_EXE_k3rs");
const NODE: &str = "installed-1";
const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: docker.io/library/busybox:1.35
    command: [sh, -c, "echo hello from the installed node && exec sleep 3600"]
"#;

#[test]
fn curl_pipe_install_runs_a_pod_with_the_embedded_pause_image() {
    NodeLab::run("release", scenario);
}

/// `release.sh` with `args` (DIST in a scratch dir): exit code, stdout and stderr, and whether
/// it wrote the dist dir.
fn release_sh(args: &[&str]) -> (Option<i32>, String, bool) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dist = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg(repo.join("scripts/release.sh"))
        .args(args)
        .env("DIST", dist.path().join("dist"))
        .output()
        .unwrap();
    let wrote = dist.path().join("dist").exists();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text, wrote)
}

/// Flags release.sh cannot honour are refused before anything is built or written: `--order`
/// relinks a build made here (not a given binary, not a cross target); unknown flags and
/// flags without their value get the usage; `--help` prints every flag.
#[test]
fn release_sh_refuses_what_it_cannot_order() {
    for args in [
        &["--order", "--bin-from", "/bin/true"][..],
        &["--bin-from", "/bin/true", "--order"],
        &["--order", "--target", "riscv64gc-unknown-linux-gnu"],
    ] {
        let (code, err, wrote) = release_sh(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("--order relinks a build"), "{args:?}: {err}");
        assert!(!wrote, "{args:?} wrote a dist dir");
    }
    let (code, help, wrote) = release_sh(&["--help"]);
    assert_eq!(code, Some(0), "{help}");
    for flag in ["--target", "--bin-from", "--order", "--profile", "DIST="] {
        assert!(help.contains(flag), "--help lacks {flag}: {help}");
    }
    assert!(!wrote, "--help wrote a dist dir");
    for args in [&["--orderly"][..], &["--profile"], &["--bin-from"]] {
        let (code, err, wrote) = release_sh(args);
        assert_ne!(code, Some(0), "{args:?}: {err}");
        assert!(
            err.contains("usage:") || err.contains("needs a"),
            "{args:?}: {err}"
        );
        assert!(!wrote, "{args:?} wrote a dist dir");
    }
}

/// The ExecStart command of a unit written by install.sh (one argument per continued line,
/// double-quoted as install.sh quotes an argument with shell characters).
fn exec_start(unit: &str) -> Vec<String> {
    let mut words = Vec::new();
    let lines = unit.lines().skip_while(|l| !l.starts_with("ExecStart="));
    for line in lines {
        let line = line.trim_start_matches("ExecStart=");
        let (body, continued) = match line.strip_suffix('\\') {
            Some(b) => (b, true),
            None => (line, false),
        };
        let word = body.trim();
        // A double-quoted argument (install.sh quotes those with shell characters) is taken
        // whole when it holds nothing systemd would expand or unescape.
        let quoted = word
            .strip_prefix('"')
            .and_then(|w| w.strip_suffix('"'))
            .filter(|w| !w.contains(['"', '\\', '$', '%']));
        if let Some(arg) = quoted {
            words.push(arg.to_string());
        } else {
            assert!(
                !word.contains(['"', '$', '%']),
                "an ExecStart argument needs unquoting: {word}"
            );
            words.extend(word.split_whitespace().map(String::from));
        }
        if !continued {
            break;
        }
    }
    words
}

/// `KEY=VALUE` lines of an environment file (unquoted values: none of ours needs quotes).
fn env_file(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn scenario(lab: &NodeLab) {
    let scratch = lab.scratch.path();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let arch = arch();

    // The release, from the binary under test.
    let web = scratch.join("web");
    let dist = web.join("dist");
    let out = Command::new("bash")
        .arg(repo.join("scripts/release.sh"))
        .args(["--bin-from", BIN])
        .env("DIST", &dist)
        .output()
        .unwrap();
    assert!(out.status.success(), "release.sh: {}", text(&out));
    let binary = format!("k3rs-{arch}");
    let images_tarball = format!("k3rs-airgap-images-{arch}.tar");
    let sums = format!("sha256sum-{arch}.txt");
    let mut files: Vec<String> = std::fs::read_dir(&dist)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let mut expected = vec![
        binary.clone(),
        images_tarball.clone(),
        "install.sh".to_string(),
        sums.clone(),
    ];
    expected.sort();
    assert_eq!(files, expected);
    assert_eq!(
        std::fs::read_to_string(dist.join(&sums)).unwrap(),
        format!(
            "{}  {binary}\n{}  {images_tarball}\n",
            sha256_hex(&dist.join(&binary)),
            sha256_hex(&dist.join(&images_tarball))
        )
    );
    let stripped = Command::new("file").arg(dist.join(&binary)).output();
    if let Ok(out) = stripped {
        let what = String::from_utf8_lossy(&out.stdout);
        assert!(what.contains(", stripped"), "{what}");
    }

    // A kubectl mirror: the machine's kubectl with its checksum, as dl.k8s.io publishes them.
    let kubectl_dir = web.join("kubectl");
    std::fs::create_dir_all(&kubectl_dir).unwrap();
    let system_kubectl = common::require_program("kubectl", "kubectl");
    std::fs::copy(&system_kubectl, kubectl_dir.join("kubectl")).unwrap();
    let kubectl_sum = sha256_hex(&kubectl_dir.join("kubectl"));
    std::fs::write(kubectl_dir.join("kubectl.sha256"), &kubectl_sum).unwrap();

    // The scratch root, and the air-gap directory: busybox (not build-images.sh's pause) and
    // a truncated copy of it.
    let root = scratch.join("root");
    std::fs::create_dir_all(root.join("var/lib")).unwrap();
    let initial = listing(&root);
    let data_dir = root.join("var/lib/k3rs");
    let images = data_dir.join("agent/images");
    let built = scratch.join("built");
    build_images(&built);
    std::fs::create_dir_all(&images).unwrap();
    std::fs::copy(built.join("busybox.tar"), images.join("busybox.tar")).unwrap();
    let busybox = std::fs::read(built.join("busybox.tar")).unwrap();
    std::fs::write(images.join("broken.tar"), &busybox[..busybox.len() / 2]).unwrap();

    // curl | sh, from the server inside the namespace.
    let (url, asked) = serve(web.clone());
    let kubeconfig = root.join("etc/k3rs/k3rs.yaml");
    let install = format!(
        "curl -sfL {url}/dist/install.sh | sh -s - server --data-dir {data} \
         --write-kubeconfig {kubeconfig} --node-ip 127.0.0.1 --bind-address 127.0.0.1 \
         --kubelet-arg cgroup-root={cgroup} --kubelet-arg node-status-update-frequency=2s \
         {test_node}",
        // Quoted: `<` is a redirection to the shell.
        test_node = crate::common::k3rs::TEST_NODE_KUBELET_ARGS
            .map(|a| format!("'{a}'"))
            .join(" "),
        data = data_dir.display(),
        kubeconfig = kubeconfig.display(),
        cgroup = lab.cgroup_root,
    );
    let out = Command::new("sh")
        .args(["-c", &install])
        .env_clear()
        .env("PATH", PATH)
        .env("INSTALL_K3RS_ROOT", &root)
        .env("INSTALL_K3RS_INIT", "systemd")
        .env("INSTALL_K3RS_DOWNLOAD_URL", format!("{url}/dist"))
        .env("INSTALL_K3RS_KUBECTL_URL", format!("{url}/kubectl"))
        .env("K3RS_NODE_NAME", NODE)
        // Never the machine's /etc/k3rs/config.yaml (it goes to the service's env file).
        .env("K3RS_CONFIG_FILE", "/dev/null")
        .output()
        .unwrap();
    let log = text(&out);
    assert!(out.status.success(), "curl | sh: {log}");
    for line in [
        format!("Verified the sha256 of {binary}"),
        format!("Verified the sha256 of kubectl ({kubectl_sum})"),
        "Linked /usr/local/bin/kubectl -> k3rs".to_string(),
        "Enabled k3rs".to_string(),
    ] {
        assert!(log.contains(&line), "{line:?} not in {log}");
    }
    assert_eq!(
        *asked.lock().unwrap(),
        [
            "/dist/install.sh".to_string(),
            format!("/dist/{sums}"),
            format!("/dist/{binary}"),
            "/kubectl/kubectl.sha256".to_string(),
            "/kubectl/kubectl".to_string(),
        ]
    );
    let bin_dir = root.join("usr/local/bin");
    assert_eq!(
        std::fs::read(bin_dir.join("k3rs")).unwrap(),
        std::fs::read(dist.join(&binary)).unwrap()
    );
    assert_eq!(
        sha256_hex(&bin_dir.join("k3rs-kubectl")),
        kubectl_sum,
        "the private kubectl"
    );

    // The service as systemd would start it: the environment file, then ExecStart.
    let unit_dir = root.join("etc/systemd/system");
    let unit = std::fs::read_to_string(unit_dir.join("k3rs.service")).unwrap();
    let env = env_file(&std::fs::read_to_string(unit_dir.join("k3rs.service.env")).unwrap());
    let mut argv = exec_start(&unit);
    assert_eq!(argv[0], "/usr/local/bin/k3rs", "{unit}");
    assert_eq!(argv[1], "server", "{unit}");
    argv[0] = bin_dir.join("k3rs").display().to_string();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .env("PATH", PATH)
        .envs(env)
        .env("K3RS_LOG", "info");
    let server_log = scratch.join("server.log");
    let mut server = ChildGuard::spawn("the installed k3rs server", cmd, &server_log);

    common::wait_for("the admin kubeconfig", Duration::from_secs(120), || {
        server.assert_running();
        kubeconfig.exists().then_some(())
    });
    // kubectl through the link: k3rs runs the private kubectl (no kubectl on this PATH).
    let through_link = |args: &[&str]| {
        Command::new(bin_dir.join("kubectl"))
            .args(args)
            .env_clear()
            .env("PATH", "/nonexistent")
            .env("HOME", scratch)
            .env("KUBECONFIG", &kubeconfig)
            .output()
            .unwrap()
    };
    let k = Kubectl {
        bin: bin_dir.join("k3rs-kubectl"),
        kubeconfig: kubeconfig.clone(),
    };
    let ready = |n: &serde_json::Value| {
        n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    };
    common::wait_for("the installed node Ready", Duration::from_secs(180), || {
        server.assert_running();
        let out = k.run(&["get", "node", NODE, "-o", "json"]);
        let n: serde_json::Value = serde_json::from_str(&out.stdout).ok()?;
        ready(&n).then_some(())
    });
    let out = through_link(&["get", "nodes", "-o", "name"]);
    assert!(out.status.success(), "kubectl -> k3rs: {}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("node/{NODE}")
    );

    // The truncated tarball was skipped with a warning naming it (the air-gap imports run in
    // the background, so possibly after the node turned Ready); busybox was imported.
    let broken = images.join("broken.tar").display().to_string();
    common::wait_for("the broken.tar warning", Duration::from_secs(60), || {
        let logged = std::fs::read_to_string(&server_log).unwrap_or_default();
        (logged.contains("skipping the air-gap image tarball") && logged.contains(&broken))
            .then_some(())
    });

    // A pod runs: its sandbox is the embedded pause image, the only pause image there is.
    k.ok_stdin(&["apply", "-f", "-"], Some(POD));
    common::wait_for("the pod Running", Duration::from_secs(120), || {
        server.assert_running();
        let pod = json(&k, &["get", "pod", "hello"]);
        pod_ready(&pod).then_some(())
    });
    common::wait_for("the pod's output", Duration::from_secs(30), || {
        let out = k.run(&["logs", "hello"]);
        out.stdout
            .contains("hello from the installed node")
            .then_some(())
    });
    let socket = data_dir.join("agent/containerd/containerd.sock");
    let present = run(Command::new("ctr")
        .arg("--address")
        .arg(&socket)
        .args(["-n", "k8s.io", "images", "ls", "-q"]));
    let present: Vec<&str> = present.lines().collect();
    assert!(
        present.contains(&k3rs_agent::images::pause::IMAGE),
        "{present:?}"
    );
    assert!(
        !present
            .iter()
            .any(|i| i.starts_with("docker.io/k3rs/pause:3.6")),
        "build-images.sh's pause image must not be there: {present:?}"
    );
    assert!(
        present.contains(&"docker.io/library/busybox:1.35"),
        "{present:?}"
    );

    // Stop: the service, then what it left running (as k3rs-killall.sh does on a real root),
    // then uninstall.
    server.terminate(Duration::from_secs(30));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        // (`ip netns pids`, run from inside the namespace, lists itself: gone by now.)
        let left: Vec<i32> = lab
            .processes()
            .into_iter()
            .filter(|p| Path::new(&format!("/proc/{p}")).exists())
            .collect();
        if left.is_empty() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let ps = Command::new("ps")
                .args(["-o", "pid,ppid,stat,args", "-p"])
                .arg(
                    left.iter()
                        .map(i32::to_string)
                        .collect::<Vec<_>>()
                        .join(","),
                )
                .output()
                .unwrap();
            panic!("the node's processes are still there: {}", text(&ps));
        }
        for pid in left {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = Command::new(bin_dir.join("k3rs-uninstall.sh"))
        .env_clear()
        .env("PATH", PATH)
        .env("INSTALL_K3RS_ROOT", &root)
        .output()
        .unwrap();
    assert!(out.status.success(), "uninstall: {}", text(&out));
    assert_eq!(
        names(&listing(&root)),
        names(&initial),
        "left behind: {}",
        text(&out)
    );
}

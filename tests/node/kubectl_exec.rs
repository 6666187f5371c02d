//! The kubelet API and the API server's proxying to it, driven by real `kubectl` against a
//! `k3rs server` with its embedded agent: `kubectl logs` (plain, `-f` streaming a line written
//! later, `--tail`, `--timestamps`, `--previous` after a restart), `kubectl exec` (output and
//! exit code, stdin piped with `-i`), `kubectl attach` (output of a running container; `-i`
//! into a container with `stdin: true` that echoes), `kubectl cp` both ways, `kubectl port-forward` to an
//! httpd in a pod, `nodes/<node>/proxy/healthz`, the kubelet's `/stats/summary` and `/metrics/resource` through
//! the node proxy, and RBAC on `pods/exec` (403 without it).
//! As root, inside a network namespace the test makes (loopback only, no route out), with the
//! images of `scripts/build-images.sh` imported from `<data-dir>/agent/images`.
//!
//! Missing prerequisites fail the test (`scripts/prereqs.sh test` installs them).

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, Kubectl};
use crate::common::node_lab::{NodeLab, FAST_STATUS};

const NODE: &str = "exec-node";

const PODS: &str = r#"
apiVersion: v1
kind: Pod
metadata: {name: box}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: box
    image: docker.io/library/busybox:1.35
    command: [sh, -c, "echo line-1; echo line-2; echo line-3; while true; do if [ -f /tmp/go ]; then rm /tmp/go; echo later-line; fi; sleep 0.2; done"]
---
apiVersion: v1
kind: Pod
metadata: {name: crasher}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: d, emptyDir: {}}]
  containers:
  - name: crasher
    image: docker.io/library/busybox:1.35
    volumeMounts: [{name: d, mountPath: /d}]
    command: [sh, -c, "n=$(cat /d/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /d/n; echo attempt-$n; sleep 1; exit 1"]
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: docker.io/library/busybox:1.35
    command: [sh, -c, "mkdir -p /www && echo hello-through-port-forward > /www/index.html && exec httpd -f -p 8080 -h /www"]
---
apiVersion: v1
kind: Pod
metadata: {name: echoer}
spec:
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  containers:
  - name: echoer
    image: docker.io/library/busybox:1.35
    stdin: true
    stdinOnce: true
    tty: false
    command: [sh, -c, "while read l; do echo \"echo: $l\"; done; echo stdin-closed"]
"#;

#[test]
fn kubectl_logs_exec_cp_and_port_forward_reach_the_pods() {
    common::require_program("openssl", "openssl");
    NodeLab::run("kexec", scenario);
}

fn scenario(lab: &NodeLab) {
    let (mut server, k) = lab.start_server(NODE, "127.0.0.1", &FAST_STATUS, &[]);

    k.ok_stdin(&["apply", "-f", "-"], Some(PODS));
    for pod in ["box", "web", "echoer"] {
        common::wait_for(
            &format!("pod {pod} to run"),
            Duration::from_secs(150),
            || {
                server.assert_running();
                let p = json(&k, &["get", "pod", pod, "-o", "json"]);
                (p["status"]["phase"] == "Running").then_some(())
            },
        );
    }

    // The node's kubelet answers through the API server's node proxy (once its serving
    // certificate is issued: auto-approved for the node's own name and address).
    let healthz = format!("/api/v1/nodes/{NODE}/proxy/healthz");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let out = k.run(&["get", "--raw", &healthz]);
        if out.ok {
            assert_eq!(out.stdout, "ok");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the kubelet API does not answer: {}\ncsr: {}\nserver log:\n{}",
            out.stderr,
            k.run(&["get", "csr"]).stdout,
            common::log_tail(&server.log_path(), 80)
        );
        std::thread::sleep(Duration::from_millis(500));
    }

    stats(&k);

    // Logs: whole, tail, timestamps.
    let logs = common::wait_for("box's first lines", Duration::from_secs(30), || {
        let out = k.run(&["logs", "box"]);
        (out.ok && out.stdout.contains("line-3")).then_some(out.stdout)
    });
    assert_eq!(logs, "line-1\nline-2\nline-3\n");
    assert_eq!(k.ok(&["logs", "box", "--tail", "1"]), "line-3\n");
    let stamped = k.ok(&["logs", "box", "--timestamps"]);
    let lines: Vec<&str> = stamped.lines().collect();
    assert_eq!(lines.len(), 3, "{stamped}");
    for (i, l) in lines.iter().enumerate() {
        let (ts, text) = l.split_once(' ').unwrap_or_else(|| panic!("{l:?}"));
        assert_eq!(text, format!("line-{}", i + 1));
        assert!(
            ts.len() >= 20 && ts.as_bytes()[4] == b'-' && ts.as_bytes()[10] == b'T',
            "an RFC 3339 timestamp: {ts:?}"
        );
    }
    let missing = k.run(&["logs", "box", "-c", "nope"]);
    assert!(!missing.ok);
    assert!(
        missing
            .stderr
            .contains("container nope is not valid for pod box"),
        "{}",
        missing.stderr
    );

    // Exec: output and exit code.
    let out = k
        .command(&[
            "exec",
            "box",
            "--",
            "sh",
            "-c",
            "echo hi; echo err >&2; exit 3",
        ])
        .output()
        .expect("kubectl exec");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
    assert!(String::from_utf8_lossy(&out.stderr).contains("err"));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    // Stdin piped with -i.
    assert_eq!(
        k.ok_stdin(
            &["exec", "-i", "box", "--", "cat"],
            Some("piped through stdin\n")
        ),
        "piped through stdin\n"
    );

    // logs -f streams a line the container writes after the stream opened.
    let follow_out = server.data_dir().join("follow.log");
    let mut follow = k
        .command(&["logs", "-f", "box"])
        .stdout(std::fs::File::create(&follow_out).expect("follow log"))
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl logs -f");
    let read = || std::fs::read_to_string(&follow_out).unwrap_or_default();
    common::wait_for(
        "logs -f to print the first lines",
        Duration::from_secs(20),
        || read().contains("line-3").then_some(()),
    );
    assert!(!read().contains("later-line"), "{}", read());
    k.ok(&["exec", "box", "--", "touch", "/tmp/go"]);
    common::wait_for(
        "logs -f to stream the later line",
        Duration::from_secs(20),
        || read().contains("later-line\n").then_some(()),
    );
    let _ = follow.kill();
    let _ = follow.wait();

    attach(&k, &server);

    // cp in and out (tar in the container).
    let local = server.data_dir().join("cp-in.txt");
    let content = "copied by kubectl cp\n".repeat(100);
    std::fs::write(&local, &content).expect("write");
    k.ok(&["cp", local.to_str().unwrap(), "box:/tmp/cp.txt"]);
    assert_eq!(k.ok(&["exec", "box", "--", "cat", "/tmp/cp.txt"]), content);
    let back = server.data_dir().join("cp-out.txt");
    k.ok(&["cp", "box:/tmp/cp.txt", back.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(&back).expect("copied back"),
        content
    );

    // --previous after a restart.
    let restarts = common::wait_for("crasher to restart", Duration::from_secs(60), || {
        let p = json(&k, &["get", "pod", "crasher", "-o", "json"]);
        let n = p["status"]["containerStatuses"][0]["restartCount"]
            .as_i64()
            .unwrap_or(0);
        (n >= 1).then_some(n)
    });
    let previous = k.ok(&["logs", "crasher", "--previous"]);
    let after = json(&k, &["get", "pod", "crasher", "-o", "json"])["status"]["containerStatuses"]
        [0]["restartCount"]
        .as_i64()
        .unwrap_or(0);
    let attempt: i64 = previous
        .trim()
        .strip_prefix("attempt-")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("previous logs {previous:?}"));
    assert!(
        (restarts..=after).contains(&attempt),
        "previous instance {attempt} between restart counts {restarts} and {after}"
    );
    let none = k.run(&["logs", "box", "--previous"]);
    assert!(
        none.stderr
            .contains("previous terminated container \"box\" in pod \"box\" not found"),
        "{}",
        none.stderr
    );

    // port-forward to the httpd, curl on loopback.
    let port = common::free_port();
    let pf_log = server.data_dir().join("port-forward.log");
    let mut pf = k
        .command(&["port-forward", "pod/web", &format!("{port}:8080")])
        .stdout(std::fs::File::create(&pf_log).expect("pf log"))
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl port-forward");
    common::wait_for("port-forward to listen", Duration::from_secs(20), || {
        std::fs::read_to_string(&pf_log)
            .unwrap_or_default()
            .contains("Forwarding from")
            .then_some(())
    });
    let url = format!("http://127.0.0.1:{port}/");
    for _ in 0..2 {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "10", &url])
            .output()
            .expect("curl");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "hello-through-port-forward\n",
            "curl {url}: {out:?}"
        );
    }
    let _ = pf.kill();
    let _ = pf.wait();

    // RBAC: a user who may read pods but not exec into them.
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(
            r#"
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: pod-reader}
rules:
- {apiGroups: [""], resources: [pods, pods/log], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: eve-reads}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: pod-reader}
subjects: [{kind: User, name: eve, apiGroup: rbac.authorization.k8s.io}]
"#,
        ),
    );
    let eve = Kubectl {
        bin: k.bin.clone(),
        kubeconfig: common::users::cert_kubeconfig(&server, "eve", &[]),
    };
    assert_eq!(eve.ok(&["logs", "box", "--tail", "1"]), "later-line\n");
    let denied = eve.run(&["exec", "box", "--", "true"]);
    assert!(!denied.ok);
    assert!(
        denied.stderr.contains("forbidden") && denied.stderr.contains("pods/exec"),
        "{}",
        denied.stderr
    );
    let mut s = String::new();
    let _ = std::fs::File::open(server.log_path()).map(|mut f| f.read_to_string(&mut s));
    assert!(!s.contains("panicked"), "the server panicked:\n{s}");
}

/// `kubectl attach`: to a running container's output (a line it writes after the attach
/// opened arrives), and with `-i` to a container that reads stdin (`stdin: true`,
/// `stdinOnce: true`, no tty, like `kubectl run -i`): the piped lines come back echoed, the
/// end of the piped input closes the container's stdin (the runtime does that for
/// `stdinOnce`), and the container's exit ends the session. (Without `stdinOnce` the runtime
/// ends the session as soon as the client's stdin ends, upstream too, dropping later output.)
fn attach(k: &Kubectl, server: &common::K3rs) {
    let attach_out = server.data_dir().join("attach.log");
    let mut attached = k
        .command(&["attach", "box"])
        .stdout(std::fs::File::create(&attach_out).expect("attach log"))
        .stderr(Stdio::null())
        .spawn()
        .expect("kubectl attach");
    let read = || std::fs::read_to_string(&attach_out).unwrap_or_default();
    // The session is up once a line written after it opened arrives; retry the trigger
    // until then (a line written before the attach connected is not replayed).
    common::wait_for(
        "kubectl attach to stream a line written after it attached",
        Duration::from_secs(30),
        || {
            if read().contains("later-line\n") {
                return Some(());
            }
            k.ok(&["exec", "box", "--", "touch", "/tmp/go"]);
            std::thread::sleep(Duration::from_millis(500));
            None
        },
    );
    assert!(
        attached.try_wait().expect("try_wait").is_none(),
        "attach to a running container keeps streaming"
    );
    let _ = attached.kill();
    let _ = attached.wait();
    assert!(
        !read().contains("line-1"),
        "attach shows new output only: {}",
        read()
    );

    let echo_out = server.data_dir().join("attach-i.log");
    let echo_err = server.data_dir().join("attach-i.err");
    let mut child = k
        .command(&["attach", "-i", "echoer", "-c", "echoer"])
        .stdin(Stdio::piped())
        .stdout(std::fs::File::create(&echo_out).expect("attach -i log"))
        .stderr(std::fs::File::create(&echo_err).expect("attach -i stderr"))
        .spawn()
        .expect("kubectl attach -i");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(b"hello attach\nsecond line\nbye\n")
            .expect("write to kubectl attach -i");
    }
    let status = common::wait_for(
        "kubectl attach -i to end when the container exits",
        Duration::from_secs(30),
        || child.try_wait().expect("try_wait"),
    );
    assert_eq!(
        std::fs::read_to_string(&echo_out).unwrap_or_default(),
        "echo: hello attach\necho: second line\necho: bye\nstdin-closed\n",
        "kubectl attach -i ({status:?}), stderr: {}\npod: {}",
        std::fs::read_to_string(&echo_err).unwrap_or_default(),
        k.run(&["get", "pod", "echoer", "-o", "yaml"]).stdout,
    );
    assert!(status.success(), "kubectl attach -i: {status:?}");
    common::wait_for("echoer to succeed", Duration::from_secs(30), || {
        let p = json(k, &["get", "pod", "echoer", "-o", "json"]);
        (p["status"]["phase"] == "Succeeded").then_some(())
    });
}

/// `/stats/summary` lists the running pods with their containers' CPU and memory, and
/// `/metrics/resource` has the kubelet's resource metrics for them.
fn stats(k: &Kubectl) {
    let path = format!("/api/v1/nodes/{NODE}/proxy/stats/summary");
    let summary: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "--raw", &path])).expect("the summary is JSON");
    assert_eq!(summary["node"]["nodeName"], NODE, "{summary}");
    assert!(
        summary["node"]["memory"]["workingSetBytes"].as_u64() > Some(0),
        "{summary}"
    );
    assert!(
        summary["node"]["cpu"]["usageCoreNanoSeconds"].as_u64() > Some(0),
        "{summary}"
    );
    let pods = summary["pods"].as_array().expect("pods");
    for name in ["box", "web", "echoer"] {
        let pod = pods
            .iter()
            .find(|p| p["podRef"]["name"] == name && p["podRef"]["namespace"] == "default")
            .unwrap_or_else(|| panic!("pod {name} in {summary}"));
        assert!(pod["podRef"]["uid"].is_string(), "{pod}");
        assert!(pod["memory"]["workingSetBytes"].as_u64() > Some(0), "{pod}");
        assert!(pod["cpu"]["usageCoreNanoSeconds"].is_u64(), "{pod}");
        assert!(!pod["containers"].as_array().unwrap().is_empty(), "{pod}");
    }
    let path = format!("/api/v1/nodes/{NODE}/proxy/metrics/resource");
    let metrics = k.ok(&["get", "--raw", &path]);
    for needle in [
        "node_cpu_usage_seconds_total ",
        "node_memory_working_set_bytes ",
        "pod_memory_working_set_bytes{namespace=\"default\",pod=\"web\"} ",
        "container_cpu_usage_seconds_total{container=",
        "scrape_error 0",
    ] {
        assert!(metrics.contains(needle), "{needle} in {metrics}");
    }
}

//! `k3rs agent --server URL --token TOKEN` end to end against a real server, with real
//! `kubectl`: the TLS bootstrap (CA pinned by the token's hash, the kubelet client CSR
//! auto-approved and signed, the serving CSR auto-approved for the node's own name and
//! address), the credential files, the node identity under the Node authorizer and
//! NodeRestriction, the Node registered with its labels, taints, addresses, capacity and
//! nodeInfo, NotReady with the runtime-down message when no containerd answers, the Lease
//! renewed, a restart reusing the identity; and a wrong
//! CA hash or token refused with a clear message and no credential written. Node passwords:
//! a second agent under an existing node name (its own data dir, so its own password) is
//! refused while the first keeps working, and joins once the node's password Secret is gone.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::process::ChildGuard;
use serde_json::Value;

const CREDENTIALS: &[&str] = &[
    "server-ca.crt",
    "kubelet-client.crt",
    "kubelet-client.key",
    "serving-kubelet.crt",
    "serving-kubelet.key",
    "kubelet.kubeconfig",
];

fn agent_command(server_url: &str, token: &str, data_dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
    cmd.arg("agent")
        .args(["--server", server_url, "--token", token, "--data-dir"])
        .arg(data_dir)
        // This agent runs in the test machine's own network namespace: no iptables rules.
        .arg("--disable-kube-proxy")
        .args(extra)
        .env_remove("K3RS_TOKEN")
        .env_remove("K3RS_URL")
        .env("K3RS_CONFIG_FILE", "/dev/null")
        .env("K3RS_LOG", "info,k3rs_agent=debug");
    cmd
}

/// Runs an agent that must refuse to join; its exit status and output.
fn refused(server_url: &str, token: &str, data_dir: &Path) -> String {
    refused_as(server_url, token, data_dir, &["--node-name", "refused"])
}

/// [`refused`] with these agent arguments.
fn refused_as(server_url: &str, token: &str, data_dir: &Path, args: &[&str]) -> String {
    let out = common::process::run_with_timeout(
        agent_command(server_url, token, data_dir, args),
        None,
        Duration::from_secs(60),
    );
    let (code, stdout, stderr) = out;
    assert_ne!(code, Some(0), "the agent joined:\n{stdout}\n{stderr}");
    assert!(code.is_some(), "the agent did not exit:\n{stderr}");
    stderr
}

fn no_credentials(data_dir: &Path) {
    for f in CREDENTIALS {
        let p = data_dir.join("agent").join(f);
        assert!(!p.exists(), "{} was written", p.display());
    }
}

fn json(k: &Kubectl, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&k.ok(&all)).unwrap()
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

fn csrs(k: &Kubectl) -> Vec<Value> {
    json(k, &["get", "csr"])["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn lease_renew_time(k: &Kubectl, node: &str) -> Option<String> {
    let out = k.run(&[
        "get",
        "lease",
        node,
        "-n",
        "kube-node-lease",
        "-o",
        "jsonpath={.spec.renewTime}",
    ]);
    (out.ok && !out.stdout.trim().is_empty()).then(|| out.stdout.trim().to_string())
}

fn wait_lease_renewed(k: &Kubectl, node: &str) {
    let first = common::wait_for("the node lease", Duration::from_secs(30), || {
        lease_renew_time(k, node)
    });
    common::wait_for(
        "the node lease to be renewed",
        Duration::from_secs(30),
        || lease_renew_time(k, node).filter(|t| *t != first),
    );
}

/// The `edge-1` agent's arguments (no runtime answers on its endpoint).
fn edge_args(data_dir: &Path) -> Vec<String> {
    [
        "--node-name",
        "edge-1",
        "--node-ip",
        "10.99.0.5",
        "--node-label",
        "tier=edge",
        "--node-taint",
        "dedicated=edge:NoSchedule",
        "--kubelet-arg",
        "node-status-update-frequency=2s",
        // No runtime answers there.
        "--container-runtime-endpoint",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!(
        "unix://{}",
        data_dir.join("no-runtime.sock").display()
    )])
    .collect()
}

fn start_agent(server_url: &str, token: &str, data_dir: &Path, log: &Path) -> ChildGuard {
    let args = edge_args(data_dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ChildGuard::spawn(
        "k3rs agent",
        agent_command(server_url, token, data_dir, &args),
        log,
    )
}

#[test]
fn an_agent_joins_by_token_and_registers_its_node() {
    let (server, admin) = Kubectl::start_server(&[]);
    let url = format!("https://127.0.0.1:{}", server.https_port());
    let token = agent_token(&server);
    let (hash, bearer) = token.strip_prefix("K10").unwrap().split_once("::").unwrap();
    let work = tempfile::tempdir().unwrap();

    // A CA hash that is not the server's: refused, both hashes named, nothing written.
    let wrong_hash = "0".repeat(64);
    let dir = work.path().join("wrong-hash");
    let err = refused(&url, &format!("K10{wrong_hash}::{bearer}"), &dir);
    assert!(
        err.contains(&format!(
            "the server's CA (sha256 {hash}) does not match the CA hash in the token \
             ({wrong_hash})"
        )),
        "{err}"
    );
    no_credentials(&dir);

    // A token the server does not know: refused, nothing written.
    let dir = work.path().join("wrong-token");
    let err = refused(&url, &format!("K10{hash}::abcdef.0123456789abcdef"), &dir);
    assert!(
        err.contains("the server refused the bootstrap token (401 Unauthorized)"),
        "{err}"
    );
    no_credentials(&dir);
    assert!(csrs(&admin).is_empty(), "a refused agent made a request");

    // The real join.
    let data = work.path().join("agent-data");
    let log = work.path().join("agent.log");
    let mut agent = start_agent(&url, &token, &data, &log);
    let node = common::wait_for("the node to register", Duration::from_secs(60), || {
        agent.assert_running();
        let out = admin.run(&["get", "node", "edge-1", "-o", "json"]);
        out.ok
            .then(|| serde_json::from_str::<Value>(&out.stdout).unwrap())
            .filter(|n| n["status"]["conditions"].is_array())
    });
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["kubernetes.io/hostname"], "edge-1");
    assert_eq!(labels["kubernetes.io/os"], "linux");
    assert_eq!(labels["beta.kubernetes.io/os"], "linux");
    assert_eq!(labels["tier"], "edge");
    let arch = labels["kubernetes.io/arch"].as_str().unwrap();
    assert_eq!(arch, node["status"]["nodeInfo"]["architecture"]);
    assert!(labels
        .get("node-role.kubernetes.io/control-plane")
        .is_none());
    // The registered taint; the node lifecycle controller may already have added its
    // node.kubernetes.io/not-ready ones (the node is NotReady), which are not the agent's.
    let registered: Vec<&Value> = node["spec"]["taints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            !t["key"]
                .as_str()
                .unwrap()
                .starts_with("node.kubernetes.io/")
        })
        .collect();
    assert_eq!(
        registered,
        [&serde_json::json!({"key": "dedicated", "value": "edge", "effect": "NoSchedule"})]
    );
    assert_eq!(
        node["status"]["addresses"],
        serde_json::json!([{"type": "InternalIP", "address": "10.99.0.5"},
            {"type": "Hostname", "address": "edge-1"}])
    );
    let cpus = std::thread::available_parallelism()
        .unwrap()
        .get()
        .to_string();
    assert_eq!(node["status"]["capacity"]["cpu"], cpus.as_str());
    assert_eq!(node["status"]["capacity"]["pods"], "110");
    assert!(node["status"]["capacity"]["memory"]
        .as_str()
        .unwrap()
        .ends_with("Ki"));
    assert!(node["status"]["allocatable"]["ephemeral-storage"].is_string());
    let info = &node["status"]["nodeInfo"];
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(info["kernelVersion"], kernel.trim());
    assert_eq!(info["operatingSystem"], "linux");
    assert_eq!(info["kubeletVersion"], "v1.33.0+k3rs1");
    assert_eq!(info["containerRuntimeVersion"], "");
    assert_eq!(
        node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
        10250
    );

    // No runtime answers on the --container-runtime-endpoint: NotReady, with the runtime-down
    // message.
    let ready = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Ready")
        .unwrap()
        .clone();
    assert_eq!(ready["status"], "False");
    assert_eq!(ready["reason"], "KubeletNotReady");
    assert_eq!(
        ready["message"],
        "[container runtime is down, container runtime network not ready: network state \
         unknown]"
    );
    let types: Vec<&str> = node["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    );

    // The client request was auto-approved and signed; it came from the bootstrap token.
    let all = csrs(&admin);
    let client: Vec<&Value> = all
        .iter()
        .filter(|c| c["spec"]["signerName"] == "kubernetes.io/kube-apiserver-client-kubelet")
        .collect();
    assert_eq!(client.len(), 1, "{all:#?}");
    let id = bearer.split('.').next().unwrap();
    assert_eq!(
        client[0]["spec"]["username"],
        format!("system:bootstrap:{id}")
    );
    assert_eq!(
        client[0]["status"]["conditions"][0]["type"], "Approved",
        "{:#}",
        client[0]
    );
    assert!(client[0]["status"]["certificate"].is_string());

    // The serving request came from the node; the server approves it (the node's own name
    // and address) and the agent stores it.
    let serving = common::wait_for("the serving request", Duration::from_secs(30), || {
        csrs(&admin)
            .into_iter()
            .find(|c| c["spec"]["signerName"] == "kubernetes.io/kubelet-serving")
    });
    assert_eq!(serving["spec"]["username"], "system:node:edge-1");
    let name = serving["metadata"]["name"].as_str().unwrap().to_string();
    common::wait_for(
        "the serving request's approval",
        Duration::from_secs(30),
        || {
            csrs(&admin)
                .into_iter()
                .find(|c| c["metadata"]["name"] == name.as_str())
                .filter(|c| {
                    c["status"]["conditions"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .any(|x| x["type"] == "Approved" && x["reason"] == "AutoApproved")
                })
        },
    );
    let agent_dir = data.join("agent");
    common::wait_for("the serving certificate", Duration::from_secs(30), || {
        agent_dir.join("serving-kubelet.crt").exists().then_some(())
    });
    for f in CREDENTIALS {
        assert!(agent_dir.join(f).exists(), "{f} missing");
    }
    for f in [
        "kubelet-client.key",
        "serving-kubelet.key",
        "kubelet.kubeconfig",
    ] {
        assert_eq!(mode(&agent_dir.join(f)), 0o600, "{f}");
    }

    // The stored identity is the node's, and only the node's.
    let as_node = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: agent_dir.join("kubelet.kubeconfig"),
    };
    assert_eq!(
        as_node.ok(&[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}"
        ]),
        "system:node:edge-1"
    );
    admin.ok_stdin(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: Node\nmetadata:\n  name: other-node\n"),
    );
    let out = as_node.run(&["label", "node", "other-node", "x=y"]);
    assert!(!out.ok, "the node labelled another node");
    assert!(
        out.stderr
            .contains("node \"edge-1\" is not allowed to modify node \"other-node\""),
        "{}",
        out.stderr
    );
    let out = as_node.run(&["get", "lease", "other-node", "-n", "kube-node-lease"]);
    assert!(
        !out.ok && out.stderr.contains("Forbidden"),
        "{}",
        out.stderr
    );

    // The Lease is renewed.
    wait_lease_renewed(&admin, "edge-1");

    // A restart reuses the identity: no new request, the node and its lease carry on.
    let before = csrs(&admin).len();
    assert_eq!(before, 2);
    let uid = node["metadata"]["uid"].clone();
    assert!(
        agent.terminate(Duration::from_secs(10)).is_some(),
        "the agent did not stop on SIGTERM"
    );
    let mut agent = start_agent(&url, &token, &data, &log);
    common::wait_for("the restarted agent", Duration::from_secs(30), || {
        agent.assert_running();
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("using the stored node identity")
            .then_some(())
    });
    wait_lease_renewed(&admin, "edge-1");
    assert_eq!(
        csrs(&admin).len(),
        before,
        "the restarted agent made a new request"
    );
    let again = json(&admin, &["get", "node", "edge-1"]);
    assert_eq!(again["metadata"]["uid"], uid);
    agent.assert_running();
}

fn agent_token(server: &common::K3rs) -> String {
    std::fs::read_to_string(server.data_dir().join("server/agent-token"))
        .unwrap()
        .trim()
        .to_string()
}

/// The stored hash of `node`'s password, if its Secret exists.
fn password_hash(k: &Kubectl, node: &str) -> Option<String> {
    use base64::Engine;
    let secret = format!("{node}.node-password.k3rs");
    let out = k.run(&[
        "get",
        "secret",
        "-n",
        "kube-system",
        &secret,
        "-o",
        "jsonpath={.data.hash}",
    ]);
    out.ok.then(|| {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(out.stdout.trim())
            .unwrap();
        String::from_utf8(bytes).unwrap()
    })
}

#[test]
fn a_second_agent_cannot_take_an_existing_node_name() {
    let (server, admin) = Kubectl::start_server(&[]);
    let url = format!("https://127.0.0.1:{}", server.https_port());
    let token = agent_token(&server);
    let work = tempfile::tempdir().unwrap();

    let first = work.path().join("first");
    let mut agent = start_agent(&url, &token, &first, &work.path().join("first.log"));
    common::wait_for("edge-1 to register", Duration::from_secs(60), || {
        agent.assert_running();
        admin.run(&["get", "node", "edge-1"]).ok.then_some(())
    });
    // The server keeps a salted hash, never the password; no request keeps it either.
    let password = std::fs::read_to_string(first.join("agent/node-password")).unwrap();
    let password = password.trim();
    assert_eq!(password.len(), 64);
    assert_eq!(mode(&first.join("agent/node-password")), 0o600);
    let hash = password_hash(&admin, "edge-1").expect("the node password Secret");
    assert!(
        hash.starts_with("sha256:") && !hash.contains(password),
        "{hash}"
    );
    for c in csrs(&admin) {
        assert!(
            c["metadata"]["annotations"]["k3rs.io/node-password"].is_null(),
            "{c:#}"
        );
    }

    // Same node name, its own data dir and so its own password: refused, nothing written.
    let second = work.path().join("second");
    let args = edge_args(&second);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let err = refused_as(&url, &token, &second, &args);
    assert!(
        err.contains("403 Forbidden") && err.contains("node password rejected"),
        "{err}"
    );
    assert!(
        err.contains("edge-1.node-password.k3rs in kube-system"),
        "{err}"
    );
    no_credentials(&second);
    assert_eq!(
        password_hash(&admin, "edge-1").as_deref(),
        Some(hash.as_str())
    );

    // The first one carries on.
    wait_lease_renewed(&admin, "edge-1");
    agent.assert_running();

    // Re-registering: the old node goes, its password Secret is deleted; the second joins.
    assert!(agent.terminate(Duration::from_secs(10)).is_some());
    admin.ok(&[
        "delete",
        "secret",
        "-n",
        "kube-system",
        "edge-1.node-password.k3rs",
    ]);
    let log = work.path().join("second.log");
    let mut agent = start_agent(&url, &token, &second, &log);
    common::wait_for(
        "the second agent's identity",
        Duration::from_secs(60),
        || {
            agent.assert_running();
            std::fs::read_to_string(&log)
                .unwrap_or_default()
                .contains("node identity issued and stored")
                .then_some(())
        },
    );
    let as_node = Kubectl {
        bin: admin.bin.clone(),
        kubeconfig: second.join("agent/kubelet.kubeconfig"),
    };
    assert_eq!(
        as_node.ok(&[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}"
        ]),
        "system:node:edge-1"
    );
    let new_hash = password_hash(&admin, "edge-1").expect("the new password Secret");
    assert_ne!(new_hash, hash);
    wait_lease_renewed(&admin, "edge-1");
}

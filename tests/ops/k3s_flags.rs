//! k3s's server flags through `k3rs server --help` and behaviour: each is listed; values k3rs
//! cannot honour stop the start with a message naming them (`--cluster-dns` outside
//! `--service-cidr`, unknown `--kube-scheduler-arg`, `--kube-proxy-arg` and `--kubelet-arg`
//! keys, also without the embedded agent, `--cluster-init` with `--datastore-endpoint`, a
//! `--node-external-ip` that is no address); `--cluster-init` starts a cluster, and
//! `--kube-scheduler-arg leader-elect=false` schedules without the `kube-scheduler` Lease.
//! The node-side flags' effects (`--service-cidr` on the kubelet's DNS, `--node-external-ip`,
//! `--resolv-conf`) are proven on a real node in `tests/node/service_network.rs`.

use std::ffi::OsStr;
use std::process::Command;
use std::time::Duration;

use crate::common::hollow::HollowAgent;
use crate::common::kubectl::{json, Kubectl};
use crate::common::{wait_for, K3rs};

#[test]
fn server_help_lists_the_k3s_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_k3rs"))
        .args(["server", "--help"])
        .env("K3RS_CONFIG_FILE", "/dev/null")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--cluster-init",
        "--kube-apiserver-arg <KEY=VALUE>",
        "--kube-scheduler-arg <KEY=VALUE>",
        "--kube-controller-manager-arg <KEY=VALUE>",
        "--kube-proxy-arg <KEY=VALUE>",
        "--kubelet-arg <KEY=VALUE>",
        "--node-name <NODE_NAME>",
        "--node-external-ip <NODE_EXTERNAL_IP>",
        "--resolv-conf <FILE>",
        "--service-cidr <SERVICE_CIDR>",
        "--cluster-dns <CLUSTER_DNS>",
        "--disable <COMPONENT>",
    ] {
        assert!(help.contains(flag), "{flag} missing from:\n{help}");
    }
}

#[test]
fn flag_values_k3rs_cannot_honour_are_refused() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["--cluster-dns", "10.0.0.10"],
            "--cluster-dns 10.0.0.10 is not inside --service-cidr 10.43.0.0/16",
        ),
        (
            &[
                "--service-cidr",
                "10.96.0.0/16",
                "--cluster-dns",
                "10.96.0.1",
            ],
            "--cluster-dns 10.96.0.1 is the `kubernetes` Service's address",
        ),
        (
            &["--kube-scheduler-arg", "v=2"],
            r#"--kube-scheduler-arg: unsupported kube-scheduler flag "v" (supported: leader-elect)"#,
        ),
        (
            &["--kube-proxy-arg", "proxy-mode=ipvs"],
            r#"--kube-proxy-arg: unknown kube-proxy flag "proxy-mode""#,
        ),
        (
            &["--kubelet-arg", "cgroup-driver=systemd"],
            r#"--kubelet-arg: unknown kubelet flag "cgroup-driver""#,
        ),
        (
            &[
                "--cluster-init",
                "--datastore-endpoint",
                "https://127.0.0.1:1",
            ],
            "the argument '--cluster-init' cannot be used with '--datastore-endpoint",
        ),
        (
            &["--node-external-ip", "edge-1"],
            "invalid value 'edge-1' for '--node-external-ip",
        ),
    ];
    for (args, message) in cases {
        let (status, log, _dir) = K3rs::run_to_exit(args, Duration::from_secs(30));
        assert!(
            status.is_some_and(|s| !s.success()),
            "{args:?}: {status:?}: {log}"
        );
        assert!(log.contains(message), "{args:?}: {message} not in {log}");
    }
}

/// A switch's environment variable reads as k3s's do: empty is unset (the start goes on to
/// the next check, here a refused `--kube-scheduler-arg`), Go's boolean literals are read, and
/// another word stops the start with a message naming the switch and the accepted values.
#[test]
fn switch_environment_variables_read_empty_as_unset() {
    let refused = ["--kube-scheduler-arg", "v=2"];
    let next_check = r#"unsupported kube-scheduler flag "v""#;
    for var in [
        "K3RS_DEBUG",
        "K3RS_DISABLE_SCHEDULER",
        "K3RS_ETCD_COMPACT_ENCODING",
        "K3RS_DISABLE_KUBE_PROXY",
        "K3RS_ETCD_DISABLE_SNAPSHOTS",
    ] {
        start_stops_with(&refused, (var, ""), &[next_check]);
    }
    start_stops_with(
        &refused,
        ("K3RS_SECRETS_ENCRYPTION", "maybe"),
        &[
            "invalid value 'maybe' for '--secrets-encryption'",
            "use true or false",
        ],
    );
    // `1` turns `--cluster-init` on: it then conflicts with `--datastore-endpoint`; empty
    // leaves it off, and the start reaches the scheduler flag check instead.
    let endpoint = [
        "--datastore-endpoint",
        "https://127.0.0.1:1",
        "--kube-scheduler-arg",
        "v=2",
    ];
    for (value, expected) in [
        ("1", "cannot be used with '--datastore-endpoint"),
        ("", next_check),
    ] {
        start_stops_with(&endpoint, ("K3RS_CLUSTER_INIT", value), &[expected]);
    }
}

/// `k3rs server args` with `env` set exits unsuccessfully, its log holding every `message`.
fn start_stops_with(args: &[&str], (var, value): (&str, &str), messages: &[&str]) {
    let (status, log, _dir) =
        K3rs::run_to_exit_with_env(args, &[(var, OsStr::new(value))], Duration::from_secs(30));
    assert!(
        status.is_some_and(|s| !s.success()),
        "{var}={value:?}: {status:?}: {log}"
    );
    for message in messages {
        assert!(
            log.contains(message),
            "{var}={value:?}: {message} not in {log}"
        );
    }
}

/// `--cluster-init` starts a new cluster (the server serves); `leader-elect=false` makes the
/// scheduler bind a pod while no `kube-scheduler` Lease exists, though the controller manager
/// (still elected) holds its own.
#[test]
fn cluster_init_and_a_scheduler_without_leader_election() {
    let (_server, k) = Kubectl::start_server(&[
        "--cluster-init",
        "--kube-scheduler-arg",
        "leader-elect=false",
    ]);
    let mut agent = HollowAgent::start(&k.kubeconfig, 1, "sched-", &[]);
    k.ok(&["run", "p", "--image=busybox", "--restart=Never"]);
    let node = wait_for("the pod bound", Duration::from_secs(60), || {
        agent.proc.assert_running();
        let pod = json(&k, &["get", "pod", "p"]);
        pod["spec"]["nodeName"].as_str().map(str::to_string)
    });
    assert_eq!(node, "sched-0");
    let leases = json(&k, &["get", "leases", "-n", "kube-system"]);
    let names: Vec<&str> = leases["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["metadata"]["name"].as_str())
        .collect();
    assert!(names.contains(&"kube-controller-manager"), "{names:?}");
    assert!(!names.contains(&"kube-scheduler"), "{names:?}");
}

/// A released local-path volume whose claim is gone (the helper pod that deletes its
/// directory is what the provisioner creates; no node needs to run it here).
const RELEASED_VOLUME: &str = r#"
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pvc-gone
  annotations: {pv.kubernetes.io/provisioned-by: rancher.io/local-path}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Delete
  storageClassName: local-path
  hostPath: {path: /var/lib/k3rs/storage/pvc-gone_default_data, type: DirectoryOrCreate}
  claimRef: {namespace: default, name: data, uid: 0b5c3f57-0000-4000-8000-000000000001}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: kubernetes.io/hostname, operator: In, values: [edge-1]}
"#;

/// What agents learn from the server (`/v1-k3rs/agent-config`, readable by nodes and
/// admins, not by other users): the cluster DNS address of `--service-cidr`, the
/// `--system-default-registry` and `--disable network-policy,traefik`; the registry also prefixes the
/// local-path provisioner's helper image.
#[test]
fn the_server_hands_agents_its_settings_and_prefixes_the_helper_image() {
    let (_server, k) = Kubectl::start_server(&[
        "--service-cidr",
        "10.96.0.0/16",
        "--system-default-registry",
        "registry.local:5000",
        "--disable",
        "network-policy,traefik",
    ]);
    let want = serde_json::json!({"clusterDNS": ["10.96.0.10"],
        "systemDefaultRegistry": "registry.local:5000", "disableNetworkPolicy": true,
        "disableIngress": true, "flannelBackend": "vxlan"});
    let raw = ["get", "--raw", "/v1-k3rs/agent-config"];
    let as_admin: serde_json::Value = serde_json::from_str(&k.ok(&raw)).unwrap();
    assert_eq!(as_admin, want);
    let mut as_node = raw.to_vec();
    as_node.extend(["--as", "system:node:edge-1", "--as-group", "system:nodes"]);
    let got: serde_json::Value = serde_json::from_str(&k.ok(&as_node)).unwrap();
    assert_eq!(got, want);
    let mut as_user = raw.to_vec();
    as_user.extend(["--as", "alice"]);
    let refused = k.run(&as_user);
    assert!(
        !refused.ok && refused.stderr.contains("Forbidden"),
        "{refused:?}"
    );

    k.ok_stdin(&["apply", "-f", "-"], Some(RELEASED_VOLUME));
    let image = wait_for("the helper pod", Duration::from_secs(60), || {
        let pod = k.run(&[
            "get",
            "pod",
            "-n",
            "kube-system",
            "helper-pod-delete-pvc-gone",
            "-o",
            "jsonpath={.spec.containers[0].image}",
        ]);
        (pod.ok && !pod.stdout.is_empty()).then_some(pod.stdout)
    });
    assert_eq!(image, "registry.local:5000/library/busybox:latest");
}

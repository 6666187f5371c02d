//! Private registries on a real node: Debian's `docker-registry` (htpasswd auth, TLS from a
//! test CA) inside the lab's network namespace, serving on two addresses; images pushed with
//! `skopeo` from the busybox archive of `scripts/build-images.sh`. No other registry is
//! reachable from the namespace.
//!
//! - `registries.yaml` mirrors `docker.io` to the registry (the first endpoint unreachable, so
//!   the pull falls through to the second) with the mirror's auth and CA from `configs`: a
//!   pod on `docker.io/library/busybox:latest` with pull policy Always runs, and the
//!   registry served the pull. The registry's first address has an unreachable mirror of its
//!   own: its images still pull, from the registry itself.
//! - A private image on the registry's second address pulls only with the right
//!   `imagePullSecrets` (the pod's, or its ServiceAccount's); without them, or with a wrong
//!   password, the container waits in `ErrImagePull`, then `ImagePullBackOff`, with the
//!   registry's answer in the message and the kubelet's `Failed`/`BackOff` Events. (Not
//!   behind a dead mirror: containerd 1.6 then reports the first endpoint's error.)
//! - A malformed `registries.yaml` stops `k3rs server` with the file, line and key.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::{json as j, Value};

use crate::common;
use crate::common::kubectl::{json, wait_json, Kubectl};
use crate::common::node_lab::{self, NodeLab};
use crate::common::process::{run_with_timeout, ChildGuard};

const NODE: &str = "registry-1";
/// The registry's two addresses, and one where nothing listens.
const MIRROR: &str = "10.213.0.1";
const PRIVATE: &str = "10.213.0.2";
const NOWHERE: &str = "10.213.0.3";
const PORT: u16 = 5443;
const USER: &str = "puller";
const PASSWORD: &str = "s3cret-pw";
const PRIVATE_IMAGE: &str = "10.213.0.2:5443/private/busybox:1.35";

fn program(name: &str, package: &str) -> std::path::PathBuf {
    common::require_program(name, package)
}

/// Starts the registry on `0.0.0.0:PORT` with TLS and htpasswd auth; returns it once it
/// accepts connections on both addresses.
fn start_registry(dir: &Path) -> ChildGuard {
    common::tls_server::make_certs_for(dir, &[MIRROR, PRIVATE, NOWHERE]);
    let htpasswd = node_lab::run(
        Command::new(program("htpasswd", "apache2-utils")).args(["-Bbn", USER, PASSWORD]),
    );
    std::fs::write(dir.join("htpasswd"), htpasswd).unwrap();
    let config = format!(
        "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
         http:\n  addr: 0.0.0.0:{PORT}\n  tls:\n    certificate: {}\n    key: {}\n\
         auth:\n  htpasswd:\n    realm: k3rs-test\n    path: {}\n",
        dir.join("data").display(),
        dir.join("server.crt").display(),
        dir.join("server.key").display(),
        dir.join("htpasswd").display(),
    );
    std::fs::write(dir.join("config.yml"), config).unwrap();
    let mut cmd = Command::new(program("docker-registry", "docker-registry"));
    cmd.arg("serve").arg(dir.join("config.yml"));
    let mut registry = ChildGuard::spawn("docker-registry", cmd, &dir.join("registry.log"));
    for addr in [MIRROR, PRIVATE] {
        common::wait_for("the registry to listen", Duration::from_secs(30), || {
            registry.assert_running();
            std::net::TcpStream::connect((addr, PORT)).ok()
        });
    }
    registry
}

/// Pushes `tag` of the busybox archive to `dest` (`host:port/repo:tag`) with skopeo.
fn push(images: &Path, tag: &str, dest: &str, certs: &Path) {
    let archive = format!("oci-archive:{}:{tag}", images.join("busybox.tar").display());
    node_lab::run(
        Command::new(program("skopeo", "skopeo"))
            .args([
                "copy",
                "--quiet",
                "--dest-creds",
                &format!("{USER}:{PASSWORD}"),
            ])
            .arg("--dest-cert-dir")
            .arg(certs)
            .arg(&archive)
            .arg(format!("docker://{dest}")),
    );
}

fn registries_yaml(dir: &Path) -> String {
    let ca = dir.join("ca.crt");
    let ca = ca.display();
    format!(
        r#"mirrors:
  docker.io:
    endpoint:
      - "https://{NOWHERE}:{PORT}"
      - "https://{MIRROR}:{PORT}"
  "{MIRROR}:{PORT}":
    endpoint:
      - "https://{NOWHERE}:{PORT}"
configs:
  "{MIRROR}:{PORT}":
    auth:
      username: {USER}
      password: {PASSWORD}
    tls:
      ca_file: {ca}
  "{PRIVATE}:{PORT}":
    tls:
      ca_file: {ca}
  "{NOWHERE}:{PORT}":
    tls:
      ca_file: {ca}
"#
    )
}

fn pull_secret(name: &str, password: &str) -> String {
    use base64::Engine as _;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
    let config = j!({"auths": {format!("https://{PRIVATE}:{PORT}"): {"auth": auth}}});
    j!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": "default"},
        "type": "kubernetes.io/dockerconfigjson",
        "stringData": {".dockerconfigjson": config.to_string()}})
    .to_string()
}

fn pod(name: &str, image: &str, spec: Value) -> String {
    let mut spec = spec;
    spec["terminationGracePeriodSeconds"] = j!(1);
    spec["containers"] = j!([{"name": "c", "image": image, "imagePullPolicy": "Always",
        "command": ["sleep", "3600"]}]);
    j!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": spec})
    .to_string()
}

fn running(k: &Kubectl, name: &str) -> Value {
    wait_json(
        k,
        &format!("pod {name} to run"),
        &["get", "pod", name],
        |p| p["status"]["phase"] == "Running",
    )
}

/// The container's waiting state once its reason is `reason`.
fn waiting(k: &Kubectl, name: &str, reason: &str) -> Value {
    let p = wait_json(
        k,
        &format!("pod {name} in {reason}"),
        &["get", "pod", name],
        |p| p["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == reason,
    );
    p["status"]["containerStatuses"][0]["state"]["waiting"].clone()
}

fn events_of(k: &Kubectl, pod: &str) -> Vec<(String, String)> {
    let selector = format!("involvedObject.name={pod}");
    json(k, &["get", "events", "--field-selector", &selector])["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["reason"].as_str().unwrap_or_default().to_string(),
                e["message"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn mirrors_and_pull_secrets_reach_a_private_registry() {
    NodeLab::run("registry", scenario);
}

fn scenario(lab: &NodeLab) {
    for addr in [MIRROR, PRIVATE] {
        node_lab::run(Command::new("ip").args([
            "-n",
            &lab.netns,
            "addr",
            "add",
            &format!("{addr}/32"),
            "dev",
            "lo",
        ]));
    }
    let dir = lab.scratch.path().join("registry");
    std::fs::create_dir_all(&dir).unwrap();
    let _registry = start_registry(&dir);
    let images = lab.scratch.path().join("images");
    node_lab::build_images(&images);
    let certs = dir.join("skopeo-certs");
    std::fs::create_dir_all(&certs).unwrap();
    std::fs::copy(dir.join("ca.crt"), certs.join("ca.crt")).unwrap();
    push(
        &images,
        "latest",
        &format!("{MIRROR}:{PORT}/library/busybox:latest"),
        &certs,
    );
    push(&images, "1.35", PRIVATE_IMAGE, &certs);

    let registries = lab.scratch.path().join("registries.yaml");
    std::fs::write(&registries, registries_yaml(&dir)).unwrap();
    let file = registries.to_str().unwrap();
    let (mut server, k) = lab.start_server(NODE, "127.0.0.1", &["--private-registry", file], &[]);
    common::wait_for("the node to be Ready", Duration::from_secs(120), || {
        server.assert_running();
        let n = json(&k, &["get", "node", NODE]);
        n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
            .then_some(())
    });
    let hosts = server
        .data_dir()
        .join("agent/etc/containerd/certs.d/docker.io/hosts.toml");
    let text = std::fs::read_to_string(&hosts).unwrap();
    assert!(
        text.contains(&format!("[host.\"https://{MIRROR}:{PORT}/v2\"]")),
        "{text}"
    );

    // docker.io through the mirror: the imported busybox:latest is removed first, so the
    // pod runs only if the mirror served it.
    let socket = server.data_dir().join("agent/containerd/containerd.sock");
    node_lab::run(Command::new("ctr").arg("--address").arg(&socket).args([
        "-n",
        "k8s.io",
        "images",
        "rm",
        "docker.io/library/busybox:latest",
    ]));
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&pod("hub", "docker.io/library/busybox:latest", j!({}))),
    );
    running(&k, "hub");
    let log = std::fs::read_to_string(dir.join("registry.log")).unwrap();
    assert!(
        log.contains("/v2/library/busybox/manifests/latest"),
        "the registry served no busybox manifest:\n{log}"
    );

    // A registry whose only mirror is unreachable: the pull falls through to it.
    let upstream = format!("{MIRROR}:{PORT}/library/busybox:latest");
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&pod("upstream", &upstream, j!({}))),
    );
    running(&k, "upstream");

    // The private image without credentials: ErrImagePull, then ImagePullBackOff, with the
    // registry's answer.
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(&pod("anonymous", PRIVATE_IMAGE, j!({}))),
    );
    // ErrImagePull lasts only until the next sync of the pod; its message stays in the
    // `Failed` Event.
    let w = waiting(&k, "anonymous", "ImagePullBackOff");
    assert_eq!(
        w["message"],
        format!("Back-off pulling image \"{PRIVATE_IMAGE}\""),
        "{w}"
    );
    let events = events_of(&k, "anonymous");
    let has = |reason: &str, prefix: &str| {
        events
            .iter()
            .any(|(r, m)| r == reason && m.starts_with(prefix))
    };
    let pull_failure = format!("Failed to pull image \"{PRIVATE_IMAGE}\": ");
    assert!(
        events.iter().any(|(r, m)| r == "Failed"
            && m.starts_with(&pull_failure)
            && m.contains("401 Unauthorized")),
        "the registry's answer: {events:?}"
    );
    assert!(
        has(
            "Failed",
            &format!("Failed to pull image \"{PRIVATE_IMAGE}\": ")
        ) && has("Failed", "Error: ErrImagePull")
            && has(
                "BackOff",
                &format!("Back-off pulling image \"{PRIVATE_IMAGE}\"")
            )
            && has("Failed", "Error: ImagePullBackOff"),
        "{events:?}"
    );

    // A wrong password fails the same way; the right one pulls.
    k.ok_stdin(&["apply", "-f", "-"], Some(&pull_secret("wrong", "not-it")));
    k.ok_stdin(&["apply", "-f", "-"], Some(&pull_secret("right", PASSWORD)));
    let wrong = pod(
        "wrong",
        PRIVATE_IMAGE,
        j!({"imagePullSecrets": [{"name": "wrong"}]}),
    );
    k.ok_stdin(&["apply", "-f", "-"], Some(&wrong));
    waiting(&k, "wrong", "ImagePullBackOff");
    let events = events_of(&k, "wrong");
    assert!(
        events.iter().any(|(r, m)| r == "Failed"
            && m.starts_with(&pull_failure)
            && m.contains("401 Unauthorized")),
        "{events:?}"
    );
    let right = pod(
        "right",
        PRIVATE_IMAGE,
        j!({"imagePullSecrets": [{"name": "right"}]}),
    );
    k.ok_stdin(&["apply", "-f", "-"], Some(&right));
    running(&k, "right");

    // The ServiceAccount's pull secrets reach the pod through admission.
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(
            &j!({"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "puller", "namespace": "default"},
                 "imagePullSecrets": [{"name": "right"}]})
            .to_string(),
        ),
    );
    let by_sa = pod("by-sa", PRIVATE_IMAGE, j!({"serviceAccountName": "puller"}));
    k.ok_stdin(&["apply", "-f", "-"], Some(&by_sa));
    let p = running(&k, "by-sa");
    assert_eq!(p["spec"]["imagePullSecrets"], j!([{"name": "right"}]));
}

#[test]
fn a_malformed_registries_yaml_stops_the_start_naming_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("registries.yaml");
    std::fs::write(
        &file,
        "mirrors:\n  docker.io:\n    endpoints:\n      - https://mirror.example.com\n",
    )
    .unwrap();
    // No token and a server nobody serves: the agent reads its flags and the file first.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_k3rs"));
    cmd.args(["agent", "--server", "https://127.0.0.1:1", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--private-registry")
        .arg(&file)
        .env("K3RS_CONFIG_FILE", "/dev/null")
        .env_remove("K3RS_TOKEN");
    let (code, _out, err) = run_with_timeout(cmd, None, Duration::from_secs(30));
    assert!(code.is_some_and(|c| c != 0), "{code:?}: {err}");
    for needle in [
        &format!("--private-registry: {}", file.display()),
        "mirrors.docker.io",
        "unknown field `endpoints`",
        "line 3 column 5",
    ] {
        assert!(err.contains(needle), "{needle:?} missing from:\n{err}");
    }
    assert!(!dir.path().join("data").exists(), "nothing was started");
}

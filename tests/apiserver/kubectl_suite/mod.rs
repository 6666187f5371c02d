//! End to end: the kubectl acceptance suite. The real `k3rs server --disable-agent` with its
//! Kubernetes API on loopback, driven by the real `kubectl` (1.32), once on the embedded
//! datastore and once on a real etcd 3.4 over mutual TLS (`--datastore-endpoint https://…`
//! with `--datastore-cafile/certfile/keyfile`).
//!
//! One server per backend runs every scenario of this directory, each in its own namespace
//! (a few at a time); the manifests are under `tests/fixtures/kubectl/`.
//!
//! The runner: a failing scenario does not stop the others, and the test fails with the list
//! of failed scenarios (each panic message is printed where it happened).

mod apply;
mod cluster;
mod delete;
mod generators;
mod get;
mod manifests;
mod mutate;
mod protobuf;
mod watch;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use crate::common::kubectl::{header, table};
use crate::common::kubectl::{Kubectl, Out};
use crate::common::{self, Etcd, K3rs};

/// Scenarios running at once (the machine is small; kubectl itself costs CPU).
const WORKERS: usize = 3;

#[test]
fn kubectl_suite_on_the_embedded_datastore() {
    run(Backend::Embedded);
}

#[test]
fn kubectl_suite_on_an_external_etcd_over_tls() {
    run(Backend::EtcdTls);
}

/// Where the API server keeps its objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// The embedded Raft store.
    Embedded,
    /// A real etcd 3.4 started by the test, reached over https with a client certificate.
    EtcdTls,
}

/// One scenario: a name (also its namespace) and its body.
type Scenario = (&'static str, fn(&Ctx));

const SCENARIOS: &[Scenario] = &[
    ("cluster", cluster::discovery_version_explain),
    ("health", cluster::health_and_metrics),
    ("manifests", manifests::create_apply_replace_files),
    ("validation", manifests::invalid_objects_conflicts_strict),
    ("dry-run", manifests::server_dry_run),
    ("diff", manifests::diff),
    ("ssa", apply::server_side_apply),
    ("managed-fields", apply::managed_fields_of_updates),
    ("get", get::outputs_and_selectors),
    ("tables", get::tables),
    ("watch", watch::events),
    ("watch-table", watch::table_rows),
    ("mutate", mutate::label_annotate_patch),
    ("edit", mutate::edit_scale_set_image),
    ("describe", mutate::describe),
    ("delete", delete::cascade_and_grace),
    ("wait", delete::wait_for),
    ("generators", generators::create_generators),
    ("protobuf-twins", protobuf::stored_like_json),
    ("protobuf-strict", protobuf::unknown_fields_refused),
];

/// What a scenario gets: kubectl, its own namespace, a scratch directory.
pub struct Ctx<'a> {
    pub k: &'a Kubectl,
    pub ns: String,
    pub scratch: PathBuf,
}

impl Ctx<'_> {
    fn with_ns<'b>(&'b self, args: &[&'b str]) -> Vec<&'b str> {
        let mut v = vec!["-n", self.ns.as_str()];
        v.extend_from_slice(args);
        v
    }

    /// `kubectl -n <ns> args…`, which must succeed; its standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        self.k.ok(&self.with_ns(args))
    }

    pub fn ok_stdin(&self, args: &[&str], stdin: &str) -> String {
        self.k.ok_stdin(&self.with_ns(args), Some(stdin))
    }

    pub fn run(&self, args: &[&str]) -> Out {
        self.k.run(&self.with_ns(args))
    }

    pub fn run_stdin(&self, args: &[&str], stdin: &str) -> Out {
        self.k.run_stdin(&self.with_ns(args), Some(stdin))
    }

    /// Must fail with `needle` in its standard error; the standard error.
    pub fn fails_with(&self, args: &[&str], stdin: Option<&str>, needle: &str) -> String {
        self.k.fails_with(&self.with_ns(args), stdin, needle)
    }

    /// `kubectl get … -o jsonpath=<path>` of one object.
    pub fn jsonpath(&self, what: &str, path: &str) -> String {
        let arg = format!("jsonpath={path}");
        self.ok(&["get", what, "-o", &arg])
    }

    /// One object as JSON.
    pub fn json(&self, what: &str) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["get", what, "-o", "json"])).expect("kubectl -o json")
    }
}

/// A kubectl that waits on a watch (`wait`, `delete --wait`), started in the background with
/// `-v=6` so the test can tell when its watch is open. Killed on drop if still running.
pub struct Waiting {
    child: std::process::Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Waiting {
    /// Blocks until kubectl's watch request has been answered (30 s at most).
    pub fn until_watching(self) -> Waiting {
        common::wait_for("kubectl's watch", Duration::from_secs(30), || {
            let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
            log.lines()
                .any(|l| l.contains("\"Response\"") && l.contains("watch=true"))
                .then_some(())
        });
        self
    }

    /// Waits for kubectl to exit; its outcome (stderr without the `-v=6` request log).
    pub fn finish(mut self) -> Out {
        let status = self.child.wait().expect("waiting for kubectl");
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        Out {
            ok: status.success(),
            stdout: std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            stderr: stderr
                .lines()
                .filter(|l| !l.starts_with('I'))
                .map(|l| format!("{l}\n"))
                .collect(),
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Ctx<'_> {
    /// Starts `kubectl -n <ns> -v=6 args…` in the background (see [`Waiting`]).
    pub fn spawn(&self, args: &[&str]) -> Waiting {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let stdout = self.scratch.join(format!("bg-{n}.out"));
        let stderr = self.scratch.join(format!("bg-{n}.err"));
        let mut all = vec!["-v=6"];
        all.extend(self.with_ns(args));
        let child = self
            .k
            .command(&all)
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("spawning kubectl");
        Waiting {
            child,
            stdout,
            stderr,
        }
    }
}

/// A file of `tests/fixtures/kubectl/`.
pub fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kubectl")
        .join(name);
    assert!(p.exists(), "missing fixture {}", p.display());
    p.display().to_string()
}

/// A running server on `backend`, with what it depends on.
struct Cluster {
    // Field order matters: the server stops before the etcd it uses.
    server: K3rs,
    etcd: Option<Etcd>,
}

fn start(backend: Backend) -> Cluster {
    match backend {
        Backend::Embedded => Cluster {
            // The suite plays the controllers itself (status writes, pending deletions).
            server: K3rs::start_kubernetes(common::k3rs::AS_BARE_API),
            etcd: None,
        },
        Backend::EtcdTls => {
            let etcd = Etcd::start_tls();
            let ep = etcd.endpoint();
            let tls = etcd.client_tls().expect("a TLS etcd");
            let (cert, key) = (tls.cert.expect("cert"), tls.key.expect("key"));
            let flags = [
                "--datastore-endpoint".to_string(),
                ep.url.clone(),
                "--datastore-cafile".to_string(),
                tls.ca.display().to_string(),
                "--datastore-certfile".to_string(),
                cert.display().to_string(),
                "--datastore-keyfile".to_string(),
                key.display().to_string(),
            ];
            let mut args = common::k3rs::AS_BARE_API.to_vec();
            args.extend(flags.iter().map(String::as_str));
            Cluster {
                server: K3rs::start_kubernetes(&args),
                etcd: Some(etcd),
            }
        }
    }
}

fn wait_api(k: &Kubectl, server: &mut K3rs) {
    common::wait_for("the API", Duration::from_secs(60), || {
        server.assert_running();
        k.run(&["get", "namespace", "default", "-o", "name"])
            .ok
            .then_some(())
    });
}

/// Runs every scenario against a fresh server on `backend`.
pub fn run(backend: Backend) {
    let mut cluster = start(backend);
    let k = Kubectl {
        bin: common::require_program("kubectl", "kubectl"),
        kubeconfig: cluster.server.kubeconfig(),
    };
    wait_api(&k, &mut cluster.server);
    let scratch = tempfile::tempdir().expect("tempdir");

    // K3RS_SCENARIOS=a,b runs just those (while working on them).
    let only = std::env::var("K3RS_SCENARIOS").ok();
    let chosen = |name: &str| {
        only.as_ref()
            .is_none_or(|o| o.split(',').any(|n| n == name))
    };
    let queue = Mutex::new(
        SCENARIOS
            .iter()
            .copied()
            .filter(|(name, _)| chosen(name))
            .collect::<VecDeque<_>>(),
    );
    let failed = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| loop {
                let Some((name, body)) = queue.lock().unwrap().pop_front() else {
                    return;
                };
                let started = Instant::now();
                eprintln!("[{backend:?}] {name}: start");
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    k.ok(&["create", "namespace", name]);
                    // Scenarios list ConfigMaps: start once the root CA publisher's is there.
                    common::wait_for("kube-root-ca.crt", Duration::from_secs(30), || {
                        k.run(&["get", "configmap", "kube-root-ca.crt", "-n", name])
                            .ok
                            .then_some(())
                    });
                    let dir = scratch.path().join(name);
                    std::fs::create_dir_all(&dir).unwrap();
                    body(&Ctx {
                        k: &k,
                        ns: name.to_string(),
                        scratch: dir,
                    });
                }));
                let verdict = if outcome.is_ok() { "ok" } else { "FAILED" };
                eprintln!("[{backend:?}] {name}: {verdict} in {:?}", started.elapsed());
                if outcome.is_err() {
                    failed.lock().unwrap().push(name);
                }
            });
        }
    });
    cluster.server.assert_running();
    let failed = failed.into_inner().unwrap();
    assert!(
        failed.is_empty(),
        "[{backend:?}] failed scenarios: {failed:?} (messages above); server log tail:\n{}",
        common::log_tail(&cluster.server.log_path(), 30)
    );
    if let Some(etcd) = &cluster.etcd {
        // The objects really live in the external etcd.
        let out = common::etcdctl(
            &etcd.endpoint(),
            &["get", "--prefix", "--keys-only", "/registry/namespaces/"],
            None,
        )
        .expect_ok("etcdctl get /registry/namespaces/");
        let namespaces = ["default", "manifests", "generators"];
        for ns in namespaces
            .into_iter()
            .filter(|n| *n == "default" || chosen(n))
        {
            assert!(
                out.stdout.contains(&format!("/registry/namespaces/{ns}\n")),
                "{ns} not in etcd: {}",
                out.stdout
            );
        }
    }
}

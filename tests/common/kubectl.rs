//! Driving the real `kubectl` (v1.32 on PATH) against a test server's kubeconfig.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::process::run_with_timeout;

/// `kubectl` with a kubeconfig; every call has a 20 s request timeout and 60 s in all.
pub struct Kubectl {
    pub bin: PathBuf,
    pub kubeconfig: PathBuf,
}

/// The outcome of one `kubectl` run.
#[derive(Debug)]
pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    /// Starts `k3rs server` with the Kubernetes API (and `extra_args`), and waits until
    /// kubectl can read the `default` namespace.
    pub fn start_server(extra_args: &[&str]) -> (super::K3rs, Kubectl) {
        Kubectl::start_server_with_env(extra_args, &[])
    }

    /// [`Kubectl::start_server`] with `env` added to the server's environment (kept for
    /// restarts), e.g. `NOTIFY_SOCKET`.
    pub fn start_server_with_env(
        extra_args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> (super::K3rs, Kubectl) {
        Kubectl::attach(super::K3rs::start_kubernetes_with_env(extra_args, env))
    }

    /// [`Kubectl::start_server_with_env`] with the server's data dir at `data_dir`.
    pub fn start_server_on(
        data_dir: &Path,
        extra_args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> (super::K3rs, Kubectl) {
        Kubectl::attach(super::K3rs::start_kubernetes_on(data_dir, extra_args, env))
    }

    /// A kubectl for `server`, once it can read the `default` namespace.
    fn attach(mut server: super::K3rs) -> (super::K3rs, Kubectl) {
        let k = Kubectl {
            bin: super::require_program("kubectl", "kubectl"),
            kubeconfig: server.kubeconfig(),
        };
        super::wait_for("the API", Duration::from_secs(60), || {
            server.assert_running();
            k.run(&["get", "namespace", "default", "-o", "name"])
                .ok
                .then_some(())
        });
        (server, k)
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .arg("--request-timeout=20s")
            .args(args);
        cmd
    }

    pub fn run_stdin(&self, args: &[&str], stdin: Option<&str>) -> Out {
        self.run_env(args, stdin, &[])
    }

    /// Runs with extra environment variables (e.g. `EDITOR` for `kubectl edit`).
    pub fn run_env(&self, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Out {
        let mut cmd = self.command(args);
        cmd.envs(env.iter().copied());
        let (code, stdout, stderr) =
            run_with_timeout(cmd, stdin.map(str::as_bytes), Duration::from_secs(60));
        Out {
            ok: code == Some(0),
            stdout,
            stderr,
        }
    }

    pub fn run(&self, args: &[&str]) -> Out {
        self.run_stdin(args, None)
    }

    /// Runs and panics unless it succeeded; the standard output.
    pub fn ok(&self, args: &[&str]) -> String {
        self.ok_stdin(args, None)
    }

    /// [`Kubectl::ok`] with a standard input.
    pub fn ok_stdin(&self, args: &[&str], stdin: Option<&str>) -> String {
        let out = self.run_stdin(args, stdin);
        assert!(out.ok, "kubectl {args:?} failed: {out:?}");
        out.stdout
    }

    /// Runs and panics unless it failed with `needle` in stderr.
    pub fn fails_with(&self, args: &[&str], stdin: Option<&str>, needle: &str) -> String {
        let out = self.run_stdin(args, stdin);
        assert!(!out.ok, "kubectl {args:?} should have failed: {out:?}");
        assert!(
            out.stderr.contains(needle),
            "kubectl {args:?}: expected {needle:?} in stderr: {out:?}"
        );
        out.stderr
    }

    /// Waits (20 s at most) until CustomResourceDefinition `crd` is Established.
    pub fn crd_established(&self, crd: &str) {
        self.ok(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd}"),
            "--timeout=20s",
        ]);
    }
}

/// A YAML `example.com/v1` custom object of `kind` named `name` with `spec` (flow YAML).
pub fn example_object(kind: &str, name: &str, spec: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: {kind}\nmetadata: {{name: {name}}}\nspec: {spec}\n")
}

/// The whitespace-separated words of each line of `kubectl get` output.
pub fn table(out: &str) -> Vec<Vec<String>> {
    out.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// Whether a pod (as JSON) has the Ready condition True.
pub fn pod_ready(pod: &serde_json::Value) -> bool {
    pod["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// `kubectl <args> -o json`, parsed.
pub fn json(k: &Kubectl, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&k.ok(&all)).expect("kubectl json")
}

/// Waits (90 s at most) until `check` holds for `kubectl get <args> -o json`; a timeout shows
/// the last object seen.
pub fn wait_json(
    k: &Kubectl,
    what: &str,
    args: &[&str],
    check: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let timeout = Duration::from_secs(90);
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let v = json(k, args);
        if check(&v) {
            return v;
        }
        if std::time::Instant::now() >= deadline {
            let last: String = v.to_string().chars().take(6000).collect();
            panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The words of the header line of `kubectl get` output.
pub fn header(out: &str) -> Vec<String> {
    table(out).into_iter().next().unwrap_or_default()
}

/// `kubectl get -w` with its output going to a file we can poll; killed on drop.
pub struct Watch {
    child: std::process::Child,
    out: PathBuf,
}

impl Watch {
    pub fn start(k: &Kubectl, args: &[&str], out: &Path) -> Watch {
        let file = File::create(out).unwrap();
        let child = k
            .command(args)
            .stdout(Stdio::from(file))
            .stderr(Stdio::null())
            .spawn()
            .expect("spawning kubectl get -w");
        Watch {
            child,
            out: out.to_path_buf(),
        }
    }

    /// The output so far.
    pub fn text(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits (30 s at most) until `needle` occurs `count` times in the output, whitespace
    /// ignored (kubectl prints events compact or indented depending on its version).
    pub fn wait_for(&self, needle: &str, count: usize) {
        self.wait_until(&format!("{count}× {needle} in the watch"), |text| {
            let text: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            text.matches(needle).count() >= count
        });
    }

    /// Waits (30 s at most) until `check` holds for the output.
    pub fn wait_until(&self, what: &str, check: impl Fn(&str) -> bool) {
        super::wait_for(what, Duration::from_secs(30), || {
            check(&self.text()).then_some(())
        });
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

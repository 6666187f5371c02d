//! `install.sh` against scratch roots (its `INSTALL_K3RS_ROOT`), with the freshly built `k3rs`:
//! server and agent services (systemd and OpenRC), the files, unit and environment file they
//! get, `systemd-analyze verify` on the unit, `shellcheck` on every script, idempotence (a second
//! run changes no file and restarts nothing), the agent's token requirement, the uninstall
//! scripts (the root is back to what it was), the download path's sha256 verification against
//! a loopback HTTP server and a `file://` URL, and k3rs-killall.sh run for real in namespaces.
//!
//! Nothing here touches the machine's /etc, /usr/local or systemd: every install writes below
//! a temporary directory, and the script only logs the systemctl calls it skips there; the
//! killall script runs inside its own PID, network and mount namespaces (needs root, as CI).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

const BIN: &str = env!("CARGO_BIN_EXE_k3rs");
const TOKEN: &str = "K10deadbeef::abcdef.0123456789abcdef";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh")
}

/// A `file://` kubectl mirror (install.sh's INSTALL_K3RS_KUBECTL_URL): this machine's kubectl
/// and its `kubectl.sha256`, made once per test process.
fn kubectl_mirror() -> &'static str {
    static MIRROR: std::sync::OnceLock<(tempfile::TempDir, String)> = std::sync::OnceLock::new();
    &MIRROR
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let kubectl = crate::common::require_program("kubectl", "kubectl");
            std::fs::copy(kubectl, dir.path().join("kubectl")).unwrap();
            let sum = sha256_hex(&dir.path().join("kubectl"));
            std::fs::write(
                dir.path().join("kubectl.sha256"),
                format!("{sum}  kubectl\n"),
            )
            .unwrap();
            let url = format!("file://{}", dir.path().display());
            (dir, url)
        })
        .1
}

/// Runs `sh install.sh args` with only PATH and `env` set, under `root` (kubectl, when
/// fetched, from [`kubectl_mirror`] unless `env` says otherwise).
fn install(root: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    install_with_path(
        root,
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        env,
        args,
    )
}

fn install_with_path(root: &Path, path: &str, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new("sh")
        .arg(script())
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("INSTALL_K3RS_ROOT", root)
        .env("INSTALL_K3RS_KUBECTL_URL", kubectl_mirror())
        .envs(env.iter().copied())
        .output()
        .expect("running sh install.sh")
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: Output) -> String {
    assert!(out.status.success(), "install.sh failed: {}", text(&out));
    text(&out)
}

/// Runs a generated script (uninstall) under the same root.
fn run_script(root: &Path, path: &str) -> String {
    let out = Command::new(root.join(path.trim_start_matches('/')))
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("INSTALL_K3RS_ROOT", root)
        .output()
        .unwrap_or_else(|e| panic!("running {path}: {e}"));
    ok(out)
}

fn shellcheck(path: &Path) {
    let out = Command::new("shellcheck")
        .args(["-s", "sh"])
        .arg(path)
        .output()
        .expect("running shellcheck (scripts/prereqs.sh installs it)");
    assert!(
        out.status.success(),
        "shellcheck {}: {}",
        path.display(),
        text(&out)
    );
}

/// Every entry below `root`: kind, mode, mtime, and the content or link target.
pub(crate) type Listing = BTreeMap<String, (String, u32, i64, i64, Vec<u8>)>;

pub(crate) fn listing(root: &Path) -> Listing {
    fn walk(root: &Path, dir: &Path, out: &mut Listing) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let (kind, body) = if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                ("link", target.display().to_string().into_bytes())
            } else if meta.is_dir() {
                walk(root, &path, out);
                ("dir", Vec::new())
            } else {
                ("file", std::fs::read(&path).unwrap())
            };
            let entry = (
                kind.to_string(),
                meta.mode() & 0o7777,
                meta.mtime(),
                meta.mtime_nsec(),
                body,
            );
            out.insert(rel, entry);
        }
    }
    let mut out = Listing::new();
    walk(root, root, &mut out);
    out
}

pub(crate) fn names(listing: &Listing) -> Vec<&str> {
    listing.keys().map(String::as_str).collect()
}

fn read(root: &Path, path: &str) -> String {
    std::fs::read_to_string(root.join(path.trim_start_matches('/')))
        .unwrap_or_else(|e| panic!("reading {path} in the scratch root: {e}"))
}

fn mode(root: &Path, path: &str) -> u32 {
    std::fs::metadata(root.join(path.trim_start_matches('/')))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .permissions()
        .mode()
        & 0o7777
}

/// `systemd-analyze verify` on a copy of the unit whose absolute paths point into the
/// scratch root: verify checks that ExecStart's binary exists, and `--root` would also need
/// the root to hold systemd's own units (sysinit.target, ...), which a scratch root has not.
fn systemd_verify(root: &Path, unit: &str) {
    let copy_dir = tempfile::tempdir().unwrap();
    let name = Path::new(unit).file_name().unwrap();
    let r = root.display().to_string();
    let rewritten = read(root, unit)
        .replace("=/usr/local/bin/", &format!("={r}/usr/local/bin/"))
        .replace(
            "=-/etc/systemd/system/",
            &format!("=-{r}/etc/systemd/system/"),
        );
    assert!(rewritten.contains(&format!("ExecStart={r}/usr/local/bin/k3rs")));
    let copy = copy_dir.path().join(name);
    std::fs::write(&copy, rewritten).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(&copy)
        .output()
        .expect("running systemd-analyze (scripts/prereqs.sh installs systemd)");
    assert!(
        out.status.success(),
        "systemd-analyze verify: {}",
        text(&out)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "systemd-analyze verify warned about {unit}"
    );
}

pub(crate) fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm",
        other => other,
    }
}

/// A scratch root that starts with /var/lib (the data dir's parent), as a real root would.
fn scratch_root() -> (tempfile::TempDir, PathBuf, Listing) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("var/lib")).unwrap();
    let initial = listing(&root);
    (dir, root, initial)
}

#[test]
fn install_sh_is_shellcheck_clean() {
    shellcheck(&script());
}

#[test]
fn server_and_agent_systemd_install_rerun_and_uninstall() {
    let (_dir, root, initial) = scratch_root();
    let server_env = [
        ("INSTALL_K3RS_INIT", "systemd"),
        ("INSTALL_K3RS_BIN", BIN),
        ("K3RS_NODE_NAME", "edge-1"),
        ("K3RS_KUBECONFIG_MODE", "0644"),
    ];
    let server_args = [
        "server",
        "--tls-san=k3rs.example",
        "--node-label=site=lab 1",
    ];
    let log = ok(install(&root, &server_env, &server_args));

    // The binary, the kubectl symlink and the scripts.
    assert_eq!(
        std::fs::read(root.join("usr/local/bin/k3rs")).unwrap(),
        std::fs::read(BIN).unwrap()
    );
    assert_eq!(mode(&root, "/usr/local/bin/k3rs"), 0o755);
    assert_eq!(
        std::fs::read_link(root.join("usr/local/bin/kubectl")).unwrap(),
        Path::new("k3rs")
    );
    // crictl too when this machine has none (`k3rs crictl`, built in).
    if crate::common::find_program("crictl").is_none() {
        assert_eq!(
            std::fs::read_link(root.join("usr/local/bin/crictl")).unwrap(),
            Path::new("k3rs")
        );
        let out = Command::new(root.join("usr/local/bin/crictl"))
            .arg("--help")
            .env_clear()
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("inspectp"),
            "{}",
            text(&out)
        );
    }
    // No kubectl below the root: the official one was fetched beside k3rs, checksum verified.
    assert!(
        log.contains("No kubectl on the PATH: downloading the checksum")
            && log.contains("Verified the sha256 of kubectl"),
        "{log}"
    );
    assert_eq!(mode(&root, "/usr/local/bin/k3rs-kubectl"), 0o755);
    // The link runs the PATH's kubectl (never itself), else k3rs-kubectl, or says there is none.
    let linked = |path: &str| {
        Command::new(root.join("usr/local/bin/kubectl"))
            .args(["version", "--client"])
            .env_clear()
            .env("PATH", path)
            .output()
            .unwrap()
    };
    // The link's directory first, then this machine's PATH (where the real kubectl is).
    let system = format!(
        "{}:{}",
        root.join("usr/local/bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = linked(&system);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("Client Version: v1."),
        "{}",
        text(&out)
    );
    let out = linked("/nonexistent");
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("Client Version: v1."),
        "{}",
        text(&out)
    );
    let private = root.join("usr/local/bin/k3rs-kubectl");
    let aside = root.join("k3rs-kubectl.aside");
    std::fs::rename(&private, &aside).unwrap();
    let out = linked("/nonexistent");
    std::fs::rename(&aside, &private).unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("k3rs kubectl: no kubectl on PATH nor k3rs-kubectl beside k3rs"),
        "{}",
        text(&out)
    );

    for script in ["k3rs-killall.sh", "k3rs-uninstall.sh"] {
        let path = format!("/usr/local/bin/{script}");
        assert_eq!(mode(&root, &path), 0o755, "{script}");
        shellcheck(&root.join(path.trim_start_matches('/')));
    }

    // The unit: what k3s's has, our paths, the arguments quoted for systemd.
    let unit = read(&root, "/etc/systemd/system/k3rs.service");
    for line in [
        "Type=notify",
        "Delegate=yes",
        "KillMode=process",
        "Restart=always",
        "LimitNOFILE=1048576",
        "EnvironmentFile=-/etc/systemd/system/k3rs.service.env",
        "ExecStartPre=-/sbin/modprobe br_netfilter",
        "ExecStartPre=-/sbin/modprobe overlay",
        "WantedBy=multi-user.target",
    ] {
        assert!(unit.lines().any(|l| l == line), "{line:?} in\n{unit}");
    }
    assert!(
        unit.ends_with(
            "ExecStart=/usr/local/bin/k3rs \\\n    server \\\n    --tls-san=k3rs.example \\\n    \"--node-label=site=lab 1\"\n"
        ),
        "{unit}"
    );
    systemd_verify(&root, "/etc/systemd/system/k3rs.service");
    assert_eq!(
        std::fs::read_link(root.join("etc/systemd/system/multi-user.target.wants/k3rs.service"))
            .unwrap(),
        Path::new("/etc/systemd/system/k3rs.service")
    );

    // The environment file: exactly the K3RS_* variables, sorted, mode 0600.
    assert_eq!(
        read(&root, "/etc/systemd/system/k3rs.service.env"),
        "K3RS_KUBECONFIG_MODE=0644\nK3RS_NODE_NAME=edge-1\n"
    );
    assert_eq!(mode(&root, "/etc/systemd/system/k3rs.service.env"), 0o600);
    assert!(
        log.contains("systemctl daemon-reload") && log.contains("systemctl restart k3rs"),
        "the first install (re)starts the service: {log}"
    );

    // The same inputs again: no file written (contents, modes and mtimes identical), no restart.
    let before = listing(&root);
    let log = ok(install(&root, &server_env, &server_args));
    assert_eq!(listing(&root), before, "a second run changed files: {log}");
    assert!(log.contains("No change: not restarting k3rs"), "{log}");
    assert!(!log.contains("systemctl restart"), "{log}");
    assert!(!log.contains("daemon-reload"), "{log}");

    // A changed flag rewrites the unit, reloads and restarts.
    let log = ok(install(&root, &server_env, &["server", "--tls-san=other"]));
    assert!(
        log.contains("Wrote /etc/systemd/system/k3rs.service"),
        "{log}"
    );
    assert!(
        log.contains("skipped (root ") && log.contains("systemctl daemon-reload"),
        "{log}"
    );
    assert!(log.contains("systemctl restart k3rs"), "{log}");
    assert!(!log.contains("Wrote /usr/local/bin/k3rs\n"), "{log}");

    // A changed K3RS_ variable rewrites only the environment file, reloads and restarts.
    let changed_env = [
        ("INSTALL_K3RS_INIT", "systemd"),
        ("INSTALL_K3RS_BIN", BIN),
        ("K3RS_NODE_NAME", "edge-2"),
        ("K3RS_KUBECONFIG_MODE", "0644"),
    ];
    let log = ok(install(&root, &changed_env, &["server", "--tls-san=other"]));
    assert!(
        log.contains("Wrote /etc/systemd/system/k3rs.service.env"),
        "{log}"
    );
    assert!(
        log.contains("Unchanged: /etc/systemd/system/k3rs.service\n"),
        "{log}"
    );
    assert!(log.contains("systemctl daemon-reload"), "{log}");
    assert!(log.contains("systemctl restart k3rs"), "{log}");
    assert_eq!(
        read(&root, "/etc/systemd/system/k3rs.service.env"),
        "K3RS_KUBECONFIG_MODE=0644\nK3RS_NODE_NAME=edge-2\n"
    );
    assert_eq!(mode(&root, "/etc/systemd/system/k3rs.service.env"), 0o600);

    // Agent mode needs a token: a clear error, and nothing written.
    let before = listing(&root);
    let out = install(
        &root,
        &[
            ("INSTALL_K3RS_INIT", "systemd"),
            ("INSTALL_K3RS_SKIP_DOWNLOAD", "true"),
            ("K3RS_URL", "https://10.0.0.1:6443"),
        ],
        &[],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "K3RS_URL is set, so k3rs runs as an agent, but neither K3RS_TOKEN nor K3RS_TOKEN_FILE is set"
        ),
        "{}",
        text(&out)
    );
    assert_eq!(listing(&root), before);

    // The agent, with the binary already in place, next to the server.
    let agent_env = [
        ("INSTALL_K3RS_INIT", "systemd"),
        ("INSTALL_K3RS_SKIP_DOWNLOAD", "true"),
        ("K3RS_URL", "https://10.0.0.1:6443"),
        ("K3RS_TOKEN", TOKEN),
    ];
    let log = ok(install(&root, &agent_env, &["--node-ip=10.0.0.2"]));
    let unit = read(&root, "/etc/systemd/system/k3rs-agent.service");
    assert!(
        unit.ends_with("ExecStart=/usr/local/bin/k3rs \\\n    agent \\\n    --node-ip=10.0.0.2\n"),
        "{unit}"
    );
    assert!(unit
        .lines()
        .any(|l| l == "EnvironmentFile=-/etc/systemd/system/k3rs-agent.service.env"));
    systemd_verify(&root, "/etc/systemd/system/k3rs-agent.service");
    assert_eq!(
        read(&root, "/etc/systemd/system/k3rs-agent.service.env"),
        format!("K3RS_TOKEN={TOKEN}\nK3RS_URL=https://10.0.0.1:6443\n")
    );
    assert_eq!(
        mode(&root, "/etc/systemd/system/k3rs-agent.service.env"),
        0o600
    );
    assert_eq!(mode(&root, "/usr/local/bin/k3rs-agent-uninstall.sh"), 0o755);
    shellcheck(&root.join("usr/local/bin/k3rs-agent-uninstall.sh"));
    assert!(log.contains("systemctl restart k3rs-agent"), "{log}");
    let before = listing(&root);
    let log = ok(install(&root, &agent_env, &["--node-ip=10.0.0.2"]));
    assert_eq!(
        listing(&root),
        before,
        "a second agent run changed files: {log}"
    );
    assert!(!log.contains("systemctl restart"), "{log}");

    // What the services would have made: data and config.
    for (path, body) in [
        ("var/lib/k3rs/server/token", "secret"),
        ("etc/k3rs/k3rs.yaml", "kubeconfig"),
    ] {
        std::fs::create_dir_all(root.join(path).parent().unwrap()).unwrap();
        std::fs::write(root.join(path), body).unwrap();
    }

    // Uninstalling the agent keeps what the server still uses.
    let log = run_script(&root, "/usr/local/bin/k3rs-agent-uninstall.sh");
    assert!(
        log.contains("Another k3rs service remains (/etc/systemd/system/k3rs.service)"),
        "{log}"
    );
    let left = listing(&root);
    for gone in [
        "etc/systemd/system/k3rs-agent.service",
        "etc/systemd/system/k3rs-agent.service.env",
        "usr/local/bin/k3rs-agent-uninstall.sh",
    ] {
        assert!(!left.contains_key(gone), "{gone} left: {:?}", names(&left));
    }
    for kept in [
        "usr/local/bin/k3rs",
        "usr/local/bin/kubectl",
        "usr/local/bin/k3rs-killall.sh",
        "etc/systemd/system/k3rs.service",
        "var/lib/k3rs/server/token",
    ] {
        assert!(
            left.contains_key(kept),
            "{kept} removed: {:?}",
            names(&left)
        );
    }

    // Uninstalling the server leaves the root as it found it.
    let log = run_script(&root, "/usr/local/bin/k3rs-uninstall.sh");
    assert!(log.contains("skipped (root "), "{log}");
    assert_eq!(
        names(&listing(&root)),
        names(&initial),
        "left behind after uninstall: {log}"
    );
}

#[test]
fn openrc_install_and_uninstall() {
    let (_dir, root, initial) = scratch_root();
    let env = [
        ("INSTALL_K3RS_INIT", "openrc"),
        ("INSTALL_K3RS_BIN", BIN),
        ("INSTALL_K3RS_SYMLINK", "skip"),
        // The command from INSTALL_K3RS_EXEC, its flags from the arguments.
        ("INSTALL_K3RS_EXEC", "server"),
        ("K3RS_TOKEN", "it's \"quoted\" $HOME"),
    ];
    let log = ok(install(&root, &env, &["--disable-agent"]));
    assert!(log.contains("skipped (root "), "{log}");
    assert!(log.contains("/etc/init.d/k3rs restart"), "{log}");
    let service = read(&root, "/etc/init.d/k3rs");
    assert!(service.starts_with("#!/sbin/openrc-run\n"), "{service}");
    assert!(
        service.contains(
            "command=\"/usr/local/bin/k3rs\"\ncommand_args=\"server '--disable-agent' >>/var/log/k3rs.log 2>&1\"\n"
        ),
        "{service}"
    );
    assert!(service.contains("if [ -f /etc/k3rs/k3rs.env ]; then . /etc/k3rs/k3rs.env; fi"));
    assert_eq!(mode(&root, "/etc/init.d/k3rs"), 0o755);
    shellcheck(&root.join("etc/init.d/k3rs"));
    assert!(!root.join("usr/local/bin/kubectl").exists());
    assert!(!root.join("usr/local/bin/crictl").exists());
    assert_eq!(
        std::fs::read_link(root.join("etc/runlevels/default/k3rs")).unwrap(),
        Path::new("/etc/init.d/k3rs")
    );
    // The env file is sourced by the init script: a shell reads the token back unchanged.
    assert_eq!(mode(&root, "/etc/k3rs/k3rs.env"), 0o600);
    let out = Command::new("sh")
        .arg("-c")
        .arg(". \"$1\" && printf %s \"$K3RS_TOKEN\"")
        .arg("sh")
        .arg(root.join("etc/k3rs/k3rs.env"))
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "it's \"quoted\" $HOME"
    );

    let before = listing(&root);
    let log = ok(install(&root, &env, &["--disable-agent"]));
    assert_eq!(listing(&root), before, "a second run changed files: {log}");
    assert!(!log.contains("/etc/init.d/k3rs restart"), "{log}");

    let log = run_script(&root, "/usr/local/bin/k3rs-uninstall.sh");
    assert_eq!(
        names(&listing(&root)),
        names(&initial),
        "left behind: {log}"
    );
}

/// A loopback HTTP server for `dir`, recording the paths asked for.
pub(crate) fn serve(dir: PathBuf) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut request = String::new();
            if reader.read_line(&mut request).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                match reader.read_line(&mut header) {
                    Ok(0) | Err(_) => break,
                    Ok(_) if header == "\r\n" => break,
                    Ok(_) => {}
                }
            }
            let path = request.split(' ').nth(1).unwrap_or("/").to_string();
            log.lock().unwrap().push(path.clone());
            let reply = match std::fs::read(dir.join(path.trim_start_matches('/'))) {
                Ok(body) => {
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    [head.into_bytes(), body].concat()
                }
                Err(_) => {
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_vec()
                }
            };
            let _ = conn.write_all(&reply);
        }
    });
    (url, asked)
}

pub(crate) fn sha256_hex(path: &Path) -> String {
    let out = Command::new("sha256sum").arg(path).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

#[test]
fn download_verifies_the_sha256() {
    let dist = tempfile::tempdir().unwrap();
    let bin_name = format!("k3rs-{}", arch());
    let sums_name = format!("sha256sum-{}.txt", arch());
    std::fs::copy(BIN, dist.path().join(&bin_name)).unwrap();
    let sum = sha256_hex(&dist.path().join(&bin_name));
    std::fs::write(dist.path().join(&sums_name), format!("{sum}  {bin_name}\n")).unwrap();
    let (url, asked) = serve(dist.path().to_path_buf());
    let env = |url: &str| {
        vec![
            ("INSTALL_K3RS_INIT".to_string(), "systemd".to_string()),
            ("INSTALL_K3RS_SKIP_PREREQS".to_string(), "true".to_string()),
            ("INSTALL_K3RS_DOWNLOAD_URL".to_string(), url.to_string()),
        ]
    };
    let run = |root: &Path, url: &str| {
        let env = env(url);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        install(root, &env, &[])
    };

    // From the loopback server: checksum first, then the binary, verified.
    let (_dir, root, _) = scratch_root();
    let log = ok(run(&root, &url));
    assert!(
        log.contains(&format!("Verified the sha256 of {bin_name} ({sum})")),
        "{log}"
    );
    assert_eq!(
        std::fs::read(root.join("usr/local/bin/k3rs")).unwrap(),
        std::fs::read(BIN).unwrap()
    );
    assert_eq!(
        *asked.lock().unwrap(),
        [format!("/{sums_name}"), format!("/{bin_name}")]
    );
    // Again: the installed binary matches the release's checksum, so it is not fetched.
    asked.lock().unwrap().clear();
    let before = listing(&root);
    let log = ok(run(&root, &url));
    assert_eq!(*asked.lock().unwrap(), [format!("/{sums_name}")], "{log}");
    assert_eq!(listing(&root), before);

    // A file:// URL works the same way.
    let (_dir2, root2, _) = scratch_root();
    ok(run(&root2, &format!("file://{}", dist.path().display())));
    assert_eq!(
        std::fs::read(root2.join("usr/local/bin/k3rs")).unwrap(),
        std::fs::read(BIN).unwrap()
    );

    // A wrong checksum is refused before anything is changed.
    let bad = "0".repeat(64);
    std::fs::write(dist.path().join(&sums_name), format!("{bad}  {bin_name}\n")).unwrap();
    let (_dir3, root3, initial3) = scratch_root();
    let out = run(&root3, &url);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "The sha256 of {bin_name} is {sum}, the release says {bad}: refusing to install it"
        )),
        "{}",
        text(&out)
    );
    assert_eq!(listing(&root3), initial3);

    // A checksum file without our architecture's line is refused too.
    std::fs::write(dist.path().join(&sums_name), format!("{sum}  k3rs-other\n")).unwrap();
    let out = run(&root3, &url);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!("has no checksum for {bin_name}")),
        "{}",
        text(&out)
    );
    assert_eq!(listing(&root3), initial3);
}

/// The install failed with `needle` in its stderr and left `root` as it was.
fn assert_refused(out: &Output, needle: &str, root: &Path, initial: &Listing) {
    assert!(!out.status.success(), "{}", text(out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(needle),
        "{needle:?} not in {}",
        text(out)
    );
    assert_eq!(&listing(root), initial);
}

/// A kubectl whose checksum does not match stops the install before anything is changed;
/// INSTALL_K3RS_SKIP_KUBECTL installs no kubectl and no kubectl link that could not work.
#[test]
fn kubectl_is_verified_or_skipped() {
    let mirror = tempfile::tempdir().unwrap();
    std::fs::write(
        mirror.path().join("kubectl"),
        "#!/bin/sh\necho fake kubectl\n",
    )
    .unwrap();
    std::fs::write(mirror.path().join("kubectl.sha256"), "0".repeat(64)).unwrap();
    let url = format!("file://{}", mirror.path().display());
    let (_dir, root, initial) = scratch_root();
    let env = [
        ("INSTALL_K3RS_INIT", "systemd"),
        ("INSTALL_K3RS_BIN", BIN),
        ("INSTALL_K3RS_KUBECTL_URL", url.as_str()),
    ];
    let out = install(&root, &env, &[]);
    let sum = sha256_hex(&mirror.path().join("kubectl"));
    let needle = format!(
        "The sha256 of kubectl is {sum}, {url}/kubectl.sha256 says {}: refusing to install it",
        "0".repeat(64)
    );
    assert_refused(&out, &needle, &root, &initial);

    let env = [
        ("INSTALL_K3RS_INIT", "systemd"),
        ("INSTALL_K3RS_BIN", BIN),
        ("INSTALL_K3RS_KUBECTL_URL", url.as_str()),
        ("INSTALL_K3RS_SKIP_KUBECTL", "true"),
    ];
    let log = ok(install(&root, &env, &[]));
    assert!(
        log.contains(
            "Not linking /usr/local/bin/kubectl -> k3rs: there is no kubectl for it to run"
        ),
        "{log}"
    );
    assert!(!root.join("usr/local/bin/kubectl").exists());
    assert!(!root.join("usr/local/bin/k3rs-kubectl").exists());
    assert!(root.join("usr/local/bin/k3rs").exists());
    run_script(&root, "/usr/local/bin/k3rs-uninstall.sh");
    assert_eq!(names(&listing(&root)), names(&initial));
}

/// An unsupported system (here a machine architecture without a release, as a fake `uname`
/// says) stops the install before anything is changed.
#[test]
fn an_unsupported_system_changes_nothing() {
    let fake = tempfile::tempdir().unwrap();
    let uname = fake.path().join("uname");
    std::fs::write(
        &uname,
        "#!/bin/sh\ncase \"$1\" in -m) echo mips64 ;; -s) echo \"${FAKE_OS:-Linux}\" ;; *) echo Linux ;; esac\n",
    )
    .unwrap();
    std::fs::set_permissions(&uname, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        fake.path().display()
    );
    let (_dir, root, initial) = scratch_root();
    let env = [
        ("INSTALL_K3RS_INIT", "systemd"),
        (
            "INSTALL_K3RS_DOWNLOAD_URL",
            "http://127.0.0.1:9/never-asked",
        ),
    ];
    let out = install_with_path(&root, &path, &env, &[]);
    assert_refused(&out, "Unsupported architecture mips64", &root, &initial);

    let env = [
        ("INSTALL_K3RS_INIT", "systemd"),
        ("INSTALL_K3RS_BIN", BIN),
        ("FAKE_OS", "FreeBSD"),
    ];
    let out = install_with_path(&root, &path, &env, &[]);
    assert_refused(
        &out,
        "Unsupported system FreeBSD: k3rs runs on Linux",
        &root,
        &initial,
    );
}

/// k3rs-killall.sh for real, inside fresh PID, network and mount namespaces (so it sees only
/// the processes, interfaces, iptables and mounts the scenario made there): it kills k3rs and
/// the data dir's shims with their children, unmounts the pod's mounts (its rootfs and its
/// network namespace under containerd's state dir), deletes the cni- network namespace in
/// /run/netns, the bridge and its veth, and the KUBE-/CNI- rules; everything else stays.
#[test]
fn killall_cleans_up_what_k3rs_left() {
    let (dir, root, _) = scratch_root();
    ok(install(
        &root,
        &[
            ("INSTALL_K3RS_INIT", "systemd"),
            ("INSTALL_K3RS_BIN", BIN),
            ("INSTALL_K3RS_SKIP_PREREQS", "true"),
        ],
        &[],
    ));
    let data = dir.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/install/killall_scenario.sh");
    let out = Command::new("unshare")
        .args([
            "--pid",
            "--net",
            "--mount",
            "--mount-proc",
            "--fork",
            "--kill-child",
        ])
        .arg("sh")
        .arg(scenario)
        .arg(&data)
        .arg(root.join("usr/local/bin/k3rs-killall.sh"))
        .env_remove("INSTALL_K3RS_ROOT")
        .output()
        .expect("running unshare (util-linux)");
    let report = text(&out);
    assert!(out.status.success(), "{report}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let left = &stdout[stdout.find("== processes").expect(&report)..];
    assert_eq!(
        left,
        "== processes\nsleep 1000\n== bystander\nalive\n== mounts\n0\n\
         == links\nkeep0\nlo\n== netns\nother\n\
         == iptables\n-A INPUT -s 10.9.9.9/32 -j ACCEPT\n\
         :PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n\
         :POSTROUTING ACCEPT [0:0]\n",
        "{report}"
    );
}

//! The containerd configuration the agent generates: containerd 1.6's config format version 2,
//! with every directory the daemon writes to under the agent's data dir, so several agents (and
//! a system containerd) can share one machine. That includes the pods' network namespaces
//! (`netns_mounts_under_state_dir`, [`Layout::pod_netns_dir`]), not the host-wide `/run/netns`:
//! stopping the agent and unmounting under its data dir (`k3rs-killall.sh`) releases every one,
//! whatever state its sandbox was left in. Registry mirrors and TLS live in the registry
//! host directory (`config_path`, see [`super::registries`]), credentials in this file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::registries::hosts::{self, HostsFile};
use super::registries::Registries;

/// Where an agent's containerd keeps its files, all under `<data-dir>/agent`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `<agent>/etc/containerd/config.toml`.
    pub config_file: PathBuf,
    /// containerd's `root`: content store, snapshots, metadata (`<agent>/containerd`).
    pub root: PathBuf,
    /// containerd's `state`: runtime state (`<agent>/containerd/state`).
    pub state: PathBuf,
    /// The gRPC socket (`<agent>/containerd/containerd.sock`); containerd adds `.ttrpc` for its
    /// ttrpc socket.
    pub address: PathBuf,
    /// Where the CRI plugin mounts each pod sandbox's network namespace (`cni-<uuid>` files,
    /// `<state>/io.containerd.grpc.v1.cri/netns`) instead of `/run/netns`: `ip netns` does not
    /// list them; `nsenter --net=<file>` enters one.
    pub pod_netns_dir: PathBuf,
    /// The daemon's own stdout/stderr (`<agent>/containerd/containerd.log`).
    pub log_file: PathBuf,
    /// The `opt` plugin's directory (`<agent>/containerd/opt`) instead of `/opt/containerd`.
    pub opt: PathBuf,
    /// Where the agent writes its CNI conflist (`<agent>/etc/cni/net.d`).
    pub cni_conf_dir: PathBuf,
    /// containerd's registry host directory, the CRI plugin's `registry.config_path`
    /// (`<agent>/etc/containerd/certs.d`, as k3s).
    pub registry_dir: PathBuf,
}

impl Layout {
    /// The layout under `agent_dir` (`<data-dir>/agent`).
    pub fn new(agent_dir: &Path) -> Layout {
        let containerd = agent_dir.join("containerd");
        let state = containerd.join("state");
        Layout {
            config_file: agent_dir.join("etc/containerd/config.toml"),
            root: containerd.clone(),
            pod_netns_dir: state.join("io.containerd.grpc.v1.cri/netns"),
            state,
            address: containerd.join("containerd.sock"),
            log_file: containerd.join("containerd.log"),
            opt: containerd.join("opt"),
            cni_conf_dir: agent_dir.join("etc/cni/net.d"),
            registry_dir: agent_dir.join("etc/containerd/certs.d"),
        }
    }
}

/// Debian's containernetworking-plugins directory.
pub const DEFAULT_CNI_BIN_DIR: &str = "/usr/lib/cni";

/// The port of the CRI streaming server (exec/attach/port-forward), containerd's default.
pub const DEFAULT_STREAM_SERVER_PORT: u16 = 10010;

/// Everything the generated `config.toml` depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where containerd's files go.
    pub layout: Layout,
    /// The CRI plugin's `sandbox_image` (the pause image every pod sandbox runs).
    pub sandbox_image: String,
    /// Where the CNI plugin binaries are.
    pub cni_bin_dir: PathBuf,
    /// The snapshotter for CRI containers (`overlayfs`; `native` where overlay is unavailable).
    pub snapshotter: String,
    /// runc's `SystemdCgroup` option: cgroups through systemd instead of cgroupfs.
    pub systemd_cgroup: bool,
    /// The CRI streaming server listens on `127.0.0.1:<port>`.
    pub stream_server_port: u16,
    /// The CRI plugin's `restrict_oom_score_adj`: never ask for an `oom_score_adj` below
    /// containerd's own. Needed where the agent lacks CAP_SYS_RESOURCE (inside a container,
    /// rootless), or runc fails every sandbox (the kubelet gives sandboxes -998); see
    /// [`super::host::can_lower_oom_score_adj`].
    pub restrict_oom_score_adj: bool,
    /// `registries.yaml`: mirrors and TLS go to [`Layout::registry_dir`]
    /// ([`Config::hosts_files`]), credentials into this file.
    pub registries: Registries,
}

impl Config {
    /// The defaults for `agent_dir`: overlayfs, cgroupfs, Debian's CNI plugins.
    pub fn new(agent_dir: &Path, sandbox_image: &str) -> Config {
        Config {
            layout: Layout::new(agent_dir),
            sandbox_image: sandbox_image.to_string(),
            cni_bin_dir: PathBuf::from(DEFAULT_CNI_BIN_DIR),
            snapshotter: "overlayfs".to_string(),
            systemd_cgroup: false,
            stream_server_port: DEFAULT_STREAM_SERVER_PORT,
            restrict_oom_score_adj: false,
            registries: Registries::default(),
        }
    }

    /// The `hosts.toml` files of [`Layout::registry_dir`].
    pub fn hosts_files(&self) -> Vec<HostsFile> {
        hosts::hosts_files(&self.registries)
    }

    /// The `config.toml` text (containerd 1.6, config version 2).
    pub fn render(&self) -> String {
        let l = &self.layout;
        let cri = "plugins.\"io.containerd.grpc.v1.cri\"";
        let mut s = String::new();
        let _ = writeln!(s, "# Generated by the k3rs agent; edits are overwritten.");
        let _ = writeln!(s, "version = 2");
        let _ = writeln!(s, "root = {}", quote_path(&l.root));
        let _ = writeln!(s, "state = {}", quote_path(&l.state));
        let _ = writeln!(s);
        let _ = writeln!(s, "[grpc]");
        let _ = writeln!(s, "  address = {}", quote_path(&l.address));
        let _ = writeln!(s);
        let _ = writeln!(s, "[plugins.\"io.containerd.internal.v1.opt\"]");
        let _ = writeln!(s, "  path = {}", quote_path(&l.opt));
        let _ = writeln!(s);
        let _ = writeln!(s, "[{cri}]");
        let _ = writeln!(s, "  sandbox_image = {}", quote(&self.sandbox_image));
        let _ = writeln!(s, "  stream_server_address = \"127.0.0.1\"");
        let _ = writeln!(s, "  stream_server_port = \"{}\"", self.stream_server_port);
        if self.restrict_oom_score_adj {
            let _ = writeln!(s, "  restrict_oom_score_adj = true");
        }
        // Under `state`: [`Layout::pod_netns_dir`].
        let _ = writeln!(s, "  netns_mounts_under_state_dir = true");
        let _ = writeln!(s);
        let _ = writeln!(s, "[{cri}.containerd]");
        let _ = writeln!(s, "  snapshotter = {}", quote(&self.snapshotter));
        let _ = writeln!(s, "  default_runtime_name = \"runc\"");
        let _ = writeln!(s);
        let _ = writeln!(s, "[{cri}.containerd.runtimes.runc]");
        let _ = writeln!(s, "  runtime_type = \"io.containerd.runc.v2\"");
        let _ = writeln!(s);
        let _ = writeln!(s, "[{cri}.containerd.runtimes.runc.options]");
        let _ = writeln!(s, "  SystemdCgroup = {}", self.systemd_cgroup);
        let _ = writeln!(s);
        let _ = writeln!(s, "[{cri}.cni]");
        let _ = writeln!(s, "  bin_dir = {}", quote_path(&self.cni_bin_dir));
        let _ = writeln!(s, "  conf_dir = {}", quote_path(&l.cni_conf_dir));
        let _ = writeln!(s);
        let _ = writeln!(s, "[{cri}.registry]");
        let _ = writeln!(s, "  config_path = {}", quote_path(&l.registry_dir));
        hosts::render_auths(&mut s, cri, &self.registries);
        s
    }
}

pub(crate) fn quote_path(p: &Path) -> String {
    quote(&p.to_string_lossy())
}

/// A TOML basic string: `"` and `\` escaped, control characters as `\uXXXX`.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_under_the_agent_dir() {
        let l = Layout::new(Path::new("/var/lib/k3rs/agent"));
        assert_eq!(
            l,
            Layout {
                config_file: "/var/lib/k3rs/agent/etc/containerd/config.toml".into(),
                root: "/var/lib/k3rs/agent/containerd".into(),
                state: "/var/lib/k3rs/agent/containerd/state".into(),
                address: "/var/lib/k3rs/agent/containerd/containerd.sock".into(),
                pod_netns_dir:
                    "/var/lib/k3rs/agent/containerd/state/io.containerd.grpc.v1.cri/netns".into(),
                log_file: "/var/lib/k3rs/agent/containerd/containerd.log".into(),
                opt: "/var/lib/k3rs/agent/containerd/opt".into(),
                cni_conf_dir: "/var/lib/k3rs/agent/etc/cni/net.d".into(),
                registry_dir: "/var/lib/k3rs/agent/etc/containerd/certs.d".into(),
            }
        );
    }

    #[test]
    fn renders_the_exact_default_config() {
        let c = Config::new(Path::new("/var/lib/k3rs/agent"), "docker.io/k3rs/pause:3.6");
        let expected = r#"# Generated by the k3rs agent; edits are overwritten.
version = 2
root = "/var/lib/k3rs/agent/containerd"
state = "/var/lib/k3rs/agent/containerd/state"

[grpc]
  address = "/var/lib/k3rs/agent/containerd/containerd.sock"

[plugins."io.containerd.internal.v1.opt"]
  path = "/var/lib/k3rs/agent/containerd/opt"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "docker.io/k3rs/pause:3.6"
  stream_server_address = "127.0.0.1"
  stream_server_port = "10010"
  netns_mounts_under_state_dir = true

[plugins."io.containerd.grpc.v1.cri".containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
  SystemdCgroup = false

[plugins."io.containerd.grpc.v1.cri".cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "/var/lib/k3rs/agent/etc/cni/net.d"

[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/var/lib/k3rs/agent/etc/containerd/certs.d"
"#;
        assert_eq!(c.render(), expected);
    }

    #[test]
    fn options_reach_the_config() {
        let mut c = Config::new(Path::new("/d/agent"), "example.com/pause:1");
        c.systemd_cgroup = true;
        c.snapshotter = "native".into();
        c.cni_bin_dir = "/opt/cni/bin".into();
        c.stream_server_port = 10011;
        c.restrict_oom_score_adj = true;
        let text = c.render();
        assert!(
            text.contains("  stream_server_port = \"10011\"\n  restrict_oom_score_adj = true\n"),
            "{text}"
        );
        assert!(text.contains("  SystemdCgroup = true\n"), "{text}");
        assert!(text.contains("  snapshotter = \"native\"\n"), "{text}");
        assert!(text.contains("  bin_dir = \"/opt/cni/bin\"\n"), "{text}");
        assert!(
            text.contains("  stream_server_port = \"10011\"\n"),
            "{text}"
        );
        assert!(
            text.contains("  sandbox_image = \"example.com/pause:1\"\n"),
            "{text}"
        );
    }

    #[test]
    fn strings_are_toml_escaped() {
        assert_eq!(quote(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(quote("x\ny"), r#""x\u000Ay""#);
    }
}

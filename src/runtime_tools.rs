//! `k3rs crictl` and `k3rs ctr`: the node's container runtime as k3s users inspect it.
//! - `crictl` is built in (the agent's CRI client; see [`k3rs_agent::crictl`]).
//! - `ctr` runs containerd's own `ctr` with the agent's socket and the `k8s.io` namespace
//!   (where the kubelet's images and containers are), unless the caller set
//!   `CONTAINERD_ADDRESS` / `CONTAINERD_NAMESPACE` or passes `--address` / `--namespace`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use k3rs_agent::crictl::Command;

/// Where the commands find the node's runtime.
#[derive(Args, Debug)]
pub struct RuntimeAccess {
    /// The node's data dir (the supervised containerd's socket is under it).
    #[arg(
        short = 'd',
        long,
        default_value = "/var/lib/k3rs",
        env = "K3RS_DATA_DIR"
    )]
    data_dir: PathBuf,
}

impl RuntimeAccess {
    fn socket(&self) -> PathBuf {
        k3rs_agent::containerd::Layout::new(&self.data_dir.join("agent")).address
    }
}

/// `k3rs crictl`.
#[derive(Args, Debug)]
pub struct CrictlArgs {
    #[command(flatten)]
    access: RuntimeAccess,
    /// The CRI socket (default: the supervised containerd's under --data-dir).
    #[arg(short = 'r', long, env = "CONTAINER_RUNTIME_ENDPOINT")]
    runtime_endpoint: Option<String>,
    #[command(subcommand)]
    command: CrictlCommand,
}

#[derive(Subcommand, Debug)]
enum CrictlCommand {
    /// List containers (running ones; -a for all).
    Ps {
        #[arg(short, long)]
        all: bool,
    },
    /// List pod sandboxes.
    Pods,
    /// List images.
    #[command(alias = "image", alias = "img")]
    Images,
    /// Show a container's status (an id or a unique id prefix).
    Inspect { id: String },
    /// Show a pod sandbox's status.
    Inspectp { id: String },
    /// Print a container's log.
    Logs {
        id: String,
        /// Only the last N lines.
        #[arg(long)]
        tail: Option<u64>,
    },
    /// Remove images.
    Rmi {
        #[arg(required = true)]
        images: Vec<String>,
    },
    /// The runtime's name and version.
    Version,
}

impl From<CrictlCommand> for Command {
    fn from(c: CrictlCommand) -> Command {
        match c {
            CrictlCommand::Ps { all } => Command::Ps { all },
            CrictlCommand::Pods => Command::Pods,
            CrictlCommand::Images => Command::Images,
            CrictlCommand::Inspect { id } => Command::Inspect { id },
            CrictlCommand::Inspectp { id } => Command::Inspectp { id },
            CrictlCommand::Logs { id, tail } => Command::Logs { id, tail },
            CrictlCommand::Rmi { images } => Command::Rmi { images },
            CrictlCommand::Version => Command::Version,
        }
    }
}

/// Runs `k3rs crictl …` and prints its answer.
pub async fn crictl(args: CrictlArgs) -> anyhow::Result<()> {
    let socket = match &args.runtime_endpoint {
        Some(e) => PathBuf::from(e),
        None => args.access.socket(),
    };
    let cri = k3rs_agent::cri::grpc::Cri::connect(&socket)
        .await
        .with_context(|| format!("k3rs crictl: connecting to {}", socket.display()))?;
    let out = k3rs_agent::crictl::run(&cri, args.command.into())
        .await
        .context("k3rs crictl")?;
    print!("{out}");
    Ok(())
}

/// `k3rs ctr`.
#[derive(Args, Debug)]
pub struct CtrArgs {
    #[command(flatten)]
    access: RuntimeAccess,
    /// ctr's own arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    args: Vec<std::ffi::OsString>,
}

/// The first executable `ctr` on `path_var`.
fn system_ctr(path_var: &str) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .map(|dir| dir.join("ctr"))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Replaces this process with containerd's `ctr` for the node's containerd.
pub fn ctr(args: CtrArgs) -> anyhow::Error {
    use std::os::unix::process::CommandExt;
    let path = std::env::var("PATH").unwrap_or_default();
    let Some(bin) = system_ctr(&path) else {
        return anyhow::anyhow!(
            "k3rs ctr: no ctr on PATH (it comes with containerd: apt-get install containerd)"
        );
    };
    let mut cmd = std::process::Command::new(&bin);
    cmd.args(&args.args);
    if std::env::var_os("CONTAINERD_ADDRESS").is_none_or(|v| v.is_empty()) {
        cmd.env("CONTAINERD_ADDRESS", args.access.socket());
    }
    if std::env::var_os("CONTAINERD_NAMESPACE").is_none_or(|v| v.is_empty()) {
        cmd.env("CONTAINERD_NAMESPACE", "k8s.io");
    }
    let err = cmd.exec();
    anyhow::anyhow!("k3rs ctr: running {}: {err}", bin.display())
}

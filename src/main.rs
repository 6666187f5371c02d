//! `k3rs`: the command line. Parses flags and dispatches to the crates; nothing else.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

#[derive(Parser)]
#[command(
    name = "k3rs",
    version,
    about = "A lightweight, single-binary Kubernetes distribution"
)]
struct Cli {
    /// Turn on debug logs.
    #[arg(long, global = true, env = "K3RS_DEBUG")]
    debug: bool,
    /// Log format.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "text",
        env = "K3RS_LOG_FORMAT"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run the control plane (datastore with the etcd v3 API).
    Server(ServerArgs),
}

#[derive(Args)]
struct ServerArgs {
    /// Directory for state; the server uses <data-dir>/server.
    #[arg(
        long,
        short = 'd',
        default_value = "/var/lib/k3rs",
        env = "K3RS_DATA_DIR"
    )]
    data_dir: PathBuf,
    /// Port of the etcd v3 gRPC API (mTLS with the cluster's etcd CA).
    #[arg(long, default_value_t = 2379, env = "K3RS_ETCD_CLIENT_PORT")]
    etcd_client_port: u16,
    /// Address the etcd client port listens on.
    #[arg(long, default_value = "127.0.0.1", env = "K3RS_ETCD_CLIENT_ADDRESS")]
    etcd_client_address: IpAddr,
    /// Keep this much revision history before automatic compaction (e.g. 5m, 1h); 0 disables it.
    #[arg(long, default_value = "5m", value_parser = parse_duration, env = "K3RS_ETCD_AUTO_COMPACTION_RETENTION")]
    etcd_auto_compaction_retention: Duration,
    /// Interval of watch progress notifications for watchers that request them (like etcd's
    /// --experimental-watch-progress-notify-interval).
    #[arg(
        long,
        default_value = "10m",
        value_parser = parse_duration,
        env = "K3RS_ETCD_WATCH_PROGRESS_NOTIFY_INTERVAL"
    )]
    etcd_watch_progress_notify_interval: Duration,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 30s, 5m, 1h"))?;
    let secs = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("invalid duration unit in {s:?}: use s, m or h")),
    };
    Ok(Duration::from_secs(secs))
}

fn init_logging(debug: bool, format: LogFormat) {
    // openraft narrates every election at info; keep its warnings only unless debugging.
    let default = if debug { "debug" } else { "info,openraft=warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("K3RS_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// Cancels `token` on the first SIGTERM or SIGINT.
fn cancel_on_signal(token: CancellationToken) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing SIGINT handler")?;
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received, shutting down"),
            _ = int.recv() => tracing::info!("SIGINT received, shutting down"),
        }
        token.cancel();
    });
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_logging(cli.debug, cli.log_format);
    match cli.command {
        Command::Server(args) => {
            let cfg = k3rs_server::ServerConfig {
                data_dir: args.data_dir,
                etcd_client_addr: SocketAddr::new(args.etcd_client_address, args.etcd_client_port),
                auto_compaction_retention: args.etcd_auto_compaction_retention,
                watch_progress_notify_interval: args.etcd_watch_progress_notify_interval,
            };
            let shutdown = CancellationToken::new();
            cancel_on_signal(shutdown.clone())?;
            k3rs_server::run(cfg, shutdown)
                .await
                .context("k3rs server")?;
        }
    }
    Ok(())
}

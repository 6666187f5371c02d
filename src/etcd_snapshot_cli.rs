//! The `k3rs etcd-snapshot` command and `k3rs server`'s snapshot flags (k3s's names; under
//! `etcd-snapshot` the `--etcd-` prefix may be left out, as in k3s). The long names are the
//! server's, so the config file's `etcd-snapshot-dir` and `etcd-snapshot-retention` apply to
//! both; `--name` is `etcd-snapshot`'s own (the server's scheduled name is
//! `--etcd-snapshot-name`).

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use k3rs_apimachinery::cron::Schedule;
use k3rs_etcd_api::snapshot::{self as etcd_snapshot, client};

/// `k3rs server`'s snapshot flags.
#[derive(Args)]
pub struct ServerSnapshotArgs {
    /// With --cluster-reset: restore the datastore from this snapshot file (the old one is
    /// kept in <data-dir>/server/db/etcd-old-<time>), then exit.
    #[arg(
        long,
        env = "K3RS_CLUSTER_RESET_RESTORE_PATH",
        requires = "cluster_reset"
    )]
    pub cluster_reset_restore_path: Option<PathBuf>,
    /// Do not take scheduled datastore snapshots.
    #[arg(long, env = "K3RS_ETCD_DISABLE_SNAPSHOTS", value_parser = crate::switch::parse)]
    pub etcd_disable_snapshots: bool,
    /// When to take scheduled snapshots (cron, system time zone).
    #[arg(long, default_value = etcd_snapshot::DEFAULT_SCHEDULE, value_parser = parse_schedule, env = "K3RS_ETCD_SNAPSHOT_SCHEDULE_CRON")]
    pub etcd_snapshot_schedule_cron: Schedule,
    /// Scheduled snapshots to keep.
    #[arg(long, default_value_t = etcd_snapshot::DEFAULT_RETENTION, env = "K3RS_ETCD_SNAPSHOT_RETENTION")]
    pub etcd_snapshot_retention: usize,
    /// Directory of the snapshots (default <data-dir>/server/db/snapshots).
    #[arg(long, env = "K3RS_ETCD_SNAPSHOT_DIR")]
    pub etcd_snapshot_dir: Option<PathBuf>,
    /// Base name of scheduled snapshots.
    #[arg(long, default_value = etcd_snapshot::SCHEDULED_NAME, env = "K3RS_ETCD_SNAPSHOT_NAME")]
    pub etcd_snapshot_name: String,
}

impl ServerSnapshotArgs {
    pub fn settings(&self) -> etcd_snapshot::Settings {
        etcd_snapshot::Settings {
            disabled: self.etcd_disable_snapshots,
            schedule: self.etcd_snapshot_schedule_cron.clone(),
            retention: self.etcd_snapshot_retention,
            dir: self.etcd_snapshot_dir.clone(),
            name: self.etcd_snapshot_name.clone(),
        }
    }
}

/// A `--etcd-snapshot-schedule-cron` that is not a cron schedule.
#[derive(Debug, thiserror::Error)]
#[error("invalid cron schedule {value:?}: {source}")]
struct ScheduleError {
    value: String,
    #[source]
    source: k3rs_apimachinery::cron::ParseError,
}

fn parse_schedule(s: &str) -> Result<Schedule, ScheduleError> {
    Schedule::parse(s).map_err(|source| ScheduleError {
        value: s.to_string(),
        source,
    })
}

#[derive(Args)]
pub struct EtcdSnapshotArgs {
    #[command(subcommand)]
    command: SnapshotCommand,
    /// The server's data dir (its etcd client certificate is in <data-dir>/server/tls/etcd).
    #[arg(
        long,
        short = 'd',
        global = true,
        default_value = "/var/lib/k3rs",
        env = "K3RS_DATA_DIR"
    )]
    data_dir: PathBuf,
    /// Directory of the snapshots (default <data-dir>/server/db/snapshots).
    #[arg(
        long,
        visible_alias = "dir",
        global = true,
        env = "K3RS_ETCD_SNAPSHOT_DIR"
    )]
    etcd_snapshot_dir: Option<PathBuf>,
    /// Snapshots of --name that prune keeps.
    #[arg(long, visible_alias = "snapshot-retention", global = true, default_value_t = etcd_snapshot::DEFAULT_RETENTION)]
    etcd_snapshot_retention: usize,
    /// Base name of the snapshots saved or pruned.
    #[arg(long, global = true, default_value = etcd_snapshot::ON_DEMAND_NAME)]
    name: String,
    /// Node name in snapshot names (default: the host name).
    #[arg(long, global = true, env = "K3RS_NODE_NAME")]
    node_name: Option<String>,
    /// Port of the local server's etcd API.
    #[arg(
        long,
        global = true,
        default_value_t = 2379,
        env = "K3RS_ETCD_CLIENT_PORT"
    )]
    etcd_client_port: u16,
    /// Address of the local server's etcd API.
    #[arg(
        long,
        global = true,
        default_value = "127.0.0.1",
        env = "K3RS_ETCD_CLIENT_ADDRESS"
    )]
    etcd_client_address: IpAddr,
}

#[derive(Subcommand)]
enum SnapshotCommand {
    /// Take a snapshot now, through the running local server.
    Save,
    /// List the snapshots.
    #[command(visible_aliases = ["list", "l"])]
    Ls,
    /// Delete snapshots by name.
    Delete {
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Delete the snapshots of --name beyond the newest --snapshot-retention.
    Prune,
}

pub async fn run(args: EtcdSnapshotArgs) -> anyhow::Result<()> {
    let dir = args
        .etcd_snapshot_dir
        .clone()
        .unwrap_or_else(|| etcd_snapshot::layout::default_snapshot_dir(&args.data_dir));
    let node = args
        .node_name
        .clone()
        .unwrap_or_else(k3rs_server::identity::hostname);
    let out = match args.command {
        SnapshotCommand::Save => {
            let host = match args.etcd_client_address {
                IpAddr::V6(a) => format!("[{a}]"),
                IpAddr::V4(a) if a.is_unspecified() => "127.0.0.1".to_string(),
                a => a.to_string(),
            };
            let local = client::Local {
                data_dir: args.data_dir.clone(),
                endpoint: format!("https://{host}:{}", args.etcd_client_port),
            };
            client::save(&local, &dir, &args.name, &node)
                .await
                .context("k3rs etcd-snapshot save")?
        }
        SnapshotCommand::Ls => client::ls(&dir).context("k3rs etcd-snapshot ls")?,
        SnapshotCommand::Delete { names } => {
            client::delete(&dir, &names).context("k3rs etcd-snapshot delete")?
        }
        SnapshotCommand::Prune => {
            client::prune(&dir, &args.name, &node, args.etcd_snapshot_retention)
                .context("k3rs etcd-snapshot prune")?
        }
    };
    print!("{out}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, FromArgMatches};

    use crate::{config_file, Cli, Command};

    /// The real command line with `config` as its config file.
    fn parse(config: &str, args: &[&str]) -> Cli {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, config).unwrap();
        let mut argv: Vec<std::ffi::OsString> = vec!["k3rs".into()];
        argv.extend(args.iter().map(Into::into));
        argv.extend(["--config".into(), path.clone().into()]);
        let command = Cli::command().mut_subcommands(|s| s.args_override_self(true));
        let argv = config_file::expand(argv, &command).unwrap();
        Cli::from_arg_matches_mut(&mut command.get_matches_from(argv)).unwrap()
    }

    const CONFIG: &str = "etcd-snapshot-dir: /backups\n\
                          etcd-snapshot-retention: 3\n\
                          etcd-snapshot-schedule-cron: '*/5 * * * *'\n\
                          etcd-snapshot-name: nightly\n\
                          etcd-disable-snapshots: true\n\
                          cluster-reset: true\n\
                          cluster-reset-restore-path: /backups/s1\n";

    #[test]
    fn config_file_keys_reach_the_server_and_etcd_snapshot() {
        let Command::Server(server) = parse(CONFIG, &["server"]).command else {
            panic!("not server")
        };
        let s = server.snapshots.settings();
        assert_eq!(s.dir.as_deref(), Some(std::path::Path::new("/backups")));
        assert_eq!(
            (s.retention, s.name.as_str(), s.disabled),
            (3, "nightly", true)
        );
        assert_eq!(
            s.schedule,
            k3rs_apimachinery::cron::Schedule::parse("*/5 * * * *").unwrap()
        );
        assert_eq!(
            server.snapshots.cluster_reset_restore_path.as_deref(),
            Some(std::path::Path::new("/backups/s1"))
        );

        // The same file for `etcd-snapshot`: the shared keys apply, the server's own are
        // skipped, and the command line wins.
        let cli = parse(
            CONFIG,
            &["etcd-snapshot", "prune", "--snapshot-retention", "1"],
        );
        let Command::EtcdSnapshot(args) = cli.command else {
            panic!("not etcd-snapshot")
        };
        assert_eq!(
            args.etcd_snapshot_dir.as_deref(),
            Some(std::path::Path::new("/backups"))
        );
        assert_eq!(args.etcd_snapshot_retention, 1);
        assert_eq!(args.name, super::etcd_snapshot::ON_DEMAND_NAME);
    }
}

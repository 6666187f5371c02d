//! `k3rs certificate check|rotate`: the CLI side of [`k3rs_pki::check`] and
//! [`k3rs_pki::rotate`].

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

#[derive(Args)]
pub struct CertificateArgs {
    #[command(subcommand)]
    command: CertificateCommand,
    /// The node's data dir.
    #[arg(
        long,
        short = 'd',
        global = true,
        default_value = "/var/lib/k3rs",
        env = "K3RS_DATA_DIR"
    )]
    data_dir: PathBuf,
}

#[derive(Subcommand)]
enum CertificateCommand {
    /// List every certificate file with its subject, usages, expiry and status.
    Check {
        /// Output format.
        #[arg(long, short = 'o', value_enum, default_value = "text")]
        output: Output,
    },
    /// Back up <data-dir>/server/tls to tls-<unix time>, then remove the leaf certificates
    /// so the next start issues new ones from the same CAs. Stop the server first.
    Rotate {
        /// Only these services' certificates (repeatable): admin, auth-proxy, api-server, etcd.
        #[arg(long, short = 's', value_delimiter = ',')]
        service: Vec<String>,
    },
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Output {
    Text,
    Table,
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Runs the subcommand; what it prints goes to stdout.
pub fn run(args: CertificateArgs) -> anyhow::Result<()> {
    use k3rs_pki::{check, rotate};
    match args.command {
        CertificateCommand::Check { output } => {
            let files = check::files(&args.data_dir);
            anyhow::ensure!(
                !files.is_empty(),
                "k3rs certificate check: no certificates under {} (wrong --data-dir?)",
                args.data_dir.display()
            );
            let mut certs = Vec::new();
            for f in files {
                match check::inspect(&args.data_dir, &f) {
                    Ok(c) => certs.push(c),
                    Err(e) => tracing::warn!("{e}"),
                }
            }
            let now = unix_now() as i64;
            print!(
                "{}",
                match output {
                    Output::Text => check::render_text(&certs, now),
                    Output::Table => check::render_table(&certs, now),
                }
            );
        }
        CertificateCommand::Rotate { service } => {
            let leaves = rotate::leaves(&service)
                .map_err(|e| anyhow::anyhow!("k3rs certificate rotate: {e}"))?;
            let done = rotate::rotate(&args.data_dir.join("server"), &leaves, unix_now())
                .context("k3rs certificate rotate")?;
            println!("backed up the certificates to {}", done.backup.display());
            for f in &done.removed {
                println!("removed {} (issued anew at the next start)", f.display());
            }
            println!("start the server to issue the new certificates");
        }
    }
    Ok(())
}

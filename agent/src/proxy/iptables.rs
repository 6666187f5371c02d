//! The iptables boundary: the few operations the proxy and the network policy enforcer need,
//! behind [`Iptables`] so their sync logic is tested against [`RecordingIptables`];
//! [`SystemIptables`] runs the real `iptables`, `iptables-save` and `iptables-restore` of the
//! network namespace the agent runs in.

use std::process::Stdio;
use std::sync::{Mutex, PoisonError};

use futures::future::BoxFuture;
use tokio::io::AsyncWriteExt;

/// An iptables operation that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("running {program}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{program} {args} failed: {stderr}")]
    Failed {
        program: String,
        args: String,
        stderr: String,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the proxy does to the kernel's tables.
pub trait Iptables: Send + Sync {
    /// The names of the chains of `table` (`iptables-save -t TABLE`).
    fn chains(&self, table: &str) -> BoxFuture<'_, Result<Vec<String>>>;
    /// Creates `chain` in `table` unless it exists.
    fn ensure_chain(&self, table: &str, chain: &str) -> BoxFuture<'_, Result<()>>;
    /// Inserts `args` at the top of `chain` unless an identical rule exists (`-C`).
    fn ensure_rule(&self, table: &str, chain: &str, args: &[String]) -> BoxFuture<'_, Result<()>>;
    /// Applies `input` with `iptables-restore --noflush`: only the chains it declares change.
    fn restore(&self, input: &str) -> BoxFuture<'_, Result<()>>;
    /// Deletes every rule of `chain` in `table` identical to `args` (none: nothing to do).
    fn delete_rule(&self, table: &str, chain: &str, args: &[String]) -> BoxFuture<'_, Result<()>>;
}

/// The system's iptables binaries, found on `PATH`; waits up to 5 s for the xtables lock.
#[derive(Debug, Clone, Default)]
pub struct SystemIptables;

async fn run(program: &str, args: &[String], stdin: Option<&str>) -> Result<std::process::Output> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let spawn_err = |source| Error::Spawn {
        program: program.to_string(),
        source,
    };
    let mut child = cmd.spawn().map_err(spawn_err)?;
    if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(input.as_bytes()).await.map_err(spawn_err)?;
    }
    child.wait_with_output().await.map_err(spawn_err)
}

fn failed(program: &str, args: &[String], out: &std::process::Output) -> Error {
    Error::Failed {
        program: program.to_string(),
        args: args.join(" "),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

/// The chain names declared in `iptables-save` output.
pub fn parse_chains(save: &str) -> Vec<String> {
    save.lines()
        .filter_map(|l| l.strip_prefix(':'))
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

impl Iptables for SystemIptables {
    fn chains(&self, table: &str) -> BoxFuture<'_, Result<Vec<String>>> {
        let args = strings(&["-t", table]);
        Box::pin(async move {
            let out = run("iptables-save", &args, None).await?;
            if !out.status.success() {
                return Err(failed("iptables-save", &args, &out));
            }
            Ok(parse_chains(&String::from_utf8_lossy(&out.stdout)))
        })
    }

    fn ensure_chain(&self, table: &str, chain: &str) -> BoxFuture<'_, Result<()>> {
        let args = strings(&["-w", "5", "-t", table, "-N", chain]);
        Box::pin(async move {
            let out = run("iptables", &args, None).await?;
            let exists = String::from_utf8_lossy(&out.stderr).contains("already exists");
            if out.status.success() || exists {
                Ok(())
            } else {
                Err(failed("iptables", &args, &out))
            }
        })
    }

    fn ensure_rule(&self, table: &str, chain: &str, rule: &[String]) -> BoxFuture<'_, Result<()>> {
        let mut check = strings(&["-w", "5", "-t", table, "-C", chain]);
        check.extend(rule.iter().cloned());
        let mut insert = strings(&["-w", "5", "-t", table, "-I", chain]);
        insert.extend(rule.iter().cloned());
        Box::pin(async move {
            if run("iptables", &check, None).await?.status.success() {
                return Ok(());
            }
            let out = run("iptables", &insert, None).await?;
            if out.status.success() {
                Ok(())
            } else {
                Err(failed("iptables", &insert, &out))
            }
        })
    }

    fn restore(&self, input: &str) -> BoxFuture<'_, Result<()>> {
        let args = strings(&["-w", "5", "--noflush"]);
        let input = input.to_string();
        Box::pin(async move {
            let out = run("iptables-restore", &args, Some(&input)).await?;
            if out.status.success() {
                Ok(())
            } else {
                Err(failed("iptables-restore", &args, &out))
            }
        })
    }

    fn delete_rule(&self, table: &str, chain: &str, rule: &[String]) -> BoxFuture<'_, Result<()>> {
        let mut check = strings(&["-w", "5", "-t", table, "-C", chain]);
        check.extend(rule.iter().cloned());
        let mut delete = strings(&["-w", "5", "-t", table, "-D", chain]);
        delete.extend(rule.iter().cloned());
        Box::pin(async move {
            // Bounded: a rule inserted twice is deleted twice; more is someone else's loop.
            for _ in 0..16 {
                if !run("iptables", &check, None).await?.status.success() {
                    return Ok(());
                }
                let out = run("iptables", &delete, None).await?;
                if !out.status.success() {
                    return Err(failed("iptables", &delete, &out));
                }
            }
            Ok(())
        })
    }
}

/// One call made to a [`RecordingIptables`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Chains(String),
    EnsureChain(String, String),
    EnsureRule(String, String, Vec<String>),
    Restore(String),
    DeleteRule(String, String, Vec<String>),
}

/// A fake for unit tests: records every call; `chains` answers with the chains set in
/// `existing`; `restore` fails while `fail_restore` is set. A lock poisoned by a panicking test
/// still holds a complete record, so it is read through.
#[derive(Debug, Default)]
pub struct RecordingIptables {
    pub calls: Mutex<Vec<Call>>,
    pub existing: Mutex<Vec<String>>,
    pub fail_restore: Mutex<bool>,
}

impl RecordingIptables {
    /// The calls so far, and forget them.
    pub fn take(&self) -> Vec<Call> {
        std::mem::take(&mut *self.calls.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn record(&self, call: Call) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(call);
    }
}

impl Iptables for RecordingIptables {
    fn chains(&self, table: &str) -> BoxFuture<'_, Result<Vec<String>>> {
        self.record(Call::Chains(table.to_string()));
        let existing = self
            .existing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Box::pin(async move { Ok(existing) })
    }

    fn ensure_chain(&self, table: &str, chain: &str) -> BoxFuture<'_, Result<()>> {
        self.record(Call::EnsureChain(table.to_string(), chain.to_string()));
        Box::pin(async { Ok(()) })
    }

    fn ensure_rule(&self, table: &str, chain: &str, args: &[String]) -> BoxFuture<'_, Result<()>> {
        self.record(Call::EnsureRule(
            table.to_string(),
            chain.to_string(),
            args.to_vec(),
        ));
        Box::pin(async { Ok(()) })
    }

    fn restore(&self, input: &str) -> BoxFuture<'_, Result<()>> {
        self.record(Call::Restore(input.to_string()));
        let fail = *self
            .fail_restore
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Box::pin(async move {
            if fail {
                Err(Error::Failed {
                    program: "iptables-restore".into(),
                    args: "--noflush".into(),
                    stderr: "injected failure".into(),
                })
            } else {
                Ok(())
            }
        })
    }

    fn delete_rule(&self, table: &str, chain: &str, args: &[String]) -> BoxFuture<'_, Result<()>> {
        self.record(Call::DeleteRule(
            table.to_string(),
            chain.to_string(),
            args.to_vec(),
        ));
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_names_are_read_from_save_output() {
        let save = "# Generated by iptables-save v1.8.9\n*nat\n:PREROUTING ACCEPT [0:0]\n\
                    :KUBE-SVC-ABC - [0:0]\n-A PREROUTING -j KUBE-SERVICES\nCOMMIT\n";
        assert_eq!(parse_chains(save), vec!["PREROUTING", "KUBE-SVC-ABC"]);
    }
}

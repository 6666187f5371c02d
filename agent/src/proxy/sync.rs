//! One sync of the proxy's rules ([`sync`]) and when to sync ([`Pacer`]).
//!
//! A sync installs the jumps from the built-in chains into the proxy's top-level chains
//! (idempotently: checked with `-C`, inserted at the top when missing, as upstream's
//! `EnsureRule(Prepend, …)`), reads the `nat` chains present, and writes the whole rule set
//! with one `iptables-restore --noflush`, which replaces the chains it declares and leaves
//! every other chain alone.

use std::time::Duration;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use tokio::time::Instant;

use super::iptables::{Iptables, Result};
use super::names::{EXTERNAL_SERVICES, FORWARD, NODE_PORTS, POSTROUTING, SERVICES};
use super::rules::{self, NodeContext};

/// A rule in a built-in chain that sends packets into one of the proxy's chains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Jump {
    /// `nat` or `filter`.
    pub table: &'static str,
    /// The built-in chain (`PREROUTING`, `OUTPUT`, `FORWARD`…).
    pub from: &'static str,
    /// The proxy's chain.
    pub to: &'static str,
    /// The rule's `-m comment`.
    pub comment: &'static str,
    /// Only new connections (`-m conntrack --ctstate NEW`).
    pub new_only: bool,
}

const fn jump(
    table: &'static str,
    from: &'static str,
    to: &'static str,
    comment: &'static str,
    new_only: bool,
) -> Jump {
    Jump {
        table,
        from,
        to,
        comment,
        new_only,
    }
}

/// Upstream's jumps, in its order (without the load-balancer firewall it does not implement).
pub const JUMPS: &[Jump] = &[
    jump(
        "filter",
        "INPUT",
        EXTERNAL_SERVICES,
        "kubernetes externally-visible service portals",
        true,
    ),
    jump(
        "filter",
        "FORWARD",
        EXTERNAL_SERVICES,
        "kubernetes externally-visible service portals",
        true,
    ),
    jump(
        "filter",
        "INPUT",
        NODE_PORTS,
        "kubernetes health check service ports",
        false,
    ),
    jump(
        "filter",
        "FORWARD",
        SERVICES,
        "kubernetes service portals",
        true,
    ),
    jump(
        "filter",
        "OUTPUT",
        SERVICES,
        "kubernetes service portals",
        true,
    ),
    jump(
        "filter",
        "FORWARD",
        FORWARD,
        "kubernetes forwarding rules",
        false,
    ),
    jump(
        "nat",
        "OUTPUT",
        SERVICES,
        "kubernetes service portals",
        false,
    ),
    jump(
        "nat",
        "PREROUTING",
        SERVICES,
        "kubernetes service portals",
        false,
    ),
    jump(
        "nat",
        "POSTROUTING",
        POSTROUTING,
        "kubernetes postrouting rules",
        false,
    ),
];

impl Jump {
    /// The rule's arguments as `iptables` takes them (one argv element per word; the comment
    /// is one element).
    pub fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if self.new_only {
            args.extend(["-m", "conntrack", "--ctstate", "NEW"].map(String::from));
        }
        args.extend(["-m", "comment", "--comment", self.comment, "-j", self.to].map(String::from));
        args
    }
}

/// Makes the kernel's tables match `services` and `slices`; returns the restore input
/// written.
pub async fn sync<I: Iptables + ?Sized>(
    ipt: &I,
    ctx: &NodeContext,
    services: &[Service],
    slices: &[EndpointSlice],
) -> Result<String> {
    for j in JUMPS {
        ipt.ensure_chain(j.table, j.to).await?;
        ipt.ensure_rule(j.table, j.from, &j.args()).await?;
    }
    let existing = ipt.chains("nat").await?;
    let input = rules::build(services, slices, ctx, &existing);
    ipt.restore(&input).await?;
    Ok(input)
}

/// When the next sync is due: at most one per `min_interval` (upstream's
/// `--iptables-min-sync-period`, 1 s), at least one per `resync` (`--iptables-sync-period`,
/// 30 s), and after a failure again in `retry` at the latest.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// The least time between two syncs.
    pub min_interval: Duration,
    /// The most time between two syncs.
    pub resync: Duration,
    /// How soon a failed sync is retried.
    pub retry: Duration,
    last: Option<Instant>,
    dirty: bool,
    failed: bool,
}

impl Pacer {
    /// A pacer whose first sync is due at once.
    pub fn new(min_interval: Duration, resync: Duration, retry: Duration) -> Pacer {
        Pacer {
            min_interval,
            resync,
            retry,
            last: None,
            dirty: true,
            failed: false,
        }
    }

    /// Something the rules depend on changed.
    pub fn changed(&mut self) {
        self.dirty = true;
    }

    /// The instant of the next sync (possibly past: then at once).
    pub fn due(&self, now: Instant) -> Instant {
        let Some(last) = self.last else {
            return now;
        };
        if self.failed {
            last + self.retry.max(self.min_interval)
        } else if self.dirty {
            last + self.min_interval
        } else {
            last + self.resync
        }
    }

    /// A sync ran at `at` (`ok`: it succeeded).
    pub fn synced(&mut self, at: Instant, ok: bool) {
        self.last = Some(at);
        self.dirty = !ok;
        self.failed = !ok;
    }
}

#[cfg(test)]
mod tests {
    use super::super::iptables::{Call, RecordingIptables};
    use super::*;

    fn ctx() -> NodeContext {
        NodeContext {
            node_name: "n1".into(),
            cluster_cidr: None,
        }
    }

    #[test]
    fn jump_args_match_upstream_spelling() {
        assert_eq!(
            JUMPS[0].args(),
            vec![
                "-m",
                "conntrack",
                "--ctstate",
                "NEW",
                "-m",
                "comment",
                "--comment",
                "kubernetes externally-visible service portals",
                "-j",
                "KUBE-EXTERNAL-SERVICES"
            ]
        );
        assert_eq!(
            JUMPS[8].args(),
            vec![
                "-m",
                "comment",
                "--comment",
                "kubernetes postrouting rules",
                "-j",
                "KUBE-POSTROUTING"
            ]
        );
    }

    #[tokio::test]
    async fn a_sync_ensures_jumps_reads_chains_then_restores_once() {
        let ipt = RecordingIptables::default();
        *ipt.existing.lock().unwrap() = vec!["KUBE-SVC-OLDOLDOLDOLDOLDO".into()];
        let input = sync(&ipt, &ctx(), &[], &[]).await.unwrap();
        assert!(input.contains(":KUBE-SVC-OLDOLDOLDOLDOLDO - [0:0]\n"));
        assert!(input.contains("-X KUBE-SVC-OLDOLDOLDOLDOLDO\n"));
        let calls = ipt.take();
        let mut want = Vec::new();
        for j in JUMPS {
            want.push(Call::EnsureChain(j.table.into(), j.to.into()));
            want.push(Call::EnsureRule(j.table.into(), j.from.into(), j.args()));
        }
        want.push(Call::Chains("nat".into()));
        want.push(Call::Restore(input));
        assert_eq!(calls, want);
    }

    #[tokio::test]
    async fn a_failed_restore_is_reported() {
        let ipt = RecordingIptables::default();
        *ipt.fail_restore.lock().unwrap() = true;
        let err = sync(&ipt, &ctx(), &[], &[]).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "iptables-restore --noflush failed: injected failure"
        );
    }

    #[test]
    fn the_pacer_bounds_sync_frequency() {
        let s = Duration::from_secs(1);
        let mut p = Pacer::new(s, 30 * s, 5 * s);
        let t0 = Instant::now();
        assert_eq!(p.due(t0), t0, "the first sync is at once");
        p.synced(t0, true);
        assert_eq!(p.due(t0), t0 + 30 * s, "clean: the periodic resync");
        p.changed();
        assert_eq!(p.due(t0), t0 + s, "a change right after a sync waits 1 s");
        assert_eq!(p.due(t0 + 10 * s), t0 + s, "a later change is due at once");
        p.synced(t0 + 10 * s, false);
        p.changed();
        assert_eq!(p.due(t0 + 10 * s), t0 + 15 * s, "after a failure: retry");
        p.synced(t0 + 15 * s, true);
        assert_eq!(p.due(t0 + 15 * s), t0 + 45 * s);
    }
}

//! Applying a [`Plan`] to the kernel ([`apply`]) and taking every rule of the enforcer away
//! again ([`remove`]), through the [`Iptables`] boundary.
//!
//! [`apply`] inserts the jumps from `FORWARD` and `INPUT` into [`TOP`] once (at the top,
//! checked with `-C`), then writes all the enforcer's chains with one `iptables-restore
//! --noflush`: a packet meets either the old rule set or the new one, never a mix.

use super::plan::{self, Plan, TOP};
use crate::proxy::iptables::{Iptables, Result};

/// The built-in `filter` chains that jump into [`TOP`].
pub const HOOKS: [&str; 2] = ["FORWARD", "INPUT"];

/// The arguments of the jump from a hook into [`TOP`].
pub fn jump_args() -> Vec<String> {
    [
        "-m",
        "comment",
        "--comment",
        "kubernetes network policy",
        "-j",
        TOP,
    ]
    .map(String::from)
    .to_vec()
}

/// Makes the `filter` table enforce `plan`; returns the restore input written.
pub async fn apply<I: Iptables + ?Sized>(ipt: &I, plan: &Plan) -> Result<String> {
    ipt.ensure_chain("filter", TOP).await?;
    for hook in HOOKS {
        ipt.ensure_rule("filter", hook, &jump_args()).await?;
    }
    let existing = ipt.chains("filter").await?;
    let input = plan::render(plan, &existing);
    ipt.restore(&input).await?;
    Ok(input)
}

/// Removes the jumps and every chain of the enforcer (nothing is filtered afterwards).
pub async fn remove<I: Iptables + ?Sized>(ipt: &I) -> Result<()> {
    for hook in HOOKS {
        ipt.delete_rule("filter", hook, &jump_args()).await?;
    }
    let existing = ipt.chains("filter").await?;
    let input = plan::render_removal(&existing);
    ipt.restore(&input).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netpol::plan::Chain;
    use crate::proxy::iptables::{Call, RecordingIptables};

    #[tokio::test]
    async fn apply_hooks_then_restores_once_and_drops_stale_chains() {
        let ipt = RecordingIptables::default();
        *ipt.existing.lock().unwrap() = vec![
            "FORWARD".into(),
            TOP.into(),
            "KUBE-NP-I-OLDOLDOLDOLDOLDO".into(),
            "KUBE-SERVICES".into(),
        ];
        let plan = Plan {
            chains: vec![Chain {
                name: TOP.into(),
                rules: vec![],
            }],
            warnings: vec![],
        };
        let input = apply(&ipt, &plan).await.unwrap();
        assert_eq!(
            input,
            "*filter\n:KUBE-NWPLCY - [0:0]\n:KUBE-NP-I-OLDOLDOLDOLDOLDO - [0:0]\n\
             -X KUBE-NP-I-OLDOLDOLDOLDOLDO\nCOMMIT\n"
        );
        assert_eq!(
            ipt.take(),
            vec![
                Call::EnsureChain("filter".into(), TOP.into()),
                Call::EnsureRule("filter".into(), "FORWARD".into(), jump_args()),
                Call::EnsureRule("filter".into(), "INPUT".into(), jump_args()),
                Call::Chains("filter".into()),
                Call::Restore(input),
            ]
        );
    }

    #[tokio::test]
    async fn remove_unhooks_then_deletes_only_the_enforcers_chains() {
        let ipt = RecordingIptables::default();
        *ipt.existing.lock().unwrap() = vec![
            "INPUT".into(),
            TOP.into(),
            "KUBE-NP-E-AAAAAAAAAAAAAAAA".into(),
            "KUBE-FORWARD".into(),
        ];
        remove(&ipt).await.unwrap();
        assert_eq!(
            ipt.take(),
            vec![
                Call::DeleteRule("filter".into(), "FORWARD".into(), jump_args()),
                Call::DeleteRule("filter".into(), "INPUT".into(), jump_args()),
                Call::Chains("filter".into()),
                Call::Restore(
                    "*filter\n:KUBE-NWPLCY - [0:0]\n:KUBE-NP-E-AAAAAAAAAAAAAAAA - [0:0]\n\
                     -X KUBE-NWPLCY\n-X KUBE-NP-E-AAAAAAAAAAAAAAAA\nCOMMIT\n"
                        .into()
                ),
            ]
        );
    }
}

//! `--kube-scheduler-arg KEY=VALUE` (k3s's way to pass kube-scheduler flags): the flags the
//! in-process scheduler understands; any other key is refused, never silently ignored.

use k3rs_apimachinery::component_args::{self, Component};

/// The scheduler's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Args {
    /// `leader-elect` (default true): run only while holding the `kube-system/kube-scheduler`
    /// Lease, so that one server of an HA cluster schedules; false runs it on every server.
    pub leader_elect: bool,
}

impl Default for Args {
    fn default() -> Args {
        Args { leader_elect: true }
    }
}

/// A `--kube-scheduler-arg` that cannot be used.
pub type ArgError = component_args::ArgError;

/// `--kube-scheduler-arg`.
const COMPONENT: Component = Component {
    name: "kube-scheduler",
    supported: &["leader-elect"],
};

impl Args {
    /// Parses [`k3rs_apimachinery::component_args`] items; later items override earlier ones.
    pub fn parse(items: &[String]) -> Result<Args, ArgError> {
        let mut args = Args::default();
        for item in COMPONENT.items(items) {
            let (key, value) = item?;
            match key {
                "leader-elect" => {
                    args.leader_elect = value
                        .parse()
                        .map_err(|_| COMPONENT.invalid(key, value, "boolean (true or false)"))?;
                }
                other => return Err(COMPONENT.unsupported(other)),
            }
        }
        Ok(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<Args, ArgError> {
        Args::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn leader_elect_is_honoured_and_other_keys_refused() {
        assert_eq!(parse(&[]), Ok(Args { leader_elect: true }));
        assert_eq!(
            parse(&["--leader-elect=false"]),
            Ok(Args {
                leader_elect: false
            })
        );
        assert_eq!(
            parse(&["leader-elect=false", "leader-elect=true"]),
            Ok(Args { leader_elect: true })
        );
        assert_eq!(
            parse(&["v=2"]).unwrap_err().to_string(),
            "--kube-scheduler-arg: unsupported kube-scheduler flag \"v\" (supported: leader-elect)"
        );
        assert_eq!(
            parse(&["leader-elect=maybe"]).unwrap_err().to_string(),
            "--kube-scheduler-arg leader-elect: \"maybe\" is not a valid boolean (true or false)"
        );
        assert_eq!(
            parse(&["leader-elect"]).unwrap_err().to_string(),
            "--kube-scheduler-arg \"leader-elect\": expected KEY=VALUE"
        );
    }
}

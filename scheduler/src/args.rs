//! `--kube-scheduler-arg KEY=VALUE` (k3s's way to pass kube-scheduler flags): the flags the
//! in-process scheduler understands; any other key is refused, never silently ignored.

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
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgError {
    /// No `=`.
    #[error("--kube-scheduler-arg {0:?}: expected KEY=VALUE")]
    NotKeyValue(String),
    /// A flag the scheduler does not take.
    #[error(
        "--kube-scheduler-arg: unsupported kube-scheduler flag {0:?} (supported: leader-elect)"
    )]
    Unsupported(String),
    /// A value the flag does not take.
    #[error("--kube-scheduler-arg {key}: {value:?} is not a valid {what}")]
    Invalid {
        /// The flag.
        key: &'static str,
        /// The value given.
        value: String,
        /// What the flag takes.
        what: &'static str,
    },
}

impl Args {
    /// Parses [`k3rs_apimachinery::component_args`] items; later items override earlier ones.
    pub fn parse(items: &[String]) -> Result<Args, ArgError> {
        let mut args = Args::default();
        for item in items {
            let (key, value) = k3rs_apimachinery::component_args::key_value(item)
                .ok_or_else(|| ArgError::NotKeyValue(item.clone()))?;
            match key {
                "leader-elect" => {
                    args.leader_elect = value.parse().map_err(|_| ArgError::Invalid {
                        key: "leader-elect",
                        value: value.to_string(),
                        what: "boolean (true or false)",
                    })?;
                }
                other => return Err(ArgError::Unsupported(other.to_string())),
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
            parse(&["leader-elect"]),
            Err(ArgError::NotKeyValue("leader-elect".into()))
        );
    }
}

//! `--kube-controller-manager-arg KEY=VALUE` (k3s's way to pass kube-controller-manager
//! flags): the flags the in-process controller manager understands.

use std::time::Duration;

use super::selection::{Selection, UnknownController};

/// The controller manager's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args {
    /// `controllers`: which controllers run (default `*`).
    pub controllers: Selection,
    /// `cluster-cidr`: the node IPAM controller hands out node ranges of it (the server
    /// passes its own `--cluster-cidr`, as k3s does).
    pub cluster_cidr: ipnet::IpNet,
    /// `node-monitor-grace-period`: how long a node may go without a heartbeat before it is
    /// Unknown (upstream's 40s).
    pub node_monitor_grace_period: Duration,
    /// Where the built-in local-path provisioner puts volumes (k3s's
    /// `--default-local-storage-path`); `None` when it is off (`--disable local-storage`).
    pub local_storage: Option<std::path::PathBuf>,
    /// k3s's `--system-default-registry`: the local-path provisioner's helper pods pull their
    /// image from it.
    pub system_default_registry: Option<String>,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            controllers: Selection::default(),
            cluster_cidr: "10.42.0.0/16".parse().expect("a CIDR"),
            node_monitor_grace_period: Duration::from_secs(40),
            local_storage: None,
            system_default_registry: None,
        }
    }
}

/// A `--kube-controller-manager-arg` that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgError {
    /// The item (given) has no `=`.
    #[error("--kube-controller-manager-arg {0:?}: expected KEY=VALUE")]
    NotKeyValue(String),
    /// The flag (given) is not one this controller manager implements.
    #[error("--kube-controller-manager-arg: unsupported kube-controller-manager flag {0:?} (supported: controllers, cluster-cidr, node-monitor-grace-period)")]
    Unsupported(String),
    /// The flag's value does not parse.
    #[error("--kube-controller-manager-arg {key}: {value:?} is not a valid {what}")]
    Invalid {
        /// The flag (e.g. `cluster-cidr`).
        key: &'static str,
        /// The value given.
        value: String,
        /// What the value should be (e.g. `CIDR`, `duration`).
        what: &'static str,
    },
    /// `controllers` names a controller the manager does not have.
    #[error(transparent)]
    Controllers(#[from] UnknownController),
}

impl Args {
    /// Parses [`k3rs_apimachinery::component_args`] items; later items override earlier ones.
    pub fn parse(items: &[String]) -> Result<Args, ArgError> {
        let mut args = Args::default();
        for item in items {
            let (key, value) = k3rs_apimachinery::component_args::key_value(item)
                .ok_or_else(|| ArgError::NotKeyValue(item.clone()))?;
            match key {
                "controllers" => {
                    args.controllers = Selection::parse(value, &super::known())?;
                }
                "cluster-cidr" => {
                    args.cluster_cidr = value.parse().map_err(|_| ArgError::Invalid {
                        key: "cluster-cidr",
                        value: value.to_string(),
                        what: "CIDR",
                    })?;
                }
                "node-monitor-grace-period" => {
                    args.node_monitor_grace_period = k3rs_apimachinery::duration::parse(value)
                        .ok_or_else(|| ArgError::Invalid {
                            key: "node-monitor-grace-period",
                            value: value.to_string(),
                            what: "duration",
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
    fn controllers_selects() {
        let a = parse(&["controllers=*,-resourcequota"]).unwrap();
        assert!(!a.controllers.enables("resourcequota"));
        assert!(a.controllers.enables("serviceaccount"));
        assert_eq!(parse(&[]).unwrap(), Args::default());
        assert!(parse(&["--controllers=serviceaccount"]).is_ok());
    }

    #[test]
    fn bad_items_are_refused_with_their_text() {
        assert_eq!(
            parse(&["controllers"]).unwrap_err(),
            ArgError::NotKeyValue("controllers".into())
        );
        assert_eq!(
            parse(&["bind-address=0.0.0.0"]).unwrap_err(),
            ArgError::Unsupported("bind-address".into())
        );
        assert!(matches!(
            parse(&["controllers=*,-nope"]).unwrap_err(),
            ArgError::Controllers(_)
        ));
        assert!(matches!(
            parse(&["node-monitor-grace-period=soon"]).unwrap_err(),
            ArgError::Invalid { .. }
        ));
        assert!(matches!(
            parse(&["cluster-cidr=10.42.0.0"]).unwrap_err(),
            ArgError::Invalid { .. }
        ));
    }

    #[test]
    fn durations_and_cidrs_as_upstream_writes_them() {
        let a = parse(&["cluster-cidr=10.0.0.0/8", "node-monitor-grace-period=1m30s"]).unwrap();
        assert_eq!(a.cluster_cidr, "10.0.0.0/8".parse().unwrap());
        assert_eq!(a.node_monitor_grace_period, Duration::from_secs(90));
    }
}

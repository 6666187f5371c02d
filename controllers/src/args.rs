//! `--kube-controller-manager-arg KEY=VALUE` (k3s's way to pass kube-controller-manager
//! flags): the flags the in-process controller manager understands.

use std::time::Duration;

use k3rs_apimachinery::component_args::{self, Component};

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
    /// `node-monitor-period`: how often every node's heartbeat is checked. Unset: upstream's
    /// 5s, or a quarter of the grace period when that is shorter.
    pub node_monitor_period: Option<Duration>,
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
            node_monitor_period: None,
            local_storage: None,
            system_default_registry: None,
        }
    }
}

/// A `--kube-controller-manager-arg` that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgError {
    /// No `=`, a flag this controller manager does not implement, or a value that does not
    /// parse.
    #[error(transparent)]
    Item(#[from] component_args::ArgError),
    /// `controllers` names a controller the manager does not have.
    #[error(transparent)]
    Controllers(#[from] UnknownController),
}

/// `--kube-controller-manager-arg`.
const COMPONENT: Component = Component {
    name: "kube-controller-manager",
    supported: &[
        "controllers",
        "cluster-cidr",
        "node-monitor-grace-period",
        "node-monitor-period",
    ],
};

impl Args {
    /// Parses [`k3rs_apimachinery::component_args`] items; later items override earlier ones.
    pub fn parse(items: &[String]) -> Result<Args, ArgError> {
        let mut args = Args::default();
        for item in COMPONENT.items(items) {
            let (key, value) = item?;
            match key {
                "controllers" => {
                    args.controllers = Selection::parse(value, &super::known())?;
                }
                "cluster-cidr" => {
                    args.cluster_cidr =
                        (value.parse()).map_err(|_| COMPONENT.invalid(key, value, "CIDR"))?;
                }
                "node-monitor-grace-period" => {
                    args.node_monitor_grace_period = k3rs_apimachinery::duration::parse(value)
                        .ok_or_else(|| COMPONENT.invalid(key, value, "duration"))?;
                }
                "node-monitor-period" => {
                    let period = k3rs_apimachinery::duration::parse(value)
                        .filter(|p| !p.is_zero())
                        .ok_or_else(|| COMPONENT.invalid(key, value, "positive duration"))?;
                    args.node_monitor_period = Some(period);
                }
                other => return Err(COMPONENT.unsupported(other).into()),
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
        let message = |item: &str| parse(&[item]).unwrap_err().to_string();
        assert_eq!(
            message("controllers"),
            "--kube-controller-manager-arg \"controllers\": expected KEY=VALUE"
        );
        assert_eq!(
            message("bind-address=0.0.0.0"),
            "--kube-controller-manager-arg: unsupported kube-controller-manager flag \
             \"bind-address\" (supported: controllers, cluster-cidr, node-monitor-grace-period, \
             node-monitor-period)"
        );
        assert!(matches!(
            parse(&["controllers=*,-nope"]).unwrap_err(),
            ArgError::Controllers(_)
        ));
        assert_eq!(
            message("node-monitor-grace-period=soon"),
            "--kube-controller-manager-arg node-monitor-grace-period: \"soon\" is not a valid \
             duration"
        );
        assert_eq!(
            message("cluster-cidr=10.42.0.0"),
            "--kube-controller-manager-arg cluster-cidr: \"10.42.0.0\" is not a valid CIDR"
        );
    }

    #[test]
    fn durations_and_cidrs_as_upstream_writes_them() {
        let a = parse(&["cluster-cidr=10.0.0.0/8", "node-monitor-grace-period=1m30s"]).unwrap();
        assert_eq!(a.cluster_cidr, "10.0.0.0/8".parse().unwrap());
        assert_eq!(a.node_monitor_grace_period, Duration::from_secs(90));
        assert_eq!(a.node_monitor_period, None);
        let a = parse(&["node-monitor-period=1h"]).unwrap();
        assert_eq!(a.node_monitor_period, Some(Duration::from_secs(3600)));
        for bad in [
            "node-monitor-period=0s",
            "node-monitor-period=-1s",
            "node-monitor-period=x",
        ] {
            assert!(parse(&[bad]).is_err(), "{bad}");
        }
    }
}

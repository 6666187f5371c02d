//! `--kube-proxy-arg KEY=VALUE` (k3s's way to pass kube-proxy flags): the flags the service
//! proxy understands, applied over the node's defaults; any other key is refused with the
//! list of known ones (never silently ignored).

use std::time::Duration;

use super::ProxyConfig;

/// The keys understood.
pub const KNOWN: &[&str] = &[
    "cluster-cidr",
    "iptables-min-sync-period",
    "iptables-sync-period",
];

/// What `--kube-proxy-arg`s set; `None` keeps the node's value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyArgs {
    /// `cluster-cidr`: the pod network (traffic from outside it to a cluster IP is
    /// masqueraded); default the agent's `--cluster-cidr`.
    pub cluster_cidr: Option<ipnet::Ipv4Net>,
    /// `iptables-min-sync-period` (upstream's 1s).
    pub min_sync_period: Option<Duration>,
    /// `iptables-sync-period` (upstream's 30s).
    pub sync_period: Option<Duration>,
}

/// A `--kube-proxy-arg` refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyArgError {
    /// No `=`.
    #[error("--kube-proxy-arg {0:?}: expected KEY=VALUE")]
    NotKeyValue(String),
    /// A value the flag does not take; `expected` says what it takes.
    #[error("--kube-proxy-arg {key}={value}: expected {expected}")]
    Value {
        /// The flag.
        key: String,
        /// The value given.
        value: String,
        /// What the flag takes.
        expected: &'static str,
    },
    /// A flag k3rs does not know.
    #[error("--kube-proxy-arg: unknown kube-proxy flag {flag:?} (k3rs understands: {})", KNOWN.join(", "))]
    Unknown {
        /// The flag.
        flag: String,
    },
}

impl ProxyArgs {
    /// Parses `KEY=VALUE`s (a leading `--` on the key is accepted); later ones win.
    pub fn parse(items: &[String]) -> Result<ProxyArgs, ProxyArgError> {
        let mut out = ProxyArgs::default();
        for item in items {
            let (k, v) = k3rs_apimachinery::component_args::key_value(item)
                .ok_or_else(|| ProxyArgError::NotKeyValue(item.clone()))?;
            let bad = |expected| ProxyArgError::Value {
                key: k.to_string(),
                value: v.to_string(),
                expected,
            };
            let duration = || {
                k3rs_apimachinery::duration::parse(v)
                    .filter(|d| !d.is_zero())
                    .ok_or_else(|| bad("a duration like 1s or 30s"))
            };
            match k {
                "cluster-cidr" => {
                    out.cluster_cidr = Some(v.parse().map_err(|_| bad("an IPv4 CIDR"))?)
                }
                "iptables-min-sync-period" => out.min_sync_period = Some(duration()?),
                "iptables-sync-period" => out.sync_period = Some(duration()?),
                other => {
                    return Err(ProxyArgError::Unknown {
                        flag: other.to_string(),
                    })
                }
            }
        }
        Ok(out)
    }

    /// `cfg` with these settings over it.
    pub fn apply(&self, mut cfg: ProxyConfig) -> ProxyConfig {
        if let Some(cidr) = self.cluster_cidr {
            cfg.node.cluster_cidr = Some(cidr);
        }
        cfg.min_sync_period = self.min_sync_period.unwrap_or(cfg.min_sync_period);
        cfg.sync_period = self.sync_period.unwrap_or(cfg.sync_period);
        cfg
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::NodeContext;

    fn parse(items: &[&str]) -> Result<ProxyArgs, ProxyArgError> {
        ProxyArgs::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn known_keys_override_the_node_defaults() {
        let base = ProxyConfig::new(NodeContext {
            node_name: "n".into(),
            cluster_cidr: Some("10.42.0.0/16".parse().unwrap()),
        });
        assert_eq!(
            parse(&[]).unwrap().apply(base.clone()).sync_period,
            base.sync_period
        );
        let cfg = parse(&[
            "cluster-cidr=10.50.0.0/16",
            "--iptables-sync-period=10s",
            "iptables-min-sync-period=2s",
        ])
        .unwrap()
        .apply(base);
        assert_eq!(cfg.node.cluster_cidr, Some("10.50.0.0/16".parse().unwrap()));
        assert_eq!(cfg.sync_period, Duration::from_secs(10));
        assert_eq!(cfg.min_sync_period, Duration::from_secs(2));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        assert_eq!(
            parse(&["proxy-mode=ipvs"]).unwrap_err().to_string(),
            "--kube-proxy-arg: unknown kube-proxy flag \"proxy-mode\" (k3rs understands: \
             cluster-cidr, iptables-min-sync-period, iptables-sync-period)"
        );
        assert_eq!(
            parse(&["iptables-sync-period=soon"])
                .unwrap_err()
                .to_string(),
            "--kube-proxy-arg iptables-sync-period=soon: expected a duration like 1s or 30s"
        );
        assert!(parse(&["iptables-sync-period=0s"]).is_err());
        assert!(parse(&["cluster-cidr=fd00::/64"]).is_err());
        assert_eq!(
            parse(&["cluster-cidr"]),
            Err(ProxyArgError::NotKeyValue("cluster-cidr".into()))
        );
    }
}

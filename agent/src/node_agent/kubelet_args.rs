//! `--kubelet-arg KEY=VALUE` (k3s's form): the kubelet flags k3rs understands, parsed and
//! kept; an unknown key is refused with the list of known ones (never silently ignored).

use std::time::Duration;

use k3rs_apimachinery::quantity::Quantity;
use k8s_openapi::api::core::v1::Taint;

use crate::kubelet::eviction::config::{self, EvictionFlags, FlagError};
use crate::kubelet::eviction::EvictionConfig;
use crate::kubelet::image_gc::ImageGcPolicy;
use crate::kubelet::log_rotation::LogRotatePolicy;
use crate::kubelet::node_status::node;

/// The keys understood.
pub const KNOWN: &[&str] = &[
    "cgroup-root",
    "cluster-dns",
    "cluster-domain",
    "container-log-max-files",
    "container-log-max-size",
    "eviction-hard",
    "eviction-max-pod-grace-period",
    "eviction-minimum-reclaim",
    "eviction-pressure-transition-period",
    "eviction-soft",
    "eviction-soft-grace-period",
    "image-gc-high-threshold",
    "image-gc-low-threshold",
    "image-minimum-gc-age",
    "kube-reserved",
    "max-pods",
    "node-labels",
    "node-status-update-frequency",
    "pod-manifest-path",
    "port",
    "register-with-taints",
    "resolv-conf",
    "system-reserved",
];

/// What `--kubelet-arg`s set.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KubeletArgs {
    /// The cgroup the pods' cgroups go under (`<root>/kubepods/…`).
    pub cgroup_root: Option<String>,
    /// The cluster DNS server(s) pods resolve with.
    pub cluster_dns: Vec<std::net::IpAddr>,
    /// The cluster's DNS domain pods search and the cluster DNS serves (default
    /// `cluster.local`).
    pub cluster_domain: Option<String>,
    /// When container logs are rotated and how many files of each are kept
    /// (`container-log-max-size`, a quantity of bytes, default 10Mi; `container-log-max-files`,
    /// at least 2, default 5).
    pub(crate) container_log: LogRotatePolicy,
    /// The eviction thresholds (`eviction-hard`, replacing upstream's defaults when given;
    /// `eviction-soft` with `eviction-soft-grace-period`; `eviction-minimum-reclaim`),
    /// `eviction-pressure-transition-period` (5m) and `eviction-max-pod-grace-period` (0).
    pub(crate) eviction: EvictionConfig,
    /// `image-gc-high-threshold` (85), `image-gc-low-threshold` (80, below the high one),
    /// `image-minimum-gc-age` (2m).
    pub(crate) image_gc: ImageGcPolicy,
    /// The pod capacity the node reports (default 110).
    pub max_pods: Option<u32>,
    /// `node-labels` (comma-separated `key=value`), added to the `--node-label`s at
    /// registration.
    pub node_labels: Vec<(String, String)>,
    /// How often the node status is computed and, if changed, reported (default 10 s).
    pub node_status_update_frequency: Option<Duration>,
    /// The static pod manifests' directory (default `<data-dir>/agent/pod-manifests`).
    pub pod_manifest_path: Option<std::path::PathBuf>,
    /// The kubelet API's port (upstream's `--port`, 10250).
    pub port: Option<u16>,
    /// `register-with-taints` (comma-separated `key=value:Effect`), added to the
    /// `--node-taint`s at registration.
    pub register_with_taints: Vec<Taint>,
    /// `system-reserved` (`cpu=…,memory=…,ephemeral-storage=…`): kept from pods for the
    /// operating system.
    pub system_reserved: node::Reserved,
    /// `kube-reserved` (same form): kept from pods for Kubernetes' own daemons.
    pub kube_reserved: node::Reserved,
    /// The resolv.conf pods with `dnsPolicy: Default` get and the cluster DNS forwards to
    /// (default `/etc/resolv.conf`, as the kubelet's `--resolv-conf`).
    pub resolv_conf: Option<std::path::PathBuf>,
}

/// A `--kubelet-arg` refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeletArgError {
    /// No `=`.
    #[error("--kubelet-arg {0:?}: expected KEY=VALUE")]
    NotKeyValue(String),
    /// A value the flag does not take; `expected` says what it takes.
    #[error("--kubelet-arg {key}={value}: expected {expected}")]
    Value {
        /// The flag.
        key: String,
        /// The value given.
        value: String,
        /// What the flag takes.
        expected: &'static str,
    },
    /// A bad `node-labels` entry.
    #[error(transparent)]
    Label(#[from] node::LabelError),
    /// A bad eviction threshold, grace period or minimum reclaim.
    #[error(transparent)]
    Eviction(#[from] FlagError),
    /// `image-gc-low-threshold` not below `image-gc-high-threshold`.
    #[error(
        "--kubelet-arg: image-gc-low-threshold ({low}) must be less than \
         image-gc-high-threshold ({high})"
    )]
    ImageGcThresholds {
        /// The low threshold.
        low: u8,
        /// The high threshold.
        high: u8,
    },
    /// A bad `register-with-taints` entry.
    #[error(transparent)]
    Taint(#[from] node::TaintError),
    /// A flag k3rs does not know.
    #[error("--kubelet-arg: unknown kubelet flag {flag:?} (k3rs understands: {})", KNOWN.join(", "))]
    Unknown {
        /// The flag.
        flag: String,
    },
}

fn bad(key: &str, value: &str, expected: &'static str) -> KubeletArgError {
    KubeletArgError::Value {
        key: key.to_string(),
        value: value.to_string(),
        expected,
    }
}

/// A Go duration (`10s`, `1m30s`, `1.5h`), as the kubelet's flags take it.
fn duration(key: &str, v: &str) -> Result<Duration, KubeletArgError> {
    k3rs_apimachinery::duration::parse(v)
        .ok_or_else(|| bad(key, v, "a duration like 10s, 1m or 1h30m"))
}

/// A `system-reserved`/`kube-reserved` value: `cpu=…,memory=…,ephemeral-storage=…`.
fn reserved(key: &str, v: &str) -> Result<node::Reserved, KubeletArgError> {
    const EXPECTED: &str =
        "cpu=QUANTITY,memory=QUANTITY,ephemeral-storage=QUANTITY (k3rs does not reserve pid)";
    let mut out = node::Reserved::default();
    for pair in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (resource, amount) = pair.split_once('=').ok_or_else(|| bad(key, v, EXPECTED))?;
        let q = Quantity::parse(amount.trim())
            .filter(|q| !q.is_negative())
            .ok_or_else(|| bad(key, v, EXPECTED))?;
        match resource.trim() {
            "cpu" => out.cpu_millis = q.milli_value().max(0) as u64,
            "memory" => out.memory = q.value().max(0) as u64,
            "ephemeral-storage" => out.ephemeral_storage = q.value().max(0) as u64,
            _ => return Err(bad(key, v, EXPECTED)),
        }
    }
    Ok(out)
}

/// A whole percentage, 0 to 100.
fn percent(key: &str, v: &str) -> Result<u8, KubeletArgError> {
    v.parse()
        .ok()
        .filter(|p| *p <= 100)
        .ok_or_else(|| bad(key, v, "a whole percentage from 0 to 100"))
}

impl KubeletArgs {
    /// Parses `KEY=VALUE`s (a leading `--` on the key is accepted); later ones win, list
    /// values (`node-labels`, `register-with-taints`, comma separated) accumulate.
    pub fn parse(args: &[String]) -> Result<KubeletArgs, KubeletArgError> {
        let mut out = KubeletArgs::default();
        let mut eviction = EvictionFlags::default();
        for a in args {
            let (k, v) = a
                .split_once('=')
                .ok_or_else(|| KubeletArgError::NotKeyValue(a.clone()))?;
            let k = k.trim_start_matches("--");
            match k {
                "cgroup-root" => {
                    if !v.starts_with('/') {
                        return Err(bad(k, v, "an absolute cgroup path"));
                    }
                    out.cgroup_root = Some(v.to_string())
                }
                "cluster-dns" => {
                    for ip in v.split(',').filter(|i| !i.is_empty()) {
                        out.cluster_dns
                            .push(ip.parse().map_err(|_| bad(k, v, "IP addresses"))?);
                    }
                }
                "cluster-domain" => out.cluster_domain = Some(v.to_string()),
                "container-log-max-files" => {
                    out.container_log.max_files = v
                        .parse()
                        .ok()
                        .filter(|n| *n >= 2)
                        .ok_or_else(|| bad(k, v, "a whole number of at least 2"))?
                }
                "container-log-max-size" => {
                    out.container_log.max_size = Quantity::parse(v)
                        .map(Quantity::value)
                        .and_then(|b| u64::try_from(b).ok())
                        .filter(|b| *b > 0)
                        .ok_or_else(|| bad(k, v, "a size in bytes like 10Mi or 500Ki"))?
                }
                "eviction-hard" => eviction.hard = Some(v.to_string()),
                "eviction-soft" => eviction.soft = Some(v.to_string()),
                "eviction-soft-grace-period" => eviction.soft_grace_period = Some(v.to_string()),
                "eviction-minimum-reclaim" => eviction.minimum_reclaim = Some(v.to_string()),
                "eviction-max-pod-grace-period" => {
                    let secs: u64 = v
                        .parse()
                        .map_err(|_| bad(k, v, "a whole number of seconds, 0 or more"))?;
                    out.eviction.max_pod_grace_period = Duration::from_secs(secs)
                }
                "eviction-pressure-transition-period" => {
                    out.eviction.pressure_transition_period = duration(k, v)?
                }
                "kube-reserved" => out.kube_reserved = reserved(k, v)?,
                "system-reserved" => out.system_reserved = reserved(k, v)?,
                "image-gc-high-threshold" => out.image_gc.high_threshold_percent = percent(k, v)?,
                "image-gc-low-threshold" => out.image_gc.low_threshold_percent = percent(k, v)?,
                "image-minimum-gc-age" => out.image_gc.min_age = duration(k, v)?,
                "max-pods" => {
                    out.max_pods = Some(v.parse().map_err(|_| bad(k, v, "a whole number"))?)
                }
                "node-labels" => {
                    for l in v.split(',').filter(|l| !l.is_empty()) {
                        out.node_labels.push(node::parse_label(l)?);
                    }
                }
                "node-status-update-frequency" => {
                    out.node_status_update_frequency = Some(duration(k, v)?)
                }
                "pod-manifest-path" => {
                    if !v.starts_with('/') {
                        return Err(bad(k, v, "an absolute path"));
                    }
                    out.pod_manifest_path = Some(v.into())
                }
                "port" => {
                    out.port = Some(
                        v.parse()
                            .ok()
                            .filter(|p| *p > 0)
                            .ok_or_else(|| bad(k, v, "a port number"))?,
                    )
                }
                "register-with-taints" => {
                    for t in v.split(',').filter(|t| !t.is_empty()) {
                        out.register_with_taints.push(node::parse_taint(t)?);
                    }
                }
                "resolv-conf" => out.resolv_conf = Some(v.into()),
                _ => {
                    return Err(KubeletArgError::Unknown {
                        flag: k.to_string(),
                    })
                }
            }
        }
        out.eviction.thresholds = config::thresholds(&eviction)?;
        let (low, high) = (
            out.image_gc.low_threshold_percent,
            out.image_gc.high_threshold_percent,
        );
        if low >= high {
            return Err(KubeletArgError::ImageGcThresholds { low, high });
        }
        Ok(out)
    }

    /// `system-reserved` and `kube-reserved` together.
    pub fn reserved(&self) -> node::Reserved {
        self.system_reserved.plus(self.kube_reserved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn known_keys_are_kept() {
        let a = KubeletArgs::parse(&s(&[
            "max-pods=50",
            "--node-labels=a=1,b=2",
            "node-status-update-frequency=5s",
            "register-with-taints=k=v:NoSchedule",
        ]))
        .unwrap();
        assert_eq!(a.max_pods, Some(50));
        assert_eq!(
            a.node_labels,
            vec![("a".into(), "1".into()), ("b".into(), "2".into())]
        );
        assert_eq!(a.node_status_update_frequency, Some(Duration::from_secs(5)));
        assert_eq!(a.register_with_taints[0].key, "k");
        let b = KubeletArgs::parse(&s(&[
            "cgroup-root=/k3rs",
            "cluster-dns=10.43.0.10",
            "cluster-domain=example.local",
            "resolv-conf=/run/k3rs/resolv.conf",
        ]))
        .unwrap();
        assert_eq!(
            b.resolv_conf.as_deref(),
            Some(std::path::Path::new("/run/k3rs/resolv.conf"))
        );
        assert_eq!(b.cgroup_root.as_deref(), Some("/k3rs"));
        assert_eq!(
            b.cluster_dns,
            vec!["10.43.0.10".parse::<std::net::IpAddr>().unwrap()]
        );
        assert_eq!(b.cluster_domain.as_deref(), Some("example.local"));
        assert_eq!(b.container_log, LogRotatePolicy::default());
        let logs = KubeletArgs::parse(&s(&[
            "container-log-max-size=100Ki",
            "container-log-max-files=3",
        ]))
        .unwrap();
        assert_eq!(
            logs.container_log,
            LogRotatePolicy {
                max_size: 100 * 1024,
                max_files: 3
            }
        );
        for bad in [
            "container-log-max-size=0",
            "container-log-max-size=-1Mi",
            "container-log-max-size=big",
            "container-log-max-files=1",
            "container-log-max-files=many",
        ] {
            assert!(KubeletArgs::parse(&s(&[bad])).is_err(), "{bad}");
        }
        assert!(KubeletArgs::parse(&s(&["cgroup-root=k3rs"])).is_err());
        assert!(KubeletArgs::parse(&s(&["cluster-dns=dns"])).is_err());
    }

    #[test]
    fn disk_and_memory_protection_is_settable() {
        use crate::kubelet::eviction::threshold::{Signal, Threshold, ThresholdValue};
        let d = KubeletArgs::parse(&[]).unwrap();
        assert_eq!(d.eviction, EvictionConfig::default());
        assert_eq!(d.image_gc, ImageGcPolicy::default());
        let a = KubeletArgs::parse(&s(&[
            "eviction-hard=nodefs.available<30%",
            "eviction-pressure-transition-period=15s",
            "image-gc-high-threshold=60",
            "image-gc-low-threshold=50",
            "image-minimum-gc-age=0s",
        ]))
        .unwrap();
        assert_eq!(
            a.eviction,
            EvictionConfig {
                thresholds: vec![Threshold::hard(
                    Signal::NodeFsAvailable,
                    ThresholdValue::Percentage(0.3)
                )],
                pressure_transition_period: Duration::from_secs(15),
                max_pod_grace_period: Duration::ZERO,
            }
        );
        let soft = KubeletArgs::parse(&s(&[
            "eviction-soft=nodefs.available<40%",
            "eviction-hard=pid.available<100",
            "eviction-soft-grace-period=nodefs.available=20s",
            "eviction-minimum-reclaim=pid.available=50",
            "eviction-max-pod-grace-period=10",
        ]))
        .unwrap();
        assert_eq!(
            soft.eviction.thresholds,
            vec![
                Threshold {
                    min_reclaim: Some(ThresholdValue::Quantity(50)),
                    ..Threshold::hard(Signal::PidAvailable, ThresholdValue::Quantity(100))
                },
                Threshold {
                    grace_period: Duration::from_secs(20),
                    ..Threshold::hard(Signal::NodeFsAvailable, ThresholdValue::Percentage(0.4))
                },
            ]
        );
        assert_eq!(soft.eviction.max_pod_grace_period, Duration::from_secs(10));
        let r = KubeletArgs::parse(&s(&[
            "system-reserved=cpu=500m,memory=1Gi",
            "kube-reserved=memory=256Mi,ephemeral-storage=2Gi",
        ]))
        .unwrap();
        assert_eq!(
            r.reserved(),
            node::Reserved {
                cpu_millis: 500,
                memory: (1 << 30) + (256 << 20),
                ephemeral_storage: 2 << 30
            }
        );
        assert_eq!(
            a.image_gc,
            ImageGcPolicy {
                high_threshold_percent: 60,
                low_threshold_percent: 50,
                min_age: Duration::ZERO
            }
        );
        let err = |v: &[&str]| KubeletArgs::parse(&s(v)).unwrap_err().to_string();
        assert_eq!(
            err(&["image-gc-low-threshold=90"]),
            "--kubelet-arg: image-gc-low-threshold (90) must be less than \
             image-gc-high-threshold (85)"
        );
        assert_eq!(
            err(&["image-gc-high-threshold=101"]),
            "--kubelet-arg image-gc-high-threshold=101: expected a whole percentage from 0 to 100"
        );
        assert_eq!(
            err(&["eviction-hard=memory.available>1Gi"]),
            "--kubelet-arg eviction-hard: \"memory.available>1Gi\": expected SIGNAL<VALUE (only \
             the < operator is supported)"
        );
        assert_eq!(
            err(&["eviction-soft=memory.available<1Gi"]),
            "--kubelet-arg eviction-soft: grace period must be specified for the soft eviction \
             threshold memory.available"
        );
        assert_eq!(
            err(&["eviction-max-pod-grace-period=-1"]),
            "--kubelet-arg eviction-max-pod-grace-period=-1: expected a whole number of seconds, \
             0 or more"
        );
        assert_eq!(
            err(&["system-reserved=pid=100"]),
            "--kubelet-arg system-reserved=pid=100: expected cpu=QUANTITY,memory=QUANTITY,\
             ephemeral-storage=QUANTITY (k3rs does not reserve pid)"
        );
        for bad in [
            "kube-reserved=memory",
            "kube-reserved=memory=-1Gi",
            "kube-reserved=memory=lots",
        ] {
            assert!(
                err(&[bad]).starts_with("--kubelet-arg kube-reserved="),
                "{bad}"
            );
        }
        assert!(KubeletArgs::parse(&s(&["image-minimum-gc-age=soon"])).is_err());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        assert_eq!(
            KubeletArgs::parse(&s(&["cgroup-driver=systemd"])).map_err(|e| e.to_string()),
            Err(
                "--kubelet-arg: unknown kubelet flag \"cgroup-driver\" (k3rs understands: \
                 cgroup-root, cluster-dns, cluster-domain, container-log-max-files, \
                 container-log-max-size, eviction-hard, eviction-max-pod-grace-period, \
                 eviction-minimum-reclaim, eviction-pressure-transition-period, eviction-soft, \
                 eviction-soft-grace-period, image-gc-high-threshold, image-gc-low-threshold, \
                 image-minimum-gc-age, kube-reserved, max-pods, node-labels, \
                 node-status-update-frequency, pod-manifest-path, port, register-with-taints, \
                 resolv-conf, system-reserved)"
                    .into()
            )
        );
        assert!(KubeletArgs::parse(&s(&["max-pods"])).is_err());
        assert!(KubeletArgs::parse(&s(&["max-pods=many"])).is_err());
        assert!(KubeletArgs::parse(&s(&["node-status-update-frequency=soon"])).is_err());
        assert!(KubeletArgs::parse(&s(&["port=0"])).is_err());
        assert!(KubeletArgs::parse(&s(&["pod-manifest-path=manifests"])).is_err());
        assert_eq!(
            KubeletArgs::parse(&s(&["pod-manifest-path=/etc/k3rs/manifests"]))
                .unwrap()
                .pod_manifest_path,
            Some("/etc/k3rs/manifests".into())
        );
        assert!(KubeletArgs::parse(&s(&["port=70000"])).is_err());
        assert_eq!(
            KubeletArgs::parse(&s(&["port=10251"])).unwrap().port,
            Some(10251)
        );
    }
}

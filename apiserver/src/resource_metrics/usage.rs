//! Usage from two scrapes, as metrics-server computes it: CPU is the rate of the cumulative
//! CPU time between the two points, memory the working set of the later one. Pure.
//!
//! # Guarantees
//! - A rate needs the later point to be newer, its counter not to have gone down, and (for a
//!   container) the same start time in both points: a restarted container has no usage until
//!   its next scrape, as with metrics-server.
//! - A pod has usage only when every container of its later scrape has; its timestamp and
//!   window are its newest container's.
//! - Quantities are written as metrics-server writes them: CPU in nano-cores and memory in
//!   bytes, each in Kubernetes' canonical form (`1500u`, `12Ki`).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::points::{NodePoints, Point};

/// Usage over one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// CPU, in nano-cores.
    pub nano_cores: u64,
    /// Memory working set, in bytes.
    pub memory_bytes: u64,
    /// The end of the window.
    pub timestamp: Timestamp,
    /// The window's length.
    pub window: Duration,
}

/// A pod's usage: its containers', by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUsage {
    pub timestamp: Timestamp,
    pub window: Duration,
    pub containers: Vec<(String, Usage)>,
}

/// What one node's two last scrapes say.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// The node's own usage.
    pub node: Option<Usage>,
    /// The pods', by (namespace, name).
    pub pods: BTreeMap<(String, String), PodUsage>,
}

/// The usage between `prev` and `last` (see the module's guarantees).
pub fn rate(prev: &Point, last: &Point) -> Option<Usage> {
    if last.start != prev.start || last.cpu_core_nanos < prev.cpu_core_nanos {
        return None;
    }
    let window = last.timestamp.duration_since(prev.timestamp);
    let nanos = u128::try_from(window.as_nanos()).ok().filter(|n| *n > 0)?;
    let used = u128::from(last.cpu_core_nanos - prev.cpu_core_nanos);
    Some(Usage {
        nano_cores: u64::try_from(used * 1_000_000_000 / nanos).ok()?,
        memory_bytes: last.memory_working_set,
        timestamp: last.timestamp,
        window: Duration::from_nanos(u64::try_from(nanos).ok()?),
    })
}

/// The usage of everything `last` holds that `prev` allows a rate for.
pub fn between(prev: &NodePoints, last: &NodePoints) -> NodeUsage {
    let node = match (&prev.node, &last.node) {
        (Some(p), Some(l)) => rate(p, l),
        _ => None,
    };
    let mut pods = BTreeMap::new();
    for (key, containers) in &last.pods {
        let Some(before) = prev.pods.get(key) else {
            continue;
        };
        let usage: Option<Vec<(String, Usage)>> = containers
            .iter()
            .map(|(name, l)| Some((name.clone(), rate(before.get(name)?, l)?)))
            .collect();
        let Some(usage) = usage else { continue };
        let Some(newest) = usage.iter().map(|(_, u)| *u).max_by_key(|u| u.timestamp) else {
            continue;
        };
        pods.insert(
            key.clone(),
            PodUsage {
                timestamp: newest.timestamp,
                window: newest.window,
                containers: usage,
            },
        );
    }
    NodeUsage { node, pods }
}

/// `n` of a unit scaled by 10^-9, in canonical decimal form (`250m`, `1500u`, `7n`, `2`).
pub fn nano_quantity(n: u64) -> String {
    const SUFFIXES: [&str; 4] = ["n", "u", "m", ""];
    let (mut v, mut i) = (n, 0);
    while i + 1 < SUFFIXES.len() && v != 0 && v % 1000 == 0 {
        v /= 1000;
        i += 1;
    }
    if n == 0 {
        return "0".to_string();
    }
    format!("{v}{}", SUFFIXES[i])
}

/// `bytes` in canonical binary form (`12Ki`, `3Mi`, `1000`).
pub fn byte_quantity(bytes: u64) -> String {
    const SUFFIXES: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let (mut v, mut i) = (bytes, 0);
    while i + 1 < SUFFIXES.len() && v != 0 && v % 1024 == 0 {
        v /= 1024;
        i += 1;
    }
    format!("{v}{}", SUFFIXES[i])
}

/// `d` as Go's `time.Duration` prints it, to the millisecond (`15.003s`, `1m0.5s`).
pub fn go_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms == 0 {
        return "0s".to_string();
    }
    let (h, m, s, frac) = (ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if frac == 0 {
        out.push_str(&format!("{s}s"));
    } else {
        let frac = format!("{frac:03}");
        out.push_str(&format!("{s}.{}s", frac.trim_end_matches('0')));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::points::PodPoints;
    use super::*;

    fn at(secs: i64, millis: i32) -> Timestamp {
        Timestamp::new(secs, millis * 1_000_000).unwrap()
    }

    fn p(secs: i64, millis: i32, cpu: u64, mem: u64, start: Option<i64>) -> Point {
        Point {
            timestamp: at(secs, millis),
            cpu_core_nanos: cpu,
            memory_working_set: mem,
            start: start.map(|s| at(s, 0)),
        }
    }

    #[test]
    fn rate_is_cpu_time_over_the_window() {
        let u = rate(
            &p(100, 0, 1_000_000_000, 1, None),
            &p(115, 0, 8_500_000_000, 4096, None),
        )
        .unwrap();
        assert_eq!(
            u,
            Usage {
                nano_cores: 500_000_000,
                memory_bytes: 4096,
                timestamp: at(115, 0),
                window: Duration::from_secs(15),
            }
        );
        // Sub-second windows count exactly.
        let u = rate(&p(100, 0, 0, 1, None), &p(100, 250, 125_000_000, 1, None)).unwrap();
        assert_eq!(u.nano_cores, 500_000_000);
    }

    #[test]
    fn no_rate_without_progress_or_after_a_restart() {
        assert_eq!(rate(&p(100, 0, 5, 1, None), &p(100, 0, 9, 1, None)), None);
        assert_eq!(rate(&p(100, 0, 9, 1, None), &p(115, 0, 5, 1, None)), None);
        assert_eq!(
            rate(&p(100, 0, 1, 1, Some(1)), &p(115, 0, 5, 1, Some(2))),
            None
        );
        assert_eq!(rate(&p(115, 0, 1, 1, None), &p(100, 0, 5, 1, None)), None);
    }

    #[test]
    fn pods_need_every_container() {
        let key = |n: &str| ("ns".to_string(), n.to_string());
        let mut prev = NodePoints {
            node: Some(p(0, 0, 0, 1, None)),
            ..Default::default()
        };
        let mut last = NodePoints {
            node: Some(p(10, 0, 10_000_000_000, 2, None)),
            ..Default::default()
        };
        let c = |t: i64, cpu: u64| p(t, 0, cpu, 10, Some(0));
        let pod = |cs: &[(&str, Point)]| -> PodPoints {
            cs.iter().map(|(n, p)| (n.to_string(), *p)).collect()
        };
        prev.pods
            .insert(key("a"), pod(&[("x", c(0, 0)), ("y", c(0, 0))]));
        last.pods.insert(
            key("a"),
            pod(&[("x", c(10, 1_000_000_000)), ("y", c(5, 0))]),
        );
        // b has a container the previous scrape did not see.
        prev.pods.insert(key("b"), pod(&[("x", c(0, 0))]));
        last.pods
            .insert(key("b"), pod(&[("x", c(10, 1)), ("z", c(10, 1))]));
        // c is new.
        last.pods.insert(key("c"), pod(&[("x", c(10, 1))]));
        let u = between(&prev, &last);
        assert_eq!(u.node.unwrap().nano_cores, 1_000_000_000);
        assert_eq!(u.pods.keys().collect::<Vec<_>>(), [&key("a")]);
        let a = &u.pods[&key("a")];
        assert_eq!(
            (a.timestamp, a.window),
            (at(10, 0), Duration::from_secs(10))
        );
        let cpus: Vec<(&str, u64)> = a
            .containers
            .iter()
            .map(|(n, u)| (n.as_str(), u.nano_cores))
            .collect();
        assert_eq!(cpus, [("x", 100_000_000), ("y", 0)]);
    }

    #[test]
    fn canonical_quantities() {
        assert_eq!(nano_quantity(0), "0");
        assert_eq!(nano_quantity(7), "7n");
        assert_eq!(nano_quantity(1_500_000), "1500u");
        assert_eq!(nano_quantity(250_000_000), "250m");
        assert_eq!(nano_quantity(2_000_000_000), "2");
        assert_eq!(nano_quantity(123_456_789), "123456789n");
        assert_eq!(byte_quantity(0), "0");
        assert_eq!(byte_quantity(1000), "1000");
        assert_eq!(byte_quantity(12 * 1024), "12Ki");
        assert_eq!(byte_quantity(3 * 1024 * 1024), "3Mi");
        assert_eq!(byte_quantity(1536 * 1024), "1536Ki");
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_millis(15_003)), "15.003s");
        assert_eq!(go_duration(Duration::from_secs(15)), "15s");
        assert_eq!(go_duration(Duration::from_millis(60_500)), "1m0.5s");
        assert_eq!(go_duration(Duration::from_secs(3600)), "1h0m0s");
        assert_eq!(go_duration(Duration::ZERO), "0s");
    }
}

//! The decisions of `k3rs check-config`: what the host offers ([`HostFacts`], gathered by
//! [`super::gather`]) against what a k3rs node needs, one [`Check`] line per requirement.

use std::path::PathBuf;

/// What was found on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostFacts {
    /// `uname -r`.
    pub kernel_release: String,
    /// The controllers of a cgroup v2 hierarchy mounted at `/sys/fs/cgroup`, if it is one.
    pub cgroup_v2_controllers: Option<Vec<String>>,
    /// The cgroup v1 hierarchies mounted under `/sys/fs/cgroup` (`cpu`, `memory`, …).
    pub cgroup_v1_hierarchies: Vec<String>,
    /// `/proc/filesystems` names.
    pub filesystems: Vec<String>,
    /// Whether bridged traffic is seen by iptables (`/proc/sys/net/bridge` exists: the
    /// br_netfilter module is loaded or built in).
    pub bridge_netfilter: bool,
    /// `net.ipv4.ip_forward`.
    pub ip_forward: Option<bool>,
    /// Each required program and where it was found on `PATH`.
    pub programs: Vec<(String, Option<PathBuf>)>,
    /// Each CNI plugin and where it was found.
    pub cni_plugins: Vec<(String, Option<PathBuf>)>,
}

/// The filesystem names of a `/proc/filesystems` text (its last column).
pub fn filesystem_names(proc_filesystems: &str) -> Vec<String> {
    proc_filesystems
        .lines()
        .filter_map(|l| l.split_whitespace().last().map(str::to_string))
        .collect()
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// What k3rs needs is there.
    Pass,
    /// Works, but something is worth knowing.
    Warn,
    /// Something k3rs needs is missing.
    Fail,
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// The outcome.
    pub status: Status,
    /// What was found, or what to do about it.
    pub detail: String,
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let status = match self.status {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
        };
        write!(f, "- {}: {status} ({})", self.name, self.detail)
    }
}

/// Programs a node runs, with the Debian package that has each.
pub const PROGRAMS: &[(&str, &str)] = &[
    ("containerd", "containerd"),
    ("runc", "runc"),
    ("iptables", "iptables"),
    ("iptables-save", "iptables"),
    ("iptables-restore", "iptables"),
    ("ip", "iproute2"),
];
/// CNI plugins the agent's network config uses.
pub const CNI_PLUGINS: &[&str] = &["bridge", "host-local", "portmap", "loopback"];
/// Controllers the kubelet puts limits on.
const CGROUP_CONTROLLERS: &[&str] = &["cpu", "memory", "pids"];
/// The oldest kernel supported (as k3s: cgroup, overlayfs and netfilter features).
const MIN_KERNEL: (u32, u32) = (4, 15);

fn check(name: &str, status: Status, detail: impl Into<String>) -> Check {
    Check {
        name: name.to_string(),
        status,
        detail: detail.into(),
    }
}

fn kernel(release: &str) -> Check {
    let mut parts = release.split(['.', '-']).map(|p| p.parse::<u32>().ok());
    let version = (parts.next().flatten(), parts.next().flatten());
    match version {
        (Some(major), Some(minor)) if (major, minor) >= MIN_KERNEL => {
            check("kernel version", Status::Pass, release)
        }
        (Some(_), Some(_)) => check(
            "kernel version",
            Status::Fail,
            format!(
                "{release}; {}.{} or newer is needed",
                MIN_KERNEL.0, MIN_KERNEL.1
            ),
        ),
        _ => check(
            "kernel version",
            Status::Warn,
            format!("cannot tell the version of {release:?}"),
        ),
    }
}

fn cgroups(f: &HostFacts) -> Check {
    let (kind, present): (&str, &[String]) = match &f.cgroup_v2_controllers {
        Some(c) => ("cgroups v2", c),
        None => ("cgroups v1", &f.cgroup_v1_hierarchies),
    };
    let missing: Vec<&str> = CGROUP_CONTROLLERS
        .iter()
        .copied()
        .filter(|c| !present.iter().any(|p| p == c))
        .collect();
    if missing.is_empty() {
        check(
            "cgroup hierarchy",
            Status::Pass,
            format!("{kind} with {}", CGROUP_CONTROLLERS.join(", ")),
        )
    } else {
        check(
            "cgroup hierarchy",
            Status::Fail,
            format!(
                "{kind} without {} (enable it on the kernel command line, e.g. cgroup_enable=memory)",
                missing.join(", ")
            ),
        )
    }
}

fn found(name: &str, at: &Option<PathBuf>, install: &str) -> Check {
    match at {
        Some(p) => check(name, Status::Pass, p.display().to_string()),
        None => check(name, Status::Fail, format!("not found; install {install}")),
    }
}

/// Every check, in report order.
pub fn evaluate(f: &HostFacts) -> Vec<Check> {
    let mut out = vec![kernel(&f.kernel_release), cgroups(f)];
    out.push(if f.filesystems.iter().any(|n| n == "overlay") {
        check("overlay filesystem", Status::Pass, "supported")
    } else {
        check(
            "overlay filesystem",
            Status::Fail,
            "not supported; load it with `modprobe overlay`",
        )
    });
    out.push(if f.bridge_netfilter {
        check(
            "br_netfilter",
            Status::Pass,
            "bridged traffic passes iptables",
        )
    } else {
        check(
            "br_netfilter",
            Status::Fail,
            "not loaded; load it with `modprobe br_netfilter`",
        )
    });
    out.push(match f.ip_forward {
        Some(true) => check("ip forwarding", Status::Pass, "net.ipv4.ip_forward = 1"),
        _ => check(
            "ip forwarding",
            Status::Warn,
            "net.ipv4.ip_forward = 0; pods cannot reach other nodes until \
             `sysctl -w net.ipv4.ip_forward=1`",
        ),
    });
    for (name, at) in &f.programs {
        let package = PROGRAMS
            .iter()
            .find(|(p, _)| p == name)
            .map_or(name.as_str(), |(_, pkg)| pkg);
        out.push(found(name, at, &format!("the {package} package")));
    }
    for (name, at) in &f.cni_plugins {
        out.push(found(
            &format!("CNI plugin {name}"),
            at,
            "the containernetworking-plugins package",
        ));
    }
    out
}

/// The summary line: `STATUS: pass`, or how many checks failed.
pub fn summary(checks: &[Check]) -> String {
    match checks.iter().filter(|c| c.status == Status::Fail).count() {
        0 => "STATUS: pass".into(),
        1 => "STATUS: 1 check failed".into(),
        n => format!("STATUS: {n} checks failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn healthy() -> HostFacts {
        HostFacts {
            kernel_release: "6.1.0-26-amd64".into(),
            cgroup_v2_controllers: Some(vec![
                "cpuset".into(),
                "cpu".into(),
                "io".into(),
                "memory".into(),
                "pids".into(),
            ]),
            cgroup_v1_hierarchies: Vec::new(),
            filesystems: vec!["ext4".into(), "overlay".into()],
            bridge_netfilter: true,
            ip_forward: Some(true),
            programs: vec![("runc".into(), Some("/usr/sbin/runc".into()))],
            cni_plugins: vec![("bridge".into(), Some("/usr/lib/cni/bridge".into()))],
        }
    }

    fn lines(f: &HostFacts) -> Vec<String> {
        evaluate(f).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_healthy_host_passes_everything() {
        assert_eq!(
            lines(&healthy()),
            [
                "- kernel version: pass (6.1.0-26-amd64)",
                "- cgroup hierarchy: pass (cgroups v2 with cpu, memory, pids)",
                "- overlay filesystem: pass (supported)",
                "- br_netfilter: pass (bridged traffic passes iptables)",
                "- ip forwarding: pass (net.ipv4.ip_forward = 1)",
                "- runc: pass (/usr/sbin/runc)",
                "- CNI plugin bridge: pass (/usr/lib/cni/bridge)",
            ]
        );
        assert_eq!(summary(&evaluate(&healthy())), "STATUS: pass");
    }

    #[test]
    fn what_is_missing_fails_with_what_to_do() {
        let mut f = healthy();
        f.kernel_release = "4.4.0-generic".into();
        f.cgroup_v2_controllers = None;
        f.cgroup_v1_hierarchies = vec!["cpu".into(), "pids".into()];
        f.filesystems = vec!["ext4".into()];
        f.bridge_netfilter = false;
        f.ip_forward = Some(false);
        f.programs = vec![("iptables-restore".into(), None)];
        f.cni_plugins = vec![("portmap".into(), None)];
        assert_eq!(
            lines(&f),
            [
                "- kernel version: fail (4.4.0-generic; 4.15 or newer is needed)",
                "- cgroup hierarchy: fail (cgroups v1 without memory (enable it on the kernel command line, e.g. cgroup_enable=memory))",
                "- overlay filesystem: fail (not supported; load it with `modprobe overlay`)",
                "- br_netfilter: fail (not loaded; load it with `modprobe br_netfilter`)",
                "- ip forwarding: warn (net.ipv4.ip_forward = 0; pods cannot reach other nodes until `sysctl -w net.ipv4.ip_forward=1`)",
                "- iptables-restore: fail (not found; install the iptables package)",
                "- CNI plugin portmap: fail (not found; install the containernetworking-plugins package)",
            ]
        );
        assert_eq!(summary(&evaluate(&f)), "STATUS: 6 checks failed");
    }

    #[test]
    fn cgroup_v1_with_all_controllers_passes() {
        let mut f = healthy();
        f.cgroup_v2_controllers = None;
        f.cgroup_v1_hierarchies = ["cpu", "cpuacct", "memory", "pids"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            cgroups(&f).to_string(),
            "- cgroup hierarchy: pass (cgroups v1 with cpu, memory, pids)"
        );
        assert_eq!(kernel("weird").status, Status::Warn);
    }
}

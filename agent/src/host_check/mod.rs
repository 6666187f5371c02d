//! `k3rs check-config`: reads what the host offers (kernel, cgroups, filesystems, netfilter,
//! programs on `PATH`, CNI plugins) and judges it with the pure [`checks`].

pub mod checks;

use std::path::{Path, PathBuf};

pub use checks::{evaluate, summary, Check, HostFacts, Status};

/// Where CNI plugins are looked for: Debian's package, then the upstream default.
pub const CNI_BIN_DIRS: &[&str] = &["/usr/lib/cni", "/opt/cni/bin"];

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// `name` in the directories of `path_var` (a `PATH` value), if executable there.
pub fn which(name: &str, path_var: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path_var)
        .map(|d| d.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn cgroup_v1_hierarchies(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("cgroup.procs").exists())
        .flat_map(|e| {
            // `cpu,cpuacct` directories hold several controllers.
            e.file_name()
                .to_string_lossy()
                .split(',')
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

/// What this host offers, looking for programs on `path_var`.
pub fn gather(path_var: &str) -> HostFacts {
    let uname = kernel_release();
    let cgroup_v2_controllers = read("/sys/fs/cgroup/cgroup.controllers")
        .map(|s| s.split_whitespace().map(str::to_string).collect());
    let filesystems = checks::filesystem_names(&read("/proc/filesystems").unwrap_or_default());
    HostFacts {
        kernel_release: uname,
        cgroup_v2_controllers,
        cgroup_v1_hierarchies: cgroup_v1_hierarchies(Path::new("/sys/fs/cgroup")),
        filesystems,
        bridge_netfilter: Path::new("/proc/sys/net/bridge").exists(),
        ip_forward: read("/proc/sys/net/ipv4/ip_forward").map(|s| s.trim() == "1"),
        programs: checks::PROGRAMS
            .iter()
            .map(|(p, _)| (p.to_string(), which(p, path_var)))
            .collect(),
        cni_plugins: checks::CNI_PLUGINS
            .iter()
            .map(|p| {
                let at = CNI_BIN_DIRS
                    .iter()
                    .map(|d| Path::new(d).join(p))
                    .find(|c| c.is_file());
                (p.to_string(), at)
            })
            .collect(),
    }
}

/// The kernel release (`uname -r`), from procfs.
fn kernel_release() -> String {
    read("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

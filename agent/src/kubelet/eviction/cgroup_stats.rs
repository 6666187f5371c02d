//! What the eviction manager reads from cgroups and `/proc` besides `/proc/meminfo`: the
//! pods' working set (the `<cgroup root>/kubepods` cgroup, for `allocatableMemory.available`),
//! each pod's process count (its cgroup's `pids.current`, for ranking under PID pressure) and
//! the node's task limit and count (for `pid.available`, as the kubelet's `pidlimit` reads
//! them: the smaller of `kernel.pid_max` and `kernel.threads-max`, and the task total of
//! `/proc/loadavg`). The parsers are pure; the readers are thin.

use std::path::{Path, PathBuf};

use crate::kubelet::pods::cgroups::{cgroup_mounts, pod_cgroup_paths};

/// The working set of a memory cgroup: its (hierarchical) usage less its inactive file
/// pages (cgroup v1 `total_inactive_file`, v2 `inactive_file`), as cAdvisor computes it.
pub fn working_set(usage: u64, memory_stat: &str) -> u64 {
    let stat = |key: &str| {
        memory_stat.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    let inactive = stat("total_inactive_file")
        .or_else(|| stat("inactive_file"))
        .unwrap_or(0);
    usage.saturating_sub(inactive)
}

/// `(available, capacity)` process IDs: `capacity` the smaller of the two kernel limits,
/// `available` that less the tasks in `/proc/loadavg`'s `running/total` field.
pub fn pid_observation(pid_max: &str, threads_max: &str, loadavg: &str) -> Option<(u64, u64)> {
    let limit = [pid_max, threads_max]
        .iter()
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .min()?;
    let tasks: u64 = loadavg
        .split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()?;
    Some((limit.saturating_sub(tasks), limit))
}

fn read(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

fn cgroup_mount_points() -> Vec<PathBuf> {
    cgroup_mounts(&read(Path::new("/proc/self/mountinfo")).unwrap_or_default())
}

/// The pods' working set: `<cgroup root>/kubepods` in the memory hierarchy (v1) or the
/// unified one (v2); `None` before any pod made that cgroup.
pub fn pods_working_set(cgroup_root: &str) -> Option<u64> {
    let rel = format!("{}/kubepods", cgroup_root.trim_matches('/'));
    for m in cgroup_mount_points() {
        let dir = m.join(rel.trim_start_matches('/'));
        let usage =
            read(&dir.join("memory.current")).or_else(|| read(&dir.join("memory.usage_in_bytes")));
        if let Some(usage) = usage.and_then(|u| u.trim().parse().ok()) {
            return Some(working_set(
                usage,
                &read(&dir.join("memory.stat")).unwrap_or_default(),
            ));
        }
    }
    None
}

/// The processes in the pod's cgroup (`pids.current`); `None` when not found.
pub fn pod_process_count(cgroup_root: &str, pod_uid: &str) -> Option<u64> {
    pod_cgroup_paths(&cgroup_mount_points(), cgroup_root, pod_uid)
        .into_iter()
        .find_map(|p| read(&p.join("pids.current"))?.trim().parse().ok())
}

/// The node's `pid.available` observation.
pub fn node_pids() -> Option<(u64, u64)> {
    pid_observation(
        &read(Path::new("/proc/sys/kernel/pid_max"))?,
        &read(Path::new("/proc/sys/kernel/threads-max")).unwrap_or_default(),
        &read(Path::new("/proc/loadavg"))?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_working_set_leaves_out_inactive_file_pages() {
        let v2 = "anon 1000\nfile 500\ninactive_file 300\nactive_file 200\n";
        assert_eq!(working_set(2000, v2), 1700);
        let v1 = "cache 10\ninactive_file 5\ntotal_cache 400\ntotal_inactive_file 250\n";
        // v1: the hierarchy's total, like its usage.
        assert_eq!(working_set(1000, v1), 750);
        assert_eq!(working_set(100, "inactive_file 300\n"), 0);
        assert_eq!(working_set(100, ""), 100);
    }

    #[test]
    fn pids_are_the_smaller_kernel_limit_less_the_tasks() {
        assert_eq!(
            pid_observation("4194304\n", "95000\n", "0.50 0.40 0.30 3/812 12345\n"),
            Some((94188, 95000))
        );
        assert_eq!(
            pid_observation("32768\n", "", "0.50 0.40 0.30 3/812 12345\n"),
            Some((31956, 32768))
        );
        assert_eq!(pid_observation("", "", "0.5 0.4 0.3 3/812 1"), None);
        assert_eq!(pid_observation("100", "", "garbage"), None);
    }

    #[test]
    fn this_machine_has_a_pid_observation() {
        let (available, capacity) = node_pids().expect("/proc");
        assert!(
            available > 0 && available < capacity,
            "{available}/{capacity}"
        );
    }
}

//! Removing a gone pod's cgroup (upstream's pod container manager `Destroy`): runc creates
//! `<cgroup root>/kubepods[/<qos>]/pod<uid>` in every hierarchy for the pod's containers and
//! removes only the containers' own cgroups, so the kubelet removes the pod's once the pod is
//! gone. The paths are computed from `/proc/self/mountinfo` (pure); the removal is `rmdir`,
//! deepest first (a cgroup directory only goes when it has no processes).

use std::path::{Path, PathBuf};

/// The mount points of the cgroup (v1) and cgroup2 filesystems in `mountinfo`.
pub fn cgroup_mounts(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let fields: Vec<&str> = l.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            let fstype = *fields.get(sep + 1)?;
            let mount = PathBuf::from(fields.get(4)?);
            (fstype == "cgroup" || fstype == "cgroup2").then_some(mount)
        })
        .collect()
}

/// Where the pod's cgroup can be, in each hierarchy, for each QoS tier.
pub fn pod_cgroup_paths(mounts: &[PathBuf], cgroup_root: &str, pod_uid: &str) -> Vec<PathBuf> {
    let root = cgroup_root.trim_matches('/');
    let mut out = vec![];
    for m in mounts {
        for tier in ["", "burstable/", "besteffort/"] {
            let rel = format!("{root}/kubepods/{tier}pod{pod_uid}");
            out.push(m.join(rel.trim_start_matches('/')));
        }
    }
    out
}

fn remove_tree(dir: &Path) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            remove_tree(&e.path());
        }
    }
    if let Err(e) = std::fs::remove_dir(dir) {
        tracing::debug!("removing the cgroup {}: {e}", dir.display());
    }
}

/// Removes the pod's cgroups (what still has processes stays).
pub fn remove_pod_cgroups(cgroup_root: &str, pod_uid: &str) {
    if pod_uid.is_empty() {
        return;
    }
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    for p in pod_cgroup_paths(&cgroup_mounts(&mountinfo), cgroup_root, pod_uid) {
        if p.is_dir() {
            remove_tree(&p);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pod_cgroup_in_every_hierarchy_and_tier() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw
31 30 0:27 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
32 30 0:28 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 25 0:35 / /data rw - ext4 /dev/sda1 rw";
        let mounts = cgroup_mounts(mountinfo);
        assert_eq!(
            mounts,
            vec![
                PathBuf::from("/sys/fs/cgroup/cpu"),
                PathBuf::from("/sys/fs/cgroup/memory")
            ]
        );
        let v2 = cgroup_mounts("35 25 0:30 / /sys/fs/cgroup rw shared:9 - cgroup2 cgroup2 rw");
        assert_eq!(v2, vec![PathBuf::from("/sys/fs/cgroup")]);
        let paths = pod_cgroup_paths(&mounts[..1], "/k3rs", "u1");
        assert_eq!(
            paths,
            vec![
                PathBuf::from("/sys/fs/cgroup/cpu/k3rs/kubepods/podu1"),
                PathBuf::from("/sys/fs/cgroup/cpu/k3rs/kubepods/burstable/podu1"),
                PathBuf::from("/sys/fs/cgroup/cpu/k3rs/kubepods/besteffort/podu1"),
            ]
        );
        assert_eq!(
            pod_cgroup_paths(&v2, "/", "u2")[0],
            PathBuf::from("/sys/fs/cgroup/kubepods/podu2")
        );
    }

    #[test]
    fn removes_a_tree_deepest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let pod = tmp.path().join("kubepods/podu1");
        std::fs::create_dir_all(pod.join("sandbox/inner")).unwrap();
        remove_tree(&pod);
        assert!(!pod.exists());
        assert!(tmp.path().join("kubepods").exists(), "only the pod's");
    }
}

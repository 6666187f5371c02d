//! What the host lets containerd do, read from `/proc`.

use std::path::Path;

/// CAP_SYS_RESOURCE's bit: needed to lower a process's `oom_score_adj`.
const CAP_SYS_RESOURCE: u32 = 24;

/// Whether this process may lower `oom_score_adj` (it has CAP_SYS_RESOURCE). A containerd
/// started by it inherits the answer; when it is false, set
/// [`super::Config::restrict_oom_score_adj`].
pub fn can_lower_oom_score_adj() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| effective_capabilities(&s))
        .is_some_and(|caps| caps & (1 << CAP_SYS_RESOURCE) != 0)
}

/// Adapts `config` to this host: `restrict_oom_score_adj` without CAP_SYS_RESOURCE, and the
/// snapshotter per [`snapshotter_for`]. Returns a note per change, for the log.
pub fn adapt(config: &mut super::Config) -> Vec<String> {
    let mut notes = Vec::new();
    if !can_lower_oom_score_adj() {
        config.restrict_oom_score_adj = true;
        notes.push("no CAP_SYS_RESOURCE: restrict_oom_score_adj = true".to_string());
    }
    if config.snapshotter == "overlayfs" {
        let (snapshotter, why) = snapshotter_for(&config.layout.root);
        if let Some(why) = why {
            notes.push(format!("snapshotter {snapshotter}: {why}"));
        }
        config.snapshotter = snapshotter.to_string();
    }
    notes
}

/// The snapshotter for a containerd whose root is `root`: `overlayfs` when the kernel has
/// overlay and `root` is not itself on overlayfs (the kernel refuses an overlay upper dir on
/// overlayfs, e.g. a root inside a Docker container's filesystem), else `native` (a full copy
/// per layer and container: slower, works everywhere) with the reason.
pub fn snapshotter_for(root: &Path) -> (&'static str, Option<String>) {
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    choose_snapshotter(&filesystems, &mountinfo, root)
}

/// [`snapshotter_for`] on the texts of `/proc/filesystems` and `/proc/self/mountinfo`.
fn choose_snapshotter(
    filesystems: &str,
    mountinfo: &str,
    root: &Path,
) -> (&'static str, Option<String>) {
    let has_overlay = crate::host_check::checks::filesystem_names(filesystems)
        .iter()
        .any(|n| n == "overlay");
    if !has_overlay {
        return (
            "native",
            Some("the kernel has no overlay filesystem".into()),
        );
    }
    match fs_type_of(mountinfo, root) {
        Some(fs) if fs == "overlay" => (
            "native",
            Some(format!("{} is on overlayfs", root.display())),
        ),
        _ => ("overlayfs", None),
    }
}

/// The filesystem type of the mount holding `path` (the longest mount point that is a prefix
/// of it; later mounts over the same point win).
fn fs_type_of(mountinfo: &str, path: &Path) -> Option<String> {
    let mut best: Option<(usize, String)> = None;
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let (Some(mount_point), Some(sep)) = (fields.get(4), fields.iter().position(|f| *f == "-"))
        else {
            continue;
        };
        let Some(fstype) = fields.get(sep + 1) else {
            continue;
        };
        let mount_point = Path::new(mount_point);
        if path.starts_with(mount_point) {
            let depth = mount_point.components().count();
            if best.as_ref().is_none_or(|(d, _)| depth >= *d) {
                best = Some((depth, fstype.to_string()));
            }
        }
    }
    best.map(|(_, fs)| fs)
}

/// The `CapEff:` mask of a `/proc/<pid>/status` text.
fn effective_capabilities(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_effective_mask() {
        let status = "Name:\tx\nCapPrm:\t000001ffffffffff\nCapEff:\t000001fffeffffff\n";
        let caps = effective_capabilities(status).unwrap();
        assert_eq!(caps, 0x1fffeffffff);
        assert_eq!(
            caps & (1 << CAP_SYS_RESOURCE),
            0,
            "a container without SYS_RESOURCE"
        );
        assert_eq!(effective_capabilities("Name:\tx\n"), None);
        assert_eq!(effective_capabilities("CapEff:\tzz\n"), None);
    }

    const MOUNTINFO: &str = "\
24 1 0:22 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w
31 24 8:1 / /var/lib rw,relatime - ext4 /dev/sda1 rw
32 24 0:29 / /tmp rw,relatime - tmpfs tmpfs rw
33 31 8:2 / /var/lib/k3rs/agent rw,relatime - xfs /dev/sda2 rw
";

    #[test]
    fn finds_the_mount_holding_a_path() {
        let fs = |p: &str| fs_type_of(MOUNTINFO, Path::new(p));
        assert_eq!(fs("/var/lib/k3rs/agent/containerd").as_deref(), Some("xfs"));
        assert_eq!(fs("/var/lib/k3rs").as_deref(), Some("ext4"));
        assert_eq!(fs("/var/lib-other").as_deref(), Some("overlay"));
        assert_eq!(fs("/tmp/x").as_deref(), Some("tmpfs"));
        assert_eq!(fs("/opt").as_deref(), Some("overlay"));
    }

    #[test]
    fn overlayfs_unless_missing_or_nested() {
        let fss = "nodev\tsysfs\nnodev\toverlay\n\text4\n";
        let pick = |fss: &str, p: &str| choose_snapshotter(fss, MOUNTINFO, Path::new(p));
        assert_eq!(
            pick(fss, "/var/lib/k3rs/agent/containerd"),
            ("overlayfs", None)
        );
        assert_eq!(
            pick(fss, "/opt/k3rs/agent/containerd"),
            (
                "native",
                Some("/opt/k3rs/agent/containerd is on overlayfs".to_string())
            )
        );
        assert_eq!(
            pick("nodev\tsysfs\n\text4\n", "/var/lib/k3rs/agent/containerd"),
            (
                "native",
                Some("the kernel has no overlay filesystem".to_string())
            )
        );
    }
}

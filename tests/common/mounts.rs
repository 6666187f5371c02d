//! Mount clean-up for tests that run containers: a killed containerd-shim leaves its
//! container's rootfs overlay and the sandbox's `/dev/shm` mounted, which keeps the test's
//! temporary directory from being removed and grows the machine's mount table run after run.

use std::process::Command;

/// Lazily unmounts (`umount -l`) every mount at or below `dir`, deepest first.
pub fn unmount_under(dir: &std::path::Path) {
    let dir = dir.to_string_lossy().into_owned();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut mounts: Vec<&str> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| is_at_or_below(m, &dir))
        .collect();
    mounts.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for m in mounts {
        let _ = Command::new("umount").args(["-l", m]).status();
    }
}

/// Whether mount point `m` is `dir` or inside it (`/tmp/a1` is not inside `/tmp/a`).
fn is_at_or_below(m: &str, dir: &str) -> bool {
    let dir = dir.trim_end_matches('/');
    m == dir
        || m.strip_prefix(dir)
            .is_some_and(|rest| rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_dir_and_its_descendants_match() {
        assert!(super::is_at_or_below("/tmp/a", "/tmp/a"));
        assert!(super::is_at_or_below("/tmp/a/b/rootfs", "/tmp/a/"));
        assert!(!super::is_at_or_below("/tmp/a1/rootfs", "/tmp/a"));
        assert!(!super::is_at_or_below("/tmp", "/tmp/a"));
    }
}

//! What the host lets containerd do, read from `/proc`.

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
}

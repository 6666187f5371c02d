//! The node's own usage for `/stats/summary` and `/metrics/resource` (cAdvisor's root
//! container as the kubelet reports it), from `/proc/stat` and `/proc/meminfo`, as pure parsers.
//!
//! # Guarantees
//! - CPU: `usageCoreNanoSeconds` = the busy jiffies of the `cpu` line (all but idle and
//!   iowait) at `USER_HZ` (100), in nanoseconds.
//! - Memory: `usageBytes` = MemTotal − MemFree, `workingSetBytes` = usage − Inactive(file),
//!   `availableBytes` = MemTotal − workingSet, `rssBytes` = AnonPages (bytes).

/// Nanoseconds per `USER_HZ` jiffy.
const NANOS_PER_JIFFY: u64 = 10_000_000;

/// The node's memory as the summary API reports it (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Memory {
    pub available_bytes: u64,
    pub usage_bytes: u64,
    pub working_set_bytes: u64,
    pub rss_bytes: u64,
}

/// Cumulative busy CPU time of all cores, in nanoseconds, from `/proc/stat`.
pub fn cpu_usage_core_nanos(proc_stat: &str) -> Option<u64> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    let fields: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    let busy: u64 = fields
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    Some(busy * NANOS_PER_JIFFY)
}

fn kib(meminfo: &str, key: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let rest = l.strip_prefix(key)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse::<u64>().ok()
    })
}

/// The node's memory from `/proc/meminfo`.
pub fn memory(meminfo: &str) -> Option<Memory> {
    let total = kib(meminfo, "MemTotal")? * 1024;
    let free = kib(meminfo, "MemFree")? * 1024;
    let inactive_file = kib(meminfo, "Inactive(file)").unwrap_or(0) * 1024;
    let usage = total.saturating_sub(free);
    let working_set = usage.saturating_sub(inactive_file);
    Some(Memory {
        available_bytes: total.saturating_sub(working_set),
        usage_bytes: usage,
        working_set_bytes: working_set,
        rss_bytes: kib(meminfo, "AnonPages").unwrap_or(0) * 1024,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_counts_busy_jiffies() {
        let stat = "cpu  100 5 50 9000 20 3 2 1 7 0\ncpu0 50 2 25 4500 10 1 1 0 0 0\nintr 1\n";
        // 100 + 5 + 50 + 3 + 2 + 1 jiffies (idle, iowait and guest excluded).
        assert_eq!(cpu_usage_core_nanos(stat), Some(161 * 10_000_000));
        assert_eq!(cpu_usage_core_nanos("intr 1\n"), None);
        assert_eq!(cpu_usage_core_nanos("cpu  a b\n"), None);
    }

    #[test]
    fn memory_from_meminfo() {
        let meminfo = "MemTotal:        1000 kB\nMemFree:          200 kB\n\
                       MemAvailable:     600 kB\nInactive(file):   100 kB\nAnonPages:        300 kB\n";
        assert_eq!(
            memory(meminfo),
            Some(Memory {
                available_bytes: 300 * 1024,
                usage_bytes: 800 * 1024,
                working_set_bytes: 700 * 1024,
                rss_bytes: 300 * 1024,
            })
        );
        assert_eq!(memory("MemFree: 1 kB\n"), None);
    }
}

//! What the node status reports of the machine (upstream kubelet asks cAdvisor): CPUs, memory,
//! the data dir's filesystem, kernel, OS image and the machine/boot IDs. The parsers are pure;
//! [`Machine::observe`] reads `/proc`, `/etc` and `/sys`.

use std::path::Path;

/// The machine as last observed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Machine {
    pub cpus: u64,
    /// `MemTotal` in bytes.
    pub memory_bytes: u64,
    /// `MemAvailable` in bytes.
    pub memory_available_bytes: u64,
    /// Size and free space (for unprivileged users) of the data dir's filesystem, bytes.
    pub fs_bytes: u64,
    pub fs_available_bytes: u64,
    pub kernel_version: String,
    pub os_image: String,
    pub machine_id: String,
    pub system_uuid: String,
    pub boot_id: String,
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

impl Machine {
    /// Observes the machine; the filesystem is the one holding `data_dir`. What cannot be
    /// read is left zero or empty.
    pub fn observe(data_dir: &Path) -> Machine {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let (fs_bytes, fs_available_bytes) = rustix::fs::statvfs(data_dir)
            .map(|s| (s.f_blocks * s.f_frsize, s.f_bavail * s.f_frsize))
            .unwrap_or((0, 0));
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
            memory_bytes: meminfo_bytes(&meminfo, "MemTotal").unwrap_or(0),
            memory_available_bytes: meminfo_bytes(&meminfo, "MemAvailable").unwrap_or(0),
            fs_bytes,
            fs_available_bytes,
            kernel_version: read_trimmed("/proc/sys/kernel/osrelease"),
            os_image: os_image(&std::fs::read_to_string("/etc/os-release").unwrap_or_default()),
            machine_id: read_trimmed("/etc/machine-id"),
            system_uuid: read_trimmed("/sys/class/dmi/id/product_uuid").to_ascii_lowercase(),
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
        }
    }
}

/// A `/proc/meminfo` field in bytes (the file gives kB).
pub(crate) fn meminfo_bytes(meminfo: &str, field: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let (name, rest) = l.split_once(':')?;
        if name.trim() != field {
            return None;
        }
        let kb: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kb * 1024)
    })
}

/// `PRETTY_NAME` of `/etc/os-release` (unquoted), else `"Linux"` as cAdvisor falls back to.
pub(crate) fn os_image(os_release: &str) -> String {
    os_release
        .lines()
        .find_map(|l| l.strip_prefix("PRETTY_NAME="))
        .map(|v| v.trim().trim_matches('"').trim_matches('\'').to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "Linux".to_string())
}

/// The machine's host name, lower case (upstream kubelet's default node name).
pub fn hostname() -> String {
    let h = read_trimmed("/proc/sys/kernel/hostname");
    if h.is_empty() {
        "localhost".into()
    } else {
        h.to_ascii_lowercase()
    }
}

pub(crate) use k3rs_apimachinery::net::default_ip;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_fields_are_bytes() {
        let m = "MemTotal:       16393056 kB\nMemFree:  100 kB\nMemAvailable:    8000000 kB\n";
        assert_eq!(meminfo_bytes(m, "MemTotal"), Some(16_393_056 * 1024));
        assert_eq!(meminfo_bytes(m, "MemAvailable"), Some(8_000_000 * 1024));
        assert_eq!(meminfo_bytes(m, "Mem"), None);
    }

    #[test]
    fn os_image_is_the_pretty_name() {
        let r = "NAME=\"Debian GNU/Linux\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n";
        assert_eq!(os_image(r), "Debian GNU/Linux 12 (bookworm)");
        assert_eq!(os_image("ID=x\n"), "Linux");
    }

    #[test]
    fn the_machine_is_observed() {
        let m = Machine::observe(Path::new("/"));
        assert!(m.cpus >= 1 && m.memory_bytes > 0 && m.fs_bytes > 0, "{m:?}");
        assert!(m.memory_available_bytes <= m.memory_bytes);
        assert!(!m.kernel_version.is_empty());
    }
}

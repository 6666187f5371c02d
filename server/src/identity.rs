//! This server's identity in the etcd API: a random member ID (also its Raft node ID) and the
//! cluster ID, both created on first start and kept in `<data-dir>/server/`, and the hostname.

use std::path::Path;

use k3rs_pki::files::{read_optional, write_atomic, PRIVATE};

/// IDs reported in every etcd response header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// This server's member ID (also its Raft node ID).
    pub member_id: u64,
    /// The cluster's ID, the same on every member.
    pub cluster_id: u64,
}

/// Loads `member-id` and `cluster-id` (hex) from `server_dir`, creating them when missing.
pub fn load_or_create(server_dir: &Path) -> Result<Identity, k3rs_pki::Error> {
    Ok(Identity {
        member_id: load_or_create_id(&server_dir.join("member-id"))?,
        cluster_id: load_or_create_id(&server_dir.join("cluster-id"))?,
    })
}

fn load_or_create_id(path: &Path) -> Result<u64, k3rs_pki::Error> {
    if let Some(text) = read_optional(path)? {
        if let Some(id) = parse_id(&text) {
            return Ok(id);
        }
        tracing::warn!(path = %path.display(), "ignoring an unreadable ID file");
    }
    let id = random_id();
    write_atomic(path, format!("{id:016x}\n").as_bytes(), PRIVATE)?;
    Ok(id)
}

fn parse_id(text: &str) -> Option<u64> {
    u64::from_str_radix(text.trim(), 16)
        .ok()
        .filter(|id| *id != 0)
}

/// A random non-zero ID below 2^63 (etcd's IDs print as positive in every client).
fn random_id() -> u64 {
    loop {
        let id = rand::random::<u64>() >> 1;
        if id != 0 {
            return id;
        }
    }
}

/// The address other servers reach this one at by default: the source address of the
/// default route (like k3s, which picks the default route's interface).
pub use k3rs_apimachinery::net::{default_ip, hostname};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_created_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = load_or_create(dir.path()).unwrap();
        let b = load_or_create(dir.path()).unwrap();
        assert_eq!(a, b);
        assert_ne!(a.member_id, 0);
        assert_ne!(a.member_id, a.cluster_id);
        assert!(a.member_id < 1 << 63);
    }

    #[test]
    fn id_parsing() {
        assert_eq!(parse_id("00000000000000ff\n"), Some(255));
        assert_eq!(parse_id("0"), None);
        assert_eq!(parse_id("zz"), None);
        assert!(!hostname().is_empty());
    }
}

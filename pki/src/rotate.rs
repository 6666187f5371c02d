//! `k3rs certificate rotate` (run while the server is stopped, as k3s's): backs the whole
//! `<data-dir>/server/tls` up to `<data-dir>/server/tls-<unix seconds>/`, then removes the
//! chosen leaf certificates and keys so the next start issues new ones from the unchanged
//! CAs (what k3s does too). CAs, the service-account key and the token are never touched.

use std::path::{Path, PathBuf};

use super::Error;

/// The `--service` names and the leaves (`<stem>.crt`/`.key` under `tls/`) each covers.
pub const SERVICES: &[(&str, &[&str])] = &[
    ("admin", &["client-admin"]),
    ("auth-proxy", &["client-auth-proxy"]),
    (
        "api-server",
        &["serving-kube-apiserver", "client-kube-apiserver"],
    ),
    (
        "etcd",
        &[
            "etcd/server-client",
            "etcd/peer-server-client",
            "etcd/client",
        ],
    ),
];

/// A `--service` name `k3rs certificate rotate` does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown service {name:?}; known services: {}", SERVICES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "))]
pub struct UnknownService {
    /// The name as given.
    pub name: String,
}

/// The leaves to rotate for `services` (every leaf when empty), or the unknown name.
pub fn leaves(services: &[String]) -> Result<Vec<&'static str>, UnknownService> {
    if services.is_empty() {
        return Ok(SERVICES
            .iter()
            .flat_map(|(_, l)| l.iter().copied())
            .collect());
    }
    let mut out = Vec::new();
    for s in services {
        let Some((_, l)) = SERVICES.iter().find(|(name, _)| name == s) else {
            return Err(UnknownService { name: s.clone() });
        };
        for leaf in l.iter() {
            if !out.contains(leaf) {
                out.push(*leaf);
            }
        }
    }
    Ok(out)
}

/// What [`rotate`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotated {
    /// The directory the previous `tls/` was copied to (`tls-<unix time>`).
    pub backup: PathBuf,
    /// The certificate files removed (their keys went too).
    pub removed: Vec<PathBuf>,
}

/// Backs `<server_dir>/tls` up to `<server_dir>/tls-<now>` and removes `leaves`.
pub fn rotate(server_dir: &Path, leaves: &[&str], now: u64) -> Result<Rotated, Error> {
    let tls = server_dir.join("tls");
    if !tls.join("server-ca.crt").exists() {
        return Err(Error::Io {
            path: tls.join("server-ca.crt"),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no server certificates here (wrong --data-dir?)",
            ),
        });
    }
    let backup = server_dir.join(format!("tls-{now}"));
    copy_dir(&tls, &backup)?;
    let mut removed = Vec::new();
    for leaf in leaves {
        for ext in ["crt", "key"] {
            let path = tls.join(format!("{leaf}.{ext}"));
            match std::fs::remove_file(&path) {
                Ok(()) if ext == "crt" => removed.push(path),
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(Error::Io { path, source }),
            }
        }
    }
    Ok(Rotated { backup, removed })
}

/// Copies a tree, keeping file modes (keys stay 0600); directories are created 0700.
fn copy_dir(from: &Path, to: &Path) -> Result<(), Error> {
    super::files::create_dir(to)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    for entry in std::fs::read_dir(from).map_err(io(from))? {
        let entry = entry.map_err(io(from))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_type().map_err(io(&src))?.is_dir() {
            copy_dir(&src, &dst)?;
        } else {
            std::fs::copy(&src, &dst).map_err(io(&dst))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Pki, PkiOptions};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn services_select_leaves() {
        assert_eq!(leaves(&[]).unwrap().len(), 7);
        assert_eq!(
            leaves(&["etcd".into(), "admin".into(), "etcd".into()]).unwrap(),
            [
                "etcd/server-client",
                "etcd/peer-server-client",
                "etcd/client",
                "client-admin"
            ]
        );
        assert_eq!(
            leaves(&["kubelet".into()]).map_err(|e| e.to_string()),
            Err(
                "unknown service \"kubelet\"; known services: admin, auth-proxy, api-server, etcd"
                    .into()
            )
        );
    }

    #[test]
    fn backs_up_then_removes_the_leaves_and_the_next_ensure_reissues_them() {
        let dir = tempfile::tempdir().unwrap();
        let opts = PkiOptions::default();
        Pki::ensure(dir.path(), &opts).unwrap();
        let tls = dir.path().join("tls");
        let ca = std::fs::read(tls.join("client-ca.crt")).unwrap();
        let admin = std::fs::read(tls.join("client-admin.crt")).unwrap();
        let serving = std::fs::read(tls.join("serving-kube-apiserver.crt")).unwrap();

        let done = rotate(dir.path(), &leaves(&["admin".into()]).unwrap(), 1234).unwrap();
        assert_eq!(done.backup, dir.path().join("tls-1234"));
        assert_eq!(done.removed, [tls.join("client-admin.crt")]);
        assert!(!tls.join("client-admin.key").exists());
        assert_eq!(
            std::fs::read(done.backup.join("client-admin.crt")).unwrap(),
            admin
        );
        let key_mode = std::fs::metadata(done.backup.join("etcd/client.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(key_mode & 0o777, 0o600);

        Pki::ensure(dir.path(), &opts).unwrap();
        assert_ne!(std::fs::read(tls.join("client-admin.crt")).unwrap(), admin);
        assert_eq!(std::fs::read(tls.join("client-ca.crt")).unwrap(), ca);
        assert_eq!(
            std::fs::read(tls.join("serving-kube-apiserver.crt")).unwrap(),
            serving
        );
        assert!(rotate(&dir.path().join("nothing"), &[], 1).is_err());
    }
}

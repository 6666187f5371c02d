//! The node password (k3s's `/etc/rancher/node/password`): a random secret this node keeps in
//! `<data-dir>/agent/node-password` and sends with the client certificate request it makes
//! with the join token. The server stores a hash of it in the Secret
//! `<node>.node-password.k3rs` (`kube-system`) at the first join and refuses later joins
//! under the same node name with another password, so the shared join token cannot take over
//! an existing node's identity.
//!
//! # Guarantees
//! - The password is made once (32 random bytes, hex) and kept: a restart or a renewed
//!   identity sends the same one. It is written atomically, mode 0600.
//! - An unreadable or empty file is an error, never silently replaced (a new password would
//!   lock the node out).

use super::files::{self, IoError, Layout};

/// Why the node password is unusable.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// The file could not be read or written.
    #[error(transparent)]
    Io(#[from] IoError),
    /// The file holds no password.
    #[error(
        "{path} is empty or not text: delete it to make a new node password (and delete the \
         node's <node>.node-password.k3rs Secret in kube-system so the server accepts it)"
    )]
    Unreadable {
        /// The file.
        path: std::path::PathBuf,
    },
}

/// The node's password, made and stored on first use.
pub fn ensure(layout: &Layout) -> Result<String, PasswordError> {
    let path = layout.node_password();
    if let Some(bytes) = files::read_optional(&path)? {
        return String::from_utf8(bytes)
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .ok_or(PasswordError::Unreadable { path });
    }
    let password = hex::encode(rand::random::<[u8; 32]>());
    files::write_atomic(&path, format!("{password}\n").as_bytes(), files::PRIVATE)?;
    Ok(password)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn made_once_then_kept() {
        let d = tempfile::tempdir().unwrap();
        let layout = Layout::new(d.path());
        let first = ensure(&layout).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(ensure(&layout).unwrap(), first);
        let mode = std::fs::metadata(layout.node_password())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(ensure(&Layout::new(other.path())).unwrap(), first);
        std::fs::write(layout.node_password(), b"\n").unwrap();
        assert!(matches!(
            ensure(&layout),
            Err(PasswordError::Unreadable { .. })
        ));
    }
}

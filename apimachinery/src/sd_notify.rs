//! systemd's readiness protocol (`sd_notify(3)`): when the service manager sets
//! `NOTIFY_SOCKET`, the service sends newline-separated `KEY=VALUE` assignments (`READY=1`,
//! `STATUS=…`, `STOPPING=1`) as one datagram to that unix socket. A socket name starting with
//! `@` is in the abstract namespace.
//!
//! # Guarantees
//! - Without `NOTIFY_SOCKET` nothing is sent and nothing fails: a process not run by systemd
//!   (or by `Type=simple`) behaves the same.
//! - The variable is left in place, so helpers started later can notify too (k3s does the
//!   same).

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// The environment variable the service manager sets.
pub const ENV: &str = "NOTIFY_SOCKET";

/// Sends `state` (e.g. `"READY=1\nSTATUS=serving"`) to `$NOTIFY_SOCKET`. `Ok(false)` when the
/// variable is unset or empty (not supervised), `Ok(true)` when the datagram was sent.
pub fn notify(state: &str) -> io::Result<bool> {
    let Some(socket) = std::env::var_os(ENV).filter(|v| !v.is_empty()) else {
        return Ok(false);
    };
    let addr = address(&socket.to_string_lossy())?;
    let sock = UnixDatagram::unbound()?;
    sock.send_to_addr(state.as_bytes(), &addr)?;
    Ok(true)
}

/// `READY=1` with a `STATUS=` line; failures are returned for the caller to log.
pub fn ready(status: &str) -> io::Result<bool> {
    notify(&message(&[("READY", "1"), ("STATUS", status)]))
}

/// A `STATUS=` line alone: progress while starting, shown by `systemctl status`.
pub fn status(status: &str) -> io::Result<bool> {
    notify(&message(&[("STATUS", status)]))
}

/// `STOPPING=1` with a `STATUS=` line.
pub fn stopping(status: &str) -> io::Result<bool> {
    notify(&message(&[("STOPPING", "1"), ("STATUS", status)]))
}

/// The datagram for `assignments`: one `KEY=VALUE` per line. Newlines inside a value would
/// start a new assignment, so they become spaces.
pub fn message(assignments: &[(&str, &str)]) -> String {
    assignments
        .iter()
        .map(|(k, v)| format!("{k}={}", v.replace('\n', " ")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The socket address `NOTIFY_SOCKET` names: a path, or `@name` for an abstract socket.
pub fn address(value: &str) -> io::Result<SocketAddr> {
    match value.strip_prefix('@') {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())
        }
        None => SocketAddr::from_pathname(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::linux::net::SocketAddrExt;

    #[test]
    fn message_lines() {
        assert_eq!(
            message(&[("READY", "1"), ("STATUS", "API server\nready")]),
            "READY=1\nSTATUS=API server ready"
        );
    }

    #[test]
    fn addresses() {
        let a = address("@k3rs/notify").unwrap();
        assert_eq!(a.as_abstract_name(), Some(&b"k3rs/notify"[..]));
        let p = address("/run/systemd/notify").unwrap();
        assert_eq!(
            p.as_pathname(),
            Some(std::path::Path::new("/run/systemd/notify"))
        );
    }

    #[test]
    fn sends_one_datagram_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let server = UnixDatagram::bind(&path).unwrap();
        let sock = UnixDatagram::unbound().unwrap();
        let text = message(&[("READY", "1")]);
        sock.send_to_addr(text.as_bytes(), &address(path.to_str().unwrap()).unwrap())
            .unwrap();
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }
}

//! The host's resolvers, and relaying a query to them (CoreDNS's `forward . /etc/resolv.conf`).
//!
//! Which resolvers: the `nameserver`s of `/etc/resolv.conf`; when it lists a loopback stub
//! (systemd-resolved's `127.0.0.53`), those of `/run/systemd/resolve/resolv.conf` instead if it
//! has any (as k3s picks the kubelet's `--resolv-conf`); loopback addresses are never used, so
//! a query can not loop back into a local stub that forwards to the cluster DNS.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use crate::kubelet::plan::parse_resolv_conf;

/// The usual resolv.conf.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";
/// systemd-resolved's list of the real upstream servers.
pub const SYSTEMD_RESOLV_CONF: &str = "/run/systemd/resolve/resolv.conf";

/// How long one upstream may take to answer.
pub const TIMEOUT: Duration = Duration::from_secs(2);

fn servers(text: &str) -> (Vec<SocketAddr>, bool) {
    let mut loopback = false;
    let mut out = Vec::new();
    for s in parse_resolv_conf(text).servers {
        let Ok(ip) = s.split('%').next().unwrap_or_default().parse::<IpAddr>() else {
            continue;
        };
        if ip.is_loopback() {
            loopback = true;
        } else if !ip.is_unspecified() {
            out.push(SocketAddr::new(ip, 53));
        }
    }
    (out, loopback)
}

/// The upstream servers from the texts of `/etc/resolv.conf` and systemd-resolved's file.
pub fn choose(resolv_conf: Option<&str>, systemd: Option<&str>) -> Vec<SocketAddr> {
    let (etc, stub) = servers(resolv_conf.unwrap_or_default());
    if stub {
        let (real, _) = servers(systemd.unwrap_or_default());
        if !real.is_empty() {
            return real;
        }
    }
    etc
}

/// The upstream servers of this host, from `resolv_conf` (default [`RESOLV_CONF`]).
pub fn host(resolv_conf: Option<&std::path::Path>) -> Vec<SocketAddr> {
    let read = |p: &std::path::Path| std::fs::read_to_string(p).ok();
    choose(
        read(resolv_conf.unwrap_or(std::path::Path::new(RESOLV_CONF))).as_deref(),
        read(std::path::Path::new(SYSTEMD_RESOLV_CONF)).as_deref(),
    )
}

/// Why a relay failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No resolver to ask (the node's resolv.conf names none).
    #[error("no upstream resolver")]
    NoUpstream,
    /// Sending to or reading from the resolver failed.
    #[error("upstream {0}: {1}")]
    Io(SocketAddr, #[source] std::io::Error),
    /// The resolver did not answer in time.
    #[error("upstream {0} did not answer in time")]
    Timeout(SocketAddr),
}

async fn udp_once(server: SocketAddr, query: &[u8]) -> Result<Vec<u8>, Error> {
    let io = |e| Error::Io(server, e);
    let local: SocketAddr = match server {
        SocketAddr::V4(_) => "0.0.0.0:0".parse().expect("an address"),
        SocketAddr::V6(_) => "[::]:0".parse().expect("an address"),
    };
    let sock = UdpSocket::bind(local).await.map_err(io)?;
    sock.connect(server).await.map_err(io)?;
    sock.send(query).await.map_err(io)?;
    let mut buf = vec![0u8; 65535];
    loop {
        let n = sock.recv(&mut buf).await.map_err(io)?;
        // Only the reply to this query (same ID).
        if n >= 2 && query.len() >= 2 && buf[..2] == query[..2] {
            buf.truncate(n);
            return Ok(buf);
        }
    }
}

async fn tcp_once(server: SocketAddr, query: &[u8]) -> Result<Vec<u8>, Error> {
    let io = |e| Error::Io(server, e);
    let mut conn = TcpStream::connect(server).await.map_err(io)?;
    let len = u16::try_from(query.len()).unwrap_or(u16::MAX);
    conn.write_all(&len.to_be_bytes()).await.map_err(io)?;
    conn.write_all(query).await.map_err(io)?;
    let mut len = [0u8; 2];
    conn.read_exact(&mut len).await.map_err(io)?;
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    conn.read_exact(&mut buf).await.map_err(io)?;
    Ok(buf)
}

/// Relays `query` to each of `servers` in turn (over TCP if `tcp`) until one answers within
/// `timeout`; the reply comes back unchanged.
pub async fn relay(
    servers: &[SocketAddr],
    query: &[u8],
    tcp: bool,
    timeout: Duration,
) -> Result<Vec<u8>, Error> {
    let mut last = Error::NoUpstream;
    for server in servers {
        let attempt = async {
            if tcp {
                tcp_once(*server, query).await
            } else {
                udp_once(*server, query).await
            }
        };
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(reply)) => return Ok(reply),
            Ok(Err(e)) => last = e,
            Err(_) => last = Error::Timeout(*server),
        }
    }
    Err(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_loopback_stub_defers_to_systemd_resolved_upstreams() {
        let etc = "nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch lan\n";
        let systemd = "# generated\nnameserver 192.168.1.1\nnameserver fd00::1\n";
        assert_eq!(
            choose(Some(etc), Some(systemd)),
            [addr("192.168.1.1:53"), addr("[fd00::1]:53")]
        );
        assert_eq!(choose(Some(etc), None), Vec::<SocketAddr>::new());
        assert_eq!(
            choose(Some("nameserver 127.0.0.1\nnameserver 10.0.0.2\n"), None),
            [addr("10.0.0.2:53")]
        );
    }

    #[test]
    fn a_plain_resolv_conf_is_used_as_is() {
        let etc = "nameserver 10.0.0.2\nnameserver 10.0.0.3\n";
        let systemd = "nameserver 192.168.1.1\n";
        assert_eq!(
            choose(Some(etc), Some(systemd)),
            [addr("10.0.0.2:53"), addr("10.0.0.3:53")]
        );
        assert_eq!(choose(None, None), Vec::<SocketAddr>::new());
    }

    /// A fake upstream on loopback that answers every query with the query's bytes and `!`.
    async fn fake_udp() -> SocketAddr {
        let sock = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let at = sock.local_addr().unwrap();
        tokio::spawn(async move {
            let mut buf = [0u8; 512];
            while let Ok((n, peer)) = sock.recv_from(&mut buf).await {
                let mut reply = buf[..n].to_vec();
                reply.push(b'!');
                let _ = sock.send_to(&reply, peer).await;
            }
        });
        at
    }

    #[tokio::test]
    async fn udp_queries_go_to_the_first_upstream_that_answers() {
        let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let good = fake_udp().await;
        let servers = [silent.local_addr().unwrap(), good];
        let reply = relay(
            &servers,
            b"\x12\x34query",
            false,
            Duration::from_millis(300),
        )
        .await
        .unwrap();
        assert_eq!(reply, b"\x12\x34query!");
    }

    #[tokio::test]
    async fn tcp_queries_are_length_prefixed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut len = [0u8; 2];
            conn.read_exact(&mut len).await.unwrap();
            let mut q = vec![0u8; usize::from(u16::from_be_bytes(len))];
            conn.read_exact(&mut q).await.unwrap();
            q.extend_from_slice(b"-tcp");
            conn.write_all(&(q.len() as u16).to_be_bytes())
                .await
                .unwrap();
            conn.write_all(&q).await.unwrap();
        });
        let reply = relay(&[at], b"\x00\x07q", true, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(reply, b"\x00\x07q-tcp");
    }

    #[tokio::test]
    async fn no_answer_is_an_error() {
        let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let at = silent.local_addr().unwrap();
        let err = relay(&[at], b"\x00\x01q", false, Duration::from_millis(100)).await;
        assert!(matches!(err, Err(Error::Timeout(a)) if a == at), "{err:?}");
        assert!(matches!(
            relay(&[], b"q", false, TIMEOUT).await,
            Err(Error::NoUpstream)
        ));
    }
}

//! The machine's default address.

use std::net::{IpAddr, Ipv4Addr, UdpSocket};

/// The source address of the default route (k3s's default node IP: the default route's
/// interface), found by connecting a UDP socket, which sends nothing; 127.0.0.1 without a
/// default route.
pub fn default_ip() -> IpAddr {
    let routed = UdpSocket::bind("0.0.0.0:0").and_then(|s| {
        // TEST-NET-1: never answered; only the routing decision matters.
        s.connect("192.0.2.1:9")?;
        s.local_addr()
    });
    match routed {
        Ok(a) if !a.ip().is_unspecified() && !a.ip().is_loopback() => a.ip(),
        _ => IpAddr::V4(Ipv4Addr::LOCALHOST),
    }
}

/// This machine's hostname, `localhost` if it cannot be read.
pub fn hostname() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

//! The `flannel.1` VXLAN device, as flannel makes it: VNI 1, UDP port 8472, no learning (the
//! agent writes every FDB and neighbour entry), the node's address as the local tunnel end,
//! bound to the interface holding that address, and an MTU 50 bytes below that interface's
//! (the outer IPv4, UDP and VXLAN headers and the inner Ethernet header). [`step`] decides,
//! without I/O, what to do with the device the kernel has.

use std::net::Ipv4Addr;

use super::plan::Mac;

/// flannel's VNI.
pub const VNI: u32 = 1;
/// flannel's VXLAN port (the Linux default, not IANA's 4789).
pub const PORT: u16 = 8472;
/// What encapsulation costs: outer IPv4 (20) + UDP (8) + VXLAN (8) + inner Ethernet (14).
pub const OVERHEAD: u32 = 50;

/// The device to have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceSpec {
    pub vni: u32,
    pub port: u16,
    /// The local tunnel end (the node's address).
    pub local: Ipv4Addr,
    /// The interface holding `local`.
    pub link: String,
    pub mtu: u32,
}

impl DeviceSpec {
    /// flannel's device for a node at `local` on `link`, whose MTU is `link_mtu`.
    pub fn new(local: Ipv4Addr, link: &str, link_mtu: u32) -> DeviceSpec {
        DeviceSpec {
            vni: VNI,
            port: PORT,
            local,
            link: link.to_string(),
            mtu: link_mtu.saturating_sub(OVERHEAD),
        }
    }
}

/// The device the kernel has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceState {
    /// `None`: a device of that name that is not VXLAN.
    pub vni: Option<u32>,
    pub port: Option<u16>,
    pub local: Option<Ipv4Addr>,
    pub link: Option<String>,
    pub learning: bool,
    pub mtu: u32,
    pub up: bool,
    pub mac: Mac,
}

/// What to do with the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Create,
    /// It exists with other tunnel settings (or is no VXLAN device): delete, then create.
    Recreate,
    /// Right tunnel, but the MTU differs or it is down: set the MTU and bring it up.
    Adjust,
    Keep,
}

/// What turns `current` into `want`.
pub fn step(current: Option<&DeviceState>, want: &DeviceSpec) -> Step {
    let Some(c) = current else {
        return Step::Create;
    };
    let same_tunnel = c.vni == Some(want.vni)
        && c.port == Some(want.port)
        && c.local == Some(want.local)
        && c.link.as_deref() == Some(want.link.as_str())
        && !c.learning;
    if !same_tunnel {
        Step::Recreate
    } else if c.mtu != want.mtu || !c.up {
        Step::Adjust
    } else {
        Step::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> DeviceState {
        DeviceState {
            vni: Some(1),
            port: Some(8472),
            local: Some(Ipv4Addr::new(10, 1, 0, 2)),
            link: Some("eth0".into()),
            learning: false,
            mtu: 1450,
            up: true,
            mac: "02:00:00:00:00:01".parse().unwrap(),
        }
    }

    #[test]
    fn the_device_is_kept_adjusted_or_recreated() {
        let want = DeviceSpec::new(Ipv4Addr::new(10, 1, 0, 2), "eth0", 1500);
        assert_eq!(want.mtu, 1450);
        assert_eq!(step(None, &want), Step::Create);
        assert_eq!(step(Some(&state()), &want), Step::Keep);
        let down = DeviceState {
            up: false,
            ..state()
        };
        assert_eq!(step(Some(&down), &want), Step::Adjust);
        let mtu = DeviceState {
            mtu: 1500,
            ..state()
        };
        assert_eq!(step(Some(&mtu), &want), Step::Adjust);
        let moved = DeviceState {
            local: Some(Ipv4Addr::new(10, 1, 0, 3)),
            ..state()
        };
        assert_eq!(step(Some(&moved), &want), Step::Recreate);
        let learning = DeviceState {
            learning: true,
            ..state()
        };
        assert_eq!(step(Some(&learning), &want), Step::Recreate);
        let not_vxlan = DeviceState {
            vni: None,
            ..state()
        };
        assert_eq!(step(Some(&not_vxlan), &want), Step::Recreate);
    }
}

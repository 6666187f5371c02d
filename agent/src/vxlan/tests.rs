use serde_json::json;

use super::kernel::{Call, FakeOverlay, Interface};
use super::plan::{Action, Fdb, Neighbour, Route, DEVICE};
use super::*;

fn node(name: &str, cidr: &str, ip: &str, mac: &str) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": {
            "flannel.alpha.coreos.com/backend-type": "vxlan",
            "flannel.alpha.coreos.com/backend-data": format!(r#"{{"VNI":1,"VtepMAC":"{mac}"}}"#),
        }},
        "spec": {"podCIDR": cidr},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
    }))
    .unwrap()
}

fn cfg() -> VxlanConfig {
    VxlanConfig {
        node_name: "a".into(),
        node_ip: Some(Ipv4Addr::new(10, 1, 0, 2)),
        cluster_cidr: Some("10.42.0.0/16".parse().unwrap()),
    }
}

fn fake() -> FakeOverlay {
    let fake = FakeOverlay::default();
    fake.interfaces.lock().unwrap().push((
        Ipv4Addr::new(10, 1, 0, 2),
        Interface {
            name: "eth0".into(),
            mtu: 1500,
        },
    ));
    fake
}

#[tokio::test]
async fn the_device_is_created_once_then_kept() {
    let fake = fake();
    let (mac, local) = ensure_device(&fake, &cfg()).await.unwrap();
    assert_eq!(
        (mac.to_string().as_str(), local),
        ("02:00:00:00:00:01", Ipv4Addr::new(10, 1, 0, 2))
    );
    assert_eq!(
        fake.take(),
        [Call::CreateDevice(DeviceSpec {
            vni: 1,
            port: 8472,
            local,
            link: "eth0".into(),
            mtu: 1450,
        })]
    );
    ensure_device(&fake, &cfg()).await.unwrap();
    assert_eq!(fake.take(), []);
    let no_ip = VxlanConfig {
        node_ip: Some(Ipv4Addr::new(10, 9, 9, 9)),
        ..cfg()
    };
    assert!(matches!(
        ensure_device(&fake, &no_ip).await,
        Err(SetupError::NoInterface(_))
    ));
}

#[tokio::test]
async fn entries_follow_the_nodes_as_they_come_and_go() {
    let fake = fake();
    let a = node("a", "10.42.0.0/24", "10.1.0.2", "02:00:00:00:00:01");
    let b = node("b", "10.42.1.0/24", "10.2.0.2", "02:00:00:00:00:0b");
    assert!(sync_entries(&fake, &cfg(), &[a.clone(), b]).await);
    let mac_b = "02:00:00:00:00:0b".parse().unwrap();
    let gw_b = Ipv4Addr::new(10, 42, 1, 0);
    assert_eq!(
        fake.take(),
        [
            Call::Apply(Action::AddAddress("10.42.0.0/32".parse().unwrap())),
            Call::Apply(Action::ReplaceFdb(Fdb {
                mac: mac_b,
                dst: Ipv4Addr::new(10, 2, 0, 2)
            })),
            Call::Apply(Action::ReplaceNeighbour(Neighbour {
                ip: gw_b,
                mac: mac_b
            })),
            Call::Apply(Action::ReplaceRoute(Route {
                dst: "10.42.1.0/24".parse().unwrap(),
                via: gw_b,
                dev: DEVICE.into()
            })),
        ]
    );
    // b moves to another address: only its FDB entry changes.
    let moved = node("b", "10.42.1.0/24", "10.3.0.2", "02:00:00:00:00:0b");
    assert!(sync_entries(&fake, &cfg(), &[a.clone(), moved]).await);
    assert_eq!(
        fake.take(),
        [Call::Apply(Action::ReplaceFdb(Fdb {
            mac: mac_b,
            dst: Ipv4Addr::new(10, 3, 0, 2)
        }))]
    );
    // b goes: its route, neighbour and FDB entry go.
    assert!(sync_entries(&fake, &cfg(), std::slice::from_ref(&a)).await);
    let calls = fake.take();
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(matches!(calls[0], Call::Apply(Action::DeleteRoute(_))));
    assert!(matches!(calls[1], Call::Apply(Action::DeleteNeighbour(_))));
    assert!(matches!(calls[2], Call::Apply(Action::DeleteFdb(_))));
}

#[tokio::test]
async fn nothing_is_routed_before_the_node_has_a_pod_cidr() {
    let fake = fake();
    let mut a = node("a", "10.42.0.0/24", "10.1.0.2", "02:00:00:00:00:01");
    a.spec = None;
    let b = node("b", "10.42.1.0/24", "10.2.0.2", "02:00:00:00:00:0b");
    assert!(sync_entries(&fake, &cfg(), &[a, b]).await);
    assert_eq!(fake.take(), []);
}

#[tokio::test]
async fn pods_get_the_tunnels_mtu() {
    assert_eq!(pod_mtu(&fake(), &cfg()).await, Some(1450));
    let elsewhere = VxlanConfig {
        node_ip: Some(Ipv4Addr::new(10, 9, 9, 9)),
        ..cfg()
    };
    assert_eq!(pod_mtu(&fake(), &elsewhere).await, None);
    let loopback = VxlanConfig {
        node_ip: Some(Ipv4Addr::LOCALHOST),
        ..cfg()
    };
    assert_eq!(pod_mtu(&fake(), &loopback).await, None);
    assert!(matches!(
        ensure_device(&fake(), &loopback).await,
        Err(SetupError::Loopback(_))
    ));
}

use serde_json::json;

use super::*;

const MAC_B: &str = "0a:00:00:00:00:0b";
const MAC_C: &str = "0a:00:00:00:00:0c";

fn node(name: &str, cidr: &str, ip: &str, vtep: Option<&str>) -> Node {
    let annotations = match vtep {
        Some(mac) => json!({
            "flannel.alpha.coreos.com/backend-type": "vxlan",
            "flannel.alpha.coreos.com/backend-data": format!(r#"{{"VNI":1,"VtepMAC":"{mac}"}}"#),
        }),
        None => json!({}),
    };
    serde_json::from_value(json!({
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr]},
        "status": {"addresses": [{"type": "InternalIP", "address": ip}]},
    }))
    .unwrap()
}

fn net(s: &str) -> Ipv4Net {
    s.parse().unwrap()
}

fn mac(s: &str) -> Mac {
    s.parse().unwrap()
}

fn route(dst: &str, via: &str) -> Route {
    Route {
        dst: net(dst),
        via: via.parse().unwrap(),
        dev: DEVICE.into(),
    }
}

fn neigh(ip: &str, m: &str) -> Neighbour {
    Neighbour {
        ip: ip.parse().unwrap(),
        mac: mac(m),
    }
}

fn fdb(m: &str, dst: &str) -> Fdb {
    Fdb {
        mac: mac(m),
        dst: dst.parse().unwrap(),
    }
}

#[test]
fn macs_parse_and_print_in_lower_case() {
    assert_eq!(mac("0A:1b:2C:3d:4E:5f").to_string(), "0a:1b:2c:3d:4e:5f");
    for bad in [
        "",
        "0a:1b:2c:3d:4e",
        "0a:1b:2c:3d:4e:5f:60",
        "0a:1b:2c:3d:4e:5",
        "zz:1b:2c:3d:4e:5f",
    ] {
        assert!(bad.parse::<Mac>().is_err(), "{bad:?}");
    }
}

#[test]
fn each_peer_with_a_vtep_gets_a_route_a_neighbour_and_an_fdb_entry() {
    let mut c = node("c", "10.42.2.0/24", "10.2.0.2", Some(MAC_C));
    c.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(super::annotations::PUBLIC_IP.into(), "192.168.7.7".into());
    let nodes = [
        node("me", "10.42.0.0/24", "10.1.0.2", Some("0a:00:00:00:00:0a")),
        node("b", "10.42.1.0/24", "10.3.0.2", Some(MAC_B)),
        c,
        node("no-vtep-yet", "10.42.3.0/24", "10.4.0.2", None),
        node(
            "outside",
            "192.168.0.0/24",
            "10.5.0.2",
            Some("0a:00:00:00:00:0e"),
        ),
        node("rogue", "0.0.0.0/0", "10.6.0.2", Some("0a:00:00:00:00:0f")),
    ];
    let cluster: IpNet = "10.42.0.0/16".parse().unwrap();
    let want = State {
        addresses: [net("10.42.0.0/32")].into(),
        routes: [
            route("10.42.1.0/24", "10.42.1.0"),
            route("10.42.2.0/24", "10.42.2.0"),
        ]
        .into(),
        neighbours: [neigh("10.42.1.0", MAC_B), neigh("10.42.2.0", MAC_C)].into(),
        fdb: [fdb(MAC_B, "10.3.0.2"), fdb(MAC_C, "192.168.7.7")].into(),
    };
    assert_eq!(
        desired("me", net("10.42.0.0/24"), &nodes, Some(&cluster)),
        want
    );
    // Without a cluster CIDR everything but a default route is routed.
    let all = desired("me", net("10.42.0.0/24"), &nodes, None);
    assert_eq!(all.routes.len(), 3, "{all:?}");
}

#[test]
fn a_node_of_another_backend_is_no_peer() {
    let mut b = node("b", "10.42.1.0/24", "10.3.0.2", Some(MAC_B));
    b.metadata
        .annotations
        .as_mut()
        .unwrap()
        .insert(super::annotations::BACKEND_TYPE.into(), "host-gw".into());
    assert_eq!(peer(&b), None);
    let b = node("b", "10.42.1.0/24", "10.3.0.2", Some(MAC_B));
    assert_eq!(
        peer(&b),
        Some(Peer {
            node: "b".into(),
            pod_cidr: net("10.42.1.0/24"),
            public_ip: "10.3.0.2".parse().unwrap(),
            vtep_mac: mac(MAC_B),
        })
    );
}

#[test]
fn the_plan_orders_adds_before_routes_and_removes_stale_entries_by_key() {
    let desired = State {
        addresses: [net("10.42.0.0/32")].into(),
        routes: [
            route("10.42.1.0/24", "10.42.1.0"),
            route("10.42.2.0/24", "10.42.2.0"),
        ]
        .into(),
        neighbours: [neigh("10.42.1.0", MAC_B), neigh("10.42.2.0", MAC_C)].into(),
        fdb: [fdb(MAC_B, "10.3.0.2"), fdb(MAC_C, "10.9.0.9")].into(),
    };
    let host_gw_leftover = Route {
        dst: net("10.42.2.0/24"),
        via: "10.2.0.2".parse().unwrap(),
        dev: "eth0".into(),
    };
    let current = State {
        addresses: [net("10.42.7.0/32")].into(),
        routes: [
            route("10.42.1.0/24", "10.42.1.0"),
            host_gw_leftover,
            route("10.42.5.0/24", "10.42.5.0"),
        ]
        .into(),
        neighbours: [
            neigh("10.42.1.0", MAC_B),
            neigh("10.42.5.0", "0a:00:00:00:00:05"),
        ]
        .into(),
        fdb: [
            fdb(MAC_B, "10.3.0.2"),
            fdb(MAC_C, "10.2.0.2"),
            fdb("0a:00:00:00:00:05", "10.5.0.2"),
        ]
        .into(),
    };
    assert_eq!(
        plan(&desired, &current),
        vec![
            Action::AddAddress(net("10.42.0.0/32")),
            Action::DeleteAddress(net("10.42.7.0/32")),
            Action::ReplaceFdb(fdb(MAC_C, "10.9.0.9")),
            Action::ReplaceNeighbour(neigh("10.42.2.0", MAC_C)),
            Action::ReplaceRoute(route("10.42.2.0/24", "10.42.2.0")),
            Action::DeleteRoute(route("10.42.5.0/24", "10.42.5.0")),
            Action::DeleteNeighbour(neigh("10.42.5.0", "0a:00:00:00:00:05")),
            Action::DeleteFdb(fdb("0a:00:00:00:00:05", "10.5.0.2")),
        ]
    );
    assert_eq!(plan(&desired, &desired), Vec::new());
}

use super::*;

fn net(s: &str) -> Ipv4Net {
    s.parse().unwrap()
}

const MAC: &str = "fe:e1:a6:65:d8:86";

#[test]
fn iproute2_json_parses() {
    let addrs = br#"[{"ifindex":1,"ifname":"lo","mtu":65536,"flags":["LOOPBACK","UP"],"addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},
        {"ifindex":2,"ifname":"eth0","mtu":1400,"flags":["UP"],"addr_info":[{"family":"inet","local":"10.201.0.2","prefixlen":24}]}]"#;
    assert_eq!(
        parse_interface_of(addrs, "10.201.0.2".parse().unwrap()).unwrap(),
        Some(Interface {
            name: "eth0".into(),
            mtu: 1400
        })
    );
    assert_eq!(
        parse_interface_of(addrs, "10.9.9.9".parse().unwrap()).unwrap(),
        None
    );

    let link = br#"[{"ifindex":3,"ifname":"flannel.1","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1450,"address":"fa:f5:fc:e4:0a:49","linkinfo":{"info_kind":"vxlan","info_data":{"id":1,"local":"10.201.0.2","link":"eth0","port_range":{"low":0,"high":0},"port":8472,"learning":false,"ttl":0}}}]"#;
    assert_eq!(
        parse_device(link).unwrap(),
        Some(DeviceState {
            vni: Some(1),
            port: Some(8472),
            local: Some("10.201.0.2".parse().unwrap()),
            link: Some("eth0".into()),
            learning: false,
            mtu: 1450,
            up: true,
            mac: "fa:f5:fc:e4:0a:49".parse().unwrap(),
        })
    );
    let bridge = br#"[{"ifindex":3,"ifname":"flannel.1","flags":["BROADCAST"],"mtu":1500,"address":"fa:f5:fc:e4:0a:49","linkinfo":{"info_kind":"bridge"}}]"#;
    let d = parse_device(bridge).unwrap().unwrap();
    assert_eq!((d.vni, d.up), (None, false));

    let own = br#"[{"ifindex":3,"ifname":"flannel.1","mtu":1450,"addr_info":[{"family":"inet","local":"10.42.0.0","prefixlen":32},{"family":"inet6","local":"fe80::1","prefixlen":64}]}]"#;
    assert_eq!(parse_addresses(own).unwrap(), vec![net("10.42.0.0/32")]);

    let routes = br#"[{"dst":"10.42.1.0/24","gateway":"10.42.1.0","dev":"flannel.1","flags":["onlink"]},
        {"dst":"10.42.3.0/24","dev":"cni0","flags":[]},{"dst":"10.42.4.0/24","gateway":"10.99.0.4","dev":"eth0"}]"#;
    assert_eq!(
        parse_routes(routes).unwrap(),
        vec![
            Route {
                dst: net("10.42.1.0/24"),
                via: "10.42.1.0".parse().unwrap(),
                dev: DEVICE.into()
            },
            Route {
                dst: net("10.42.4.0/24"),
                via: "10.99.0.4".parse().unwrap(),
                dev: "eth0".into()
            },
        ]
    );

    let neigh = br#"[{"dst":"10.42.1.0","lladdr":"fe:e1:a6:65:d8:86","state":["PERMANENT"]},{"dst":"10.42.9.0","state":["FAILED"]}]"#;
    assert_eq!(
        parse_neighbours(neigh).unwrap(),
        vec![Neighbour {
            ip: "10.42.1.0".parse().unwrap(),
            mac: MAC.parse().unwrap()
        }]
    );

    let fdb =
        br#"[{"mac":"fe:e1:a6:65:d8:86","dst":"10.202.0.2","flags":["self"],"state":"permanent"},
        {"mac":"33:33:00:00:00:01","flags":["self"],"state":"permanent"}]"#;
    assert_eq!(
        parse_fdb(fdb).unwrap(),
        vec![Fdb {
            mac: MAC.parse().unwrap(),
            dst: "10.202.0.2".parse().unwrap()
        }]
    );
    assert_eq!(parse_fdb(b"\n").unwrap(), Vec::new());
    assert!(parse_fdb(b"{").is_err());
}

#[test]
fn each_action_is_one_iproute2_command() {
    let mac: Mac = MAC.parse().unwrap();
    let line = |a: Action| {
        let (program, args) = command(&a);
        format!("{program} {}", args.join(" "))
    };
    let route = Route {
        dst: net("10.42.1.0/24"),
        via: "10.42.1.0".parse().unwrap(),
        dev: DEVICE.into(),
    };
    assert_eq!(
        line(Action::AddAddress(net("10.42.0.0/32"))),
        "ip addr add 10.42.0.0/32 dev flannel.1"
    );
    assert_eq!(
        line(Action::ReplaceFdb(Fdb {
            mac,
            dst: "10.202.0.2".parse().unwrap()
        })),
        "bridge fdb replace fe:e1:a6:65:d8:86 dev flannel.1 dst 10.202.0.2 self permanent"
    );
    assert_eq!(
        line(Action::ReplaceNeighbour(Neighbour {
            ip: "10.42.1.0".parse().unwrap(),
            mac
        })),
        "ip neigh replace 10.42.1.0 lladdr fe:e1:a6:65:d8:86 dev flannel.1 nud permanent"
    );
    assert_eq!(
        line(Action::ReplaceRoute(route.clone())),
        "ip -4 route replace 10.42.1.0/24 via 10.42.1.0 dev flannel.1 onlink proto 75"
    );
    assert_eq!(
        line(Action::DeleteRoute(route)),
        "ip -4 route del 10.42.1.0/24 via 10.42.1.0 dev flannel.1 proto 75"
    );
    assert_eq!(
        line(Action::DeleteNeighbour(Neighbour {
            ip: "10.42.1.0".parse().unwrap(),
            mac
        })),
        "ip neigh del 10.42.1.0 dev flannel.1"
    );
    assert_eq!(
        line(Action::DeleteFdb(Fdb {
            mac,
            dst: "10.202.0.2".parse().unwrap()
        })),
        "bridge fdb del fe:e1:a6:65:d8:86 dev flannel.1 dst 10.202.0.2 self"
    );
}

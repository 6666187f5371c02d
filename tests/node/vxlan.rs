//! The VXLAN overlay across a router: `k3rs server` (with its embedded agent) and `k3rs agent`
//! in two network namespaces on different subnets, joined only through a router namespace
//! (no shared layer 2). With the default backend (vxlan) each node publishes its VTEP in
//! flannel's annotations and has `flannel.1` with a route, a permanent neighbour and an FDB
//! entry for the other; a pod on one node reaches a pod on the other (keeping its source
//! address) and a Service whose only endpoint is on the other. With host-gw in the same
//! topology the route is refused with a Warning Event on the node, not black-holed.
//!
//! As root, with the images of `scripts/build-images.sh`; missing prerequisites fail the test.

use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::common;
use crate::common::kubectl::{json, Kubectl};
use crate::common::node_lab::NodeLab;
use crate::common::two_node_lab::{curl, run, running_pod, TwoNodeLab, TwoNodes, A, B};

const WEB: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/hostname: gw-b}
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: docker.io/library/busybox:1.35
        command:
        - sh
        - -c
        - |
          mkdir -p /www/cgi-bin && hostname > /www/index.html
          printf '#!/bin/sh\necho Content-Type: text/plain\necho\necho "$REMOTE_ADDR"\n' > /www/cgi-bin/ip
          chmod +x /www/cgi-bin/ip
          exec httpd -f -p 80 -h /www
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 8080, targetPort: 80}]
"#;

/// A pod on gw-a fetching, every second, the Service (`/www/svc`) and the web pod's
/// `/cgi-bin/ip` straight (`/www/direct`: the source address the web pod saw); it serves
/// what it fetched on port 80.
fn client(service_ip: &str, web_ip: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: client}}
spec:
  nodeSelector: {{kubernetes.io/hostname: gw-a}}
  terminationGracePeriodSeconds: 1
  containers:
  - name: fetch
    image: docker.io/library/busybox:1.35
    command:
    - sh
    - -c
    - |
      mkdir -p /www && httpd -p 80 -h /www
      while true; do
        printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 {service_ip} 8080 > /www/svc.tmp 2>&1
        mv /www/svc.tmp /www/svc
        printf 'GET /cgi-bin/ip HTTP/1.0\r\n\r\n' | nc -w 2 {web_ip} 80 > /www/direct.tmp 2>&1
        mv /www/direct.tmp /www/direct
        sleep 1
      done
"#
    )
}

/// `ip -n <ns> <args>` (or `bridge`), its stdout.
fn ip_in(program: &str, lab: &NodeLab, args: &[&str]) -> String {
    run(Command::new(program).args(["-n", &lab.netns]).args(args))
}

fn cidr(n: &Value) -> String {
    n["spec"]["podCIDR"]
        .as_str()
        .expect("a pod CIDR")
        .to_string()
}

/// The pod CIDR's network address (`10.42.1.0/24` → `10.42.1.0`).
fn network(cidr: &str) -> &str {
    cidr.split('/').next().unwrap()
}

/// The VTEP MAC node `name` published, once both its flannel annotations are there.
fn published_vtep(k: &Kubectl, name: &str, public_ip: &str) -> Option<String> {
    let n = json(k, &["get", "node", name, "-o", "json"]);
    let a = &n["metadata"]["annotations"];
    if a["flannel.alpha.coreos.com/backend-type"] != "vxlan"
        || a["flannel.alpha.coreos.com/public-ip"] != public_ip
    {
        return None;
    }
    let data: Value =
        serde_json::from_str(a["flannel.alpha.coreos.com/backend-data"].as_str()?).ok()?;
    assert_eq!(data["VNI"], 1, "{data}");
    data["VtepMAC"].as_str().map(str::to_string)
}

#[test]
fn pods_and_services_cross_a_router_over_vxlan() {
    let lab = TwoNodeLab::routed("vx");
    lab.a.inside(|| vxlan_scenario(&lab));
}

fn vxlan_scenario(lab: &TwoNodeLab) {
    // The default backend.
    let TwoNodes {
        mut server,
        k,
        mut agent,
        node_a,
        node_b,
    } = lab.start(&[]);
    let (lab_a, lab_b) = (&lab.a, &lab.b);
    let (cidr_a, cidr_b) = (cidr(&node_a), cidr(&node_b));
    assert_ne!(cidr_a, cidr_b);

    // Each node publishes the MAC of its flannel.1 (VNI 1, port 8472, no learning, local =
    // node address, MTU 50 below the veth's, its pod CIDR's .0/32).
    for (lab, node, ip, cidr) in [(lab_a, A, lab.a_ip, &cidr_a), (lab_b, B, lab.b_ip, &cidr_b)] {
        let mac = common::wait_for(
            &format!("{node}'s VTEP annotations"),
            Duration::from_secs(30),
            || published_vtep(&k, node, ip),
        );
        let dev: Value = serde_json::from_str(&ip_in(
            "ip",
            lab,
            &["-j", "-d", "addr", "show", "dev", "flannel.1"],
        ))
        .unwrap();
        let dev = &dev[0];
        assert_eq!(dev["address"], mac.as_str(), "{dev}");
        assert_eq!(dev["mtu"], 1450, "{dev}");
        let vxlan = &dev["linkinfo"]["info_data"];
        assert_eq!(
            (
                &vxlan["id"],
                &vxlan["port"],
                &vxlan["learning"],
                &vxlan["local"]
            ),
            (
                &Value::from(1),
                &Value::from(8472),
                &Value::from(false),
                &Value::from(ip)
            ),
            "{dev}"
        );
        // The keeper adds the address once it sees its node's pod CIDR, which may come
        // after the annotations.
        let own = format!("{}/32", network(cidr));
        common::wait_for(
            &format!("{own} on {node}'s flannel.1"),
            Duration::from_secs(30),
            || {
                let addrs = ip_in("ip", lab, &["-4", "addr", "show", "dev", "flannel.1"]);
                addrs.contains(&own).then_some(())
            },
        );
    }

    // A has a route, a permanent neighbour and an FDB entry for B's VTEP, and B for A's.
    let mac_a = published_vtep(&k, A, lab.a_ip).unwrap();
    let mac_b = published_vtep(&k, B, lab.b_ip).unwrap();
    for (lab, cidr, mac, ip) in [
        (lab_a, &cidr_b, &mac_b, lab.b_ip),
        (lab_b, &cidr_a, &mac_a, lab.a_ip),
    ] {
        let gw = network(cidr);
        common::wait_for(
            &format!("{}'s entries for {cidr}", lab.netns),
            Duration::from_secs(30),
            || {
                let routes = ip_in("ip", lab, &["route", "show", "proto", "75"]);
                let neigh = ip_in(
                    "ip",
                    lab,
                    &["neigh", "show", "dev", "flannel.1", "nud", "permanent"],
                );
                let fdb = ip_in("bridge", lab, &["fdb", "show", "dev", "flannel.1"]);
                (routes.contains(&format!("{cidr} via {gw} dev flannel.1 onlink"))
                    && neigh.contains(&format!("{gw} lladdr {mac} PERMANENT"))
                    && fdb.contains(&format!("{mac} dst {ip} self permanent")))
                .then_some(())
            },
        );
    }

    k.ok_stdin(&["apply", "-f", "-"], Some(WEB));
    let svc = json(&k, &["get", "service", "web", "-o", "json"]);
    let service_ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
    let web = common::wait_for(
        "the web pod running on gw-b",
        Duration::from_secs(120),
        || {
            server.assert_running();
            agent.assert_running();
            running_pod(&k, "web-")
        },
    );
    assert_eq!(web["spec"]["nodeName"], B);
    let web_name = web["metadata"]["name"].as_str().unwrap().to_string();
    let web_ip = web["status"]["podIP"].as_str().unwrap().to_string();
    // gw-a's host reaches the pod on gw-b through the overlay.
    let page = common::wait_for(
        &format!("GET http://{web_ip}/ from gw-a"),
        Duration::from_secs(30),
        || curl(&format!("http://{web_ip}/")),
    );
    assert_eq!(page, web_name);

    k.ok_stdin(&["apply", "-f", "-"], Some(&client(&service_ip, &web_ip)));
    let client = common::wait_for(
        "the client pod running on gw-a",
        Duration::from_secs(120),
        || running_pod(&k, "client"),
    );
    assert_eq!(client["spec"]["nodeName"], A);
    let client_ip = client["status"]["podIP"].as_str().unwrap().to_string();
    // Pods get the tunnel's MTU.
    let mtu = k.ok(&["exec", "client", "--", "cat", "/sys/class/net/eth0/mtu"]);
    assert_eq!(mtu.trim(), "1450");
    // Pod to pod across the router, unmasqueraded: the web pod sees the client pod's address.
    let direct = common::wait_for(
        "the client's direct fetch from the web pod",
        Duration::from_secs(60),
        || curl(&format!("http://{client_ip}/direct")).filter(|o| o.contains("200 OK")),
    );
    // busybox httpd listens on IPv6 and prints v4 peers as `[::ffff:a.b.c.d]`.
    let seen = |l: &str| {
        let l = l.trim();
        l.strip_prefix("[::ffff:")
            .and_then(|a| a.strip_suffix(']'))
            .unwrap_or(l)
            .to_string()
    };
    assert!(
        direct.lines().any(|l| seen(l) == client_ip),
        "the web pod saw another source than {client_ip}: {direct}"
    );
    // Pod to Service (ClusterIP) whose only endpoint is on the other node.
    let out = common::wait_for(
        "the client's fetch through the Service",
        Duration::from_secs(60),
        || curl(&format!("http://{client_ip}/svc")).filter(|o| o.contains(&web_name)),
    );
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");

    // B goes: A drops its route, neighbour and FDB entry for it.
    agent.terminate(Duration::from_secs(20));
    k.ok(&["delete", "node", B]);
    let gw_b = network(&cidr_b).to_string();
    common::wait_for("A's entries for B removed", Duration::from_secs(30), || {
        let routes = ip_in("ip", lab_a, &["route", "show", "proto", "75"]);
        let neigh = ip_in(
            "ip",
            lab_a,
            &["neigh", "show", "dev", "flannel.1", "nud", "permanent"],
        );
        let fdb = ip_in("bridge", lab_a, &["fdb", "show", "dev", "flannel.1"]);
        (!routes.contains(&cidr_b) && !neigh.contains(&gw_b) && !fdb.contains(&mac_b)).then_some(())
    });
}

#[test]
fn host_gw_refuses_a_peer_behind_a_router() {
    let lab = TwoNodeLab::routed("hg");
    lab.a.inside(|| host_gw_scenario(&lab));
}

fn host_gw_scenario(lab: &TwoNodeLab) {
    let host_gw = ["--flannel-backend", "host-gw"];
    let TwoNodes {
        server: _server,
        k,
        mut agent,
        node_b,
        ..
    } = lab.start_with(&host_gw, &host_gw);
    let cidr_b = cidr(&node_b);
    // A Warning Event on each node names the peer it cannot route, and why.
    for (node, peer, peer_ip) in [(A, B, lab.b_ip), (B, A, lab.a_ip)] {
        let event = common::wait_for(
            &format!("the HostGwRouteRefused Event on {node}"),
            Duration::from_secs(60),
            || {
                agent.assert_running();
                let events = json(&k, &["get", "events", "-n", "default", "-o", "json"]);
                events["items"]
                    .as_array()?
                    .iter()
                    .find(|e| {
                        e["reason"] == "HostGwRouteRefused"
                            && e["involvedObject"]["kind"] == "Node"
                            && e["involvedObject"]["name"] == node
                    })
                    .cloned()
            },
        );
        assert_eq!(event["type"], "Warning", "{event}");
        let message = event["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("node {peer}'s pod CIDR"))
                && message.contains(peer_ip)
                && message.contains("--flannel-backend=vxlan"),
            "{message}"
        );
    }
    // No route to B's pods: neither via B's address nor any other.
    let routes = ip_in("ip", &lab.a, &["route", "show", "proto", "75"]);
    assert!(!routes.contains(&cidr_b), "{routes}");
    let links = ip_in("ip", &lab.a, &["link", "show"]);
    assert!(
        !links.contains("flannel.1"),
        "host-gw makes no VXLAN device: {links}"
    );
}

#[test]
fn wireguard_native_is_refused_at_start() {
    NodeLab::run("wg", |lab| {
        let out = Command::new("timeout")
            .arg("60")
            .arg(env!("CARGO_BIN_EXE_k3rs"))
            .args(["server", "--data-dir"])
            .arg(lab.scratch.path().join("data"))
            .args(["--flannel-backend", "wireguard-native"])
            .env("K3RS_CONFIG_FILE", "/dev/null")
            .output()
            .expect("k3rs server");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("--flannel-backend=wireguard-native") && stderr.contains("use vxlan"),
            "{stderr}"
        );
        // The probe link, if the kernel made one, is gone.
        let links = ip_in("ip", lab, &["link", "show"]);
        assert!(!links.contains("k3rs-wgprobe"), "{links}");
    });
}

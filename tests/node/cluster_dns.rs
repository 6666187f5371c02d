//! Cluster DNS end to end: `k3rs server` with its embedded agent answers DNS on the node IP,
//! the server's `kube-dns` Service (10.43.0.10) lists that node, and a busybox pod whose
//! resolv.conf the kubelet wrote (ClusterFirst) resolves `kubernetes.default` and a Service
//! through its search list, Service names, a
//! headless Service's pods, a StatefulSet pod's hostname, SRV and PTR records through the
//! service proxy, while an unknown name under `cluster.local` is NXDOMAIN. Names outside the
//! cluster are relayed to the node's resolvers (`--kubelet-arg resolv-conf`, here a small
//! resolver the test runs) for pods, while a source outside the cluster's networks (a second
//! namespace the test makes) is REFUSED, for outside and cluster names alike.
//!
//! As root, inside a network namespace the test makes (a veth pair carries the node IP,
//! no route out), with the images of `scripts/build-images.sh`. The pod runs its lookups in a
//! loop and serves the outputs over httpd; the test reads them with curl.

use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::{json, Kubectl};
use crate::common::node_lab::{NodeLab, FAST_STATUS};
use serde_json::Value;

const NODE: &str = "dns-1";
const NODE_IP: &str = "10.99.0.1";
/// The node's (only) upstream resolver: [`fake_upstream`].
const UPSTREAM_IP: &str = "10.99.0.2";
/// What the upstream answers for every A question.
const OUTSIDE_ANSWER: [u8; 4] = [192, 0, 2, 7];
/// The source outside the cluster, in its own namespace.
const STRANGER_IP: &str = "10.98.0.2";

const WORKLOAD: &str = r#"
apiVersion: v1
kind: Service
metadata: {name: db}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: db}
  ports: [{name: http, port: 8080, targetPort: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: docker.io/library/busybox:1.35
        command: [sh, -c, "mkdir -p /www && hostname > /www/index.html && exec httpd -f -p 80 -h /www"]
---
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: lookups
    image: docker.io/library/busybox:1.35
    command:
    - sh
    - -c
    - |
      mkdir -p /www && cp /etc/resolv.conf /www/resolv.conf
      q() { f=$1; shift; nslookup "$@" > /www/$f.tmp 2>&1; echo "rc=$?" >> /www/$f.tmp; mv /www/$f.tmp /www/$f; }
      httpd -p 80 -h /www
      while true; do
        q kubernetes kubernetes.default.svc.cluster.local
        nc -w 2 kubernetes.default 443 < /dev/null > /www/short.tmp 2>&1; echo "rc=$?" >> /www/short.tmp; mv /www/short.tmp /www/short
        printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 web 8080 > /www/web.tmp 2>&1; echo "rc=$?" >> /www/web.tmp; mv /www/web.tmp /www/web
        q webfqdn web.default.svc.cluster.local
        q db db.default.svc.cluster.local
        q db0 db-0.db.default.svc.cluster.local
        q srv -type=srv _http._tcp.web.default.svc.cluster.local
        q ptr 10.43.0.1
        q nope nope.default.svc.cluster.local
        q outside outside.example.com
        sleep 1
      done
"#;

fn curl(url: &str) -> Option<String> {
    let out = Command::new("curl")
        .args(["-sf", "--max-time", "2", url])
        .output()
        .expect("curl");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).to_string())
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A resolver at `addr:53` that answers every A question with [`OUTSIDE_ANSWER`] (and other
/// types with no records) until `stop` is set.
fn fake_upstream(
    addr: &str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    let sock = std::net::UdpSocket::bind((addr, 53)).expect("bind the fake upstream");
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                continue;
            };
            // Header (12 bytes) and one question: name, type (2), class (2).
            let Some(end) = buf[12..n].iter().position(|b| *b == 0).map(|p| 12 + p + 5) else {
                continue;
            };
            if end > n {
                continue;
            }
            let is_a = buf[end - 4..end - 2] == [0, 1];
            let mut reply = buf[..end].to_vec();
            reply[2] = 0x81; // QR, RD
            reply[3] = 0x80; // RA, NOERROR
            reply[6..8].copy_from_slice(&[0, u8::from(is_a)]); // ANCOUNT
            reply[8..12].fill(0);
            if is_a {
                // The question's name (pointer), A, IN, TTL 60, 4 bytes.
                reply.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4]);
                reply.extend_from_slice(&OUTSIDE_ANSWER);
            }
            let _ = sock.send_to(&reply, peer);
        }
    })
}

/// A network namespace outside the cluster, joined to the lab by a veth pair; removed on drop.
struct Stranger {
    ns: String,
}

impl Stranger {
    fn new() -> Stranger {
        let ns = format!("{}-out", common::netns::unique_prefix());
        ip(&["netns", "add", &ns]);
        let s = Stranger { ns };
        ip(&[
            "link", "add", "dnso0", "type", "veth", "peer", "name", "dnso1", "netns", &s.ns,
        ]);
        ip(&["addr", "add", "10.98.0.1/24", "dev", "dnso0"]);
        ip(&["link", "set", "dnso0", "up"]);
        let inside = |args: &[&str]| {
            let mut all = vec!["-n", s.ns.as_str()];
            all.extend_from_slice(args);
            ip(&all);
        };
        inside(&["addr", "add", &format!("{STRANGER_IP}/24"), "dev", "dnso1"]);
        inside(&["link", "set", "dnso1", "up"]);
        inside(&["link", "set", "lo", "up"]);
        inside(&["route", "add", "default", "via", "10.98.0.1"]);
        s
    }

    /// `busybox nslookup name server` from the stranger's namespace: its output.
    fn lookup(&self, name: &str, server: &str) -> String {
        let busybox = common::require_program("busybox", "busybox-static");
        let out = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.ns))
            .arg(busybox)
            .args(["timeout", "10", "nslookup", name, server])
            .output()
            .expect("nsenter busybox nslookup");
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).status();
    }
}

#[test]
fn pods_resolve_cluster_names_through_the_embedded_dns() {
    NodeLab::run("dns", scenario);
}

fn wait_ready(server: &mut common::K3rs, k: &Kubectl) {
    common::wait_for("the node to be Ready", Duration::from_secs(120), || {
        server.assert_running();
        let n = json(k, &["get", "node", NODE, "-o", "json"]);
        n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
            .then_some(())
    });
}

fn scenario(lab: &NodeLab) {
    // The node IP on a veth pair inside the lab (no dummy module on every host).
    ip(&[
        "link", "add", "dns0", "type", "veth", "peer", "name", "dns1",
    ]);
    ip(&["addr", "add", &format!("{NODE_IP}/24"), "dev", "dns0"]);
    ip(&["link", "set", "dns0", "up"]);
    ip(&["link", "set", "dns1", "up"]);
    ip(&["addr", "add", &format!("{UPSTREAM_IP}/32"), "dev", "dns1"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let upstream = fake_upstream(UPSTREAM_IP, stop.clone());
    let resolv = tempfile::tempdir().unwrap();
    let resolv_conf = resolv.path().join("resolv.conf");
    std::fs::write(&resolv_conf, format!("nameserver {UPSTREAM_IP}\n")).unwrap();
    let resolv_arg = format!("resolv-conf={}", resolv_conf.display());
    let mut args = FAST_STATUS.to_vec();
    args.extend_from_slice(&["--kubelet-arg", &resolv_arg]);
    let (mut server, k) = lab.start_server(NODE, NODE_IP, &args, &[]);
    wait_ready(&mut server, &k);

    // The server's kube-dns Service sits at the cluster DNS address and lists the node.
    let svc = json(
        &k,
        &[
            "get",
            "service",
            "kube-dns",
            "-n",
            "kube-system",
            "-o",
            "json",
        ],
    );
    assert_eq!(svc["spec"]["clusterIP"], "10.43.0.10");
    assert!(svc["spec"]["selector"].is_null(), "selector-less: {svc}");
    let node = json(&k, &["get", "node", NODE, "-o", "json"]);
    assert_eq!(node["metadata"]["labels"]["k3rs.io/cluster-dns-port"], "53");
    let slice = common::wait_for("the kube-dns endpoints", Duration::from_secs(30), || {
        let s = json(
            &k,
            &[
                "get",
                "endpointslices",
                "-n",
                "kube-system",
                "-l",
                "kubernetes.io/service-name=kube-dns",
                "-o",
                "json",
            ],
        );
        let items = s["items"].as_array().cloned().unwrap_or_default();
        items
            .into_iter()
            .find(|s| !s["endpoints"].as_array().is_none_or(|e| e.is_empty()))
    });
    assert_eq!(
        slice["endpoints"][0]["addresses"],
        serde_json::json!([NODE_IP])
    );
    assert_eq!(slice["endpoints"][0]["nodeName"], NODE);
    let ports: Vec<(String, String, i64)> = slice["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().into(),
                p["protocol"].as_str().unwrap().into(),
                p["port"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ports,
        [
            ("dns".into(), "UDP".into(), 53),
            ("dns-tcp".into(), "TCP".into(), 53)
        ]
    );
    let eps = json(
        &k,
        &[
            "get",
            "endpoints",
            "kube-dns",
            "-n",
            "kube-system",
            "-o",
            "json",
        ],
    );
    assert_eq!(eps["subsets"][0]["addresses"][0]["ip"], NODE_IP);

    k.ok_stdin(&["apply", "-f", "-"], Some(WORKLOAD));
    let pods: Vec<Value> = common::wait_for(
        "db-0, db-1 and client running",
        Duration::from_secs(120),
        || {
            server.assert_running();
            let p = json(&k, &["get", "pods", "-o", "json"]);
            let items = p["items"].as_array().cloned().unwrap_or_default();
            (items.len() == 3
                && items
                    .iter()
                    .all(|p| p["status"]["podIP"].is_string() && p["status"]["phase"] == "Running"))
            .then_some(items)
        },
    );
    let pod_ip = |name: &str| -> String {
        pods.iter()
            .find(|p| p["metadata"]["name"] == name)
            .and_then(|p| p["status"]["podIP"].as_str())
            .unwrap_or_else(|| panic!("{name} has no IP"))
            .to_string()
    };
    let (client, db0, db1) = (pod_ip("client"), pod_ip("db-0"), pod_ip("db-1"));
    let web = json(&k, &["get", "service", "web", "-o", "json"]);
    let web_ip = web["spec"]["clusterIP"].as_str().unwrap().to_string();
    assert_ne!(web_ip, "10.43.0.10", "the cluster DNS address is reserved");

    let resolv = common::wait_for("the client's resolv.conf", Duration::from_secs(30), || {
        curl(&format!("http://{client}/resolv.conf"))
    });
    assert!(resolv.contains("nameserver 10.43.0.10"), "{resolv}");
    assert!(
        resolv.contains("search default.svc.cluster.local svc.cluster.local cluster.local"),
        "{resolv}"
    );

    // Each lookup: wait until it succeeds (the first ones may run before the pods are
    // endpoints), then check the exact addresses.
    let lookup = |file: &str, what: &str, ok: &dyn Fn(&str) -> bool| -> String {
        let mut last = String::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(out) = curl(&format!("http://{client}/{file}")) {
                if ok(&out) {
                    return out;
                }
                last = out;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: no good answer within 60 s; last output:\n{last}\nserver log:\n{}",
                common::log_tail(&server.log_path(), 40)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    let answered = |out: &str| out.contains("rc=0");
    let out = lookup("kubernetes", "kubernetes.default.svc.cluster.local", &|o| {
        answered(o) && o.contains("Address: 10.43.0.1")
    });
    assert!(
        out.contains("Name:\tkubernetes.default.svc.cluster.local"),
        "{out}"
    );
    // Short names go through the search list of the pod's resolv.conf (glibc's resolver in
    // busybox nc; busybox nslookup does not search): nc names the address it connects to,
    // and is quiet when the connection succeeds.
    let out = lookup("short", "kubernetes.default (search list)", &|o| {
        o.contains("(10.43.0.1)") || o.contains("rc=0")
    });
    assert!(!out.contains("bad address"), "{out}");
    // `web`, through the search list and the Service, answers with a db pod's hostname.
    let out = lookup("web", "GET web:8080 (search list, Service)", &|o| {
        o.contains("db-")
    });
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    lookup("webfqdn", "web.default.svc.cluster.local", &|o| {
        answered(o) && o.contains(&format!("Address: {web_ip}"))
    });
    let out = lookup("db", "the headless service", &|o| {
        answered(o)
            && o.contains(&format!("Address: {db0}"))
            && o.contains(&format!("Address: {db1}"))
    });
    assert!(
        !out.contains(&web_ip),
        "a headless service has no cluster IP: {out}"
    );
    lookup("db0", "db-0.db", &|o| {
        answered(o) && o.contains(&format!("Address: {db0}"))
    });
    let out = lookup("srv", "SRV of the named port", &|o| {
        answered(o) && o.contains("web.default.svc.cluster.local")
    });
    assert!(out.contains("8080"), "{out}");
    let out = lookup("ptr", "PTR of the kubernetes service", &|o| {
        answered(o) && o.contains("kubernetes.default.svc.cluster.local")
    });
    assert!(out.contains("1.0.43.10.in-addr.arpa"), "{out}");
    let out = lookup("nope", "an unknown name", &|o| o.contains("rc="));
    assert!(out.contains("NXDOMAIN"), "{out}");
    assert!(out.contains("rc=1"), "{out}");

    // Outside names: relayed for the pod; refused to a stranger, as are cluster names.
    lookup("outside", "outside.example.com from a pod", &|o| {
        answered(o) && o.contains("Address: 192.0.2.7")
    });
    let stranger = Stranger::new();
    for name in [
        "outside.example.com",
        "kubernetes.default.svc.cluster.local",
    ] {
        let out = stranger.lookup(name, NODE_IP);
        assert!(out.contains("REFUSED"), "{name} from {STRANGER_IP}: {out}");
        assert!(
            !out.contains("192.0.2.7") && !out.contains("10.43.0.1"),
            "{out}"
        );
    }
    drop(stranger);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    upstream.join().unwrap();
}

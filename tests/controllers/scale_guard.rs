//! The scale regression guard (issue 23): one Deployment of 1,000 pods on 100 hollow nodes,
//! created as users create pods (the ReplicaSet controller makes them, the scheduler binds
//! them, the hollow kubelets run them). It checks the work completes within a generous bound,
//! so that a quadratic loop shows up as a timeout rather than a silent slowdown, and prints
//! its figures (durations and the server's RSS); nothing here is a timed assertion.

use std::time::{Duration, Instant};

use crate::common::hollow::HollowAgent;
use crate::common::kubectl::Kubectl;
use crate::common::stats::rss_mib;
use crate::common::wait_for;

const NODES: usize = 100;
const PODS: usize = 1_000;
const PREFIX: &str = "scale-";

fn deployment() -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: scale, namespace: default}}
spec:
  replicas: {PODS}
  selector: {{matchLabels: {{app: scale}}}}
  template:
    metadata: {{labels: {{app: scale}}}}
    spec:
      containers:
      - name: c
        image: registry.k8s.io/pause:3.10
        resources: {{requests: {{cpu: 100m, memory: 100Mi}}}}
"
    )
}

/// `jsonpath` output of `kubectl get <args>`, `None` when kubectl fails.
fn get(k: &Kubectl, args: &[&str], path: &str) -> Option<String> {
    let arg = format!("jsonpath={path}");
    let mut all = vec!["get"];
    all.extend(args);
    all.extend(["-o", &arg]);
    let out = k.run(&all);
    out.ok.then_some(out.stdout)
}

#[test]
fn a_deployment_of_1000_pods_on_100_hollow_nodes_completes() {
    let (mut server, k) = Kubectl::start_server(&[]);
    let pid = server.pid();
    let rss = || pid.map_or(f64::NAN, rss_mib);
    let started = Instant::now();
    let mut agent = HollowAgent::start(&k.kubeconfig, NODES, PREFIX, &[]);
    wait_for("100 Ready hollow nodes", Duration::from_secs(300), || {
        agent.proc.assert_running();
        std::thread::sleep(Duration::from_secs(1));
        let ready = get(
            &k,
            &["nodes"],
            r#"{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}"#,
        )?;
        (ready.lines().filter(|s| *s == "True").count() >= NODES).then_some(())
    });
    let nodes_ready = started.elapsed();
    let nodes_rss = rss();

    // The node IPAM controller sets the ranges of many joining nodes concurrently: each node
    // gets a /24 of the cluster CIDR, and no two the same.
    let cidrs = wait_for("a podCIDR on every node", Duration::from_secs(120), || {
        let out = get(
            &k,
            &["nodes"],
            r#"{range .items[*]}{.spec.podCIDR}{"\n"}{end}"#,
        )?;
        let cidrs: Vec<String> = out
            .lines()
            .filter(|c| !c.is_empty())
            .map(str::to_string)
            .collect();
        (cidrs.len() >= NODES).then_some(cidrs)
    });
    let distinct: std::collections::BTreeSet<&String> = cidrs.iter().collect();
    assert_eq!(
        distinct.len(),
        cidrs.len(),
        "a range given twice: {cidrs:?}"
    );
    for c in &cidrs {
        assert!(
            c.starts_with("10.42.") && c.ends_with(".0/24"),
            "{c} is not a /24 of 10.42.0.0/16"
        );
    }

    k.ok_stdin(&["apply", "-f", "-"], Some(&deployment()));
    let created = Instant::now();
    wait_for(
        "1,000 available replicas",
        Duration::from_secs(1_200),
        || {
            server.assert_running();
            agent.proc.assert_running();
            std::thread::sleep(Duration::from_secs(2));
            let available = get(&k, &["deployment", "scale"], "{.status.availableReplicas}")?;
            (available.parse::<usize>().ok()? >= PODS).then_some(())
        },
    );
    let available = created.elapsed();
    let pods_rss = rss();

    // Every pod is Running on a hollow node.
    let pods = get(
        &k,
        &["pods", "-l", "app=scale"],
        r#"{range .items[*]}{.spec.nodeName} {.status.phase}{"\n"}{end}"#,
    )
    .expect("list the pods");
    let rows: Vec<&str> = pods.lines().collect();
    assert_eq!(rows.len(), PODS, "{pods}");
    for row in &rows {
        let (node, phase) = row.split_once(' ').unwrap_or((row, ""));
        assert!(node.starts_with(PREFIX) && phase == "Running", "{row}");
    }

    println!(
        "scale guard: {NODES} hollow nodes Ready after {:.1} s (server {nodes_rss:.0} MiB); \
         {PODS} pods of one Deployment available after {:.1} s (server {pods_rss:.0} MiB, \
         {:.0} KiB per pod)",
        nodes_ready.as_secs_f64(),
        available.as_secs_f64(),
        (pods_rss - nodes_rss) * 1024.0 / PODS as f64,
    );
}

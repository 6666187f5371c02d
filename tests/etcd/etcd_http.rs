//! The HTTP endpoints etcd serves on its client port next to gRPC — `/health` and `/metrics` —
//! compared with a real etcd 3.4 (both with client-certificate TLS): same health answer, and
//! every metric family k3rs exports exists in etcd's `/metrics` with the same type.

use std::collections::BTreeMap;

use crate::common;
use crate::common::etcdctl::Endpoint;
use crate::common::{Etcd, K3rs};

/// `GET path` with the endpoint's CA and client certificate: `(status code, body)`.
fn get(ep: &Endpoint, path: &str) -> (u16, String) {
    let tls = ep.tls.as_ref().expect("a TLS endpoint");
    let client = tls.cert.as_deref().zip(tls.key.as_deref());
    common::https::request("GET", &format!("{}{path}", ep.url), &tls.ca, client)
}

/// `# TYPE <name> <type>` lines.
fn families(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, t)| (n.to_string(), t.to_string()))
        .collect()
}

fn value(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .unwrap_or_else(|| panic!("{name} in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn health_and_metrics_on_the_client_port_match_etcd() {
    let etcd = Etcd::start_tls();
    let k3rs = K3rs::start();
    let (ours, theirs) = (k3rs.endpoint(), etcd.endpoint());

    let (code, body) = get(&theirs, "/health");
    assert_eq!(code, 200, "etcd: {body}");
    let etcd_health: serde_json::Value = serde_json::from_str(&body).unwrap();
    let (code, body) = get(&ours, "/health");
    assert_eq!(code, 200, "k3rs: {body}");
    let our_health: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(our_health["health"], etcd_health["health"]);
    assert_eq!(our_health["health"], "true");

    // Some writes so the counters and histograms have observations.
    for i in 0..5 {
        let out = common::etcdctl(&ours, &["put", &format!("k{i}"), "v"], None);
        assert!(out.success(), "{out:?}");
    }
    let (code, our_metrics) = get(&ours, "/metrics");
    assert_eq!(code, 200, "{our_metrics}");
    let (code, etcd_metrics) = get(&theirs, "/metrics");
    assert_eq!(code, 200);
    let (ours_f, theirs_f) = (families(&our_metrics), families(&etcd_metrics));
    for name in [
        "etcd_server_has_leader",
        "etcd_server_proposals_pending",
        "etcd_server_proposals_failed_total",
        "etcd_disk_backend_commit_duration_seconds",
        "etcd_disk_wal_fsync_duration_seconds",
    ] {
        assert!(ours_f.contains_key(name), "k3rs lacks {name}");
    }
    // k3rs' own families (the write path's stage timings) are named `k3rs_*`; every other one
    // is etcd's.
    for (name, kind) in ours_f.iter().filter(|(n, _)| !n.starts_with("k3rs_")) {
        assert_eq!(
            theirs_f.get(name),
            Some(kind),
            "{name} ({kind}) is not in etcd's /metrics with that type"
        );
    }
    assert_eq!(value(&our_metrics, "etcd_server_has_leader"), 1.0);
    assert_eq!(value(&our_metrics, "etcd_server_proposals_pending"), 0.0);
    assert!(
        value(
            &our_metrics,
            "etcd_disk_backend_commit_duration_seconds_count"
        ) >= 5.0
    );
    let stage = "k3rs_datastore_stage_duration_seconds";
    assert_eq!(ours_f.get(stage).map(String::as_str), Some("histogram"));
    let puts = value(&our_metrics, &format!("{stage}_count{{stage=\"request\"}}"));
    assert!(puts >= 5.0, "{puts} front-end writes timed");
    let fsyncs = value(
        &our_metrics,
        &format!("{stage}_count{{stage=\"wal_fsync\"}}"),
    );
    assert!(fsyncs >= 5.0, "{fsyncs} WAL syncs timed");
    let max = value(
        &our_metrics,
        "k3rs_datastore_stage_duration_max_seconds{stage=\"raft_write\"}",
    );
    assert!(max > 0.0, "the longest Raft write is recorded");

    // Without a client certificate the port refuses, as etcd's does with --client-cert-auth.
    let mut anonymous = ours.clone();
    if let Some(t) = anonymous.tls.as_mut() {
        t.cert = None;
        t.key = None;
    }
    let (code, _) = get(&anonymous, "/metrics");
    assert_eq!(code, 0, "no client certificate, no answer");
}

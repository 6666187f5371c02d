//! The Summary (`stats/v1alpha1`) from one node sample and the runtime's container stats, as a
//! pure function.
//!
//! # Guarantees
//! - `node`: `nodeName`, `cpu` (`usageCoreNanoSeconds`, `usageNanoCores` when a rate is
//!   known), `memory` (`usageBytes`, `workingSetBytes`, `availableBytes`, `rssBytes`), each with
//!   the sample's `time`. Sample `time`s keep their fraction of a second (`…:22.5Z`, still
//!   RFC 3339 for Go's parser) so that a metrics server's CPU rate between two scrapes is
//!   exact; `startTime`s are whole seconds as upstream's.
//! - `pods`: one entry per pod UID among the running containers (by the kubelet's
//!   `io.kubernetes.pod.*` labels; containers without them, e.g. foreign ones, are left out), in
//!   namespace/name order, with `podRef`, `startTime` (its oldest container's) and `containers`
//!   (name order; `cpu`/`memory` as the runtime reported them); the pod's `cpu` and `memory` are
//!   the sums of its containers' values (a value no container reported stays absent).

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Map, Value};

use super::node::Memory;
use crate::cri::pb;
use crate::kubelet::plan::labels;

/// The node's own usage at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NodeSample {
    /// Unix nanoseconds.
    pub time_nanos: i64,
    pub cpu_core_nanos: Option<u64>,
    pub cpu_nano_cores: Option<u64>,
    pub memory: Option<Memory>,
}

/// RFC 3339 (UTC, seconds) of Unix nanoseconds.
pub fn rfc3339(nanos: i64) -> String {
    let secs = nanos.div_euclid(1_000_000_000);
    let t = k8s_openapi::jiff::Timestamp::from_second(secs).unwrap_or_default();
    format!("{t:.0}")
}

/// RFC 3339 (UTC) of Unix nanoseconds, with the fraction of a second when there is one.
pub fn sample_time(nanos: i64) -> String {
    let t = k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(nanos)).unwrap_or_default();
    format!("{t}")
}

fn put(m: &mut Map<String, Value>, key: &str, v: Option<u64>) {
    if let Some(v) = v {
        m.insert(key.into(), json!(v));
    }
}

fn value(v: &Option<pb::UInt64Value>) -> Option<u64> {
    v.as_ref().map(|v| v.value)
}

/// (JSON name, reader) of the memory fields a container reports.
type MemoryField = (&'static str, fn(&pb::MemoryUsage) -> Option<u64>);
const MEMORY_FIELDS: &[MemoryField] = &[
    ("availableBytes", |m| value(&m.available_bytes)),
    ("usageBytes", |m| value(&m.usage_bytes)),
    ("workingSetBytes", |m| value(&m.working_set_bytes)),
    ("rssBytes", |m| value(&m.rss_bytes)),
    ("pageFaults", |m| value(&m.page_faults)),
    ("majorPageFaults", |m| value(&m.major_page_faults)),
];

fn cpu_of(c: &pb::CpuUsage) -> Value {
    let mut m = Map::new();
    m.insert("time".into(), json!(sample_time(c.timestamp)));
    put(&mut m, "usageNanoCores", value(&c.usage_nano_cores));
    put(
        &mut m,
        "usageCoreNanoSeconds",
        value(&c.usage_core_nano_seconds),
    );
    Value::Object(m)
}

fn memory_of(mem: &pb::MemoryUsage) -> Value {
    let mut m = Map::new();
    m.insert("time".into(), json!(sample_time(mem.timestamp)));
    for (name, read) in MEMORY_FIELDS {
        put(&mut m, name, read(mem));
    }
    Value::Object(m)
}

/// The sum of the `fields` of `parts` (objects); `None` when no part has any of them.
fn sum(parts: &[&Value], fields: &[&str], time: &str) -> Option<Value> {
    let mut m = Map::new();
    for f in fields {
        let vals: Vec<u64> = parts.iter().filter_map(|p| p[*f].as_u64()).collect();
        if !vals.is_empty() {
            m.insert((*f).into(), json!(vals.iter().sum::<u64>()));
        }
    }
    (!m.is_empty()).then(|| {
        m.insert("time".into(), json!(time));
        Value::Object(m)
    })
}

/// The Summary. `started` maps container IDs to their creation (Unix nanoseconds); only
/// containers in it (the running ones) are reported.
pub fn summary(
    node_name: &str,
    node: &NodeSample,
    containers: &[pb::ContainerStats],
    started: &HashMap<String, i64>,
) -> Value {
    let time = sample_time(node.time_nanos);
    let mut node_json = json!({"nodeName": node_name});
    let mut cpu = Map::new();
    put(&mut cpu, "usageNanoCores", node.cpu_nano_cores);
    put(&mut cpu, "usageCoreNanoSeconds", node.cpu_core_nanos);
    if !cpu.is_empty() {
        cpu.insert("time".into(), json!(time));
        node_json["cpu"] = Value::Object(cpu);
    }
    if let Some(m) = node.memory {
        node_json["memory"] = json!({"time": time, "availableBytes": m.available_bytes,
            "usageBytes": m.usage_bytes, "workingSetBytes": m.working_set_bytes,
            "rssBytes": m.rss_bytes});
    }
    // (namespace, name, uid) → [(container name, start, stats)]
    type Pods<'a> = BTreeMap<(&'a str, &'a str, &'a str), Vec<(&'a str, i64, Value)>>;
    let mut pods: Pods = BTreeMap::new();
    for c in containers {
        let Some(a) = &c.attributes else { continue };
        let Some(&start) = started.get(&a.id) else {
            continue;
        };
        let label = |k: &str| a.labels.get(k).map(String::as_str);
        let (Some(ns), Some(name), Some(uid), Some(container)) = (
            label(labels::POD_NAMESPACE),
            label(labels::POD_NAME),
            label(labels::POD_UID),
            label(labels::CONTAINER_NAME),
        ) else {
            continue;
        };
        let mut cj = json!({"name": container, "startTime": rfc3339(start)});
        if let Some(cpu) = &c.cpu {
            cj["cpu"] = cpu_of(cpu);
        }
        if let Some(mem) = &c.memory {
            cj["memory"] = memory_of(mem);
        }
        pods.entry((ns, name, uid))
            .or_default()
            .push((container, start, cj));
    }
    let pods: Vec<Value> = pods
        .into_iter()
        .map(|((ns, name, uid), mut cs)| {
            cs.sort_by(|a, b| a.0.cmp(b.0));
            let start = cs.iter().map(|c| c.1).min().unwrap_or_default();
            let cpus: Vec<&Value> = cs.iter().map(|c| &c.2["cpu"]).collect();
            let mems: Vec<&Value> = cs.iter().map(|c| &c.2["memory"]).collect();
            let mut p = json!({
                "podRef": {"name": name, "namespace": ns, "uid": uid},
                "startTime": rfc3339(start),
                "containers": cs.iter().map(|c| c.2.clone()).collect::<Vec<_>>(),
            });
            if let Some(v) = sum(&cpus, &["usageNanoCores", "usageCoreNanoSeconds"], &time) {
                p["cpu"] = v;
            }
            let mem_fields: Vec<&str> = MEMORY_FIELDS.iter().map(|f| f.0).collect();
            if let Some(v) = sum(&mems, &mem_fields, &time) {
                p["memory"] = v;
            }
            p
        })
        .collect();
    json!({"node": node_json, "pods": pods})
}

#[cfg(test)]
mod tests;

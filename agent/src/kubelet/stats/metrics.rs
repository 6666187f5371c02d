//! `/metrics/resource`: the Summary rendered as Prometheus text with the kubelet's resource
//! metric names, as a pure function.
//!
//! # Guarantees
//! - `node_cpu_usage_seconds_total`, `node_memory_working_set_bytes`,
//!   `container_cpu_usage_seconds_total`, `container_memory_working_set_bytes`,
//!   `container_start_time_seconds` (labels `container`, `namespace`, `pod`),
//!   `pod_cpu_usage_seconds_total`, `pod_memory_working_set_bytes` (labels `namespace`, `pod`)
//!   and `scrape_error` (1 when the container stats could not be read); a sample the summary
//!   lacks is not written, every family has its HELP and TYPE lines.

use std::fmt::Write;

use serde_json::Value;

/// One metric family: name, type, help, and how to read a sample of one entry.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    read: fn(&Value) -> Option<f64>,
}

fn seconds(nanos: &Value) -> Option<f64> {
    nanos.as_u64().map(|n| n as f64 / 1e9)
}

fn start_seconds(v: &Value) -> Option<f64> {
    let t: k8s_openapi::jiff::Timestamp = v["startTime"].as_str()?.parse().ok()?;
    Some(t.as_second() as f64)
}

const CPU: Family = Family {
    name: "cpu_usage_seconds_total",
    kind: "counter",
    help: "Cumulative cpu time consumed in core-seconds",
    read: |v| seconds(&v["cpu"]["usageCoreNanoSeconds"]),
};
const MEMORY: Family = Family {
    name: "memory_working_set_bytes",
    kind: "gauge",
    help: "Current working set in bytes",
    read: |v| v["memory"]["workingSetBytes"].as_u64().map(|b| b as f64),
};
const START: Family = Family {
    name: "start_time_seconds",
    kind: "gauge",
    help: "Start time of the container since unix epoch in seconds",
    read: start_seconds,
};

fn family(out: &mut String, prefix: &str, f: &Family, samples: &[(String, &Value)]) {
    let name = format!("{prefix}_{}", f.name);
    let _ = writeln!(out, "# HELP {name} [STABLE] {} of the {prefix}", f.help);
    let _ = writeln!(out, "# TYPE {name} {}", f.kind);
    for (labels, v) in samples {
        if let Some(x) = (f.read)(v) {
            let _ = writeln!(out, "{name}{labels} {x}");
        }
    }
}

/// Prometheus text of `summary`; `scrape_error` says whether the container stats failed.
pub fn render(summary: &Value, scrape_error: bool) -> String {
    let mut out = String::new();
    let node = [(String::new(), &summary["node"])];
    let pods: Vec<&Value> = summary["pods"].as_array().into_iter().flatten().collect();
    let pod_samples: Vec<(String, &Value)> = pods
        .iter()
        .map(|p| {
            let r = &p["podRef"];
            let labels = format!(
                "{{namespace=\"{}\",pod=\"{}\"}}",
                r["namespace"].as_str().unwrap_or(""),
                r["name"].as_str().unwrap_or("")
            );
            (labels, *p)
        })
        .collect();
    let container_samples: Vec<(String, &Value)> = pods
        .iter()
        .flat_map(|p| {
            let r = &p["podRef"];
            p["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(move |c| {
                    let labels = format!(
                        "{{container=\"{}\",namespace=\"{}\",pod=\"{}\"}}",
                        c["name"].as_str().unwrap_or(""),
                        r["namespace"].as_str().unwrap_or(""),
                        r["name"].as_str().unwrap_or("")
                    );
                    (labels, c)
                })
        })
        .collect();
    family(&mut out, "container", &CPU, &container_samples);
    family(&mut out, "container", &MEMORY, &container_samples);
    family(&mut out, "container", &START, &container_samples);
    family(&mut out, "node", &CPU, &node);
    family(&mut out, "node", &MEMORY, &node);
    family(&mut out, "pod", &CPU, &pod_samples);
    family(&mut out, "pod", &MEMORY, &pod_samples);
    let _ = writeln!(
        out,
        "# HELP scrape_error [ALPHA] 1 if there was an error while getting container metrics, 0 otherwise"
    );
    let _ = writeln!(out, "# TYPE scrape_error gauge");
    let _ = writeln!(out, "scrape_error {}", u8::from(scrape_error));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_node_pod_and_container_samples() {
        let summary = json!({
            "node": {"nodeName": "n", "cpu": {"usageCoreNanoSeconds": 2_500_000_000u64},
                "memory": {"workingSetBytes": 1024}},
            "pods": [{"podRef": {"name": "web", "namespace": "default", "uid": "u"},
                "cpu": {"usageCoreNanoSeconds": 500_000_000u64}, "memory": {"workingSetBytes": 64},
                "containers": [{"name": "c", "startTime": "2023-11-14T22:13:20Z",
                    "cpu": {"usageCoreNanoSeconds": 500_000_000u64},
                    "memory": {"workingSetBytes": 64}}]}],
        });
        let text = render(&summary, false);
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            samples,
            [
                "container_cpu_usage_seconds_total{container=\"c\",namespace=\"default\",pod=\"web\"} 0.5",
                "container_memory_working_set_bytes{container=\"c\",namespace=\"default\",pod=\"web\"} 64",
                "container_start_time_seconds{container=\"c\",namespace=\"default\",pod=\"web\"} 1700000000",
                "node_cpu_usage_seconds_total 2.5",
                "node_memory_working_set_bytes 1024",
                "pod_cpu_usage_seconds_total{namespace=\"default\",pod=\"web\"} 0.5",
                "pod_memory_working_set_bytes{namespace=\"default\",pod=\"web\"} 64",
                "scrape_error 0",
            ]
        );
        assert!(text.contains("# TYPE node_cpu_usage_seconds_total counter\n"));
        assert!(text.contains("# TYPE pod_memory_working_set_bytes gauge\n"));
        assert!(render(&json!({}), true).ends_with("scrape_error 1\n"));
    }
}

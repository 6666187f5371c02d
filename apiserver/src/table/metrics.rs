//! NodeMetrics and PodMetrics (`metrics.k8s.io`): metrics-server's columns.

use serde_json::{json, Value};

use super::printers::{Column, NAME};
use crate::resource_metrics::usage::byte_quantity;
use k3rs_apimachinery::resources::milli_value;

const CPU: Column = Column::new("CPU", "string", "CPU usage");
const MEMORY: Column = Column::new("Memory", "string", "Memory usage");
const WINDOW: Column = Column::new("Window", "string", "Time window for metrics");

/// Name, CPU, Memory, Window.
pub const COLUMNS: &[Column] = &[NAME, CPU, MEMORY, WINDOW];

fn cpu_memory(usages: &[&Value]) -> (String, String) {
    let cpu: i64 = usages
        .iter()
        .filter_map(|u| u["cpu"].as_str().and_then(milli_value))
        .sum();
    let memory: i64 = usages
        .iter()
        .filter_map(|u| {
            u["memory"]
                .as_str()
                .and_then(k3rs_apimachinery::resources::value)
        })
        .sum();
    (
        format!("{cpu}m"),
        byte_quantity(u64::try_from(memory).unwrap_or(0)),
    )
}

/// The cells of a NodeMetrics or PodMetrics (a pod's usage is its containers' sum).
pub fn cells(m: &Value, _now: i64) -> Vec<Value> {
    let usages: Vec<&Value> = match m["containers"].as_array() {
        Some(cs) => cs.iter().map(|c| &c["usage"]).collect(),
        None => vec![&m["usage"]],
    };
    let (cpu, memory) = cpu_memory(&usages);
    vec![
        json!(m["metadata"]["name"]),
        json!(cpu),
        json!(memory),
        json!(m["window"]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_cells_sum_the_containers() {
        let pod = json!({"metadata": {"name": "web"}, "window": "15s", "containers": [
            {"name": "a", "usage": {"cpu": "1500u", "memory": "1Mi"}},
            {"name": "b", "usage": {"cpu": "250m", "memory": "1Mi"}}]});
        assert_eq!(
            cells(&pod, 0),
            [json!("web"), json!("252m"), json!("2Mi"), json!("15s")]
        );
        let node = json!({"metadata": {"name": "n1"}, "window": "15.2s",
            "usage": {"cpu": "2", "memory": "1000"}});
        assert_eq!(
            cells(&node, 0),
            [json!("n1"), json!("2000m"), json!("1000"), json!("15.2s")]
        );
    }
}

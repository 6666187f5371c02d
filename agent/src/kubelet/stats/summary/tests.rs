use super::*;

fn u(v: u64) -> Option<pb::UInt64Value> {
    Some(pb::UInt64Value { value: v })
}

fn stats(id: &str, pod: &str, container: &str, cpu: u64, ws: u64) -> pb::ContainerStats {
    let labels = [
        (labels::POD_NAMESPACE, "default"),
        (labels::POD_NAME, pod),
        (labels::POD_UID, &format!("uid-{pod}")),
        (labels::CONTAINER_NAME, container),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    pb::ContainerStats {
        attributes: Some(pb::ContainerAttributes {
            id: id.into(),
            labels,
            ..Default::default()
        }),
        cpu: Some(pb::CpuUsage {
            timestamp: 1_700_000_001_000_000_000,
            usage_core_nano_seconds: u(cpu),
            usage_nano_cores: None,
        }),
        memory: Some(pb::MemoryUsage {
            timestamp: 1_700_000_001_000_000_000,
            working_set_bytes: u(ws),
            ..Default::default()
        }),
        writable_layer: None,
    }
}

#[test]
fn pods_sum_their_running_containers() {
    let node = NodeSample {
        time_nanos: 1_700_000_002_500_000_000,
        cpu_core_nanos: Some(9_000),
        cpu_nano_cores: Some(250_000_000),
        memory: Some(Memory {
            available_bytes: 3,
            usage_bytes: 2,
            working_set_bytes: 1,
            rss_bytes: 4,
        }),
    };
    let containers = vec![
        stats("c1", "web", "b", 100, 1000),
        stats("c2", "web", "a", 50, 24),
        stats("c3", "db", "main", 7, 8),
        stats("gone", "db", "old", 1, 1),
        pb::ContainerStats::default(),
    ];
    let started: HashMap<String, i64> = [
        ("c1", 1_700_000_000_000_000_000),
        ("c2", 1_699_999_999_000_000_000),
        ("c3", 1_700_000_000_000_000_000),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let s = summary("n1", &node, &containers, &started);
    assert_eq!(
        s["node"],
        json!({"nodeName": "n1",
            "cpu": {"time": "2023-11-14T22:13:22.5Z", "usageNanoCores": 250_000_000u64,
                "usageCoreNanoSeconds": 9000},
            "memory": {"time": "2023-11-14T22:13:22.5Z", "availableBytes": 3, "usageBytes": 2,
                "workingSetBytes": 1, "rssBytes": 4}})
    );
    let pods = s["pods"].as_array().unwrap();
    assert_eq!(pods.len(), 2);
    assert_eq!(
        pods[0]["podRef"],
        json!({"name": "db", "namespace": "default", "uid": "uid-db"})
    );
    assert_eq!(
        pods[0]["containers"].as_array().unwrap().len(),
        1,
        "the stopped one is left out"
    );
    let web = &pods[1];
    assert_eq!(web["startTime"], "2023-11-14T22:13:19Z");
    assert_eq!(
        web["containers"][0],
        json!({"name": "a", "startTime": "2023-11-14T22:13:19Z",
            "cpu": {"time": "2023-11-14T22:13:21Z", "usageCoreNanoSeconds": 50},
            "memory": {"time": "2023-11-14T22:13:21Z", "workingSetBytes": 24}})
    );
    assert_eq!(
        web["cpu"],
        json!({"time": "2023-11-14T22:13:22.5Z", "usageCoreNanoSeconds": 150})
    );
    assert_eq!(
        web["memory"],
        json!({"time": "2023-11-14T22:13:22.5Z", "workingSetBytes": 1024})
    );
}

#[test]
fn an_empty_node() {
    let s = summary("n", &NodeSample::default(), &[], &HashMap::new());
    assert_eq!(s, json!({"node": {"nodeName": "n"}, "pods": []}));
}

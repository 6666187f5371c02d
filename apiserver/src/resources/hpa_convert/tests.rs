use super::*;

fn v2_full() -> Value {
    json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": "default", "annotations": {"team": "a"}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 10,
            "metrics": [
                {"type": "Resource", "resource": {"name": "memory",
                    "target": {"type": "AverageValue", "averageValue": "100Mi"}}},
                {"type": "Pods", "pods": {"metric": {"name": "qps"},
                    "target": {"type": "AverageValue", "averageValue": "10"}}},
                {"type": "Object", "object": {
                    "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "s"},
                    "metric": {"name": "hits"}, "target": {"type": "Value", "value": "5"}}},
                {"type": "External", "external": {"metric": {"name": "queue",
                    "selector": {"matchLabels": {"q": "a"}}},
                    "target": {"type": "AverageValue", "averageValue": "3"}}},
                {"type": "ContainerResource", "containerResource": {"name": "cpu",
                    "container": "app", "target": {"type": "Utilization", "averageUtilization": 60}}},
                {"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 70}}},
            ],
            "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15}]}},
        },
        "status": {
            "observedGeneration": 1, "currentReplicas": 3, "desiredReplicas": 4,
            "currentMetrics": [
                {"type": "Resource", "resource": {"name": "cpu",
                    "current": {"averageUtilization": 55, "averageValue": "110m"}}},
                {"type": "External", "external": {"metric": {"name": "queue"},
                    "current": {"value": "7"}}},
            ],
            "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}],
        },
    })
}

fn annotation(obj: &Value, key: &str) -> Value {
    serde_json::from_str(obj["metadata"]["annotations"][key].as_str().expect(key)).unwrap()
}

#[test]
fn v1_carries_the_cpu_target_and_annotations_for_the_rest() {
    let v1 = to_v1(&v2_full());
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(
        v1["spec"],
        json!({"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "minReplicas": 2, "maxReplicas": 10, "targetCPUUtilizationPercentage": 70})
    );
    assert_eq!(
        annotation(&v1, METRICS),
        json!([
            {"type": "Resource", "resource": {"name": "memory", "targetAverageValue": "100Mi"}},
            {"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "10"}},
            {"type": "Object", "object": {"target": {"apiVersion": "v1", "kind": "Service", "name": "s"},
                "metricName": "hits", "targetValue": "5"}},
            {"type": "External", "external": {"metricName": "queue",
                "metricSelector": {"matchLabels": {"q": "a"}}, "targetAverageValue": "3"}},
            {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "app",
                "targetAverageUtilization": 60}},
        ])
    );
    assert_eq!(
        annotation(&v1, BEHAVIOR),
        json!({"ScaleUp": {"StabilizationWindowSeconds": 0, "SelectPolicy": "Max",
            "Policies": [{"Type": "Pods", "Value": 4, "PeriodSeconds": 15}]}, "ScaleDown": null})
    );
    assert_eq!(
        v1["status"],
        json!({"observedGeneration": 1, "currentReplicas": 3, "desiredReplicas": 4,
            "currentCPUUtilizationPercentage": 55})
    );
    assert_eq!(
        annotation(&v1, CURRENT_METRICS),
        json!([
            {"type": "Resource", "resource": {"name": "cpu", "currentAverageUtilization": 55,
                "currentAverageValue": "110m"}},
            {"type": "External", "external": {"metricName": "queue", "currentValue": "7"}},
        ])
    );
    assert_eq!(
        annotation(&v1, CONDITIONS),
        v2_full()["status"]["conditions"]
    );
    assert_eq!(v1["metadata"]["annotations"]["team"], "a");
}

#[test]
fn round_trips_through_v1() {
    let v2 = v2_full();
    assert_eq!(to_v2(&to_v1(&v2)), v2);
}

#[test]
fn a_plain_v1_object_gets_the_cpu_metric() {
    let v1 = json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "a"},
        "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a"}, "maxReplicas": 3,
            "targetCPUUtilizationPercentage": 50},
        "status": {"currentReplicas": 0, "desiredReplicas": 0, "currentCPUUtilizationPercentage": 20}});
    let v2 = to_v2(&v1);
    assert_eq!(
        v2,
        json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "a"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "a"}, "maxReplicas": 3,
                "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 50}}}]},
            "status": {"desiredReplicas": 0, "currentMetrics": [{"type": "Resource",
                "resource": {"name": "cpu", "current": {"averageUtilization": 20}}}]}})
    );
    let mut no_target = v1.clone();
    no_target["spec"]
        .as_object_mut()
        .unwrap()
        .remove("targetCPUUtilizationPercentage");
    assert_eq!(
        to_v2(&no_target)["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );
}

#[test]
fn annotations_are_consumed_and_bad_ones_ignored() {
    let v1 = json!({"metadata": {"name": "a", "annotations": {
            METRICS: "not json", BEHAVIOR: "{\"scaleDown\":{\"selectPolicy\":\"Min\"}}"}},
        "spec": {"maxReplicas": 3}});
    let v2 = to_v2(&v1);
    assert!(v2["metadata"].get("annotations").is_none());
    assert_eq!(
        v2["spec"]["behavior"],
        json!({"scaleDown": {"selectPolicy": "Min"}})
    );
    assert_eq!(v2["spec"]["metrics"][0]["resource"]["name"], "cpu");
}

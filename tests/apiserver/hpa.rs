//! The horizontal pod autoscaler against the real binary, real kubectl and hollow nodes:
//! an autoscaler keeps a Deployment inside minReplicas/maxReplicas through its scale
//! subresource (with upstream's SuccessfulRescale events), reports that it cannot read
//! `metrics.k8s.io` (no metrics server: `--disable metrics-server`) in its ScalingActive
//! condition, and says so when its
//! target does not exist. (How metrics turn into replicas is unit-tested in
//! `server/src/controllers/hpa/`.) `kubectl autoscale` (which writes autoscaling/v1) and
//! both API versions reading and writing the same objects without losing what v1 cannot say.

use std::time::Duration;

use crate::common;
use crate::common::hollow::HollowAgent;
use crate::common::kubectl::{wait_json, Kubectl};
use serde_json::Value;

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
      containers:
      - name: c
        image: "busybox:1.36"
        resources: {requests: {cpu: 100m}}
"#;

/// An autoscaler of Deployment `target` on 50 % CPU.
fn autoscaler(target: &str, min: u32, max: u32) -> String {
    format!(
        r#"
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {{name: {target}}}
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: {target}}}
  minReplicas: {min}
  maxReplicas: {max}
  metrics:
  - type: Resource
    resource: {{name: cpu, target: {{type: Utilization, averageUtilization: 50}}}}
"#
    )
}

fn condition<'a>(hpa: &'a Value, type_: &str) -> Option<&'a Value> {
    hpa["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn events(k: &Kubectl, reason: &str) -> Vec<String> {
    let list = common::kubectl::json(
        k,
        &[
            "get",
            "events",
            "--field-selector",
            &format!("reason={reason}"),
        ],
    );
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["kind"] == "HorizontalPodAutoscaler")
        .map(|e| e["message"].as_str().unwrap_or("").to_string())
        .collect()
}

#[test]
fn the_autoscaler_keeps_its_target_within_bounds_and_says_why_it_cannot_do_more() {
    let (_server, k) = Kubectl::start_server(&["--disable", "metrics-server"]);
    let _agent = HollowAgent::start(&k.kubeconfig, 1, "hpa-", &[]);
    k.ok_stdin(&["apply", "-f", "-"], Some(WEB));
    k.ok_stdin(&["apply", "-f", "-"], Some(&autoscaler("web", 3, 5)));

    // Below minReplicas: raised to 3 through the scale subresource.
    wait_json(&k, "web scaled to 3", &["get", "deployment", "web"], |d| {
        d["spec"]["replicas"] == 3
    });
    let hpa = wait_json(&k, "the hpa's status", &["get", "hpa", "web"], |h| {
        h["status"]["desiredReplicas"] == 3
    });
    assert!(hpa["status"]["lastScaleTime"].is_string(), "{hpa}");
    assert_eq!(
        events(&k, "SuccessfulRescale"),
        ["New size: 3; reason: Current number of replicas below Spec.MinReplicas"]
    );

    // Within the bounds the CPU metric is needed, and no metrics server serves it.
    let hpa = wait_json(&k, "ScalingActive False", &["get", "hpa", "web"], |h| {
        condition(h, "ScalingActive").is_some_and(|c| c["status"] == "False")
    });
    let active = condition(&hpa, "ScalingActive").unwrap();
    assert_eq!(active["reason"], "FailedGetResourceMetric", "{active}");
    assert_eq!(
        active["message"],
        "the HPA was unable to compute the replica count: failed to get cpu utilization: \
         unable to get metrics for resource cpu: unable to fetch metrics from resource metrics \
         API: the server could not find the requested resource (get pods.metrics.k8s.io)"
    );
    let able = condition(&hpa, "AbleToScale").unwrap();
    assert_eq!(
        (&able["status"], &able["reason"]),
        (&"True".into(), &"SucceededGetScale".into())
    );
    assert_eq!(hpa["status"]["currentReplicas"], 3);
    assert!(
        !events(&k, "FailedComputeMetricsReplicas").is_empty(),
        "a FailedComputeMetricsReplicas event"
    );
    let described = k.ok(&["describe", "hpa", "web"]);
    assert!(described.contains("FailedGetResourceMetric"), "{described}");

    // Above maxReplicas: brought back to 5 at the next sync (every 15 s).
    k.ok(&["scale", "deployment", "web", "--replicas=8"]);
    wait_json(
        &k,
        "web scaled back to 5",
        &["get", "deployment", "web"],
        |d| d["spec"]["replicas"] == 5,
    );
    assert!(
        events(&k, "SuccessfulRescale").contains(
            &"New size: 5; reason: Current number of replicas above Spec.MaxReplicas".to_string()
        ),
        "{:?}",
        events(&k, "SuccessfulRescale")
    );

    // A target that does not exist.
    k.ok_stdin(&["apply", "-f", "-"], Some(&autoscaler("nothing", 1, 2)));
    let hpa = wait_json(&k, "AbleToScale False", &["get", "hpa", "nothing"], |h| {
        condition(h, "AbleToScale").is_some_and(|c| c["status"] == "False")
    });
    let able = condition(&hpa, "AbleToScale").unwrap();
    assert_eq!(able["reason"], "FailedGetScale");
    let message = able["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "the HPA controller was unable to get the target's current scale: failed to query scale subresource for Deployment/default/nothing: "
        ) && message.contains("not found"),
        "{message}"
    );
    // Deleting the autoscaler leaves the target as it is.
    k.ok(&["delete", "hpa", "web"]);
    std::thread::sleep(Duration::from_secs(1));
    k.ok(&["scale", "deployment", "web", "--replicas=7"]);
    let d = common::kubectl::json(&k, &["get", "deployment", "web"]);
    assert_eq!(d["spec"]["replicas"], 7);
}

const RICH: &str = r#"
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: rich}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: absent}
  minReplicas: 1
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: memory, target: {type: AverageValue, averageValue: 100Mi}}
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 70}}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 60}
"#;

fn annotation(obj: &Value, key: &str) -> Value {
    let raw = obj["metadata"]["annotations"][key]
        .as_str()
        .unwrap_or_else(|| panic!("annotation {key} in {obj}"));
    serde_json::from_str(raw).expect("annotation JSON")
}

#[test]
fn kubectl_autoscale_and_both_api_versions_share_one_object() {
    let (_server, k) = Kubectl::start_server(&[]);
    let versions = k.ok(&["api-versions"]);
    for v in ["autoscaling/v1", "autoscaling/v2"] {
        assert!(versions.lines().any(|l| l == v), "{v} in {versions}");
    }
    let group: Value =
        serde_json::from_str(&k.ok(&["get", "--raw", "/apis/autoscaling"])).expect("group");
    assert_eq!(group["preferredVersion"]["version"], "v2", "{group}");

    // kubectl 1.32's `autoscale` posts an autoscaling/v1 object.
    k.ok_stdin(&["apply", "-f", "-"], Some(WEB));
    let out = k.ok(&[
        "autoscale",
        "deployment",
        "web",
        "--min=2",
        "--max=5",
        "--cpu-percent=60",
    ]);
    assert!(out.contains("autoscaled"), "{out}");
    let v1 = common::kubectl::json(
        &k,
        &["get", "horizontalpodautoscalers.v1.autoscaling", "web"],
    );
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 60, "{v1}");
    assert_eq!(v1["spec"]["minReplicas"], 2);
    let v2 = common::kubectl::json(
        &k,
        &["get", "horizontalpodautoscalers.v2.autoscaling", "web"],
    );
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"],
        serde_json::json!([{"type": "Resource", "resource": {"name": "cpu",
            "target": {"type": "Utilization", "averageUtilization": 60}}}])
    );
    assert!(v2["metadata"].get("annotations").is_none(), "{v2}");
    // The autoscaler acts on it like on any other (raises web to minReplicas).
    wait_json(&k, "web scaled to 2", &["get", "deployment", "web"], |d| {
        d["spec"]["replicas"] == 2
    });
    let table = k.ok(&["get", "hpa", "web"]);
    assert!(
        table.contains("Deployment/web") && table.contains("/60%"),
        "{table}"
    );

    // What v1 cannot express travels in annotations...
    k.ok_stdin(&["apply", "-f", "-"], Some(RICH));
    let v1 = wait_json(
        &k,
        "rich's conditions through v1",
        &["get", "horizontalpodautoscalers.v1.autoscaling", "rich"],
        |h| {
            h["metadata"]["annotations"]
                .get("autoscaling.alpha.kubernetes.io/conditions")
                .is_some()
        },
    );
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 70, "{v1}");
    assert_eq!(
        annotation(&v1, "autoscaling.alpha.kubernetes.io/metrics"),
        serde_json::json!([{"type": "Resource",
            "resource": {"name": "memory", "targetAverageValue": "100Mi"}}])
    );
    let behavior = annotation(&v1, "autoscaling.alpha.kubernetes.io/behavior");
    assert_eq!(
        behavior["ScaleDown"]["StabilizationWindowSeconds"], 60,
        "{behavior}"
    );
    let conditions = annotation(&v1, "autoscaling.alpha.kubernetes.io/conditions");
    assert!(
        conditions
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "AbleToScale")),
        "{conditions}"
    );

    // ... so a read-modify-write through v1 keeps them.
    let mut edited = v1.clone();
    edited["spec"]["maxReplicas"] = 9.into();
    k.ok_stdin(&["replace", "-f", "-"], Some(&edited.to_string()));
    let v2 = common::kubectl::json(
        &k,
        &["get", "horizontalpodautoscalers.v2.autoscaling", "rich"],
    );
    assert_eq!(v2["spec"]["maxReplicas"], 9);
    assert_eq!(
        v2["spec"]["metrics"][0]["resource"]["target"]["averageValue"], "100Mi",
        "{v2}"
    );
    assert_eq!(v2["spec"]["metrics"][1]["resource"]["name"], "cpu");
    assert_eq!(
        v2["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        60
    );
    let annotations = v2["metadata"]["annotations"].as_object().unwrap();
    assert!(
        !annotations
            .keys()
            .any(|k| k.starts_with("autoscaling.alpha")),
        "{v2}"
    );

    // Invalid through v1 is invalid (the internal field path, like kube-apiserver).
    k.fails_with(
        &["apply", "-f", "-"],
        Some(
            "apiVersion: autoscaling/v1\nkind: HorizontalPodAutoscaler\nmetadata: {name: bad}\n\
             spec: {scaleTargetRef: {kind: Deployment, name: web}, minReplicas: 3, maxReplicas: 2}\n",
        ),
        "spec.maxReplicas",
    );
    let explained = k.ok(&[
        "explain",
        "hpa.spec.targetCPUUtilizationPercentage",
        "--api-version=autoscaling/v1",
    ]);
    assert!(
        explained.contains("targetCPUUtilizationPercentage"),
        "{explained}"
    );
}

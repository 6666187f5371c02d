//! The horizontal pod autoscaler against the real binary, real kubectl and hollow nodes:
//! an autoscaler keeps a Deployment inside minReplicas/maxReplicas through its scale
//! subresource (with upstream's SuccessfulRescale events), reports that it cannot read
//! `metrics.k8s.io` (no metrics server) in its ScalingActive condition, and says so when its
//! target does not exist. (How metrics turn into replicas is unit-tested in
//! `server/src/controllers/hpa/`.)

mod common;

use std::time::Duration;

use common::hollow::HollowAgent;
use common::kubectl::{wait_json, Kubectl};
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
    let (_server, k) = Kubectl::start_server(&[]);
    let _agent = HollowAgent::start(&k.kubeconfig, 1, "hpa-", &[]);
    k.ok_stdin(&["apply", "-f", "-"], Some(WEB));
    // (`kubectl autoscale` of kubectl 1.32 writes autoscaling/v1, which k3rs does not serve.)
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

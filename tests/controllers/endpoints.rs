//! The endpoints and EndpointSlice controllers inside `k3rs server`: pods (status set through
//! the status subresource, as a kubelet would) selected by a Service show up in its
//! `Endpoints` (ready / not ready, named target ports resolved per pod) and in its
//! `discovery.k8s.io/v1` EndpointSlices (conditions ready/serving/terminating); a terminating
//! pod leaves the Endpoints but stays in the slices as terminating; `publishNotReadyAddresses`
//! publishes every address as ready; deleting the Service removes both.

use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(60);

fn get_json(k: &Kubectl, args: &[&str]) -> Value {
    let mut all = vec!["get"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&k.ok(&all)).expect("kubectl -o json")
}

fn create_pod(k: &Kubectl, name: &str, port: Option<i64>) {
    let ports = port.map_or(json!([]), |p| json!([{"name": "http", "containerPort": p}]));
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "web"}},
        "spec": {"nodeName": "node-a", "containers": [{"name": "c", "image": "pause", "ports": ports}]},
    });
    k.ok_stdin(&["create", "-f", "-"], Some(&pod.to_string()));
}

fn set_status(k: &Kubectl, name: &str, ip: &str, ready: bool) {
    let status = json!({"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}],
    }});
    k.ok(&[
        "patch",
        "pod",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        &status.to_string(),
    ]);
}

/// `(ip, pod name, port)` of each address list of the Endpoints' subsets.
fn addresses(ep: &Value, list: &str) -> Vec<(String, String, i64)> {
    let mut out = Vec::new();
    for subset in ep["subsets"].as_array().into_iter().flatten() {
        let port = subset["ports"][0]["port"].as_i64().unwrap_or(0);
        for a in subset[list].as_array().into_iter().flatten() {
            out.push((
                a["ip"].as_str().unwrap_or("").to_string(),
                a["targetRef"]["name"].as_str().unwrap_or("").to_string(),
                port,
            ));
        }
    }
    out.sort();
    out
}

fn owned(ip: &str, pod: &str, port: i64) -> (String, String, i64) {
    (ip.to_string(), pod.to_string(), port)
}

/// `(ip, port, ready, serving, terminating)` of every endpoint in the service's slices.
fn slice_endpoints(k: &Kubectl) -> Vec<(String, i64, bool, bool, bool)> {
    let list = get_json(
        k,
        &["endpointslices", "-l", "kubernetes.io/service-name=web"],
    );
    let mut out = Vec::new();
    for s in list["items"].as_array().into_iter().flatten() {
        let port = s["ports"][0]["port"].as_i64().unwrap_or(0);
        for e in s["endpoints"].as_array().into_iter().flatten() {
            let c = &e["conditions"];
            out.push((
                e["addresses"][0].as_str().unwrap_or("").to_string(),
                port,
                c["ready"] == true,
                c["serving"] == true,
                c["terminating"] == true,
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn endpoints_and_slices_follow_the_selected_pods() {
    // The pods' node exists and stays Ready for the test (no Lease needed within 10 min),
    // so neither the pod GC nor taint eviction removes the pods.
    let (_server, k) =
        Kubectl::start_server(&["--kube-controller-manager-arg=node-monitor-grace-period=10m"]);
    k.ok_stdin(
        &["create", "-f", "-"],
        Some(
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}})
                .to_string(),
        ),
    );
    let ready = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
    k.ok(&[
        "patch",
        "node",
        "node-a",
        "--subresource=status",
        "--type=merge",
        "-p",
        &ready.to_string(),
    ]);
    let svc = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "labels": {"tier": "front"}},
        "spec": {"selector": {"app": "web"},
                 "ports": [{"name": "http", "port": 80, "targetPort": "http"}]},
    });
    k.ok_stdin(&["create", "-f", "-"], Some(&svc.to_string()));
    create_pod(&k, "a", Some(8080));
    create_pod(&k, "b", Some(9090));
    create_pod(&k, "c", None);
    set_status(&k, "a", "10.42.0.1", true);
    set_status(&k, "b", "10.42.0.2", false);
    set_status(&k, "c", "10.42.0.3", true);

    let want_ready = vec![owned("10.42.0.1", "a", 8080)];
    let want_not_ready = vec![owned("10.42.0.2", "b", 9090)];
    common::wait_for("the endpoints of web", WAIT, || {
        let out = k.run(&["get", "endpoints", "web", "-o", "json"]);
        let ep: Value = serde_json::from_str(&out.stdout).ok()?;
        (addresses(&ep, "addresses") == want_ready
            && addresses(&ep, "notReadyAddresses") == want_not_ready)
            .then_some(())
    });
    let ep = get_json(&k, &["endpoints", "web"]);
    assert_eq!(ep["metadata"]["labels"], json!({"tier": "front"}));
    let a = &ep["subsets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["addresses"].is_array())
        .unwrap()["addresses"][0];
    assert_eq!(a["nodeName"], "node-a");
    assert_eq!(a["targetRef"]["kind"], "Pod");

    // Slices: one per resolved port set, labelled and owned as upstream.
    // c resolves no port: it is in no Endpoints subset, but in a slice without ports, as
    // upstream's EndpointSlice controller groups pods by their (possibly empty) port set.
    common::wait_for("the endpoint slices of web", WAIT, || {
        (slice_endpoints(&k)
            == vec![
                ("10.42.0.1".into(), 8080, true, true, false),
                ("10.42.0.2".into(), 9090, false, false, false),
                ("10.42.0.3".into(), 0, true, true, false),
            ])
        .then_some(())
    });
    let slices = get_json(
        &k,
        &["endpointslices", "-l", "kubernetes.io/service-name=web"],
    );
    for s in slices["items"].as_array().unwrap() {
        assert_eq!(s["addressType"], "IPv4");
        assert_eq!(
            s["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
            "endpointslice-controller.k8s.io"
        );
        assert_eq!(s["metadata"]["labels"]["tier"], "front");
        assert_eq!(s["metadata"]["ownerReferences"][0]["kind"], "Service");
        assert_eq!(s["metadata"]["ownerReferences"][0]["name"], "web");
        assert!(s["metadata"]["name"].as_str().unwrap().starts_with("web-"));
    }

    // A terminating pod (bound, so its deletion waits for a kubelet) leaves the Endpoints
    // and stays in the slices, serving but not ready.
    k.ok(&["delete", "pod", "a", "--wait=false"]);
    common::wait_for("a to leave the endpoints", WAIT, || {
        let ep = get_json(&k, &["endpoints", "web"]);
        (addresses(&ep, "addresses").is_empty()
            && addresses(&ep, "notReadyAddresses") == want_not_ready)
            .then_some(())
    });
    common::wait_for("a to be terminating in the slices", WAIT, || {
        (slice_endpoints(&k)
            == vec![
                ("10.42.0.1".into(), 8080, false, true, true),
                ("10.42.0.2".into(), 9090, false, false, false),
                ("10.42.0.3".into(), 0, true, true, false),
            ])
        .then_some(())
    });

    // publishNotReadyAddresses: every address is ready, the terminating one included.
    k.ok(&[
        "patch",
        "service",
        "web",
        "--type=merge",
        "-p",
        r#"{"spec":{"publishNotReadyAddresses":true}}"#,
    ]);
    common::wait_for("all addresses ready", WAIT, || {
        let ep = get_json(&k, &["endpoints", "web"]);
        (addresses(&ep, "addresses")
            == vec![owned("10.42.0.1", "a", 8080), owned("10.42.0.2", "b", 9090)]
            && addresses(&ep, "notReadyAddresses").is_empty())
        .then_some(())
    });

    // Deleting the Service removes its Endpoints and (garbage collector) its slices.
    k.ok(&["delete", "service", "web"]);
    common::wait_for("the endpoints and slices of web to go", WAIT, || {
        let ep = k.run(&["get", "endpoints", "web", "-o", "name"]);
        let slices = k.ok(&[
            "get",
            "endpointslices",
            "-l",
            "kubernetes.io/service-name=web",
            "-o",
            "name",
        ]);
        (!ep.ok && slices.trim().is_empty()).then_some(())
    });
}

//! A Deployment named with 60 characters on a hollow node: its ReplicaSet is
//! `<deployment>-<hash>` (71 characters, a subdomain but not a label) and its pods get names
//! from the ReplicaSet's `generateName`, cut to 58 characters plus 5 random ones, as
//! kube-apiserver's name generator cuts them. They run.

use std::time::Duration;

use serde_json::Value;

use crate::common::hollow::HollowAgent;
use crate::common::kubectl::Kubectl;
use crate::common::wait_for;

#[test]
fn a_deployment_named_with_60_characters_gets_its_replicaset_and_pods() {
    let (_server, k) = Kubectl::start_server(&[]);
    let mut agent = HollowAgent::start(&k.kubeconfig, 1, "ln-", &[]);
    wait_for("the hollow node Ready", Duration::from_secs(60), || {
        agent.proc.assert_running();
        let out = k.run(&[
            "get",
            "node",
            "ln-0",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ]);
        (out.stdout == "True").then_some(())
    });

    let name = format!("web-{}", "l".repeat(56));
    assert_eq!(name.len(), 60);
    k.ok(&[
        "create",
        "deployment",
        &name,
        "--image=nginx",
        "--replicas=2",
    ]);

    let rs = wait_for("the ReplicaSet", Duration::from_secs(60), || {
        let out = k.run(&["get", "replicasets", "-o", "json"]);
        let list: Value = serde_json::from_str(&out.stdout).ok()?;
        list["items"].as_array()?.first().cloned()
    });
    let rs_name = rs["metadata"]["name"].as_str().unwrap().to_string();
    assert!(rs_name.starts_with(&format!("{name}-")), "{rs_name}");
    assert!(rs_name.len() > 63, "{rs_name}");
    assert_eq!(rs["metadata"]["ownerReferences"][0]["name"], name.as_str());

    let pods = wait_for("2 Running pods", Duration::from_secs(90), || {
        agent.proc.assert_running();
        let out = k.run(&["get", "pods", "-o", "json"]);
        let list: Value = serde_json::from_str(&out.stdout).ok()?;
        let items = list["items"].as_array()?.clone();
        let running = items
            .iter()
            .filter(|p| p["status"]["phase"] == "Running")
            .count();
        (running == 2).then_some(items)
    });
    for p in &pods {
        let pod = p["metadata"]["name"].as_str().unwrap();
        assert_eq!(
            p["metadata"]["generateName"],
            format!("{rs_name}-").as_str()
        );
        assert_eq!(pod.len(), 63, "{pod}");
        assert!(pod.starts_with(&rs_name[..58]), "{pod}");
        assert_eq!(
            p["metadata"]["ownerReferences"][0]["name"],
            rs_name.as_str()
        );
        assert_eq!(p["spec"]["nodeName"], "ln-0");
    }
}

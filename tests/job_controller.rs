//! The Job controller on hollow nodes: parallel completions, Indexed Jobs, and the backoff
//! limit, with the tracking finalizer released from every finished pod.

mod common;

use std::time::Duration;

use common::hollow::HollowAgent;
use common::kubectl::Kubectl;

fn get(k: &Kubectl, what: &[&str], path: &str) -> String {
    let arg = format!("jsonpath={path}");
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend(["-o", &arg]);
    k.ok(&args)
}

fn wait_condition(k: &Kubectl, job: &str, condition: &str) {
    common::wait_for(
        &format!("job {job} {condition}"),
        Duration::from_secs(120),
        || {
            let status = get(
                k,
                &["job", job],
                &format!("{{.status.conditions[?(@.type==\"{condition}\")].status}}"),
            );
            (status == "True").then_some(())
        },
    );
}

#[test]
fn jobs_run_to_completion_on_hollow_nodes() {
    let (_server, k) = Kubectl::start_server(&[]);
    // The server's scheduler places the pods; the hollow kubelets run each for a second.
    let _agent = HollowAgent::start(&k.kubeconfig, 3, "jn-", &["--hollow-job-duration", "1s"]);

    // Parallelism 3, completions 6.
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(
            r#"{"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "six"},
        "spec": {"parallelism": 3, "completions": 6, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}"#,
        ),
    );
    // Indexed, 3 completions.
    k.ok_stdin(
        &["apply", "-f", "-"],
        Some(
            r#"{"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "idx"},
        "spec": {"parallelism": 3, "completions": 3, "completionMode": "Indexed",
            "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}"#,
        ),
    );
    // Every pod fails (exit 1): backoffLimit 1 allows two failures.
    k.ok_stdin(&["apply", "-f", "-"], Some(r#"{"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "doomed"},
        "spec": {"backoffLimit": 1, "template": {
            "metadata": {"annotations": {"hollow.k3rs.io/exit-code": "1"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}"#));

    // Never more than `parallelism` pods of it running at once, in every state looked at.
    common::wait_for("job six Complete", Duration::from_secs(120), || {
        let phases = get(
            &k,
            &["pods", "-l", "job-name=six"],
            "{.items[*].status.phase}",
        );
        let active = phases
            .split(' ')
            .filter(|p| !p.is_empty() && *p != "Succeeded" && *p != "Failed")
            .count();
        assert!(active <= 3, "{active} active pods of six: {phases}");
        let status = get(
            &k,
            &["job", "six"],
            "{.status.conditions[?(@.type==\"Complete\")].status}",
        );
        (status == "True").then_some(())
    });
    assert_eq!(
        get(
            &k,
            &["job", "six"],
            "{.status.succeeded} {.status.failed} {.status.active}"
        ),
        "6 0 0"
    );
    assert_eq!(
        get(&k, &["job", "six"], "{.status.conditions[*].type}"),
        "SuccessCriteriaMet Complete"
    );
    assert!(!get(&k, &["job", "six"], "{.status.completionTime}").is_empty());
    let phases = get(
        &k,
        &["pods", "-l", "job-name=six"],
        "{.items[*].status.phase}",
    );
    assert_eq!(
        phases.split(' ').filter(|p| *p == "Succeeded").count(),
        6,
        "{phases}"
    );
    let finalizers = get(
        &k,
        &["pods", "-l", "job-name=six"],
        "{.items[*].metadata.finalizers}",
    );
    assert_eq!(finalizers, "", "tracking finalizers are released");
    let table = k.ok(&["get", "job", "six", "--no-headers"]);
    assert_eq!(
        common::kubectl::table(&table)[0][1..3],
        ["Complete".to_string(), "6/6".to_string()]
    );

    wait_condition(&k, "idx", "Complete");
    assert_eq!(
        get(&k, &["job", "idx"], "{.status.completedIndexes}"),
        "0-2"
    );
    let hostnames = get(
        &k,
        &["pods", "-l", "job-name=idx"],
        "{.items[*].spec.hostname}",
    );
    let mut hostnames: Vec<&str> = hostnames.split(' ').collect();
    hostnames.sort();
    assert_eq!(hostnames, ["idx-0", "idx-1", "idx-2"]);

    wait_condition(&k, "doomed", "Failed");
    assert_eq!(
        get(
            &k,
            &["job", "doomed"],
            "{.status.conditions[?(@.type==\"Failed\")].reason}"
        ),
        "BackoffLimitExceeded"
    );
    assert_eq!(
        get(
            &k,
            &["job", "doomed"],
            "{.status.failed} {.status.succeeded}"
        ),
        "2 0"
    );
}

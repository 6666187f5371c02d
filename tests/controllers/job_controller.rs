//! The Job and CronJob controllers on hollow nodes (pods placed by the server's scheduler):
//! parallel completions, Indexed Jobs, and the backoff limit, with the tracking finalizer
//! released from every finished pod; a `* * * * *` CronJob starts a Job within about a minute
//! and records it, a suspended one starts nothing, and `kubectl create job --from=cronjob/…`
//! makes a Job from the template.

use std::time::Duration;

use crate::common;
use crate::common::hollow::HollowAgent;
use crate::common::kubectl::Kubectl;

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

fn cronjob(name: &str, suspend: bool) -> String {
    format!(
        r#"{{"apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {{"name": "{name}"}},
        "spec": {{"schedule": "* * * * *", "suspend": {suspend},
            "jobTemplate": {{"metadata": {{"labels": {{"cron": "{name}"}}}},
            "spec": {{"template": {{"spec": {{
                "restartPolicy": "Never", "containers": [{{"name": "c", "image": "busybox"}}]}}}}}}}}}}}}"#
    )
}

#[test]
fn a_cronjob_fires_every_minute_and_kubectl_creates_jobs_from_it() {
    let (_server, k) = Kubectl::start_server(&[]);
    let _agent = HollowAgent::start(&k.kubeconfig, 2, "cj-", &["--hollow-job-duration", "1s"]);
    k.ok_stdin(&["apply", "-f", "-"], Some(&cronjob("every", false)));
    k.ok_stdin(&["apply", "-f", "-"], Some(&cronjob("paused", true)));
    let uid = get(&k, &["cronjob", "every"], "{.metadata.uid}");
    // A daily schedule in Asia/Kolkata (UTC+05:30, no daylight saving) at the coming minute:
    // read as UTC it would be 5.5 hours away.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let due_minute = now / 60 + if now % 60 < 45 { 1 } else { 2 };
    let local = (due_minute + 330) % (24 * 60);
    let zoned = cronjob("zoned", false).replace(
        r#""schedule": "* * * * *""#,
        &format!(
            r#""schedule": "{} {} * * *", "timeZone": "Asia/Kolkata""#,
            local % 60,
            local / 60
        ),
    );
    k.ok_stdin(&["apply", "-f", "-"], Some(&zoned));
    let out = k.run_stdin(
        &["apply", "-f", "-"],
        Some(&cronjob("lost", false).replace(
            r#""schedule": "* * * * *""#,
            r#""schedule": "* * * * *", "timeZone": "Mars/Olympus""#,
        )),
    );
    assert!(
        !out.ok
            && out.stderr.contains(
                "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"
            ),
        "{out:?}"
    );

    // The next minute boundary starts a Job named for its schedule time.
    let job = common::wait_for(
        "a Job of the CronJob (the next minute)",
        Duration::from_secs(80),
        || {
            let names = get(
                &k,
                &["jobs", "-l", "cron=every"],
                "{.items[*].metadata.name}",
            );
            names.split(' ').find(|n| !n.is_empty()).map(str::to_string)
        },
    );
    let minutes: i64 = job
        .strip_prefix("every-")
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("job name {job}"));
    let scheduled = get(
        &k,
        &["job", &job],
        "{.metadata.annotations.batch\\.kubernetes\\.io/cronjob-scheduled-timestamp}",
    );
    let expected = std::process::Command::new("date")
        .args([
            "-u",
            "-d",
            &format!("@{}", minutes * 60),
            "+%Y-%m-%dT%H:%M:%SZ",
        ])
        .output()
        .expect("date");
    assert_eq!(
        scheduled,
        String::from_utf8_lossy(&expected.stdout).trim(),
        "the name's minute is the scheduled time"
    );
    assert_eq!(
        get(
            &k,
            &["job", &job],
            "{.metadata.ownerReferences[0].kind} {.metadata.ownerReferences[0].uid} {.metadata.ownerReferences[0].controller}"
        ),
        format!("CronJob {uid} true")
    );
    wait_condition(&k, &job, "Complete");
    common::wait_for(
        "lastSuccessfulTime in the CronJob's status",
        Duration::from_secs(30),
        || {
            let s = get(
                &k,
                &["cronjob", "every"],
                "{.status.lastScheduleTime} {.status.lastSuccessfulTime}",
            );
            s.starts_with(&scheduled).then_some(s)
        },
    );
    let describe = k.ok(&["describe", "cronjob", "every"]);
    assert!(
        describe.contains(&format!("Created job {job}")),
        "{describe}"
    );
    // The suspended one saw the same minute boundary and started nothing.
    assert_eq!(
        get(
            &k,
            &["jobs", "-l", "cron=paused"],
            "{.items[*].metadata.name}"
        ),
        ""
    );
    assert_eq!(
        get(&k, &["cronjob", "paused"], "{.status.lastScheduleTime}"),
        ""
    );

    // The zoned CronJob fired at its local time, named for that instant.
    let zoned_job = common::wait_for(
        "the Asia/Kolkata CronJob's Job",
        Duration::from_secs(150),
        || {
            let names = get(
                &k,
                &["jobs", "-l", "cron=zoned"],
                "{.items[*].metadata.name}",
            );
            names.split(' ').find(|n| !n.is_empty()).map(str::to_string)
        },
    );
    assert_eq!(zoned_job, format!("zoned-{due_minute}"));

    // kubectl makes a Job from the template (client-side), owned by the CronJob.
    let out = k.ok(&["create", "job", "manual", "--from=cronjob/every"]);
    assert!(out.contains("job.batch/manual created"), "{out}");
    assert_eq!(
        get(
            &k,
            &["job", "manual"],
            "{.metadata.annotations.cronjob\\.kubernetes\\.io/instantiate} {.metadata.ownerReferences[0].uid}"
        ),
        format!("manual {uid}")
    );
    wait_condition(&k, "manual", "Complete");
}

//! The Job controller's decision, without I/O: given a Job and the pods it owns, which pods to
//! create, delete and release (finalizer), and the status to write.
//!
//! Pod tracking follows upstream's finalizer protocol, which survives controller restarts: every
//! pod carries the `batch.kubernetes.io/job-tracking` finalizer; a finished pod's UID is first
//! recorded in `status.uncountedTerminatedPods`, then its finalizer is removed, then it moves
//! into `status.succeeded`/`failed`. `Complete`/`Failed` are only added once nothing is uncounted
//! and no pod of the Job runs any more (`SuccessCriteriaMet`/`FailureTarget` come first).
//!
//! Not modelled (yet): the exponential back-off before replacing failed pods,
//! `backoffLimitPerIndex`, `successPolicy`, `podReplacementPolicy: Failed`.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use k8s_openapi::api::batch::v1::{
    Job, JobCondition, JobStatus, PodFailurePolicyRule, UncountedTerminatedPods,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// The finalizer that keeps a Job's pod until the Job counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
/// Annotation (and label) with an Indexed Job pod's completion index.
pub const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// What to do for one Job now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobPlan {
    /// Pods to create: one entry per pod, its completion index for Indexed Jobs.
    pub create: Vec<Option<i32>>,
    /// Names of pods to delete.
    pub delete: Vec<String>,
    /// Names of pods whose tracking finalizer is to be removed.
    pub release: Vec<String>,
    /// The Job's status after this step.
    pub status: JobStatus,
    /// Look again after this long (the active deadline).
    pub requeue_after: Option<Duration>,
}

/// How a failed pod counts under the Job's pod failure policy.
#[derive(Debug, Clone, PartialEq)]
enum FailureAction {
    Count,
    Ignore,
    FailJob(String),
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn has_finalizer(pod: &Pod) -> bool {
    pod.metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == TRACKING_FINALIZER)
}

fn uid(pod: &Pod) -> &str {
    pod.metadata.uid.as_deref().unwrap_or("")
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pod's completion index, if it has a valid one.
pub fn completion_index(pod: &Pod) -> Option<i32> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(COMPLETION_INDEX)?
        .parse()
        .ok()
        .filter(|i| *i >= 0)
}

/// Whether a pod that no longer runs counts as succeeded (`Some(true)`), failed
/// (`Some(false)`), or still runs (`None`). As upstream, a pod being deleted before it
/// succeeded counts as failed.
fn outcome(pod: &Pod) -> Option<bool> {
    match phase(pod) {
        "Succeeded" => Some(true),
        "Failed" => Some(false),
        _ if pod.metadata.deletion_timestamp.is_some() => Some(false),
        _ => None,
    }
}

fn has_condition(status: &JobStatus, type_: &str) -> bool {
    status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == type_ && c.status == "True")
}

/// The first rule of the pod failure policy that matches the failed `pod`.
fn failure_action(job: &Job, pod: &Pod) -> FailureAction {
    let rules: &[PodFailurePolicyRule] = job
        .spec
        .as_ref()
        .and_then(|s| s.pod_failure_policy.as_ref())
        .map(|p| p.rules.as_slice())
        .unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let Some(why) = rule_matches(rule, pod) else {
            continue;
        };
        return match rule.action.as_str() {
            "Ignore" => FailureAction::Ignore,
            "FailJob" => {
                FailureAction::FailJob(format!("{why} matching FailJob rule at index {i}"))
            }
            _ => FailureAction::Count,
        };
    }
    FailureAction::Count
}

/// Why `rule` matches `pod` (upstream's message start), if it does.
fn rule_matches(rule: &PodFailurePolicyRule, pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let pod_name = format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        name(pod)
    );
    if let Some(req) = &rule.on_exit_codes {
        for c in status.container_statuses.iter().flatten() {
            if req.container_name.as_ref().is_some_and(|n| *n != c.name) {
                continue;
            }
            let Some(code) = c.state.as_ref()?.terminated.as_ref().map(|t| t.exit_code) else {
                continue;
            };
            if code == 0 {
                continue;
            }
            let listed = req.values.contains(&code);
            let hit = match req.operator.as_str() {
                "In" => listed,
                "NotIn" => !listed,
                _ => false,
            };
            if hit {
                return Some(format!(
                    "Container {} for pod {pod_name} failed with exit code {code}",
                    c.name
                ));
            }
        }
        return None;
    }
    for pattern in rule.on_pod_conditions.iter().flatten() {
        let want = pattern.status.as_str();
        if status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == pattern.type_ && c.status == want)
        {
            return Some(format!("Pod {pod_name} has condition {}", pattern.type_));
        }
    }
    None
}

fn condition(type_: &str, reason: &str, message: &str, now: Timestamp) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

fn add_condition(conditions: &mut Vec<JobCondition>, c: JobCondition) {
    if !conditions
        .iter()
        .any(|x| x.type_ == c.type_ && x.status == "True")
    {
        conditions.retain(|x| x.type_ != c.type_);
        conditions.push(c);
    }
}

/// `0-2,4,7-8`: sorted indexes, runs compressed, as upstream formats `completedIndexes`.
pub fn format_indexes(indexes: &BTreeSet<i32>) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut iter = indexes.iter().copied().peekable();
    while let Some(start) = iter.next() {
        let mut end = start;
        while iter.peek() == Some(&(end + 1)) {
            end = iter.next().unwrap_or(end);
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    out.join(",")
}

/// The inverse of [`format_indexes`]; malformed parts are skipped.
pub fn parse_indexes(s: &str) -> BTreeSet<i32> {
    let mut out = BTreeSet::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<i32>(), b.parse::<i32>()) {
                    out.extend(a..=b);
                }
            }
            None => out.extend(part.parse::<i32>().ok()),
        }
    }
    out
}

/// Decides the next step for `job`, owning `pods`, at `now`.
pub fn plan(job: &Job, pods: &[&Pod], now: Timestamp) -> JobPlan {
    let spec = job.spec.clone().unwrap_or_default();
    let old = job.status.clone().unwrap_or_default();
    let indexed = spec.completion_mode.as_deref() == Some("Indexed");
    let parallelism = spec.parallelism.unwrap_or(1).max(0);
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let suspended = spec.suspend == Some(true);
    let finished = has_condition(&old, "Complete") || has_condition(&old, "Failed");

    let mut pods: Vec<&Pod> = pods.to_vec();
    pods.sort_by_key(|p| name(p));
    let by_uid: HashMap<&str, &Pod> = pods.iter().map(|p| (uid(p), *p)).collect();
    let uncounted = old.uncounted_terminated_pods.clone().unwrap_or_default();
    let mut succeeded = old.succeeded.unwrap_or(0);
    let mut failed = old.failed.unwrap_or(0);
    // Released pods (finalizer gone, or the pod gone) move into the counts.
    let mut uncounted_ok: Vec<String> = Vec::new();
    for u in uncounted.succeeded.unwrap_or_default() {
        match by_uid.get(u.as_str()) {
            Some(p) if has_finalizer(p) => uncounted_ok.push(u),
            _ => succeeded += 1,
        }
    }
    let mut uncounted_failed: Vec<String> = Vec::new();
    for u in uncounted.failed.unwrap_or_default() {
        match by_uid.get(u.as_str()) {
            Some(p) if has_finalizer(p) => uncounted_failed.push(u),
            _ => failed += 1,
        }
    }

    let mut plan = JobPlan::default();
    let mut fail_job: Option<(String, String)> = None;
    for pod in &pods {
        if !has_finalizer(pod) {
            continue;
        }
        let u = uid(pod).to_string();
        if uncounted_ok.contains(&u) || uncounted_failed.contains(&u) {
            plan.release.push(name(pod));
            continue;
        }
        match outcome(pod) {
            Some(true) => uncounted_ok.push(u),
            Some(false) => match failure_action(job, pod) {
                FailureAction::Ignore => plan.release.push(name(pod)),
                FailureAction::Count => uncounted_failed.push(u),
                FailureAction::FailJob(message) => {
                    uncounted_failed.push(u);
                    fail_job.get_or_insert(("PodFailurePolicy".into(), message));
                }
            },
            None => {}
        }
    }

    let active: Vec<&Pod> = pods
        .iter()
        .copied()
        .filter(|p| outcome(p).is_none())
        .collect();
    let terminating = pods
        .iter()
        .filter(|p| {
            p.metadata.deletion_timestamp.is_some() && !matches!(phase(p), "Succeeded" | "Failed")
        })
        .count() as i32;
    let succeeded_total = succeeded + uncounted_ok.len() as i32;
    let failed_total = failed + uncounted_failed.len() as i32;
    let restarts: i32 = if spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        == Some("OnFailure")
    {
        active
            .iter()
            .filter_map(|p| p.status.as_ref()?.container_statuses.as_ref())
            .flatten()
            .map(|c| c.restart_count)
            .sum()
    } else {
        0
    };

    let mut completed: BTreeSet<i32> =
        parse_indexes(old.completed_indexes.as_deref().unwrap_or(""));
    if indexed {
        let completions = spec.completions.unwrap_or(0);
        completed.extend(
            pods.iter()
                .filter(|p| phase(p) == "Succeeded")
                .filter_map(|p| completion_index(p))
                .filter(|i| *i < completions),
        );
    }

    let start_time = old.start_time.clone().or((!suspended).then_some(Time(now)));
    let mut conditions = old.conditions.clone().unwrap_or_default();
    let mut completion_time = old.completion_time.clone();

    if fail_job.is_none() && failed_total + restarts > backoff_limit {
        fail_job = Some((
            "BackoffLimitExceeded".into(),
            "Job has reached the specified backoff limit".into(),
        ));
    }
    if let (None, Some(limit), Some(start)) = (&fail_job, spec.active_deadline_seconds, &start_time)
    {
        let deadline = start
            .0
            .checked_add(Duration::from_secs(limit.max(0) as u64))
            .unwrap_or(Timestamp::MAX);
        if now >= deadline {
            fail_job = Some((
                "DeadlineExceeded".into(),
                "Job was active longer than specified deadline".into(),
            ));
        } else if !finished && !suspended {
            plan.requeue_after = Some(deadline.duration_since(now).unsigned_abs());
        }
    }
    let complete = match (indexed, spec.completions) {
        (true, Some(c)) => completed.len() as i32 >= c,
        (false, Some(c)) => succeeded_total >= c,
        (_, None) => succeeded_total > 0 && active.is_empty(),
    };
    let settled = uncounted_ok.is_empty() && uncounted_failed.is_empty();
    let running_none = active.is_empty() && terminating == 0;

    if finished {
        plan.delete = active.iter().map(|p| name(p)).collect();
    } else if has_condition(&old, "FailureTarget") || fail_job.is_some() {
        let (reason, message) = fail_job.unwrap_or_else(|| {
            let target = conditions.iter().find(|c| c.type_ == "FailureTarget");
            (
                target.and_then(|c| c.reason.clone()).unwrap_or_default(),
                target.and_then(|c| c.message.clone()).unwrap_or_default(),
            )
        });
        add_condition(
            &mut conditions,
            condition("FailureTarget", &reason, &message, now),
        );
        plan.delete = active.iter().map(|p| name(p)).collect();
        if settled && running_none {
            add_condition(&mut conditions, condition("Failed", &reason, &message, now));
        }
    } else if complete || has_condition(&old, "SuccessCriteriaMet") {
        let (reason, message) = (
            "CompletionsReached",
            "Reached expected number of succeeded pods",
        );
        add_condition(
            &mut conditions,
            condition("SuccessCriteriaMet", reason, message, now),
        );
        plan.delete = active.iter().map(|p| name(p)).collect();
        if settled && running_none {
            add_condition(&mut conditions, condition("Complete", reason, message, now));
            completion_time = Some(Time(now));
        }
    } else if suspended {
        add_condition(
            &mut conditions,
            condition("Suspended", "JobSuspended", "Job suspended", now),
        );
        plan.delete = active.iter().map(|p| name(p)).collect();
    } else {
        if let Some(c) = conditions
            .iter_mut()
            .find(|c| c.type_ == "Suspended" && c.status == "True")
        {
            *c = JobCondition {
                status: "False".into(),
                ..condition("Suspended", "JobResumed", "Job resumed", now)
            };
        }
        if indexed {
            scale_indexed(
                &mut plan,
                &active,
                &completed,
                spec.completions.unwrap_or(0),
                parallelism,
            );
        } else {
            let wanted = match spec.completions {
                Some(c) => parallelism.min(c - succeeded_total),
                // Work queue: after a success no new pods, the running ones finish.
                None if succeeded_total > 0 => active.len() as i32,
                None => parallelism,
            }
            .max(0) as usize;
            if active.len() < wanted {
                plan.create = vec![None; wanted - active.len()];
            } else {
                plan.delete = excess(&active, active.len() - wanted);
            }
        }
    }

    let ready = active.iter().filter(|p| is_ready(p)).count() as i32;
    let deleting: BTreeSet<&String> = plan.delete.iter().collect();
    let active_after = active
        .iter()
        .filter(|p| !deleting.contains(&name(p)))
        .count() as i32;
    plan.status = JobStatus {
        active: Some(active_after),
        ready: Some(ready),
        terminating: Some(terminating + (active.len() as i32 - active_after)),
        succeeded: Some(succeeded),
        failed: Some(failed),
        start_time,
        completion_time,
        completed_indexes: indexed.then(|| format_indexes(&completed)),
        uncounted_terminated_pods: Some(UncountedTerminatedPods {
            succeeded: (!uncounted_ok.is_empty()).then_some(uncounted_ok),
            failed: (!uncounted_failed.is_empty()).then_some(uncounted_failed),
        }),
        conditions: (!conditions.is_empty()).then_some(conditions),
        ..old
    };
    plan
}

/// `n` pods to delete when there are too many: not ready before ready, later names first.
fn excess(active: &[&Pod], n: usize) -> Vec<String> {
    let mut order: Vec<&Pod> = active.to_vec();
    order.sort_by_key(|p| (is_ready(p), std::cmp::Reverse(name(p))));
    order.into_iter().take(n).map(name).collect()
}

/// Indexed Jobs: create the lowest indexes that neither succeeded nor run, up to
/// `parallelism` running; delete pods with a bad, completed or duplicate index.
fn scale_indexed(
    plan: &mut JobPlan,
    active: &[&Pod],
    completed: &BTreeSet<i32>,
    completions: i32,
    parallelism: i32,
) {
    let mut running: BTreeSet<i32> = BTreeSet::new();
    for pod in active {
        match completion_index(pod) {
            Some(i) if i < completions && !completed.contains(&i) && running.insert(i) => {}
            _ => plan.delete.push(name(pod)),
        }
    }
    let remaining = completions - completed.len() as i32;
    let wanted = parallelism.min(remaining).max(0) as usize;
    let missing = (0..completions).filter(|i| !completed.contains(i) && !running.contains(i));
    plan.create = missing
        .take(wanted.saturating_sub(running.len()))
        .map(Some)
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    const NOW: &str = "2026-01-01T00:01:00Z";

    fn now() -> Timestamp {
        NOW.parse().unwrap()
    }

    fn job(spec: Value, status: Value) -> Job {
        let mut s = json!({
            "parallelism": 1, "completions": 1, "backoffLimit": 6,
            "completionMode": "NonIndexed",
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}},
        });
        for (k, v) in spec.as_object().unwrap() {
            s[k] = v.clone();
        }
        serde_json::from_value(json!({
            "metadata": {"name": "j", "namespace": "ns", "uid": "ju"},
            "spec": s,
            "status": status,
        }))
        .unwrap()
    }

    fn pod(name: &str, phase: &str, extra: Value) -> Pod {
        let mut p = json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("u-{name}"),
                "finalizers": [TRACKING_FINALIZER]},
            "spec": {"containers": [{"name": "c"}]},
            "status": {"phase": phase},
        });
        for (k, v) in extra.as_object().unwrap() {
            for (k2, v2) in v.as_object().unwrap() {
                p[k][k2] = v2.clone();
            }
        }
        serde_json::from_value(p).unwrap()
    }

    fn refs(pods: &[Pod]) -> Vec<&Pod> {
        pods.iter().collect()
    }

    fn conds(plan: &JobPlan) -> Vec<(String, String, String)> {
        plan.status
            .conditions
            .iter()
            .flatten()
            .map(|c| {
                (
                    c.type_.clone(),
                    c.status.clone(),
                    c.reason.clone().unwrap_or_default(),
                )
            })
            .collect()
    }

    fn uncounted(plan: &JobPlan) -> (Vec<String>, Vec<String>) {
        let u = plan.status.uncounted_terminated_pods.clone().unwrap();
        (
            u.succeeded.unwrap_or_default(),
            u.failed.unwrap_or_default(),
        )
    }

    #[test]
    fn a_new_job_creates_parallelism_pods_and_starts() {
        let j = job(json!({"parallelism": 3, "completions": 6}), json!({}));
        let plan = plan(&j, &[], now());
        assert_eq!(plan.create, vec![None, None, None]);
        assert!(plan.delete.is_empty());
        assert_eq!(plan.status.start_time, Some(Time(now())));
        assert_eq!(plan.status.active, Some(0));
        assert_eq!(plan.status.succeeded, Some(0));
    }

    #[test]
    fn never_more_pods_than_completions_left() {
        let j = job(
            json!({"parallelism": 3, "completions": 6}),
            json!({"succeeded": 4, "startTime": "2026-01-01T00:00:00Z"}),
        );
        let pods = [pod("a", "Running", json!({}))];
        let plan = plan(&j, &refs(&pods), now());
        assert_eq!(plan.create, vec![None]);
        assert_eq!(plan.status.active, Some(1));
    }

    #[test]
    fn finished_pods_are_counted_through_the_finalizer_protocol() {
        let j = job(
            json!({"parallelism": 2, "completions": 2}),
            json!({"startTime": NOW}),
        );
        let pods = [
            pod("a", "Succeeded", json!({})),
            pod("b", "Running", json!({})),
        ];
        // 1: the finished pod's UID is recorded as uncounted; no replacement for it.
        let p1 = plan(&j, &refs(&pods), now());
        assert_eq!(uncounted(&p1), (vec!["u-a".to_string()], vec![]));
        assert!(p1.release.is_empty());
        assert!(p1.create.is_empty());
        assert_eq!(p1.status.succeeded, Some(0));
        // 2: recorded, so its finalizer goes.
        let j2 = Job {
            status: Some(p1.status),
            ..j.clone()
        };
        let p2 = plan(&j2, &refs(&pods), now());
        assert_eq!(p2.release, vec!["a".to_string()]);
        // 3: released: counted.
        let mut released = pods.clone();
        released[0].metadata.finalizers = None;
        let j3 = Job {
            status: Some(p2.status),
            ..j
        };
        let p3 = plan(&j3, &refs(&released), now());
        assert_eq!(uncounted(&p3), (vec![], vec![]));
        assert_eq!(p3.status.succeeded, Some(1));
        assert_eq!(p3.status.active, Some(1));
    }

    #[test]
    fn the_job_completes_once_counted_and_nothing_runs() {
        let j = job(
            json!({"parallelism": 2, "completions": 2}),
            json!({"succeeded": 2, "startTime": "2026-01-01T00:00:00Z"}),
        );
        let plan = plan(&j, &[], now());
        assert_eq!(
            conds(&plan),
            vec![
                (
                    "SuccessCriteriaMet".into(),
                    "True".into(),
                    "CompletionsReached".into()
                ),
                (
                    "Complete".into(),
                    "True".into(),
                    "CompletionsReached".into()
                ),
            ]
        );
        assert_eq!(plan.status.completion_time, Some(Time(now())));
        assert!(plan.create.is_empty());
    }

    #[test]
    fn success_criteria_first_while_uncounted() {
        let j = job(json!({}), json!({"startTime": NOW}));
        let pods = [pod("a", "Succeeded", json!({}))];
        let plan = plan(&j, &refs(&pods), now());
        assert_eq!(
            conds(&plan),
            vec![(
                "SuccessCriteriaMet".into(),
                "True".into(),
                "CompletionsReached".into()
            )]
        );
        assert_eq!(plan.status.completion_time, None);
    }

    #[test]
    fn too_many_failures_fail_the_job_and_stop_its_pods() {
        let j = job(
            json!({"parallelism": 2, "completions": 4, "backoffLimit": 1}),
            json!({"failed": 1, "startTime": NOW}),
        );
        let pods = [
            pod("a", "Failed", json!({})),
            pod("b", "Running", json!({})),
        ];
        let plan = plan(&j, &refs(&pods), now());
        assert_eq!(
            conds(&plan),
            vec![(
                "FailureTarget".into(),
                "True".into(),
                "BackoffLimitExceeded".into()
            )]
        );
        assert_eq!(plan.delete, vec!["b".to_string()]);
        assert!(plan.create.is_empty());
        assert_eq!(plan.status.active, Some(0));
        assert_eq!(plan.status.terminating, Some(1));
        // Once counted and nothing runs: Failed.
        let j = job(
            json!({"parallelism": 2, "completions": 4, "backoffLimit": 1}),
            json!({"failed": 2, "startTime": NOW, "conditions": plan.status.conditions}),
        );
        let done = super::plan(&j, &[], now());
        assert_eq!(
            conds(&done),
            vec![
                (
                    "FailureTarget".into(),
                    "True".into(),
                    "BackoffLimitExceeded".into()
                ),
                (
                    "Failed".into(),
                    "True".into(),
                    "BackoffLimitExceeded".into()
                ),
            ]
        );
    }

    #[test]
    fn restarts_count_against_the_backoff_limit_with_on_failure() {
        let j = job(
            json!({"backoffLimit": 2, "template": {"spec": {"restartPolicy": "OnFailure",
                "containers": [{"name": "c"}]}}}),
            json!({"startTime": NOW}),
        );
        let pods = [pod(
            "a",
            "Running",
            json!({"status": {"containerStatuses": [{"name": "c", "image": "", "imageID": "",
                "ready": true, "restartCount": 3}]}}),
        )];
        let plan = plan(&j, &refs(&pods), now());
        assert_eq!(conds(&plan)[0].2, "BackoffLimitExceeded");
        assert_eq!(plan.delete, vec!["a".to_string()]);
    }

    #[test]
    fn the_active_deadline_fails_the_job_or_is_waited_for() {
        let j = job(
            json!({"activeDeadlineSeconds": 100}),
            json!({"startTime": "2026-01-01T00:00:00Z"}),
        );
        let pods = [pod("a", "Running", json!({}))];
        let waiting = plan(&j, &refs(&pods), now());
        assert_eq!(waiting.requeue_after, Some(Duration::from_secs(40)));
        assert!(conds(&waiting).is_empty());
        let late = plan(&j, &refs(&pods), "2026-01-01T00:01:40Z".parse().unwrap());
        assert_eq!(
            conds(&late),
            vec![(
                "FailureTarget".into(),
                "True".into(),
                "DeadlineExceeded".into()
            )]
        );
        assert_eq!(late.delete, vec!["a".to_string()]);
    }

    #[test]
    fn pod_failure_policy_fail_job_and_ignore() {
        let policy = json!({"podFailurePolicy": {"rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}},
        ]}});
        let j = job(policy, json!({"startTime": NOW}));
        let exit = |code: i32| {
            json!({"status": {"containerStatuses": [{"name": "c", "image": "",
            "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": code}}}]}})
        };
        let fatal = [pod("a", "Failed", exit(42))];
        let p = plan(&j, &refs(&fatal), now());
        let target = p.status.conditions.clone().unwrap()[0].clone();
        assert_eq!(target.reason.as_deref(), Some("PodFailurePolicy"));
        assert_eq!(
            target.message.as_deref(),
            Some("Container c for pod ns/a failed with exit code 42 matching FailJob rule at index 1")
        );
        let disrupted = [pod(
            "b",
            "Failed",
            json!({"status": {"conditions": [{"type": "DisruptionTarget", "status": "True"}]}}),
        )];
        let p = plan(&j, &refs(&disrupted), now());
        assert_eq!(p.release, vec!["b".to_string()]);
        assert_eq!(uncounted(&p), (vec![], vec![]));
        assert!(conds(&p).is_empty());
        assert_eq!(p.create, vec![None], "an ignored failure is replaced");
        let counted = [pod("c", "Failed", exit(1))];
        let p = plan(&j, &refs(&counted), now());
        assert_eq!(uncounted(&p), (vec![], vec!["u-c".to_string()]));
    }

    #[test]
    fn a_deleted_running_pod_counts_as_failed() {
        let j = job(json!({}), json!({"startTime": NOW}));
        let pods = [pod(
            "a",
            "Running",
            json!({"metadata": {"deletionTimestamp": NOW}}),
        )];
        let p = plan(&j, &refs(&pods), now());
        assert_eq!(uncounted(&p), (vec![], vec!["u-a".to_string()]));
        assert_eq!(p.create, vec![None]);
    }

    fn indexed_pod(name: &str, phase: &str, index: i32) -> Pod {
        pod(
            name,
            phase,
            json!({"metadata": {"annotations": {COMPLETION_INDEX: index.to_string()}}}),
        )
    }

    #[test]
    fn indexed_jobs_fill_the_lowest_missing_indexes() {
        let j = job(
            json!({"completionMode": "Indexed", "parallelism": 3, "completions": 5}),
            json!({"startTime": NOW, "completedIndexes": "0"}),
        );
        let pods = [
            indexed_pod("j-1", "Running", 1),
            indexed_pod("j-2", "Succeeded", 2),
            indexed_pod("j-1b", "Running", 1),
            indexed_pod("j-9", "Running", 9),
        ];
        let p = plan(&j, &refs(&pods), now());
        assert_eq!(p.status.completed_indexes.as_deref(), Some("0,2"));
        assert_eq!(p.delete, vec!["j-1b".to_string(), "j-9".to_string()]);
        assert_eq!(p.create, vec![Some(3), Some(4)]);
    }

    #[test]
    fn index_sets_round_trip_in_upstream_format() {
        let set: BTreeSet<i32> = [0, 1, 2, 4, 7, 8].into();
        assert_eq!(format_indexes(&set), "0-2,4,7-8");
        assert_eq!(parse_indexes("0-2,4,7-8"), set);
        assert_eq!(format_indexes(&BTreeSet::new()), "");
    }

    #[test]
    fn work_queue_jobs_stop_creating_after_a_success() {
        let j = job(
            json!({"parallelism": 2, "completions": null}),
            json!({"succeeded": 1, "startTime": NOW}),
        );
        let pods = [pod("b", "Running", json!({}))];
        let p = plan(&j, &refs(&pods), now());
        assert!(p.create.is_empty());
        assert!(p.delete.is_empty(), "the running pods finish");
    }

    #[test]
    fn a_suspended_job_deletes_its_pods() {
        let j = job(json!({"suspend": true}), json!({}));
        let pods = [pod("a", "Running", json!({}))];
        let p = plan(&j, &refs(&pods), now());
        assert_eq!(p.delete, vec!["a".to_string()]);
        assert_eq!(p.status.start_time, None);
        assert_eq!(
            conds(&p),
            vec![("Suspended".into(), "True".into(), "JobSuspended".into())]
        );
    }
}

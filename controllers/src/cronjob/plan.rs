//! What a CronJob needs now (upstream's `syncCronJob`), without I/O: the status from its Jobs,
//! the Job to start for the most recent missed schedule (if the deadline, the suspension and
//! the concurrency policy allow), the Jobs to delete (replaced, or past the history limits),
//! and when to look again.

use std::time::Duration;

use k8s_openapi::api::batch::v1::{CronJob, CronJobStatus, Job};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{Timestamp, Zoned};

use k3rs_apimachinery::cron::Schedule;

/// Annotation with the scheduled time a Job was created for.
pub const SCHEDULED_TIMESTAMP: &str = "batch.kubernetes.io/cronjob-scheduled-timestamp";

/// At most this many missed start times are counted (upstream warns past 100).
const MISSED_CAP: usize = 101;

/// An event to record on the CronJob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// The plan for one CronJob.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    pub status: CronJobStatus,
    /// A Job to create.
    pub create: Option<Job>,
    /// Names of Jobs to delete (background propagation).
    pub delete: Vec<String>,
    pub events: Vec<Event>,
    pub requeue_after: Option<Duration>,
}

/// Whether a Job has finished, and whether it succeeded.
fn finished(job: &Job) -> Option<bool> {
    let conds = job.status.as_ref()?.conditions.as_ref()?;
    conds
        .iter()
        .filter(|c| c.status == "True")
        .find_map(|c| match c.type_.as_str() {
            "Complete" => Some(true),
            "Failed" => Some(false),
            _ => None,
        })
}

/// The reference to `job` kept in `status.active`.
pub fn reference(job: &Job) -> ObjectReference {
    ObjectReference {
        api_version: Some("batch/v1".into()),
        kind: Some("Job".into()),
        name: job.metadata.name.clone(),
        namespace: job.metadata.namespace.clone(),
        uid: job.metadata.uid.clone(),
        resource_version: job.metadata.resource_version.clone(),
        ..ObjectReference::default()
    }
}

/// The name of the Job for the schedule time `t`: `<cronjob>-<minutes since the epoch>`.
pub fn job_name(cronjob: &str, t: Timestamp) -> String {
    format!("{cronjob}-{}", t.as_second() / 60)
}

/// The Job the CronJob's template makes for the schedule time `t`.
pub fn job_for(cj: &CronJob, t: &Zoned) -> Job {
    let name = cj.metadata.name.clone().unwrap_or_default();
    let tmpl = cj
        .spec
        .as_ref()
        .map(|s| s.job_template.clone())
        .unwrap_or_default();
    let meta = tmpl.metadata.unwrap_or_default();
    let mut annotations = meta.annotations.unwrap_or_default();
    annotations.insert(SCHEDULED_TIMESTAMP.into(), t.timestamp().to_string());
    Job {
        metadata: ObjectMeta {
            name: Some(job_name(&name, t.timestamp())),
            namespace: cj.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "CronJob".into(),
                name,
                uid: cj.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: tmpl.spec,
        status: None,
    }
}

/// Plans `cj` with its `jobs` (those it controls) at `now`.
pub fn plan(cj: &CronJob, jobs: &[&Job], now: Timestamp) -> Plan {
    let spec = cj.spec.clone().unwrap_or_default();
    let old = cj.status.clone().unwrap_or_default();
    let mut p = Plan::default();
    let (mut active, mut done): (Vec<&Job>, Vec<(&Job, bool)>) = (Vec::new(), Vec::new());
    for j in jobs {
        match finished(j) {
            Some(ok) => done.push((j, ok)),
            None => active.push(j),
        }
    }
    let last_success = done
        .iter()
        .filter(|(_, ok)| *ok)
        .filter_map(|(j, _)| j.status.as_ref()?.completion_time.clone())
        .max();
    p.status = CronJobStatus {
        active: (!active.is_empty()).then(|| active.iter().map(|j| reference(j)).collect()),
        last_schedule_time: old.last_schedule_time.clone(),
        last_successful_time: last_success.or(old.last_successful_time.clone()),
    };
    for (j, ok) in &done {
        let name = j.metadata.name.clone().unwrap_or_default();
        let was_active = old.active.iter().flatten().any(|r| r.uid == j.metadata.uid);
        if was_active {
            let status = if *ok { "Complete" } else { "Failed" };
            p.events.push(Event {
                warning: false,
                reason: "SawCompletedJob",
                message: format!("Saw completed job: {name}, status: {status}"),
            });
        }
    }
    history(&spec, &done, &mut p);
    if cj.metadata.deletion_timestamp.is_some() {
        return p;
    }
    let tz = match spec.time_zone.as_deref() {
        None | Some("UTC") | Some("Etc/UTC") => TimeZone::UTC,
        Some(name) => match TimeZone::get(name) {
            Ok(tz) => tz,
            Err(_) => {
                p.events.push(Event {
                    warning: true,
                    reason: "UnknownTimeZone",
                    message: format!("invalid timeZone: {name:?}"),
                });
                return p;
            }
        },
    };
    let schedule = match Schedule::parse(&spec.schedule) {
        Ok(s) => s,
        Err(e) => {
            p.events.push(Event {
                warning: true,
                reason: "UnparseableSchedule",
                message: format!("unparseable schedule: {:?} : {e}", spec.schedule),
            });
            return p;
        }
    };
    let now_z = now.to_zoned(tz.clone());
    p.requeue_after = schedule.next_after(&now_z).map(|next| {
        let secs = (next.timestamp().as_second() - now.as_second()).max(0) as u64;
        Duration::from_secs(secs) + Duration::from_millis(100)
    });
    if spec.suspend == Some(true) {
        return p;
    }
    let created = cj
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(now);
    let mut earliest = old
        .last_schedule_time
        .as_ref()
        .map(|t| t.0)
        .unwrap_or(created);
    if let Some(d) = spec.starting_deadline_seconds {
        let floor = Timestamp::from_second(now.as_second() - d).unwrap_or(now);
        earliest = earliest.max(floor);
    }
    let Some((t, missed)) = schedule.most_recent(&earliest.to_zoned(tz), &now_z, MISSED_CAP) else {
        return p;
    };
    if missed >= MISSED_CAP {
        p.events.push(Event {
            warning: true,
            reason: "TooManyMissedTimes",
            message: "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew".into(),
        });
    }
    if let Some(d) = spec.starting_deadline_seconds {
        if t.timestamp().as_second() + d < now.as_second() {
            return p;
        }
    }
    let name = job_name(&cj.metadata.name.clone().unwrap_or_default(), t.timestamp());
    if jobs
        .iter()
        .any(|j| j.metadata.name.as_deref() == Some(&name))
    {
        p.status.last_schedule_time = Some(Time(t.timestamp()));
        return p;
    }
    match spec.concurrency_policy.as_deref() {
        Some("Forbid") if !active.is_empty() => {
            p.events.push(Event {
                warning: false,
                reason: "JobAlreadyActive",
                message: "Not starting job because prior execution is running and concurrency policy is Forbid".into(),
            });
            return p;
        }
        Some("Replace") => {
            for j in &active {
                p.delete.push(j.metadata.name.clone().unwrap_or_default());
            }
        }
        _ => {}
    }
    p.create = Some(job_for(cj, &t));
    p.status.last_schedule_time = Some(Time(t.timestamp()));
    p
}

/// Finished Jobs past `successfulJobsHistoryLimit` (3) and `failedJobsHistoryLimit` (1),
/// oldest first.
fn history(spec: &k8s_openapi::api::batch::v1::CronJobSpec, done: &[(&Job, bool)], p: &mut Plan) {
    for (ok, limit) in [
        (true, spec.successful_jobs_history_limit.unwrap_or(3)),
        (false, spec.failed_jobs_history_limit.unwrap_or(1)),
    ] {
        let mut these: Vec<&Job> = done
            .iter()
            .filter(|(_, o)| *o == ok)
            .map(|(j, _)| *j)
            .collect();
        let excess = these.len().saturating_sub(limit.max(0) as usize);
        these.sort_by_key(|j| {
            (
                j.status.as_ref().and_then(|s| s.start_time.clone()),
                j.metadata.name.clone(),
            )
        });
        for j in these.into_iter().take(excess) {
            p.delete.push(j.metadata.name.clone().unwrap_or_default());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use serde_json::json;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn cron(extra: serde_json::Value, status: serde_json::Value) -> CronJob {
        let mut spec = json!({"schedule": "*/5 * * * *", "jobTemplate": {
            "metadata": {"labels": {"app": "c"}},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}});
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        serde_json::from_value(json!({
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1",
                "creationTimestamp": "2026-11-21T10:00:00Z"},
            "spec": spec, "status": status,
        }))
        .unwrap()
    }

    fn job(name: &str, state: Option<&str>, start: &str) -> Job {
        Job {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(JobStatus {
                start_time: Some(Time(ts(start))),
                completion_time: (state == Some("Complete")).then(|| Time(ts(start))),
                conditions: state.map(|s| {
                    vec![JobCondition {
                        type_: s.into(),
                        status: "True".into(),
                        ..JobCondition::default()
                    }]
                }),
                ..JobStatus::default()
            }),
        }
    }

    #[test]
    fn the_most_recent_missed_time_starts_a_job() {
        let cj = cron(
            json!({}),
            json!({"lastScheduleTime": "2026-11-21T10:05:00Z"}),
        );
        let p = plan(&cj, &[], ts("2026-11-21T10:17:30Z"));
        let created = p.create.unwrap();
        // 10:15 UTC is minute 29,398,815 since the epoch... as upstream names it.
        let t = ts("2026-11-21T10:15:00Z");
        assert_eq!(
            created.metadata.name,
            Some(format!("c-{}", t.as_second() / 60))
        );
        assert_eq!(
            created.metadata.annotations.unwrap()[SCHEDULED_TIMESTAMP],
            "2026-11-21T10:15:00Z"
        );
        assert_eq!(created.metadata.owner_references.unwrap()[0].uid, "u1");
        assert_eq!(created.metadata.labels.unwrap()["app"], "c");
        assert_eq!(p.status.last_schedule_time, Some(Time(t)));
        // Next at 10:20:00, 150 s later (+100 ms).
        assert_eq!(p.requeue_after, Some(Duration::from_millis(150_100)));
    }

    #[test]
    fn nothing_due_suspended_or_past_the_deadline() {
        let cj = cron(
            json!({}),
            json!({"lastScheduleTime": "2026-11-21T10:15:00Z"}),
        );
        assert_eq!(plan(&cj, &[], ts("2026-11-21T10:17:30Z")).create, None);
        let cj = cron(json!({"suspend": true}), json!({}));
        assert_eq!(plan(&cj, &[], ts("2026-11-21T10:17:30Z")).create, None);
        let cj = cron(json!({"startingDeadlineSeconds": 60}), json!({}));
        assert_eq!(plan(&cj, &[], ts("2026-11-21T10:17:30Z")).create, None);
        assert!(plan(&cj, &[], ts("2026-11-21T10:15:30Z")).create.is_some());
    }

    #[test]
    fn concurrency_policies() {
        let running = job("c-1", None, "2026-11-21T10:10:00Z");
        let at = ts("2026-11-21T10:15:10Z");
        let forbid = cron(
            json!({"concurrencyPolicy": "Forbid"}),
            json!({"lastScheduleTime": "2026-11-21T10:10:00Z"}),
        );
        let p = plan(&forbid, &[&running], at);
        assert_eq!(p.create, None);
        assert_eq!(p.events[0].reason, "JobAlreadyActive");
        assert_eq!(p.status.active.unwrap()[0].name.as_deref(), Some("c-1"));
        let replace = cron(
            json!({"concurrencyPolicy": "Replace"}),
            json!({"lastScheduleTime": "2026-11-21T10:10:00Z"}),
        );
        let p = plan(&replace, &[&running], at);
        assert_eq!(p.delete, ["c-1"]);
        assert!(p.create.is_some());
        let allow = cron(
            json!({}),
            json!({"lastScheduleTime": "2026-11-21T10:10:00Z"}),
        );
        let p = plan(&allow, &[&running], at);
        assert_eq!(p.delete, Vec::<String>::new());
        assert!(p.create.is_some());
    }

    #[test]
    fn history_limits_delete_the_oldest_finished_jobs() {
        let jobs = [
            job("s1", Some("Complete"), "2026-11-21T10:00:00Z"),
            job("s2", Some("Complete"), "2026-11-21T10:05:00Z"),
            job("f1", Some("Failed"), "2026-11-21T10:06:00Z"),
            job("f2", Some("Failed"), "2026-11-21T10:07:00Z"),
            job("s3", Some("Complete"), "2026-11-21T10:08:00Z"),
        ];
        let refs: Vec<&Job> = jobs.iter().collect();
        let cj = cron(
            json!({"successfulJobsHistoryLimit": 2}),
            json!({"lastScheduleTime": "2026-11-21T10:15:00Z"}),
        );
        let p = plan(&cj, &refs, ts("2026-11-21T10:16:00Z"));
        assert_eq!(p.delete, ["s1", "f1"]);
        assert_eq!(p.status.active, None);
        assert_eq!(
            p.status.last_successful_time,
            Some(Time(ts("2026-11-21T10:08:00Z")))
        );
    }

    #[test]
    fn a_bad_schedule_or_zone_is_reported() {
        let cj = cron(json!({"schedule": "61 * * * *"}), json!({}));
        let p = plan(&cj, &[], ts("2026-11-21T10:16:00Z"));
        assert_eq!(p.events[0].reason, "UnparseableSchedule");
        assert_eq!(p.create, None);
        let cj = cron(json!({"timeZone": "Mars/Olympus_Mons"}), json!({}));
        let p = plan(&cj, &[], ts("2026-11-21T10:16:00Z"));
        assert_eq!(p.events[0].reason, "UnknownTimeZone");
        assert_eq!(
            p.events[0].message,
            "invalid timeZone: \"Mars/Olympus_Mons\""
        );
        assert_eq!(p.create, None);
    }

    /// 09:30 in New York is 14:30 UTC in winter (EST) and 13:30 UTC in summer (EDT).
    #[test]
    fn schedules_follow_the_time_zone_and_its_daylight_saving() {
        let at = |last: &str, now: &str| {
            let cj = cron(
                json!({"schedule": "30 9 * * *", "timeZone": "America/New_York"}),
                json!({"lastScheduleTime": last}),
            );
            plan(&cj, &[], ts(now))
        };
        let winter = at("2026-11-20T14:30:00Z", "2026-11-21T14:31:00Z");
        assert_eq!(
            winter.status.last_schedule_time,
            Some(Time(ts("2026-11-21T14:30:00Z")))
        );
        assert!(winter.create.is_some());
        // Not yet at 09:30 UTC (04:30 in New York).
        let early = at("2026-11-20T14:30:00Z", "2026-11-21T09:31:00Z");
        assert_eq!(early.create, None);
        // Next: 14:30 UTC, 4 h 59 min later (+100 ms).
        assert_eq!(
            early.requeue_after,
            Some(Duration::from_millis((4 * 3600 + 59 * 60) * 1000 + 100))
        );
        let summer = at("2026-07-20T13:30:00Z", "2026-07-21T13:31:00Z");
        assert_eq!(
            summer.status.last_schedule_time,
            Some(Time(ts("2026-07-21T13:30:00Z")))
        );
        // A zone that never changes its offset: Kolkata is UTC+05:30.
        let cj = cron(
            json!({"schedule": "0 12 * * *", "timeZone": "Asia/Kolkata"}),
            json!({"lastScheduleTime": "2026-11-20T06:30:00Z"}),
        );
        let p = plan(&cj, &[], ts("2026-11-21T06:30:05Z"));
        assert_eq!(
            p.status.last_schedule_time,
            Some(Time(ts("2026-11-21T06:30:00Z")))
        );
    }
}

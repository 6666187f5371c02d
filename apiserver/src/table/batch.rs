//! Jobs and CronJobs as `kubectl get` shows them (kube's `printJob`, `printCronJob`).

use serde_json::{json, Value};

use super::age;
use super::printers::{int_of, len_of, name, str_of, Column, AGE, NAME};
use super::workloads::{containers_images, selector_string, CONTAINERS, IMAGES, SELECTOR};

pub const JOB_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Status", "string", "Status of the job."),
    Column::new(
        "Completions",
        "string",
        "The desired number of successfully finished pods the job should be run with.",
    ),
    Column::new("Duration", "string", "Time required to complete the job."),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

pub const CRONJOB_COLUMNS: &[Column] = &[
    NAME,
    Column::new("Schedule", "string", "The schedule in Cron format."),
    Column::new("Timezone", "string", "The time zone of the schedule."),
    Column::new(
        "Suspend",
        "boolean",
        "Whether subsequent executions are suspended.",
    ),
    Column::new("Active", "integer", "The number of currently running jobs."),
    Column::new(
        "Last Schedule",
        "date",
        "When the job was last successfully scheduled.",
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    SELECTOR,
];

fn has_condition(job: &Value, kind: &str) -> bool {
    job["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == kind && c["status"] == "True")
}

/// The STATUS cell of a Job.
fn job_status(job: &Value) -> &'static str {
    if has_condition(job, "Complete") {
        "Complete"
    } else if has_condition(job, "Failed") {
        "Failed"
    } else if !job["metadata"]["deletionTimestamp"].is_null() {
        "Terminating"
    } else if has_condition(job, "Suspended") {
        "Suspended"
    } else if has_condition(job, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    }
}

/// The cells of [`JOB_COLUMNS`].
pub fn job_cells(job: &Value, now: i64) -> Vec<Value> {
    let spec = &job["spec"];
    let succeeded = int_of(&job["status"]["succeeded"]);
    let completions = match spec["completions"].as_i64() {
        Some(c) => format!("{succeeded}/{c}"),
        None => match int_of(&spec["parallelism"]) {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    let start = age::parse_time(&job["status"]["startTime"]);
    let end = age::parse_time(&job["status"]["completionTime"]);
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(s), None) => age::human_duration(now - s),
        (Some(s), Some(e)) => age::human_duration(e - s),
    };
    let [containers, images] = containers_images(&spec["template"]["spec"]);
    vec![
        name(job),
        json!(job_status(job)),
        json!(completions),
        json!(duration),
        super::printers::age(job, now),
        containers,
        images,
        json!(selector_string(&spec["selector"])),
    ]
}

/// The cells of [`CRONJOB_COLUMNS`].
pub fn cronjob_cells(cj: &Value, now: i64) -> Vec<Value> {
    let spec = &cj["spec"];
    let last = &cj["status"]["lastScheduleTime"];
    let last = if last.is_null() {
        "<none>".to_string()
    } else {
        age::since(last, now)
    };
    let suspend = match spec["suspend"].as_bool() {
        None => "<unset>",
        Some(true) => "True",
        Some(false) => "False",
    };
    let job_spec = &spec["jobTemplate"]["spec"];
    let [containers, images] = containers_images(&job_spec["template"]["spec"]);
    vec![
        name(cj),
        json!(str_of(&spec["schedule"])),
        json!(spec["timeZone"].as_str().unwrap_or("<none>")),
        json!(suspend),
        json!(len_of(&cj["status"]["active"])),
        json!(last),
        super::printers::age(cj, now),
        containers,
        images,
        json!(selector_string(&job_spec["selector"])),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-01-01T00:00:00Z";

    fn now() -> i64 {
        age::parse_time(&json!(T0)).unwrap() + 3600
    }

    fn job(spec: Value, status: Value) -> Value {
        let mut spec = spec;
        spec["template"] = json!({"spec": {"containers": [{"name": "pi", "image": "perl"}]}});
        spec["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u"}});
        json!({"metadata": {"name": "pi", "creationTimestamp": T0}, "spec": spec, "status": status})
    }

    #[test]
    fn job_rows() {
        let done = job(
            json!({"completions": 1}),
            json!({"succeeded": 1, "startTime": "2024-01-01T00:00:00Z", "completionTime": "2024-01-01T00:00:42Z",
                   "conditions": [{"type": "Complete", "status": "True"}]}),
        );
        assert_eq!(
            job_cells(&done, now()),
            vec![
                json!("pi"),
                json!("Complete"),
                json!("1/1"),
                json!("42s"),
                json!("60m"),
                json!("pi"),
                json!("perl"),
                json!("batch.kubernetes.io/controller-uid=u")
            ]
        );
        let running = job(
            json!({"parallelism": 3}),
            json!({"startTime": "2024-01-01T00:55:00Z"}),
        );
        assert_eq!(
            job_cells(&running, now())[1..4],
            [json!("Running"), json!("0/1 of 3"), json!("5m")]
        );
        let pending = job(json!({}), json!({}));
        assert_eq!(job_cells(&pending, now())[2..4], [json!("0/1"), json!("")]);
        let suspended = job(
            json!({}),
            json!({"conditions": [{"type": "Suspended", "status": "True"}]}),
        );
        assert_eq!(job_cells(&suspended, now())[1], "Suspended");
    }

    #[test]
    fn cronjob_rows() {
        let cj = json!({"metadata": {"name": "c", "creationTimestamp": T0},
            "spec": {"schedule": "*/5 * * * *", "suspend": false,
                     "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "x", "image": "busybox"}]}}}}},
            "status": {"active": [{"name": "c-1"}], "lastScheduleTime": "2024-01-01T00:59:00Z"}});
        assert_eq!(
            cronjob_cells(&cj, now()),
            vec![
                json!("c"),
                json!("*/5 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("60s"),
                json!("60m"),
                json!("x"),
                json!("busybox"),
                json!("<none>")
            ]
        );
    }
}

//! Job and CronJob: `SetDefaults_Job`, the selector and labels a Job gets when
//! `manualSelector` is unset (`generateSelector`), `SetDefaults_CronJob`, and the checks of
//! `ValidateJob` / `ValidateCronJobCreate`.

use serde_json::{json, Value};

use super::default_field;
use super::pod::default_pod_spec;
use super::workload::{non_negative, pod_template};
use k3rs_apimachinery::cron::{ParseError, Schedule};
use k3rs_apimachinery::selector::LabelSelector;
use k3rs_apimachinery::status::Cause;

const JOB_NAME_LABELS: &[&str] = &["job-name", "batch.kubernetes.io/job-name"];
const CONTROLLER_UID_LABELS: &[&str] = &["controller-uid", "batch.kubernetes.io/controller-uid"];
const RESTART: &[&str] = &["OnFailure", "Never"];

/// On create, unless `spec.manualSelector` is true: the template gets the job-name and
/// controller-uid labels and the selector selects the controller uid.
pub fn generate_selector(job: &mut Value) {
    if job["spec"]["manualSelector"] == json!(true) || !job["spec"].is_object() {
        return;
    }
    let name = job["metadata"]["name"].clone();
    let uid = job["metadata"]["uid"].clone();
    if !job["spec"]["template"].is_object() {
        job["spec"]["template"] = json!({});
    }
    let template = &mut job["spec"]["template"];
    if !template["metadata"]["labels"].is_object() {
        template["metadata"]["labels"] = json!({});
    }
    let labels = &mut template["metadata"]["labels"];
    for l in JOB_NAME_LABELS {
        default_field(labels, l, name.clone());
    }
    for l in CONTROLLER_UID_LABELS {
        default_field(labels, l, uid.clone());
    }
    let spec = &mut job["spec"];
    if !spec["selector"]["matchLabels"].is_object() {
        spec["selector"]["matchLabels"] = json!({});
    }
    default_field(
        &mut spec["selector"]["matchLabels"],
        "batch.kubernetes.io/controller-uid",
        uid,
    );
}

pub fn job_defaults(job: &mut Value) {
    let Some(spec) = job.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    if spec["completions"].is_null() && spec["parallelism"].is_null() {
        spec["completions"] = json!(1);
    }
    default_field(spec, "parallelism", json!(1));
    let backoff = if spec["backoffLimitPerIndex"].is_null() {
        json!(6)
    } else {
        json!(i32::MAX)
    };
    default_field(spec, "backoffLimit", backoff);
    default_field(spec, "completionMode", json!("NonIndexed"));
    default_field(spec, "suspend", json!(false));
    let replacement = if spec["podFailurePolicy"].is_null() {
        "TerminatingOrFailed"
    } else {
        "Failed"
    };
    default_field(spec, "podReplacementPolicy", json!(replacement));
    if let Some(ps) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
        default_pod_spec(ps);
    }
    let labels = job["spec"]["template"]["metadata"]["labels"].clone();
    let empty = job["metadata"]["labels"]
        .as_object()
        .is_none_or(|l| l.is_empty());
    if labels.is_object() && empty {
        job["metadata"]["labels"] = labels;
    }
}

/// The spec of a Job (`spec`) or of a CronJob's job template (`spec.jobTemplate.spec`).
fn validate_job_spec(spec: &Value, path: &str, selector_required: bool) -> Vec<Cause> {
    let mut causes = Vec::new();
    for f in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
    ] {
        non_negative(spec, f, &format!("{path}.{f}"), &mut causes);
    }
    let selector = match &spec["selector"] {
        Value::Null if selector_required => {
            causes.push(Cause::required(format!("{path}.selector"), ""));
            None
        }
        Value::Null => None,
        sel => match LabelSelector::from_object(sel) {
            Ok(s) => Some(s),
            Err(e) => {
                causes.push(Cause::invalid_value(
                    format!("{path}.selector"),
                    sel,
                    &e.to_string(),
                ));
                None
            }
        },
    };
    match spec["completionMode"].as_str() {
        None | Some("NonIndexed") => {}
        Some("Indexed") => {
            if spec["completions"].is_null() {
                causes.push(Cause::required(
                    format!("{path}.completions"),
                    "when completion mode is Indexed",
                ));
            }
        }
        Some(other) => causes.push(Cause::not_supported(
            format!("{path}.completionMode"),
            other,
            &["NonIndexed", "Indexed"],
        )),
    }
    pod_template(
        &spec["template"],
        &format!("{path}.template"),
        selector.as_ref().filter(|s| !s.is_empty()),
        RESTART,
        &mut causes,
    );
    causes
}

pub fn validate_job(job: &Value) -> Vec<Cause> {
    validate_job_spec(&job["spec"], "spec", true)
}

/// A Job's selector and pod template are immutable (only scheduling directives of a
/// suspended job may change; not modelled here).
pub fn validate_job_update(old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    if old["spec"]["selector"] != new["spec"]["selector"] {
        causes.push(Cause::invalid_value(
            "spec.selector",
            &new["spec"]["selector"],
            "field is immutable",
        ));
    }
    if old["spec"]["template"] != new["spec"]["template"] {
        causes.push(Cause::invalid_value(
            "spec.template",
            json!("core.PodTemplateSpec{…}"),
            "field is immutable",
        ));
    }
    if old["spec"]["completionMode"] != new["spec"]["completionMode"] {
        causes.push(Cause::invalid_value(
            "spec.completionMode",
            &new["spec"]["completionMode"],
            "field is immutable",
        ));
    }
    causes
}

pub fn cronjob_defaults(cj: &mut Value) {
    let Some(spec) = cj.get_mut("spec").filter(|s| s.is_object()) else {
        return;
    };
    default_field(spec, "concurrencyPolicy", json!("Allow"));
    default_field(spec, "suspend", json!(false));
    default_field(spec, "successfulJobsHistoryLimit", json!(3));
    default_field(spec, "failedJobsHistoryLimit", json!(1));
    if let Some(ps) = spec
        .get_mut("jobTemplate")
        .and_then(|t| t.get_mut("spec"))
        .and_then(|s| s.get_mut("template"))
        .and_then(|t| t.get_mut("spec"))
    {
        default_pod_spec(ps);
    }
}

/// robfig/cron's standard parser, as `ValidateCronJobCreate` uses it: five fields or a
/// descriptor. `@every <duration>` is accepted here though the CronJob controller cannot run it.
fn check_schedule(schedule: &str) -> Result<(), ParseError> {
    if schedule.trim().starts_with("@every ") {
        return Ok(());
    }
    Schedule::parse(schedule).map(drop)
}

/// Why `tz` cannot be a CronJob's `timeZone` (upstream's `validateTimeZone`): well-formed
/// path parts, not `Local`, and known to the zoneinfo database.
fn time_zone_error(tz: &str) -> Option<String> {
    if tz.is_empty() {
        return Some("timeZone must be nil or non-empty string".into());
    }
    let part_ok = |p: &str| {
        p != "."
            && p != ".."
            && !p.starts_with('-')
            && !p.is_empty()
            && p.len() <= 14
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
    };
    if !tz.split('/').all(part_ok) {
        return Some(format!("unknown time zone {tz}"));
    }
    if tz.eq_ignore_ascii_case("Local") {
        return Some(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .into(),
        );
    }
    k8s_openapi::jiff::tz::TimeZone::get(tz)
        .is_err()
        .then(|| format!("unknown time zone {tz}"))
}

pub fn validate_cronjob(cj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let name = cj["metadata"]["name"].as_str().unwrap_or("");
    if name.len() > 52 {
        causes.push(Cause::invalid(
            "metadata.name",
            name,
            "must be no more than 52 characters",
        ));
    }
    let spec = &cj["spec"];
    match spec["schedule"].as_str().unwrap_or("") {
        "" => causes.push(Cause::required("spec.schedule", "")),
        s if s.contains("TZ") => causes.push(Cause::invalid(
            "spec.schedule",
            s,
            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
        )),
        s => {
            if let Err(e) = check_schedule(s) {
                causes.push(Cause::invalid("spec.schedule", s, &e.to_string()));
            }
        }
    }
    non_negative(
        spec,
        "startingDeadlineSeconds",
        "spec.startingDeadlineSeconds",
        &mut causes,
    );
    const POLICIES: &[&str] = &["Allow", "Forbid", "Replace"];
    match spec["concurrencyPolicy"].as_str().unwrap_or("") {
        "" => causes.push(Cause::required("spec.concurrencyPolicy", "")),
        p if POLICIES.contains(&p) => {}
        p => causes.push(Cause::not_supported("spec.concurrencyPolicy", p, POLICIES)),
    }
    for f in ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
        non_negative(spec, f, &format!("spec.{f}"), &mut causes);
    }
    if let Some(tz) = spec["timeZone"].as_str() {
        if let Some(why) = time_zone_error(tz) {
            causes.push(Cause::invalid("spec.timeZone", tz, &why));
        }
    }
    let job_spec = &spec["jobTemplate"]["spec"];
    if job_spec["manualSelector"] == json!(true) {
        causes.push(Cause::not_supported(
            "spec.jobTemplate.spec.manualSelector",
            "true",
            &["nil", "false"],
        ));
    }
    causes.extend(validate_job_spec(job_spec, "spec.jobTemplate.spec", false));
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Value {
        json!({"metadata": {"name": "pi", "uid": "u-1"}, "spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "perl"}]}}}})
    }

    #[test]
    fn time_zones_are_checked_against_the_zoneinfo_database() {
        assert_eq!(time_zone_error("Europe/Berlin"), None);
        assert_eq!(time_zone_error("Etc/UTC"), None);
        assert_eq!(
            time_zone_error("Mars/Olympus"),
            Some("unknown time zone Mars/Olympus".into())
        );
        assert_eq!(
            time_zone_error("../etc/passwd"),
            Some("unknown time zone ../etc/passwd".into())
        );
        assert_eq!(
            time_zone_error("local"),
            Some(
                "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                    .into()
            )
        );
        assert_eq!(
            time_zone_error(""),
            Some("timeZone must be nil or non-empty string".into())
        );
    }

    #[test]
    fn job_gets_a_generated_selector_and_defaults() {
        let mut j = job();
        generate_selector(&mut j);
        job_defaults(&mut j);
        let s = &j["spec"];
        assert_eq!(s["completions"], 1);
        assert_eq!(s["parallelism"], 1);
        assert_eq!(s["backoffLimit"], 6);
        assert_eq!(s["completionMode"], "NonIndexed");
        assert_eq!(s["suspend"], false);
        assert_eq!(s["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(
            s["selector"],
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}})
        );
        let labels = json!({"batch.kubernetes.io/controller-uid": "u-1", "batch.kubernetes.io/job-name": "pi",
            "controller-uid": "u-1", "job-name": "pi"});
        assert_eq!(s["template"]["metadata"]["labels"], labels);
        assert_eq!(j["metadata"]["labels"], labels);
        assert!(validate_job(&j).is_empty(), "{:?}", validate_job(&j));
    }

    #[test]
    fn parallelism_alone_leaves_completions_unset() {
        let mut j = job();
        j["spec"]["parallelism"] = json!(3);
        job_defaults(&mut j);
        assert!(j["spec"]["completions"].is_null());
        assert_eq!(j["spec"]["parallelism"], 3);
    }

    #[test]
    fn manual_selector_is_not_generated() {
        let mut j = job();
        j["spec"]["manualSelector"] = json!(true);
        generate_selector(&mut j);
        job_defaults(&mut j);
        let fields: Vec<String> = validate_job(&j).into_iter().map(|c| c.field).collect();
        assert_eq!(fields, ["spec.selector"]);
    }

    #[test]
    fn job_restart_policy_and_counts() {
        let mut j = job();
        j["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
        j["spec"]["backoffLimit"] = json!(-1);
        generate_selector(&mut j);
        job_defaults(&mut j);
        let causes = validate_job(&j);
        assert_eq!(causes[0].field, "spec.backoffLimit");
        assert_eq!(causes[1].field, "spec.template.spec.restartPolicy");
        assert_eq!(
            causes[1].message,
            "Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
        );
        let mut changed = j.clone();
        changed["spec"]["template"]["spec"]["containers"][0]["image"] = json!("other");
        assert_eq!(validate_job_update(&j, &changed)[0].field, "spec.template");
    }

    #[test]
    fn cronjob_defaults_and_schedule() {
        let mut cj = json!({"metadata": {"name": "c"}, "spec": {"schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "busybox"}]}}}}}});
        cronjob_defaults(&mut cj);
        let s = &cj["spec"];
        assert_eq!(s["concurrencyPolicy"], "Allow");
        assert_eq!(s["suspend"], false);
        assert_eq!(s["successfulJobsHistoryLimit"], 3);
        assert_eq!(s["failedJobsHistoryLimit"], 1);
        assert_eq!(
            s["jobTemplate"]["spec"]["template"]["spec"]["dnsPolicy"],
            "ClusterFirst"
        );
        assert!(s["jobTemplate"]["spec"].get("backoffLimit").is_none());
        assert!(
            validate_cronjob(&cj).is_empty(),
            "{:?}",
            validate_cronjob(&cj)
        );
        cj["spec"]["schedule"] = json!("every minute");
        cj["spec"]["concurrencyPolicy"] = json!("Sometimes");
        let causes = validate_cronjob(&cj);
        assert_eq!(causes[0].field, "spec.schedule");
        assert_eq!(
            causes[0].message,
            "Invalid value: \"every minute\": expected exactly 5 fields, found 2: [every minute]"
        );
        assert_eq!(causes[1].field, "spec.concurrencyPolicy");
    }

    #[test]
    fn schedules() {
        for ok in [
            "0 0 * * *",
            "@hourly",
            "*/15 1-5 1,15 jan-jun mon-fri",
            "@every 1h",
        ] {
            assert!(check_schedule(ok).is_ok(), "{ok}");
        }
        for bad in [
            "61 * * * *",
            "* * * *",
            "@sometimes",
            "5-1 * * * *",
            "*/0 * * * *",
            // Day of week is 0-6 in robfig/cron (upstream's parser).
            "0 0 * * 7",
        ] {
            assert!(check_schedule(bad).is_err(), "{bad}");
        }
    }
}

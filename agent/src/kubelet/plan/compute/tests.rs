use super::*;
use crate::kubelet::plan::image::image_backoff_key;
use crate::kubelet::plan::lifecycle::tests::{at, ctr, sandbox};
use crate::kubelet::plan::observed::ObservedSandbox;
use crate::kubelet::plan::spec::tests::{merge, pod as base_pod};
use serde_json::{json, Value};
use ContainerState::*;

/// A pod with API defaults (30 s grace) and `extra` merged in.
fn pod(extra: Value) -> Pod {
    let mut v = json!({"spec": {"terminationGracePeriodSeconds": 30}});
    merge(&mut v, extra);
    base_pod(v)
}

fn with_inits(extra: Value) -> Pod {
    let mut v = json!({"spec": {"initContainers": [
        {"name": "i1", "image": "busybox:1.35"},
        {"name": "i2", "image": "busybox:1.35"},
    ]}});
    merge(&mut v, extra);
    pod(v)
}

fn observed(sandboxes: Vec<ObservedSandbox>, containers: Vec<ObservedContainer>) -> ObservedPod {
    ObservedPod {
        sandboxes,
        containers,
        images: ["busybox:1.35".to_string()].into(),
    }
}

fn ready() -> Vec<ObservedSandbox> {
    vec![sandbox("s1", true, 0, 0)]
}

fn dead() -> Vec<ObservedSandbox> {
    vec![sandbox("s1", false, 0, 0)]
}

fn plan_at(
    p: &Pod,
    o: &ObservedPod,
    b: &mut Backoffs,
    probes: &ProbeResults,
    now: i64,
) -> PodActions {
    compute_pod_actions(p, o, b, probes, at(now))
}

fn plan(p: &Pod, o: &ObservedPod) -> PodActions {
    plan_at(
        p,
        o,
        &mut Backoffs::default(),
        &ProbeResults::default(),
        100,
    )
}

fn actions(p: &Pod, o: &ObservedPod) -> Vec<Action> {
    let out = plan(p, o);
    assert_eq!(
        out.waiting,
        Default::default(),
        "unexpected waiting containers"
    );
    out.actions
}

fn start(name: &str, init: bool, attempt: u32) -> Action {
    Action::StartContainer {
        name: name.into(),
        init,
        attempt,
    }
}

fn create(attempt: u32) -> Action {
    Action::CreateSandbox { attempt }
}

fn kill(id: &str, grace: u64, reason: KillReason, message: &str) -> Action {
    Action::KillContainer {
        id: id.into(),
        name: id.split('-').next().unwrap().into(),
        grace: Duration::from_secs(grace),
        reason,
        message: message.into(),
    }
}

fn kill_sandbox(id: &str) -> Action {
    Action::KillSandbox { id: id.into() }
}

#[test]
fn a_new_pod_gets_a_sandbox_then_its_containers() {
    assert_eq!(
        actions(&pod(json!({})), &observed(vec![], vec![])),
        vec![create(0), start("c", false, 0)]
    );
}

#[test]
fn a_missing_image_is_pulled_first() {
    let mut o = observed(vec![], vec![]);
    o.images.clear();
    assert_eq!(
        actions(&pod(json!({})), &o),
        vec![
            create(0),
            Action::PullImage {
                container: "c".into(),
                image: "busybox:1.35".into()
            },
            start("c", false, 0)
        ]
    );
}

#[test]
fn a_running_pod_needs_nothing() {
    let o = observed(ready(), vec![ctr("c", Running, 0, 0, 1)]);
    assert_eq!(plan(&pod(json!({})), &o), PodActions::default());
}

#[test]
fn init_containers_start_one_at_a_time_then_the_containers() {
    let p = with_inits(json!({}));
    assert_eq!(
        actions(&p, &observed(vec![], vec![])),
        vec![create(0), start("i1", true, 0)]
    );
    let i1 = ctr("i1", Exited, 0, 0, 1);
    assert_eq!(
        actions(&p, &observed(ready(), vec![ctr("i1", Running, 0, 0, 1)])),
        vec![]
    );
    assert_eq!(
        actions(&p, &observed(ready(), vec![i1.clone()])),
        vec![start("i2", true, 0)]
    );
    let i2 = ctr("i2", Exited, 0, 0, 5);
    assert_eq!(
        actions(&p, &observed(ready(), vec![i1, i2])),
        vec![start("c", false, 0)]
    );
}

#[test]
fn a_failed_init_container_restarts_unless_the_policy_is_never() {
    let failed = || observed(ready(), vec![ctr("i1", Exited, 1, 0, 1)]);
    assert_eq!(
        actions(&with_inits(json!({})), &failed()),
        vec![start("i1", true, 1)]
    );
    assert_eq!(
        actions(
            &with_inits(json!({"spec": {"restartPolicy": "OnFailure"}})),
            &failed()
        ),
        vec![start("i1", true, 1)]
    );
    // Never: the pod failed; its sandbox stops.
    assert_eq!(
        actions(
            &with_inits(json!({"spec": {"restartPolicy": "Never"}})),
            &failed()
        ),
        vec![kill_sandbox("s1")]
    );
}

#[test]
fn an_init_container_in_unknown_state_is_killed_before_it_runs_again() {
    let o = observed(ready(), vec![ctr("i1", Unknown, 0, 0, 1)]);
    assert_eq!(
        actions(&with_inits(json!({})), &o),
        vec![
            kill(
                "i1-0",
                30,
                KillReason::Unknown,
                "Init container is in \"unknown\" state, try killing it before restart"
            ),
            Action::RemoveContainer { id: "i1-0".into() },
            start("i1", true, 1)
        ]
    );
}

#[test]
fn crash_loop_backoff_grows_from_10s_and_reports_waiting() {
    let p = pod(json!({}));
    let mut b = Backoffs::default();
    let none = ProbeResults::default();
    // First exit (finished at 2): restart at once.
    let mut history = vec![ctr("c", Exited, 1, 0, 0)];
    let out = plan_at(&p, &observed(ready(), history.clone()), &mut b, &none, 3);
    assert_eq!(out.actions, vec![start("c", false, 1)]);
    // Second exit (finished at 5): back off 10 s from the finish.
    history.push(ctr("c", Exited, 1, 1, 3));
    let o = observed(ready(), history.clone());
    let out = plan_at(&p, &o, &mut b, &none, 6);
    assert_eq!(out.actions, vec![]);
    assert_eq!(
        out.waiting,
        [(
            "c".to_string(),
            Waiting::new(
                "CrashLoopBackOff",
                "back-off 10s restarting failed container=c pod=web_default(u1)"
            )
        )]
        .into()
    );
    assert_eq!(plan_at(&p, &o, &mut b, &none, 14).actions, vec![]);
    assert_eq!(
        plan_at(&p, &o, &mut b, &none, 15).actions,
        vec![start("c", false, 2)]
    );
    // Third exit (finished at 17): 20 s.
    history.push(ctr("c", Exited, 1, 2, 15));
    let o = observed(ready(), history.clone());
    let out = plan_at(&p, &o, &mut b, &none, 20);
    assert_eq!(
        out.waiting["c"].message,
        "back-off 20s restarting failed container=c pod=web_default(u1)"
    );
    assert_eq!(plan_at(&p, &o, &mut b, &none, 36).actions, vec![]);
    assert_eq!(
        plan_at(&p, &o, &mut b, &none, 37).actions,
        vec![start("c", false, 3)]
    );
}

#[test]
fn crash_loop_backoff_caps_at_5m_and_resets_after_10m_of_running() {
    let p = pod(json!({}));
    let key = backoff_key(&p, &containers(&p)[0]);
    let mut b = Backoffs::default();
    for i in 0..8 {
        b.crash_loop.next(&key, at(i), at(i));
    }
    assert_eq!(b.crash_loop.get(&key), Duration::from_secs(300));
    let none = ProbeResults::default();
    // Exited at 9 (created 7): backed off 5 min.
    let o = observed(ready(), vec![ctr("c", Exited, 1, 8, 7)]);
    let out = plan_at(&p, &o, &mut b, &none, 100);
    assert_eq!(
        out.waiting["c"].message,
        "back-off 5m0s restarting failed container=c pod=web_default(u1)"
    );
    // A run that ended more than 10 min after the last restart: restart at once, from 10 s.
    let o = observed(ready(), vec![ctr("c", Exited, 1, 8, 606)]);
    let out = plan_at(&p, &o, &mut b, &none, 609);
    assert_eq!(out.actions, vec![start("c", false, 9)]);
    assert_eq!(b.crash_loop.get(&key), Duration::from_secs(10));
}

#[test]
fn init_containers_crash_loop_too() {
    let p = with_inits(json!({}));
    let mut b = Backoffs::default();
    let none = ProbeResults::default();
    let history = vec![ctr("i1", Exited, 1, 0, 0), ctr("i1", Exited, 1, 1, 3)];
    let o = observed(ready(), history);
    plan_at(
        &p,
        &observed(ready(), vec![ctr("i1", Exited, 1, 0, 0)]),
        &mut b,
        &none,
        3,
    );
    let out = plan_at(&p, &o, &mut b, &none, 6);
    // Only the newest exited instance of an init container is kept.
    assert_eq!(
        out.actions,
        vec![Action::RemoveContainer { id: "i1-0".into() }]
    );
    assert_eq!(
        out.waiting["i1"],
        Waiting::new(
            "CrashLoopBackOff",
            "back-off 10s restarting failed container=i1 pod=web_default(u1)"
        )
    );
}

#[test]
fn exited_containers_restart_per_policy() {
    let o = |code| observed(ready(), vec![ctr("c", Exited, code, 0, 1)]);
    let always = pod(json!({}));
    let on_failure = pod(json!({"spec": {"restartPolicy": "OnFailure"}}));
    let never = pod(json!({"spec": {"restartPolicy": "Never"}}));
    assert_eq!(actions(&always, &o(0)), vec![start("c", false, 1)]);
    assert_eq!(actions(&on_failure, &o(1)), vec![start("c", false, 1)]);
    // Done: nothing runs any more, so the sandbox stops; the containers stay for their logs.
    assert_eq!(actions(&on_failure, &o(0)), vec![kill_sandbox("s1")]);
    assert_eq!(actions(&never, &o(1)), vec![kill_sandbox("s1")]);
    assert_eq!(actions(&never, &o(0)), vec![kill_sandbox("s1")]);
    // Once the sandbox stopped, the plan is empty (no new sandbox for a finished pod).
    let stopped = |code| observed(dead(), vec![ctr("c", Exited, code, 0, 1)]);
    assert_eq!(actions(&never, &stopped(1)), vec![]);
    assert_eq!(actions(&on_failure, &stopped(0)), vec![]);
}

#[test]
fn a_failed_liveness_probe_kills_and_restarts() {
    let p = pod(json!({}));
    let o = observed(ready(), vec![ctr("c", Running, 0, 0, 1)]);
    let mut probes = ProbeResults::default();
    probes.liveness.insert("c-0".into(), ProbeResult::Failure);
    let out = plan_at(&p, &o, &mut Backoffs::default(), &probes, 100);
    assert_eq!(
        out.actions,
        vec![
            kill(
                "c-0",
                30,
                KillReason::LivenessProbe,
                "Container c failed liveness probe, will be restarted"
            ),
            start("c", false, 1)
        ]
    );
    probes.liveness.insert("c-0".into(), ProbeResult::Success);
    let out = plan_at(&p, &o, &mut Backoffs::default(), &probes, 100);
    assert_eq!(out.actions, vec![]);
}

#[test]
fn a_probe_grace_period_overrides_the_pods_and_pre_stop_runs_first() {
    let p = pod(
        json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.35",
        "startupProbe": {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 5},
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}}}]}}),
    );
    let o = observed(ready(), vec![ctr("c", Running, 0, 0, 1)]);
    let mut probes = ProbeResults::default();
    probes.startup.insert("c-0".into(), ProbeResult::Failure);
    let out = plan_at(&p, &o, &mut Backoffs::default(), &probes, 100);
    assert_eq!(
        out.actions,
        vec![
            Action::RunPreStop {
                id: "c-0".into(),
                name: "c".into(),
                timeout: Duration::from_secs(5)
            },
            kill(
                "c-0",
                5,
                KillReason::StartupProbe,
                "Container c failed startup probe, will be restarted"
            ),
            start("c", false, 1)
        ]
    );
}

#[test]
fn with_restart_policy_never_a_failed_probe_stops_the_container_for_good() {
    let p = pod(json!({"spec": {"restartPolicy": "Never", "containers": [
        {"name": "a", "image": "busybox:1.35"}, {"name": "c", "image": "busybox:1.35"}]}}));
    let o = observed(
        ready(),
        vec![ctr("a", Running, 0, 0, 1), ctr("c", Running, 0, 0, 1)],
    );
    let mut probes = ProbeResults::default();
    probes.liveness.insert("c-0".into(), ProbeResult::Failure);
    let out = plan_at(&p, &o, &mut Backoffs::default(), &probes, 100);
    assert_eq!(
        out.actions,
        vec![kill(
            "c-0",
            30,
            KillReason::LivenessProbe,
            "Container c failed liveness probe"
        )]
    );
    // The only container: nothing is left running, so the whole pod stops.
    let p = pod(json!({"spec": {"restartPolicy": "Never"}}));
    let o = observed(ready(), vec![ctr("c", Running, 0, 0, 1)]);
    let out = plan_at(&p, &o, &mut Backoffs::default(), &probes, 100);
    assert_eq!(
        out.actions,
        vec![
            kill("c-0", 30, KillReason::PodStopping, "Stopping container c"),
            kill_sandbox("s1")
        ]
    );
}

#[test]
fn a_changed_image_restarts_the_container_whatever_the_policy() {
    let p = pod(json!({"spec": {"restartPolicy": "Never",
        "containers": [{"name": "c", "image": "busybox:1.36", "imagePullPolicy": "IfNotPresent"}]}}));
    let mut o = observed(ready(), vec![ctr("c", Running, 0, 0, 1)]);
    o.images.insert("busybox:1.36".into());
    assert_eq!(
        actions(&p, &o),
        vec![
            kill(
                "c-0",
                30,
                KillReason::SpecChanged,
                "Container c definition changed, will be restarted"
            ),
            start("c", false, 1)
        ]
    );
}

#[test]
fn a_container_in_unknown_state_is_killed_then_started() {
    let o = observed(ready(), vec![ctr("c", Unknown, 0, 2, 1)]);
    assert_eq!(
        actions(&pod(json!({})), &o),
        vec![
            kill(
                "c-2",
                30,
                KillReason::Unknown,
                "Container is in \"unknown\" state, try killing it before restart"
            ),
            start("c", false, 3)
        ]
    );
}

#[test]
fn a_dead_sandbox_is_replaced_and_init_containers_run_again() {
    let o = observed(dead(), vec![ctr("c", Exited, 137, 0, 1)]);
    assert_eq!(
        actions(&pod(json!({})), &o),
        vec![create(1), start("c", false, 1)]
    );
    let o = observed(
        dead(),
        vec![
            ctr("i1", Exited, 0, 0, 1),
            ctr("i2", Exited, 0, 0, 2),
            ctr("c", Exited, 137, 0, 3),
        ],
    );
    assert_eq!(
        actions(&with_inits(json!({})), &o),
        vec![
            Action::RemoveContainer { id: "i1-0".into() },
            Action::RemoveContainer { id: "i2-0".into() },
            create(1),
            start("i1", true, 1)
        ]
    );
}

#[test]
fn two_ready_sandboxes_are_replaced_by_one() {
    let o = observed(
        vec![sandbox("s1", true, 0, 0), sandbox("s2", true, 1, 10)],
        vec![ctr("c", Running, 0, 0, 11)],
    );
    assert_eq!(
        actions(&pod(json!({})), &o),
        vec![
            kill("c-0", 30, KillReason::PodStopping, "Stopping container c"),
            kill_sandbox("s2"),
            kill_sandbox("s1"),
            create(2),
            start("c", false, 1)
        ]
    );
}

#[test]
fn a_never_pod_whose_sandbox_died_after_running_is_not_recreated() {
    let p = pod(json!({"spec": {"restartPolicy": "Never"}}));
    let o = observed(dead(), vec![ctr("c", Exited, 137, 0, 1)]);
    assert_eq!(actions(&p, &o), vec![]);
    // Nothing ever ran: retry the sandbox.
    let o = observed(dead(), vec![]);
    assert_eq!(actions(&p, &o), vec![create(1), start("c", false, 0)]);
}

#[test]
fn without_a_grace_period_in_the_spec_kills_get_the_minimum() {
    let p = base_pod(json!({}));
    let o = observed(ready(), vec![ctr("c", Unknown, 0, 0, 1)]);
    assert_eq!(
        plan(&p, &o).actions[0],
        kill(
            "c-0",
            2,
            KillReason::Unknown,
            "Container is in \"unknown\" state, try killing it before restart"
        )
    );
}

#[test]
fn image_pull_back_off_and_never_pull_hold_the_container() {
    let p = pod(json!({"spec": {"containers": [
        {"name": "a", "image": "nope:1"},
        {"name": "b", "image": "local:1", "imagePullPolicy": "Never"},
        {"name": "c", "image": "busybox:1.35"}]}}));
    let mut b = Backoffs::default();
    b.image_pull
        .next(&image_backoff_key(&p, "nope:1"), at(95), at(95));
    let out = plan_at(
        &p,
        &observed(ready(), vec![]),
        &mut b,
        &ProbeResults::default(),
        100,
    );
    assert_eq!(out.actions, vec![start("c", false, 0)]);
    assert_eq!(
        out.waiting,
        [
            (
                "a".to_string(),
                Waiting::new("ImagePullBackOff", "Back-off pulling image \"nope:1\"")
            ),
            (
                "b".to_string(),
                Waiting::new(
                    "ErrImageNeverPull",
                    "Container image \"local:1\" is not present with pull policy of Never"
                )
            ),
        ]
        .into()
    );
    // Once the back-off passed, the pull is tried again.
    let out = plan_at(
        &p,
        &observed(ready(), vec![]),
        &mut b,
        &ProbeResults::default(),
        105,
    );
    assert_eq!(
        out.actions,
        vec![
            Action::PullImage {
                container: "a".into(),
                image: "nope:1".into()
            },
            start("a", false, 0),
            start("c", false, 0)
        ]
    );
}

#[test]
fn a_post_start_hook_follows_the_start() {
    let p = pod(
        json!({"spec": {"containers": [{"name": "c", "image": "busybox:1.35",
        "lifecycle": {"postStart": {"exec": {"command": ["true"]}}}}]}}),
    );
    assert_eq!(
        actions(&p, &observed(ready(), vec![])),
        vec![
            start("c", false, 0),
            Action::RunPostStart { name: "c".into() }
        ]
    );
}

mod sidecars;
mod stopping;

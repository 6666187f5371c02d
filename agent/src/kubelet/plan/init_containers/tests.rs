use super::*;
use crate::kubelet::plan::lifecycle::tests::ctr;
use crate::kubelet::plan::spec::tests::pod;
use serde_json::{json, Value};
use ContainerState::*;

fn with_inits(inits: Value, policy: &str) -> Pod {
    pod(json!({"spec": {"restartPolicy": policy, "initContainers": inits}}))
}

fn regular() -> Pod {
    with_inits(
        json!([{"name": "i1", "image": "busybox:1.35"}, {"name": "i2", "image": "busybox:1.35"}]),
        "Always",
    )
}

fn sidecar(extra: Value) -> Pod {
    let mut sc = json!({"name": "sc", "image": "busybox:1.35", "restartPolicy": "Always"});
    crate::kubelet::plan::spec::tests::merge(&mut sc, extra);
    with_inits(
        json!([sc, {"name": "i2", "image": "busybox:1.35"}]),
        "Always",
    )
}

fn observed(cs: Vec<ObservedContainer>) -> ObservedPod {
    ObservedPod {
        containers: cs,
        ..Default::default()
    }
}

/// (names to start, (killed id, reason, message)s, kill_pod, initialized)
type Summary = (Vec<String>, Vec<(String, KillReason, String)>, bool, bool);

fn summary(p: &Pod, cs: Vec<ObservedContainer>, probes: &ProbeResults) -> Summary {
    let o = observed(cs);
    let plan = init_actions(p, &o, probes);
    (
        plan.start.iter().map(|c| c.name.clone()).collect(),
        plan.kill
            .iter()
            .map(|k| (k.status.id.clone(), k.reason, k.message.clone()))
            .collect(),
        plan.kill_pod,
        plan.initialized,
    )
}

fn run(p: &Pod, cs: Vec<ObservedContainer>) -> Summary {
    summary(p, cs, &ProbeResults::default())
}

fn starts(names: &[&str], initialized: bool) -> Summary {
    (
        names.iter().map(|s| s.to_string()).collect(),
        vec![],
        false,
        initialized,
    )
}

#[test]
fn no_init_containers_means_initialized() {
    assert_eq!(run(&pod(json!({})), vec![]), starts(&[], true));
}

#[test]
fn regular_init_containers_run_one_after_another() {
    let p = regular();
    assert_eq!(run(&p, vec![]), starts(&["i1"], false));
    assert_eq!(
        run(&p, vec![ctr("i1", Running, 0, 0, 1)]),
        starts(&[], false)
    );
    assert_eq!(
        run(&p, vec![ctr("i1", Exited, 0, 0, 1)]),
        starts(&["i2"], false)
    );
    assert_eq!(
        run(
            &p,
            vec![ctr("i1", Exited, 0, 0, 1), ctr("i2", Exited, 0, 0, 5)]
        ),
        starts(&[], true)
    );
    // A created but never started init container is started again.
    assert_eq!(
        run(&p, vec![ctr("i1", Created, 0, 0, 1)]),
        starts(&["i1"], false)
    );
    // A regular container running: initialized, whatever happened to the init records.
    assert_eq!(run(&p, vec![ctr("c", Running, 0, 0, 1)]), starts(&[], true));
}

#[test]
fn failed_and_unknown_init_containers() {
    let failed = || vec![ctr("i1", Exited, 0, 0, 1), ctr("i2", Exited, 1, 0, 5)];
    assert_eq!(run(&regular(), failed()), starts(&["i2"], false));
    let never = with_inits(
        json!([{"name": "i1", "image": "busybox:1.35"},
        {"name": "i2", "image": "busybox:1.35"}]),
        "Never",
    );
    assert_eq!(run(&never, failed()), (vec![], vec![], true, false));
    assert_eq!(
        run(&regular(), vec![ctr("i1", Unknown, 0, 0, 1)]),
        (
            vec!["i1".to_string()],
            vec![(
                "i1-0".to_string(),
                KillReason::Unknown,
                "Init container is in \"unknown\" state, try killing it before restart".to_string()
            )],
            false,
            false
        )
    );
    assert_eq!(
        run(&never, vec![ctr("i1", Unknown, 0, 0, 1)]),
        (vec![], vec![], true, false)
    );
}

#[test]
fn a_sidecar_starts_then_the_next_init_container_runs_beside_it() {
    let p = sidecar(json!({}));
    assert_eq!(run(&p, vec![]), starts(&["sc"], false));
    assert_eq!(
        run(&p, vec![ctr("sc", Running, 0, 0, 1)]),
        starts(&["i2"], false)
    );
    assert_eq!(
        run(
            &p,
            vec![ctr("sc", Running, 0, 0, 1), ctr("i2", Running, 0, 0, 5)]
        ),
        starts(&[], false)
    );
    assert_eq!(
        run(
            &p,
            vec![ctr("sc", Running, 0, 0, 1), ctr("i2", Exited, 0, 0, 5)]
        ),
        starts(&[], true)
    );
    // The sidecar crashed after initialization: restart it, still initialized.
    assert_eq!(
        run(
            &p,
            vec![ctr("sc", Exited, 1, 0, 1), ctr("i2", Exited, 0, 0, 5)]
        ),
        starts(&["sc"], true)
    );
    // Its record is gone after the pod ran: start it again.
    assert_eq!(
        run(&p, vec![ctr("c", Running, 0, 0, 9)]),
        starts(&["sc"], true)
    );
}

#[test]
fn a_sidecar_waits_for_its_startup_probe() {
    let p = sidecar(json!({"startupProbe": {"exec": {"command": ["true"]}}}));
    let cs = || vec![ctr("sc", Running, 0, 0, 1)];
    let mut probes = ProbeResults::default();
    assert_eq!(summary(&p, cs(), &probes), starts(&[], false));
    probes.startup.insert("sc-0".into(), ProbeResult::Success);
    assert_eq!(summary(&p, cs(), &probes), starts(&["i2"], false));
    probes.startup.insert("sc-0".into(), ProbeResult::Failure);
    assert_eq!(
        summary(&p, cs(), &probes),
        (
            vec!["sc".to_string()],
            vec![(
                "sc-0".to_string(),
                KillReason::StartupProbe,
                "Init container sc failed startup probe".to_string()
            )],
            false,
            false
        )
    );
}

#[test]
fn a_sidecar_is_restarted_on_liveness_failure_or_a_new_image() {
    let p = sidecar(json!({"livenessProbe": {"exec": {"command": ["true"]}}}));
    let cs = || vec![ctr("sc", Running, 0, 0, 1), ctr("i2", Exited, 0, 0, 5)];
    let mut probes = ProbeResults::default();
    probes.liveness.insert("sc-0".into(), ProbeResult::Failure);
    assert_eq!(
        summary(&p, cs(), &probes),
        (
            vec!["sc".to_string()],
            vec![(
                "sc-0".to_string(),
                KillReason::LivenessProbe,
                "Init container sc failed liveness probe".to_string()
            )],
            false,
            true
        )
    );
    let p = sidecar(json!({"image": "busybox:1.36"}));
    assert_eq!(
        run(&p, cs()),
        (
            vec!["sc".to_string()],
            vec![(
                "sc-0".to_string(),
                KillReason::SpecChanged,
                "Init container sc definition changed".to_string()
            )],
            false,
            true
        )
    );
}

#[test]
fn a_sidecar_last_in_line_completes_initialization_once_started() {
    let p = with_inits(
        json!([{"name": "i1", "image": "busybox:1.35"},
            {"name": "sc", "image": "busybox:1.35", "restartPolicy": "Always"}]),
        "Never",
    );
    assert_eq!(
        run(&p, vec![ctr("i1", Exited, 0, 0, 1)]),
        starts(&["sc"], false)
    );
    assert_eq!(
        run(
            &p,
            vec![ctr("i1", Exited, 0, 0, 1), ctr("sc", Running, 0, 0, 5)]
        ),
        starts(&[], true)
    );
    // Under Never a sidecar still restarts.
    assert_eq!(
        run(
            &p,
            vec![ctr("i1", Exited, 0, 0, 1), ctr("sc", Exited, 1, 0, 5)]
        ),
        starts(&["sc"], false)
    );
}

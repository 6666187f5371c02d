//! Restartable init containers.

use super::*;

fn with_sidecar(extra: Value) -> Pod {
    let mut v = json!({"spec": {"initContainers": [
        {"name": "sc", "image": "busybox:1.35", "restartPolicy": "Always"}]}});
    merge(&mut v, extra);
    pod(v)
}

#[test]
fn a_sidecar_starts_before_the_containers_and_is_kept_running() {
    let p = with_sidecar(json!({}));
    assert_eq!(
        actions(&p, &observed(vec![], vec![])),
        vec![create(0), start("sc", true, 0)]
    );
    let sc = ctr("sc", Running, 0, 0, 1);
    assert_eq!(
        actions(&p, &observed(ready(), vec![sc.clone()])),
        vec![start("c", false, 0)]
    );
    let c = ctr("c", Running, 0, 0, 5);
    assert_eq!(actions(&p, &observed(ready(), vec![sc, c.clone()])), vec![]);
    // The sidecar crashed: it restarts beside the running container.
    let crashed = ctr("sc", Exited, 1, 0, 1);
    assert_eq!(
        actions(&p, &observed(ready(), vec![crashed, c])),
        vec![start("sc", true, 1)]
    );
}

#[test]
fn sidecars_do_not_keep_a_finished_pod_alive() {
    let p = with_sidecar(json!({"spec": {"restartPolicy": "Never"}}));
    let o = observed(
        ready(),
        vec![ctr("sc", Running, 0, 0, 1), ctr("c", Exited, 0, 0, 5)],
    );
    assert_eq!(
        actions(&p, &o),
        vec![
            kill("sc-0", 30, KillReason::PodStopping, "Stopping container sc"),
            kill_sandbox("s1")
        ]
    );
}

#[test]
fn sidecars_stop_after_the_containers_in_reverse_order() {
    let p = pod(json!({
        "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 5},
        "spec": {"initContainers": [
            {"name": "sa", "image": "busybox:1.35", "restartPolicy": "Always"},
            {"name": "sb", "image": "busybox:1.35", "restartPolicy": "Always"}]}}));
    let o = observed(
        ready(),
        vec![
            ctr("sa", Running, 0, 0, 1),
            ctr("sb", Running, 0, 0, 2),
            ctr("c", Running, 0, 0, 3),
        ],
    );
    let stop = |id: &str| {
        kill(
            id,
            5,
            KillReason::PodStopping,
            &format!("Stopping container {}", &id[..id.len() - 2]),
        )
    };
    assert_eq!(
        actions(&p, &o),
        vec![stop("c-0"), stop("sb-0"), stop("sa-0"), kill_sandbox("s1")]
    );
}

#[test]
fn an_init_container_in_image_pull_back_off_waits() {
    let p = pod(json!({"spec": {"initContainers": [
        {"name": "i1", "image": "nope:1"}, {"name": "i2", "image": "busybox:1.35"}]}}));
    let mut b = Backoffs::default();
    b.image_pull
        .next(&image_backoff_key(&p, "nope:1"), at(99), at(99));
    let out = plan_at(
        &p,
        &observed(ready(), vec![]),
        &mut b,
        &ProbeResults::default(),
        100,
    );
    assert_eq!(out.actions, vec![]);
    assert_eq!(out.waiting["i1"].reason, "ImagePullBackOff");
}

//! Supervised controllers with the real binary and `K3RS_FAILPOINTS` (the first n runs of a
//! named task panic at start):
//! - `controller/serviceaccount` panics once: the panic is logged with the task's name, the
//!   controller is started again and does its work (a new namespace gets its `default`
//!   ServiceAccount), and `/metrics` counts one restart;
//! - `controller/replicaset` keeps panicking: it is restarted with growing delays,
//!   `/readyz?verbose` answers 500 with `[-]task/controller/replicaset failed` (the other
//!   checks pass), and `/metrics` has it failing with a rising restart count.

use std::ffi::OsStr;
use std::time::Duration;

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::K3rs;

/// `GET <path>` on the server's HTTPS port; with the admin client certificate when `authn`.
fn get(server: &K3rs, path: &str, authn: bool) -> (u16, String) {
    let tls = server.data_dir().join("server/tls");
    let (cert, key) = (tls.join("client-admin.crt"), tls.join("client-admin.key"));
    let client = authn.then_some((cert.as_path(), key.as_path()));
    let url = format!("{}{path}", server.server_url());
    common::https::request("GET", &url, &tls.join("server-ca.crt"), client)
}

/// The value of the sample `series` (name and labels, exactly) in `/metrics`.
fn sample(server: &K3rs, series: &str) -> Option<u64> {
    let (code, text) = get(server, "/metrics", true);
    assert_eq!(code, 200, "{text}");
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn a_panicking_controller_is_restarted_logged_and_reported() {
    let failpoints = OsStr::new("controller/serviceaccount:1,controller/replicaset:1000");
    let (mut server, k) = Kubectl::start_server_with_env(
        &[
            "--disable-scheduler",
            "--kube-controller-manager-arg=controllers=serviceaccount,replicaset",
        ],
        &[("K3RS_FAILPOINTS", failpoints)],
    );

    // Panicked once, started again, and working.
    k.ok(&["create", "namespace", "supervised"]);
    common::wait_for(
        "the default ServiceAccount of a new namespace",
        Duration::from_secs(60),
        || {
            server.assert_running();
            k.run(&["get", "serviceaccount", "default", "-n", "supervised"])
                .ok
                .then_some(())
        },
    );
    let log = server.log();
    assert!(
        log.lines().any(|l| l.contains("task failed; restarting")
            && l.contains("controller/serviceaccount")
            && l.contains("panicked")),
        "no log line names the panicked controller:\n{log}"
    );
    let restarts = |task: &str| {
        sample(
            &server,
            &format!("k3rs_task_restarts_total{{task=\"{task}\"}}"),
        )
    };
    assert_eq!(restarts("controller/serviceaccount"), Some(1));

    // Keeps failing: restarted again and again (after 1, 2, 4 s, …), and reported.
    let before = common::wait_for("two restarts", Duration::from_secs(30), || {
        restarts("controller/replicaset").filter(|n| *n >= 2)
    });
    let (code, body) = get(&server, "/readyz?verbose", false);
    assert_eq!(code, 500, "{body}");
    assert!(
        body.contains("[-]task/controller/replicaset failed"),
        "{body}"
    );
    assert!(body.contains("[+]etcd ok"), "{body}");
    assert!(body.contains("readyz check failed"), "{body}");
    assert_eq!(
        sample(&server, "k3rs_task_failing{task=\"controller/replicaset\"}"),
        Some(1)
    );
    common::wait_for("one more restart", Duration::from_secs(30), || {
        restarts("controller/replicaset").filter(|n| *n > before)
    });
    server.assert_running();
}

//! The backend quota counts the API server's own writes, as etcd's does for kube-apiserver's:
//! once objects written through the Kubernetes API would outgrow `--etcd-quota-backend-bytes`,
//! the member raises NOSPACE, the write is refused with etcd's message, reads go on, and the
//! alarm is visible to `etcdctl alarm list`.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::client::runtime;
use crate::common::etcdctl::etcdctl;
use crate::common::k3rs::{K3rs, AS_BARE_API};
use crate::common::kube::{KubeClient, Kubeconfig};
use crate::common::kubectl::Kubectl;

/// The backend size `etcdctl endpoint status` reports.
fn db_size(server: &K3rs) -> u64 {
    let out = etcdctl(
        &server.endpoint(),
        &["endpoint", "status", "-w", "json"],
        None,
    )
    .expect_ok("endpoint status");
    let status: Value = serde_json::from_str(&out.stdout).expect("endpoint status json");
    status[0]["Status"]["dbSize"]
        .as_u64()
        .unwrap_or_else(|| panic!("no dbSize in {status}"))
}

#[test]
fn api_writes_past_the_quota_raise_nospace_and_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, _k) = Kubectl::start_server_on(dir.path(), AS_BARE_API, &[]);
    let started = db_size(&server);
    server.terminate(Duration::from_secs(20));

    // Room for a few MiB of objects beyond what the server holds after its first start.
    let quota = (started + 6 * 1024 * 1024).to_string();
    let mut args = AS_BARE_API.to_vec();
    args.extend(["--etcd-quota-backend-bytes", &quota]);
    let (mut server, _k) = Kubectl::start_server_on(dir.path(), &args, &[]);
    let data = "x".repeat(512 * 1024);
    let refused = runtime().block_on(async {
        let c = KubeClient::connect(&Kubeconfig::read(&server.kubeconfig()).unwrap())
            .await
            .unwrap();
        let path = "/api/v1/namespaces/default/configmaps";
        // 200 × 512 KiB is far past the quota: the loop ends by a refusal, or fails.
        for i in 0..200 {
            let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("big-{i}")}, "data": {"blob": data}});
            let (code, answer) = c.request("POST", path, Some(&cm)).await.unwrap();
            if code != 201 {
                let (read, _) = c.request("GET", path, None).await.unwrap();
                return Some((i, code, answer, read));
            }
        }
        None
    });
    let (created, code, answer, read) = refused.expect("200 large ConfigMaps were all stored");
    assert!(created > 0, "the first write was already refused: {answer}");
    assert!(
        answer["message"]
            .as_str()
            .unwrap_or_default()
            .contains("database space exceeded"),
        "{code}: {answer}"
    );
    assert_eq!(answer["kind"], "Status", "{answer}");
    assert_eq!(read, 200, "reads must go on under NOSPACE");
    let alarms = etcdctl(&server.endpoint(), &["alarm", "list"], None).expect_ok("alarm list");
    assert!(alarms.stdout.contains("alarm:NOSPACE"), "{alarms:?}");
    server.assert_running();
}

//! The worker's behaviour against the recording fake runtime and a recording fake API.

use std::sync::Mutex;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{ConfigMap, PodStatus, Secret};
use serde_json::{json, Value};

use super::*;
use crate::cri::fake::{Call, FakeRuntime};

#[derive(Debug, Clone, PartialEq)]
enum ApiCall {
    Status(Value),
    Delete(String),
}

#[derive(Default)]
struct FakeApi {
    calls: Mutex<Vec<ApiCall>>,
    config_maps: BTreeMap<String, ConfigMap>,
    secrets: BTreeMap<String, Secret>,
}

impl FakeApi {
    fn take(&self) -> Vec<ApiCall> {
        std::mem::take(&mut *self.calls.lock().unwrap())
    }
}

impl PodApi for FakeApi {
    fn patch_status(
        &self,
        _ns: &str,
        _name: &str,
        _uid: &str,
        patch: Value,
    ) -> BoxFuture<'_, Result<(), crate::kubelet::pods::api::Error>> {
        self.calls.lock().unwrap().push(ApiCall::Status(patch));
        Box::pin(async { Ok(()) })
    }
    fn delete(
        &self,
        _ns: &str,
        name: &str,
        uid: &str,
    ) -> BoxFuture<'_, Result<(), crate::kubelet::pods::api::Error>> {
        self.calls
            .lock()
            .unwrap()
            .push(ApiCall::Delete(format!("{name}/{uid}")));
        Box::pin(async { Ok(()) })
    }
    fn config_map(
        &self,
        _ns: &str,
        name: &str,
    ) -> BoxFuture<'_, Result<Option<ConfigMap>, crate::kubelet::pods::api::Error>> {
        let m = self.config_maps.get(name).cloned();
        Box::pin(async move { Ok(m) })
    }
    fn secret(
        &self,
        _ns: &str,
        name: &str,
    ) -> BoxFuture<'_, Result<Option<Secret>, crate::kubelet::pods::api::Error>> {
        let s = self.secrets.get(name).cloned();
        Box::pin(async move { Ok(s) })
    }
    fn token<'a>(
        &'a self,
        _ns: &'a str,
        _sa: &'a str,
        _aud: Option<&'a str>,
        _exp: Option<i64>,
        _pod: &'a Pod,
    ) -> BoxFuture<'a, Result<String, crate::kubelet::pods::api::Error>> {
        Box::pin(async { Ok("the-token".to_string()) })
    }
}

struct Setup {
    runtime: Arc<FakeRuntime>,
    api: Arc<FakeApi>,
    exec: Executor,
    events: tokio::sync::mpsc::Receiver<k8s_openapi::api::core::v1::Event>,
    _dir: tempfile::TempDir,
}

fn setup_with(api: FakeApi) -> Setup {
    let runtime = Arc::new(FakeRuntime::new());
    runtime.add_image("busybox:1.35");
    let api = Arc::new(api);
    let dir = tempfile::tempdir().unwrap();
    let (events, rx) = crate::kubelet::events::Recorder::channel("node-1");
    let changed = Arc::new(tokio::sync::Notify::new());
    let probes = crate::kubelet::prober::Manager::new(runtime.clone(), events.clone(), changed);
    let exec = Executor {
        probes: Arc::new(probes),
        events,
        runtime: runtime.clone(),
        images: runtime.clone(),
        api: api.clone(),
        node: NodeContext {
            host_ips: vec!["192.168.1.10".parse().unwrap()],
            dns: NodeDns {
                cluster_dns: vec!["10.43.0.10".parse().unwrap()],
                cluster_domain: "cluster.local".into(),
                host: None,
                node_ips: vec![],
            },
            allocatable: Allocatable::default(),
            memory_capacity: 1 << 30,
            cgroup_root: "/test".into(),
            pods_dir: dir.path().join("pods"),
            pod_logs_dir: dir.path().join("logs"),
            image_imports: crate::images::background::ImportsDone::done(),
        },
        backoffs: Default::default(),
        starts: tokio::sync::Semaphore::new(start_concurrency(1)),
        services: Box::new(Vec::new),
    };
    Setup {
        runtime,
        api,
        exec,
        events: rx,
        _dir: dir,
    }
}

fn setup() -> Setup {
    setup_with(FakeApi::default())
}

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1",
            "resourceVersion": "1"},
        "spec": spec,
    }))
    .unwrap()
}

fn c(name: &str, extra: Value) -> Value {
    let mut v = json!({"name": name, "image": "busybox:1.35"});
    v.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    v
}

/// The status of the last patch, applied to `pod` (what the informer would show next).
fn apply_status(pod: &mut Pod, calls: &[ApiCall]) -> PodStatus {
    let patch = calls
        .iter()
        .rev()
        .find_map(|c| match c {
            ApiCall::Status(p) => Some(p["status"].clone()),
            _ => None,
        })
        .expect("a status patch");
    let status: PodStatus = serde_json::from_value(patch).unwrap();
    pod.status = Some(status.clone());
    status
}

fn mutations(calls: Vec<Call>) -> Vec<Call> {
    calls
        .into_iter()
        .filter(|c| {
            !matches!(
                c,
                Call::ListPodSandbox
                    | Call::ListContainers
                    | Call::PodSandboxStatus(_)
                    | Call::ContainerStatus(_)
                    | Call::ImageStatus(_)
            )
        })
        .collect()
}

fn container_ids(rt: &FakeRuntime) -> Vec<String> {
    rt.calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::StartContainer(id) => Some(id),
            _ => None,
        })
        .collect()
}

fn waiting_reason(s: &PodStatus, name: &str) -> Option<String> {
    s.container_statuses
        .iter()
        .chain(s.init_container_statuses.iter())
        .flatten()
        .find(|c| c.name == name)?
        .state
        .as_ref()?
        .waiting
        .as_ref()?
        .reason
        .clone()
}

#[tokio::test]
async fn a_new_pod_gets_a_sandbox_and_its_container_then_nothing_more() {
    let s = setup();
    let mut p = pod(json!({"containers": [c("app", json!({}))]}));
    let mut state = PodState::default();
    let out = s.exec.sync_pod(&p, &mut state).await.unwrap();
    assert_eq!(out, Synced::default());
    let calls = mutations(s.runtime.calls());
    assert_eq!(
        calls,
        vec![
            Call::RunPodSandbox {
                namespace: "default".into(),
                name: "web".into(),
                attempt: 0
            },
            Call::CreateContainer {
                pod_sandbox_id: "sandbox-1".into(),
                name: "app".into(),
                image: "busybox:1.35".into()
            },
            Call::StartContainer("container-2".into()),
        ]
    );
    let status = apply_status(&mut p, &s.api.take());
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.pod_ip.as_deref(), Some("10.244.0.3"));
    assert_eq!(status.host_ip.as_deref(), Some("192.168.1.10"));
    let app = &status.container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        app.container_id.as_deref(),
        Some("containerd://container-2")
    );
    assert!(app.state.as_ref().unwrap().running.is_some());

    // In sync: no runtime change, no status write.
    s.runtime.clear_calls();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    assert_eq!(mutations(s.runtime.calls()), vec![]);
    assert_eq!(s.api.take(), vec![]);
}

#[tokio::test]
async fn init_containers_run_in_order_before_the_app() {
    let s = setup();
    let mut p = pod(json!({
        "initContainers": [c("one", json!({})), c("two", json!({}))],
        "containers": [c("app", json!({}))]}));
    let mut state = PodState::default();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    let status = apply_status(&mut p, &s.api.take());
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    let started = container_ids(&s.runtime);
    assert_eq!(started.len(), 1, "only the first init container");
    s.runtime.exit_container(&started[0], 0);
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    apply_status(&mut p, &s.api.take());
    let started = container_ids(&s.runtime);
    assert_eq!(started.len(), 2, "then the second");
    s.runtime.exit_container(&started[1], 0);
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    let status = apply_status(&mut p, &s.api.take());
    let creates: Vec<String> = s
        .runtime
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::CreateContainer { name, .. } => Some(name),
            _ => None,
        })
        .collect();
    assert_eq!(creates, vec!["one", "two", "app"]);
    assert_eq!(status.phase.as_deref(), Some("Running"));
}

#[tokio::test]
async fn a_failed_pull_reports_err_image_pull_then_back_off() {
    let s = setup();
    let mut p = pod(json!({"containers": [c("app", json!({"image": "nginx:1.0"}))]}));
    s.runtime
        .fail_next("PullImage", tonic::Status::unknown("no route to registry"));
    let mut state = PodState::default();
    let out = s.exec.sync_pod(&p, &mut state).await.unwrap();
    assert!(out.waiting);
    let status = apply_status(&mut p, &s.api.take());
    assert_eq!(
        waiting_reason(&status, "app").as_deref(),
        Some("ErrImagePull")
    );
    assert!(!s
        .runtime
        .calls()
        .iter()
        .any(|c| matches!(c, Call::CreateContainer { .. })));
    // Within the back-off: no pull, ImagePullBackOff.
    s.runtime.clear_calls();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    assert!(!s
        .runtime
        .calls()
        .iter()
        .any(|c| matches!(c, Call::PullImage(_))));
    let status = apply_status(&mut p, &s.api.take());
    assert_eq!(
        waiting_reason(&status, "app").as_deref(),
        Some("ImagePullBackOff")
    );
}

#[tokio::test]
async fn a_crashing_container_restarts_then_backs_off() {
    let s = setup();
    let mut p = pod(json!({"containers": [c("app", json!({}))]}));
    let mut state = PodState::default();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    apply_status(&mut p, &s.api.take());
    let first = container_ids(&s.runtime)[0].clone();
    s.runtime.exit_container(&first, 1);
    // The first restart is immediate.
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    let status = apply_status(&mut p, &s.api.take());
    let started = container_ids(&s.runtime);
    assert_eq!(started.len(), 2);
    let app = &status.container_statuses.as_ref().unwrap()[0];
    assert_eq!(app.restart_count, 1);
    assert_eq!(
        app.last_state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        1
    );
    // It crashes again: now it waits in CrashLoopBackOff.
    s.runtime.exit_container(&started[1], 1);
    let out = s.exec.sync_pod(&p, &mut state).await.unwrap();
    assert!(out.waiting);
    assert_eq!(container_ids(&s.runtime).len(), 2, "no third start yet");
    let status = apply_status(&mut p, &s.api.take());
    assert_eq!(
        waiting_reason(&status, "app").as_deref(),
        Some("CrashLoopBackOff")
    );
    assert_eq!(status.container_statuses.unwrap()[0].restart_count, 1);
}

#[tokio::test]
async fn a_missing_config_map_is_a_config_error() {
    let s = setup();
    let mut p = pod(json!({"containers": [c("app", json!({"env": [{"name": "A",
        "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "a"}}}]}))]}));
    let mut state = PodState::default();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    let status = apply_status(&mut p, &s.api.take());
    let w = status.container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap();
    assert_eq!(w.reason.as_deref(), Some("CreateContainerConfigError"));
    assert_eq!(
        w.message.as_deref(),
        Some("configmap \"settings\" not found")
    );
}

#[tokio::test]
async fn env_from_a_config_map_and_the_downward_api_reaches_the_container() {
    let mut api = FakeApi::default();
    let m: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "settings"}, "data": {"a": "1"}}))
            .unwrap();
    api.config_maps.insert("settings".into(), m);
    let s = setup_with(api);
    let p = pod(json!({"containers": [c("app", json!({"env": [
        {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "a"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]}))]}));
    let mut state = PodState::default();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    assert!(state.reasons.is_empty(), "{:?}", state.reasons);
    assert_eq!(container_ids(&s.runtime).len(), 1);
}

#[tokio::test]
async fn a_deleted_pod_is_stopped_reported_deleted_and_removed() {
    let s = setup();
    let mut p = pod(json!({"containers": [c("app", json!({}))]}));
    let mut state = PodState::default();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    apply_status(&mut p, &s.api.take());
    let logs = s.exec.node.pod_logs_dir.join("default_web_u1");
    assert!(logs.join("app").is_dir(), "the container's log directory");
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::now(),
    ));
    p.metadata.deletion_grace_period_seconds = Some(5);
    s.runtime.clear_calls();
    // First the kills.
    let out = s.exec.sync_pod(&p, &mut state).await.unwrap();
    assert!(!out.deleted);
    assert_eq!(
        mutations(s.runtime.calls()),
        vec![
            Call::StopContainer {
                container_id: "container-2".into(),
                timeout_secs: 5
            },
            Call::StopPodSandbox("sandbox-1".into()),
        ]
    );
    // Stopped: the status says so already.
    let stopped = apply_status(&mut p, &s.api.take());
    assert_eq!(stopped.phase.as_deref(), Some("Failed"));
    let app = &stopped.container_statuses.as_ref().unwrap()[0];
    assert_eq!(
        app.state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap()
            .exit_code,
        143
    );
    // Then the final status, the delete, and the removals.
    s.runtime.clear_calls();
    let out = s.exec.sync_pod(&p, &mut state).await.unwrap();
    assert!(out.deleted);
    // (written already: only the delete)
    assert_eq!(s.api.take(), vec![ApiCall::Delete("web/u1".into())]);
    assert_eq!(
        mutations(s.runtime.calls()),
        vec![
            Call::RemoveContainer("container-2".into()),
            Call::RemovePodSandbox("sandbox-1".into()),
        ]
    );
    assert!(s.runtime.list_containers(None).await.unwrap().is_empty());
    assert!(!logs.exists(), "the pod's logs go with it");
}

#[tokio::test]
async fn orphans_are_torn_down() {
    let s = setup();
    let p = pod(json!({"containers": [c("app", json!({}))]}));
    let mut state = PodState::default();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    s.runtime.clear_calls();
    // The API forgot the pod (force-deleted): everything of it goes.
    assert!(s.exec.clean_up("u1").await.unwrap());
    assert_eq!(
        mutations(s.runtime.calls()),
        vec![
            Call::StopContainer {
                container_id: "container-2".into(),
                timeout_secs: 2
            },
            Call::RemoveContainer("container-2".into()),
            Call::StopPodSandbox("sandbox-1".into()),
            Call::RemovePodSandbox("sandbox-1".into()),
        ]
    );
    assert!(!s.exec.node.pod_logs_dir.join("default_web_u1").exists());
    s.runtime.clear_calls();
    assert!(s.exec.clean_up("u1").await.unwrap(), "nothing is left");
    assert_eq!(mutations(s.runtime.calls()), vec![]);
}

#[test]
fn start_slots_are_eight_per_cpu_and_at_least_sixteen() {
    assert_eq!(start_concurrency(1), 16);
    assert_eq!(start_concurrency(2), 16);
    assert_eq!(start_concurrency(8), 64);
    let most = start_concurrency(usize::MAX);
    assert_eq!(most, tokio::sync::Semaphore::MAX_PERMITS);
    assert_eq!(tokio::sync::Semaphore::new(most).available_permits(), most);
}

#[test]
fn stop_timeouts() {
    let s = |n| Duration::from_secs(n);
    assert_eq!(stop_timeout(s(30), s(0)), 30);
    assert_eq!(stop_timeout(s(30), s(10)), 20);
    assert_eq!(stop_timeout(s(30), s(29)), 2);
    assert_eq!(stop_timeout(s(1), s(5)), 1);
    assert_eq!(stop_timeout(s(0), s(0)), 0);
}

/// The events recorded so far: `(reason, fieldPath, message)`.
fn events(s: &mut Setup) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    while let Ok(e) = s.events.try_recv() {
        let path = e.involved_object.field_path.clone().unwrap_or_default();
        out.push((
            e.reason.unwrap_or_default(),
            path,
            e.message.unwrap_or_default(),
        ));
    }
    out
}

fn ev(reason: &str, path: &str, message: &str) -> (String, String, String) {
    (reason.into(), path.into(), message.into())
}

#[tokio::test]
async fn events_tell_what_the_kubelet_did() {
    let mut s = setup();
    let mut p = pod(json!({"containers": [c("app", json!({}))]}));
    let mut state = PodState::default();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    let app = "spec.containers{app}";
    assert_eq!(
        events(&mut s),
        vec![
            ev(
                "Pulled",
                app,
                "Container image \"busybox:1.35\" already present on machine"
            ),
            ev("Created", app, "Created container: app"),
            ev("Started", app, "Started container app"),
        ]
    );
    apply_status(&mut p, &s.api.take());
    let first = container_ids(&s.runtime)[0].clone();
    s.runtime.exit_container(&first, 1);
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    apply_status(&mut p, &s.api.take());
    events(&mut s);
    s.runtime.exit_container(&container_ids(&s.runtime)[1], 1);
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    assert_eq!(
        events(&mut s),
        vec![ev(
            "BackOff",
            app,
            "Back-off restarting failed container app in pod web_default(u1)"
        )]
    );
}

#[tokio::test]
async fn a_failing_liveness_probe_wakes_the_pod_and_restarts_the_container() {
    let mut s = setup();
    s.runtime.set_exec_reply(crate::cri::pb::ExecSyncResponse {
        stdout: b"not healthy\n".to_vec(),
        stderr: vec![],
        exit_code: 1,
    });
    let probe = json!({"livenessProbe": {"exec": {"command": ["check"]},
        "periodSeconds": 1, "failureThreshold": 2}});
    let mut p = pod(json!({"containers": [c("app", probe)]}));
    let mut state = PodState::default();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    apply_status(&mut p, &s.api.take());
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    let first = container_ids(&s.runtime)[0].clone();
    events(&mut s);
    // Two failures in a row (1 s apart) store the failure and wake the pod.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !s.exec.probes.take_woken().contains("u1") {
        assert!(std::time::Instant::now() < deadline, "no probe result");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let unhealthy = ev(
        "Unhealthy",
        "spec.containers{app}",
        "Liveness probe failed: not healthy\n",
    );
    assert_eq!(events(&mut s), vec![unhealthy.clone(), unhealthy]);
    assert_eq!(
        s.exec.probes.results().liveness.get(&first),
        Some(&crate::kubelet::plan::ProbeResult::Failure)
    );
    s.runtime.clear_calls();
    s.exec.sync_pod(&p, &mut state).await.unwrap();
    let calls: Vec<Call> = mutations(s.runtime.calls())
        .into_iter()
        .filter(|c| !matches!(c, Call::ExecSync { .. }))
        .collect();
    assert!(
        matches!(&calls[0], Call::StopContainer { container_id, .. } if *container_id == first),
        "{calls:?}"
    );
    assert!(
        matches!(&calls[1], Call::CreateContainer { name, .. } if name == "app"),
        "{calls:?}"
    );
    let killing = events(&mut s)
        .into_iter()
        .find(|e| e.0 == "Killing")
        .unwrap();
    assert_eq!(
        killing.2,
        "Container app failed liveness probe, will be restarted"
    );
}

fn pull_secret(registry: &str, user: &str, password: &str) -> Secret {
    let config = json!({"auths": {registry: {"username": user, "password": password}}});
    serde_json::from_value(json!({
        "metadata": {"name": format!("{user}-pull")},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD, config.to_string())},
    }))
    .unwrap()
}

fn auth(user: &str, password: &str) -> Option<pb::AuthConfig> {
    Some(pb::AuthConfig {
        username: user.into(),
        password: password.into(),
        ..Default::default()
    })
}

#[tokio::test]
async fn pulls_try_the_matching_pull_secrets_in_turn() {
    let mut api = FakeApi::default();
    for s in [
        pull_secret("reg.example.com/app", "team", "t"),
        pull_secret("https://reg.example.com/v1/", "host", "h"),
        pull_secret("other.example.com", "other", "o"),
    ] {
        api.secrets.insert(s.metadata.name.clone().unwrap(), s);
    }
    let mut s = setup_with(api);
    let image = "reg.example.com/app:1";
    let refs = ["team-pull", "host-pull", "other-pull", "gone"].map(|n| json!({"name": n}));
    let p = pod(json!({"imagePullSecrets": refs,
        "containers": [c("app", json!({"image": image}))]}));
    // The most specific credential first; it fails, the host's pulls.
    s.runtime
        .fail_next("PullImage", tonic::Status::unknown("401 Unauthorized"));
    s.exec.sync_pod(&p, &mut PodState::default()).await.unwrap();
    assert_eq!(
        s.runtime.pull_auths(),
        vec![auth("team", "t"), auth("host", "h")]
    );
    assert!(s
        .runtime
        .calls()
        .iter()
        .any(|c| matches!(c, Call::StartContainer(_))));
    let missing = events(&mut s)
        .into_iter()
        .find(|e| e.0 == "FailedToRetrieveImagePullSecret");
    assert_eq!(
        missing,
        Some(ev(
            "FailedToRetrieveImagePullSecret",
            "",
            "Unable to retrieve some image pull secrets (gone); attempting to pull the image \
             may not succeed."
        ))
    );
}

#[tokio::test]
async fn without_a_matching_secret_the_pull_is_anonymous_and_its_error_is_the_message() {
    let mut api = FakeApi::default();
    let secret = pull_secret("other.example.com", "other", "o");
    api.secrets.insert("other-pull".into(), secret);
    let mut s = setup_with(api);
    let image = "reg.example.com/app:1";
    let mut p = pod(json!({"imagePullSecrets": [{"name": "other-pull"}],
        "containers": [c("app", json!({"image": image}))]}));
    s.runtime
        .fail_next("PullImage", tonic::Status::unknown("401 Unauthorized"));
    s.exec.sync_pod(&p, &mut PodState::default()).await.unwrap();
    assert_eq!(s.runtime.pull_auths(), vec![None]);
    let status = apply_status(&mut p, &s.api.take());
    let waiting = status.container_statuses.unwrap()[0]
        .state
        .clone()
        .unwrap()
        .waiting
        .unwrap();
    assert_eq!(waiting.reason.as_deref(), Some("ErrImagePull"));
    assert_eq!(
        waiting.message.as_deref(),
        Some("CRI PullImage: Unknown: 401 Unauthorized")
    );
    let failed: Vec<_> = events(&mut s)
        .into_iter()
        .filter(|e| e.0 == "Failed")
        .map(|e| e.2)
        .collect();
    assert_eq!(
        failed,
        vec![
            format!("Failed to pull image \"{image}\": CRI PullImage: Unknown: 401 Unauthorized"),
            "Error: ErrImagePull".to_string(),
        ]
    );
}

#[tokio::test]
async fn a_pull_waits_for_the_air_gap_imports_and_uses_the_image_they_brought() {
    let mut s = setup();
    let (done, imports) = crate::images::background::ImportsDone::pending();
    s.exec.node.image_imports = imports;
    let image = "airgap.example/app:1";
    let p = pod(json!({"containers": [c("app", json!({"image": image}))]}));
    let runtime = s.runtime.clone();
    let import = async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        runtime.add_image(image);
        done.send_replace(true);
    };
    let mut state = PodState::default();
    let (synced, ()) = tokio::join!(s.exec.sync_pod(&p, &mut state), import);
    synced.unwrap();
    let calls = s.runtime.calls();
    assert!(
        !calls.iter().any(|c| matches!(c, Call::PullImage(_))),
        "the imported image is not pulled: {calls:?}"
    );
    assert!(
        calls.iter().any(|c| matches!(c, Call::StartContainer(_))),
        "{calls:?}"
    );
}

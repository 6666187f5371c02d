//! The workload controllers of the in-process controller manager against the real binary
//! and real kubectl: ReplicaSet and ReplicationController keep their pod count, adopt and
//! release; a Deployment rolls out, rolls a new template out within maxSurge/maxUnavailable
//! (checked on every pod event of a watch), and kubectl's rollout status/history/undo/pause/
//! resume/restart work; a Recreate rollout starts the new pods once the old are gone; a
//! StatefulSet scales up in order and down in reverse; deleting a Deployment with each
//! propagation policy leaves what it should. Pods run on hollow nodes (`k3rs agent
//! --hollow`), placed there by the server's scheduler.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common;
use crate::common::hollow::HollowAgent;
use crate::common::kube::{KubeClient, Kubeconfig};
use crate::common::kubectl::{json, pod_ready as is_ready, wait_json, Kubectl};
use serde_json::Value;

/// A server with two Ready hollow nodes; both stop when dropped.
struct Cluster {
    // Dropped in this order: the nodes stop before the server.
    _agent: HollowAgent,
    server: common::K3rs,
}

const NODES: [&str; 2] = ["apps-0", "apps-1"];

fn cluster() -> (Cluster, Kubectl) {
    let (server, k) = Kubectl::start_server(&[]);
    let mut agent = HollowAgent::start(&k.kubeconfig, NODES.len(), "apps-", &[]);
    common::wait_for("2 Ready hollow nodes", Duration::from_secs(60), || {
        agent.proc.assert_running();
        let out = k.run(&["get", "nodes", "--no-headers"]);
        let rows = common::kubectl::table(&out.stdout);
        let ready = NODES
            .iter()
            .all(|n| rows.iter().any(|r| r[0] == *n && r[1] == "Ready"));
        ready.then_some(())
    });
    let cluster = Cluster {
        _agent: agent,
        server,
    };
    (cluster, k)
}

type Events = (
    tokio::task::JoinHandle<()>,
    tokio::sync::mpsc::UnboundedReceiver<Value>,
);

/// Every event of a watch on the default namespace's pods with `selector` (URL-encoded).
async fn watch_pods(kubeconfig: &std::path::Path, selector: &str) -> Events {
    let path = format!("/api/v1/namespaces/default/pods?watch=1&labelSelector={selector}");
    watch_objects(kubeconfig, &path).await
}

/// Every event of the watch at `path`.
async fn watch_objects(kubeconfig: &std::path::Path, path: &str) -> Events {
    let client = KubeClient::connect(&Kubeconfig::read(kubeconfig).unwrap())
        .await
        .unwrap();
    let mut w = client.watch(path).await.unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let task = tokio::spawn(async move {
        while let Ok(Some(ev)) = w.next().await {
            if tx.send(ev).is_err() {
                break;
            }
        }
    });
    (task, rx)
}

fn running_pods(k: &Kubectl, selector: &str) -> Vec<Value> {
    json(k, &["get", "pods", "-l", selector])["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
        .cloned()
        .collect()
}

fn controller_uid(pod: &Value) -> Option<String> {
    pod["metadata"]["ownerReferences"]
        .as_array()?
        .iter()
        .find(|r| r["controller"] == true)
        .map(|r| r["uid"].as_str().unwrap_or_default().to_string())
}

const RS: &str = r#"
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: front}
spec:
  replicas: 3
  selector: {matchLabels: {app: front}}
  template:
    metadata: {labels: {app: front, tier: web}}
    spec: {containers: [{name: c, image: nginx:1.27}]}
"#;

#[test]
fn replica_sets_keep_their_count_adopt_and_release() {
    let (_cluster, k) = cluster();
    // A running orphan that matches is adopted: the set creates only two more.
    k.ok(&[
        "run",
        "orphan",
        "--image=nginx",
        "--labels=app=front,tier=web",
    ]);
    wait_json(&k, "the orphan running", &["get", "pod", "orphan"], |p| {
        p["status"]["phase"] == "Running"
    });
    k.ok_stdin(&["apply", "-f", "-"], Some(RS));
    let rs = wait_json(&k, "3 ready replicas", &["get", "rs", "front"], |rs| {
        rs["status"]["readyReplicas"] == 3 && rs["status"]["availableReplicas"] == 3
    });
    assert_eq!(rs["status"]["replicas"], 3);
    assert_eq!(rs["status"]["fullyLabeledReplicas"], 3);
    assert_eq!(
        rs["status"]["observedGeneration"],
        rs["metadata"]["generation"]
    );
    let uid = rs["metadata"]["uid"].as_str().unwrap().to_string();
    let pods = running_pods(&k, "app=front");
    assert_eq!(pods.len(), 3);
    let orphan = json(&k, &["get", "pod", "orphan"]);
    assert_eq!(controller_uid(&orphan).as_deref(), Some(uid.as_str()));
    for p in pods.iter().filter(|p| p["metadata"]["name"] != "orphan") {
        let name = p["metadata"]["name"].as_str().unwrap();
        assert!(
            name.starts_with("front-") && name.len() == "front-".len() + 5,
            "{name}"
        );
        let owner = &p["metadata"]["ownerReferences"][0];
        assert_eq!(owner["kind"], "ReplicaSet");
        assert_eq!(owner["uid"], uid.as_str());
        assert_eq!(owner["controller"], true);
        assert_eq!(owner["blockOwnerDeletion"], true);
    }

    // A deleted pod is replaced.
    let victim = pods[0]["metadata"]["name"].as_str().unwrap().to_string();
    k.ok(&["delete", "pod", &victim, "--wait=false"]);
    common::wait_for("a replacement pod", Duration::from_secs(60), || {
        let now = running_pods(&k, "app=front");
        (now.len() == 3 && now.iter().all(|p| p["metadata"]["name"] != victim.as_str()))
            .then_some(())
    });

    // A pod that stops matching is released and replaced.
    let kept = running_pods(&k, "app=front");
    let released = kept[0]["metadata"]["name"].as_str().unwrap().to_string();
    k.ok(&["label", "pod", &released, "app=other", "--overwrite"]);
    wait_json(&k, "the pod released", &["get", "pod", &released], |p| {
        controller_uid(p).is_none()
    });
    common::wait_for(
        "a replacement for the released pod",
        Duration::from_secs(60),
        || (running_pods(&k, "app=front").len() == 3).then_some(()),
    );

    // Scaling down deletes; events record creations and deletions.
    k.ok(&["scale", "rs", "front", "--replicas=1"]);
    wait_json(&k, "1 replica", &["get", "rs", "front"], |rs| {
        rs["status"]["replicas"] == 1 && rs["status"]["readyReplicas"] == 1
    });
    assert_eq!(running_pods(&k, "app=front").len(), 1);
    let describe = k.ok(&["describe", "rs", "front"]);
    assert!(describe.contains("SuccessfulCreate"), "{describe}");
    assert!(describe.contains("Created pod: front-"), "{describe}");
    assert!(describe.contains("SuccessfulDelete"), "{describe}");
    assert!(describe.contains("replicaset-controller"), "{describe}");

    // A ReplicationController does the same with an equality selector.
    let rc = r#"
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: legacy}}
    spec: {containers: [{name: c, image: nginx}]}
"#;
    k.ok_stdin(&["apply", "-f", "-"], Some(rc));
    wait_json(&k, "2 ready rc replicas", &["get", "rc", "legacy"], |rc| {
        rc["status"]["readyReplicas"] == 2
    });
    assert_eq!(running_pods(&k, "app=legacy").len(), 2);
    let out = k.ok(&["get", "rc", "legacy"]);
    let row = common::kubectl::table(&out);
    assert_eq!(row[1][..4], ["legacy", "2", "2", "2"], "{out}");
}

/// Counts over one watch's objects, checked on every event: pods (once the first rollout is
/// done) no fewer than `min_ready` ready and not terminating; ReplicaSets no more than
/// `max_pods` replicas in all (`spec.replicas`: the surge bound is on the sets' sizes, the
/// pods of a shrunk set terminate asynchronously, as upstream's).
struct Invariant {
    pods: BTreeMap<String, Value>,
    sets: BTreeMap<String, i64>,
    max_pods: i64,
    min_ready: usize,
    armed: bool,
    events: usize,
    violations: Vec<String>,
}

impl Invariant {
    fn observe_set(&mut self, event: &Value) {
        let obj = &event["object"];
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        if event["type"] == "DELETED" {
            self.sets.remove(name);
        } else {
            let replicas = obj["spec"]["replicas"].as_i64().unwrap_or(0);
            self.sets.insert(name.to_string(), replicas);
        }
        let total: i64 = self.sets.values().sum();
        if total > self.max_pods {
            self.violations.push(format!(
                "{total} replicas in all sets (max {})",
                self.max_pods
            ));
        }
    }

    fn observe(&mut self, event: &Value) {
        let obj = &event["object"];
        let name = obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match event["type"].as_str() {
            Some("DELETED") => {
                self.pods.remove(&name);
            }
            Some("ADDED") | Some("MODIFIED") => {
                self.pods.insert(name, obj.clone());
            }
            _ => return,
        }
        self.events += 1;
        let active: Vec<&Value> = self
            .pods
            .values()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null())
            .collect();
        let ready = active
            .iter()
            .filter(|p| {
                p["status"]["conditions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
            .count();
        if self.armed && ready < self.min_ready {
            self.violations
                .push(format!("{ready} ready pods (min {})", self.min_ready));
        }
    }
}

const DEPLOY: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {kubernetes.io/change-cause: "v1"}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxSurge: 3, maxUnavailable: 2}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: "nginx:1.26"}]}
"#;

fn deployment_rss(k: &Kubectl) -> Vec<Value> {
    json(k, &["get", "rs", "-l", "app=web"])["items"]
        .as_array()
        .unwrap()
        .clone()
}

fn image_of(v: &Value) -> String {
    v["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployments_roll_out_within_surge_and_unavailability() {
    let (cluster, k) = cluster();
    let server = &cluster.server;
    let (watch, mut rx) = watch_pods(&server.kubeconfig(), "app%3Dweb").await;
    let sets_path = "/apis/apps/v1/namespaces/default/replicasets?watch=1";
    let (set_watch, mut set_rx) = watch_objects(&server.kubeconfig(), sets_path).await;
    let mut inv = Invariant {
        pods: BTreeMap::new(),
        sets: BTreeMap::new(),
        max_pods: 13,
        min_ready: 8,
        armed: false,
        events: 0,
        violations: Vec::new(),
    };
    let kk = || Kubectl {
        bin: k.bin.clone(),
        kubeconfig: k.kubeconfig.clone(),
    };
    let blocking = |args: Vec<String>, stdin: Option<String>| {
        let k = kk();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            k.ok_stdin(&args, stdin.as_deref())
        })
    };
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    // The first rollout: 10 pods, one ReplicaSet scaled 0 -> 10.
    blocking(s(&["apply", "-f", "-"]), Some(DEPLOY.into()))
        .await
        .unwrap();
    let out = blocking(
        s(&["rollout", "status", "deployment/web", "--timeout=90s"]),
        None,
    )
    .await
    .unwrap();
    assert!(out.contains("successfully rolled out"), "{out}");
    while let Ok(ev) = rx.try_recv() {
        inv.observe(&ev);
    }
    while let Ok(ev) = set_rx.try_recv() {
        inv.observe_set(&ev);
    }
    inv.armed = true;
    let rss = deployment_rss(&k);
    assert_eq!(rss.len(), 1);
    let first = rss[0]["metadata"]["name"].as_str().unwrap().to_string();
    let hash = rss[0]["metadata"]["labels"]["pod-template-hash"]
        .as_str()
        .unwrap();
    assert_eq!(first, format!("web-{hash}"));
    assert_eq!(
        rss[0]["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    let d = json(&k, &["get", "deployment", "web"]);
    assert_eq!(d["status"]["availableReplicas"], 10);
    assert_eq!(d["status"]["updatedReplicas"], 10);
    // As upstream: the revision annotation is written through the status and the
    // controller's typed round trip of the spec is no change, so the generation stays 1.
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "1"
    );
    assert_eq!(
        (
            &d["metadata"]["generation"],
            &d["status"]["observedGeneration"]
        ),
        (&serde_json::json!(1), &serde_json::json!(1)),
        "{d}"
    );
    // Writes without a fieldManager are owned by the User-Agent's program, as upstream's.
    let shown = k.ok(&[
        "get",
        "deployment",
        "web",
        "-o",
        "json",
        "--show-managed-fields",
    ]);
    let shown: Value = serde_json::from_str(&shown).unwrap();
    let managers: Vec<(&str, &str)> = shown["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let sub = m["subresource"].as_str().unwrap_or("");
            (m["manager"].as_str().unwrap(), sub)
        })
        .collect();
    assert!(
        managers.contains(&("kube-controller-manager", "status")),
        "{managers:?}"
    );
    let conds = d["status"]["conditions"].as_array().unwrap();
    let cond = |t: &str| conds.iter().find(|c| c["type"] == t).unwrap().clone();
    assert_eq!(cond("Available")["reason"], "MinimumReplicasAvailable");
    assert_eq!(cond("Progressing")["reason"], "NewReplicaSetAvailable");
    assert_eq!(
        cond("Progressing")["message"],
        format!("ReplicaSet \"{first}\" has successfully progressed.")
    );
    let events = k.ok(&[
        "get",
        "events",
        "--field-selector",
        "reason=ScalingReplicaSet",
    ]);
    assert!(
        events.contains(&format!("Scaled up replica set {first} from 0 to 10")),
        "{events}"
    );

    // A new template rolls out; every observed pod state keeps the bounds.
    let update = DEPLOY
        .replace("nginx:1.26", "nginx:1.27")
        .replace("\"v1\"", "\"v2\"");
    blocking(s(&["apply", "-f", "-"]), Some(update))
        .await
        .unwrap();
    let status = blocking(
        s(&["rollout", "status", "deployment/web", "--timeout=120s"]),
        None,
    );
    let out = status.await.unwrap();
    assert!(out.contains("successfully rolled out"), "{out}");
    // Drain what the watch saw up to now (the rollout finished: the last state is final).
    tokio::time::sleep(Duration::from_millis(500)).await;
    while let Ok(ev) = rx.try_recv() {
        inv.observe(&ev);
    }
    while let Ok(ev) = set_rx.try_recv() {
        inv.observe_set(&ev);
    }
    assert!(inv.violations.is_empty(), "{:?}", inv.violations);
    assert!(inv.events > 30, "only {} pod events observed", inv.events);
    let rss = deployment_rss(&k);
    assert_eq!(rss.len(), 2);
    let new = rss.iter().find(|r| image_of(r) == "nginx:1.27").unwrap();
    let old = rss.iter().find(|r| image_of(r) == "nginx:1.26").unwrap();
    assert_eq!(new["spec"]["replicas"], 10);
    assert_eq!(old["spec"]["replicas"], 0);
    assert_eq!(
        new["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "2"
    );
    let pods = running_pods(&k, "app=web");
    assert_eq!(pods.len(), 10);
    assert!(pods
        .iter()
        .all(|p| image_of(&serde_json::json!({"spec": {"template": p}})) == "nginx:1.27"));

    // History and undo (kubectl copies the old template back client-side).
    let history = k.ok(&["rollout", "history", "deployment/web"]);
    let rows = common::kubectl::table(&history);
    assert!(rows.iter().any(|r| r == &["1", "v1"]), "{history}");
    assert!(rows.iter().any(|r| r == &["2", "v2"]), "{history}");
    let out = k.ok(&["rollout", "undo", "deployment/web"]);
    assert!(out.contains("rolled back"), "{out}");
    let out = k.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let rss = deployment_rss(&k);
    assert_eq!(rss.len(), 2, "the old ReplicaSet is reused");
    let back = rss
        .iter()
        .find(|r| r["metadata"]["name"] == first.as_str())
        .unwrap();
    assert_eq!(back["spec"]["replicas"], 10);
    assert_eq!(
        back["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );
    assert_eq!(
        back["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"],
        "1"
    );
    let d = json(&k, &["get", "deployment", "web"]);
    assert_eq!(image_of(&d), "nginx:1.26");
    assert_eq!(
        d["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
        "3"
    );
    k.ok(&["rollout", "undo", "deployment/web", "--to-revision=2"]);
    k.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    assert_eq!(
        image_of(&json(&k, &["get", "deployment", "web"])),
        "nginx:1.27"
    );
    let history = k.ok(&["rollout", "history", "deployment/web"]);
    let revisions: Vec<String> = common::kubectl::table(&history)
        .into_iter()
        .skip(2)
        .filter_map(|r| r.first().cloned())
        .collect();
    assert_eq!(revisions, ["3", "4"], "{history}");

    // Paused: a template change makes no ReplicaSet until resumed.
    k.ok(&["rollout", "pause", "deployment/web"]);
    k.ok(&["set", "image", "deployment/web", "c=nginx:1.28"]);
    let d = wait_json(
        &k,
        "the paused condition",
        &["get", "deployment", "web"],
        |d| {
            d["status"]["observedGeneration"] == d["metadata"]["generation"]
                && d["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["reason"] == "DeploymentPaused"))
        },
    );
    assert_eq!(d["spec"]["paused"], true);
    assert_eq!(deployment_rss(&k).len(), 2);
    k.ok(&["rollout", "resume", "deployment/web"]);
    k.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    let rss = deployment_rss(&k);
    assert!(rss
        .iter()
        .any(|r| image_of(r) == "nginx:1.28" && r["spec"]["replicas"] == 10));

    // restart: a new ReplicaSet with the restartedAt annotation in its template.
    k.ok(&["rollout", "restart", "deployment/web"]);
    k.ok(&["rollout", "status", "deployment/web", "--timeout=120s"]);
    let rss = deployment_rss(&k);
    let restarted = rss.iter().find(|r| r["spec"]["replicas"] == 10).unwrap();
    assert!(
        !restarted["spec"]["template"]["metadata"]["annotations"]
            ["kubectl.kubernetes.io/restartedAt"]
            .is_null(),
        "{restarted}"
    );
    watch.abort();
    set_watch.abort();
}

const STS: &str = r#"
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: c, image: "postgres:16"}]}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
"#;

/// Called with each watch event's type, its pod and the pods seen before it.
type OnPodEvent<'a> = dyn FnMut(&str, &Value, &BTreeMap<String, Value>) + 'a;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateful_sets_scale_up_in_order_and_down_in_reverse() {
    let (cluster, k) = cluster();
    let server = &cluster.server;
    let (watch, mut rx) = watch_pods(&server.kubeconfig(), "app%3Ddb").await;
    let kk = Kubectl {
        bin: k.bin.clone(),
        kubeconfig: k.kubeconfig.clone(),
    };
    tokio::task::spawn_blocking(move || {
        kk.ok_stdin(&["apply", "-f", "-"], Some(STS));
        kk.ok(&["rollout", "status", "statefulset/db", "--timeout=90s"]);
    })
    .await
    .unwrap();

    // Every pod appears only once all lower ordinals are Ready, in ordinal order.
    let mut state: BTreeMap<String, Value> = BTreeMap::new();
    let mut created = Vec::new();
    let drain = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
                 state: &mut BTreeMap<String, Value>,
                 on: &mut OnPodEvent| {
        while let Ok(ev) = rx.try_recv() {
            let name = ev["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string();
            on(ev["type"].as_str().unwrap_or(""), &ev["object"], state);
            if ev["type"] == "DELETED" {
                state.remove(&name);
            } else {
                state.insert(name, ev["object"].clone());
            }
        }
    };
    drain(&mut rx, &mut state, &mut |ty, pod, state| {
        let name = pod["metadata"]["name"].as_str().unwrap();
        if ty == "ADDED" {
            let ordinal: usize = name.trim_start_matches("db-").parse().unwrap();
            for lower in 0..ordinal {
                let p = state.get(&format!("db-{lower}"));
                assert!(
                    p.is_some_and(is_ready),
                    "{name} created before db-{lower} was ready"
                );
            }
            created.push(name.to_string());
        }
    });
    assert_eq!(created, ["db-0", "db-1", "db-2"]);
    for (i, name) in created.iter().enumerate() {
        let pod = &state[name];
        assert_eq!(
            pod["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"],
            name.as_str()
        );
        assert_eq!(
            pod["metadata"]["labels"]["apps.kubernetes.io/pod-index"],
            i.to_string()
        );
        assert_eq!(pod["spec"]["hostname"], name.as_str());
        assert_eq!(pod["spec"]["subdomain"], "db");
        assert_eq!(
            pod["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
            format!("data-{name}")
        );
    }
    let sts = json(&k, &["get", "sts", "db"]);
    assert_eq!(sts["status"]["readyReplicas"], 3);
    assert_eq!(
        sts["status"]["currentRevision"],
        sts["status"]["updateRevision"]
    );
    let rev = sts["status"]["updateRevision"]
        .as_str()
        .unwrap()
        .to_string();
    let crs = json(&k, &["get", "controllerrevisions"]);
    assert!(
        crs["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["metadata"]["name"] == rev.as_str()),
        "{crs}"
    );
    let pvcs = k.ok(&["get", "pvc", "-o", "name"]);
    for i in 0..3 {
        assert!(pvcs.contains(&format!("data-db-{i}")), "{pvcs}");
    }

    // Scale to zero: pods go from the highest ordinal down, one at a time.
    k.ok(&["scale", "sts", "db", "--replicas=0"]);
    common::wait_for("all db pods gone", Duration::from_secs(90), || {
        running_pods(&k, "app=db").is_empty().then_some(())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut deleted: Vec<String> = Vec::new();
    drain(&mut rx, &mut state, &mut |_, pod, state| {
        let name = pod["metadata"]["name"].as_str().unwrap();
        let terminating = !pod["metadata"]["deletionTimestamp"].is_null();
        if terminating && !deleted.iter().any(|d| d == name) {
            // No other pod may be terminating when one starts to.
            let others = state
                .values()
                .filter(|p| {
                    p["metadata"]["name"] != name && !p["metadata"]["deletionTimestamp"].is_null()
                })
                .count();
            assert_eq!(
                others, 0,
                "{name} deleted while another pod was terminating"
            );
            deleted.push(name.to_string());
        }
    });
    assert_eq!(deleted, ["db-2", "db-1", "db-0"]);
    // Claims stay (whenScaled: Retain).
    let pvcs = k.ok(&["get", "pvc", "-o", "name"]);
    assert_eq!(pvcs.lines().count(), 3, "{pvcs}");
    let describe = k.ok(&["describe", "sts", "db"]);
    assert!(
        describe.contains("create Pod db-0 in StatefulSet db successful"),
        "{describe}"
    );
    assert!(
        describe.contains("delete Pod db-2 in StatefulSet db successful"),
        "{describe}"
    );
    watch.abort();
}

fn names(k: &Kubectl, args: &[&str]) -> Vec<String> {
    let mut all = args.to_vec();
    all.extend(["-o", "name"]);
    k.ok(&all).lines().map(str::to_string).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_deployment_follows_its_propagation_policy() {
    let (cluster, k) = cluster();
    for app in ["bg", "fg", "orphan"] {
        let d = DEPLOY
            .replace("name: web", &format!("name: {app}"))
            .replace("app: web", &format!("app: {app}"))
            .replace("replicas: 10", "replicas: 3");
        k.ok_stdin(&["apply", "-f", "-"], Some(&d));
    }
    for app in ["bg", "fg", "orphan"] {
        k.ok(&[
            "rollout",
            "status",
            &format!("deployment/{app}"),
            "--timeout=90s",
        ]);
        assert_eq!(running_pods(&k, &format!("app={app}")).len(), 3);
    }

    // Background: the Deployment goes at once, the collector then deletes its ReplicaSet,
    // whose pods go after it.
    k.ok(&["delete", "deployment", "bg"]);
    common::wait_for(
        "bg's ReplicaSet and pods gone",
        Duration::from_secs(60),
        || {
            (names(&k, &["get", "rs", "-l", "app=bg"]).is_empty()
                && names(&k, &["get", "pods", "-l", "app=bg"]).is_empty())
            .then_some(())
        },
    );

    // Foreground: the Deployment stays (deletionTimestamp, foregroundDeletion finalizer) until
    // its ReplicaSet is gone, which stays until its pods are gone.
    let path =
        "/apis/apps/v1/namespaces/default/deployments?watch=1&fieldSelector=metadata.name%3Dfg";
    let (watch, mut rx) = watch_objects(&cluster.server.kubeconfig(), path).await;
    k.ok(&["delete", "deployment", "fg", "--cascade=foreground"]);
    let mut seen = Vec::new();
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("the fg Deployment's DELETED event within 60 s")
    {
        let m = &ev["object"]["metadata"];
        let deleting = !m["deletionTimestamp"].is_null()
            && m["finalizers"] == serde_json::json!(["foregroundDeletion"]);
        seen.push(format!(
            "{} deleting={deleting}",
            ev["type"].as_str().unwrap_or("")
        ));
        if ev["type"] == "DELETED" {
            break;
        }
    }
    watch.abort();
    assert!(
        seen.iter().any(|e| e == "MODIFIED deleting=true"),
        "the Deployment waited for its dependents: {seen:?}"
    );
    assert!(
        seen.last().is_some_and(|e| e.starts_with("DELETED")),
        "{seen:?}"
    );
    assert_eq!(
        names(&k, &["get", "rs", "-l", "app=fg"]),
        Vec::<String>::new()
    );
    assert_eq!(
        names(&k, &["get", "pods", "-l", "app=fg"]),
        Vec::<String>::new()
    );

    // Orphan: the Deployment goes, its ReplicaSet stays without an owner and keeps its pods.
    let rs = names(&k, &["get", "rs", "-l", "app=orphan"]);
    assert_eq!(rs.len(), 1, "{rs:?}");
    k.ok(&["delete", "deployment", "orphan", "--cascade=orphan"]);
    let rs = wait_json(&k, "the orphaned ReplicaSet", &["get", &rs[0]], |rs| {
        rs["metadata"]["ownerReferences"].is_null()
    });
    assert_eq!(rs["spec"]["replicas"], 3);
    assert!(rs["metadata"]["deletionTimestamp"].is_null(), "{rs}");
    let uid = rs["metadata"]["uid"].as_str().unwrap();
    let pods = running_pods(&k, "app=orphan");
    assert_eq!(pods.len(), 3);
    assert!(pods
        .iter()
        .all(|p| controller_uid(p).as_deref() == Some(uid)));
    let out = k.run(&["get", "deployment", "orphan"]);
    assert!(out.stderr.contains("NotFound"), "{}", out.stderr);
}

const RECREATE: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: batch}
spec:
  replicas: 4
  selector: {matchLabels: {app: batch}}
  strategy: {type: Recreate}
  template:
    metadata: {labels: {app: batch}, finalizers: [example.com/hold]}
    spec: {containers: [{name: c, image: "busybox:1.36"}]}
"#;

/// The new template: another image, no finalizer.
const RECREATE_V2: &str = r#"{"spec": {"template": {"metadata": {"finalizers": null},
    "spec": {"containers": [{"name": "c", "image": "busybox:1.37"}]}}}}"#;

/// Recreate: the new template's pods are created only once no pod of the old one is left
/// (the old pods are held terminating by a finalizer until the test lets them go), checked
/// on every event of a pod watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreate_rollout_starts_new_pods_once_the_old_are_gone() {
    let (cluster, k) = cluster();
    let (watch, mut rx) = watch_pods(&cluster.server.kubeconfig(), "app%3Dbatch").await;
    k.ok_stdin(&["apply", "-f", "-"], Some(RECREATE));
    let out = k.ok(&["rollout", "status", "deployment/batch", "--timeout=120s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    let old: Vec<String> = running_pods(&k, "app=batch")
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(old.len(), 4);

    k.ok(&[
        "patch",
        "deployment",
        "batch",
        "--type=strategic",
        "-p",
        RECREATE_V2,
    ]);
    // The old pods are deleted and stay terminating; no new pod comes meanwhile.
    common::wait_for("old pods terminating", Duration::from_secs(30), || {
        let pods = json(&k, &["get", "pods", "-l", "app=batch"]);
        let items = pods["items"].as_array().unwrap();
        let terminating = items
            .iter()
            .filter(|p| !p["metadata"]["deletionTimestamp"].is_null())
            .count();
        (terminating == 4).then_some(())
    });
    tokio::time::sleep(Duration::from_secs(2)).await;
    let pods = json(&k, &["get", "pods", "-l", "app=batch"]);
    assert_eq!(pods["items"].as_array().unwrap().len(), 4, "{pods}");
    for name in &old {
        k.ok(&[
            "patch",
            "pod",
            name,
            "--type=merge",
            "-p",
            r#"{"metadata": {"finalizers": null}}"#,
        ]);
    }
    let out = k.ok(&["rollout", "status", "deployment/batch", "--timeout=120s"]);
    assert!(out.contains("successfully rolled out"), "{out}");
    tokio::time::sleep(Duration::from_millis(500)).await;

    // name → (image, phase) of every pod not yet deleted, replayed from the watch.
    let mut pods: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut overlaps = Vec::new();
    let mut new_seen = 0;
    while let Ok(ev) = rx.try_recv() {
        let pod = &ev["object"];
        let name = pod["metadata"]["name"].as_str().unwrap_or_default();
        if ev["type"] == "DELETED" {
            pods.remove(name);
            continue;
        }
        let image = pod["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap_or_default();
        let phase = pod["status"]["phase"].as_str().unwrap_or_default();
        if image == "busybox:1.37" && !pods.contains_key(name) {
            new_seen += 1;
            let old: Vec<&String> = pods
                .iter()
                .filter(|(_, (i, p))| i == "busybox:1.36" && p != "Failed" && p != "Succeeded")
                .map(|(n, _)| n)
                .collect();
            if !old.is_empty() {
                overlaps.push(format!("{name} created while {old:?} remained"));
            }
        }
        pods.insert(name.to_string(), (image.to_string(), phase.to_string()));
    }
    watch.abort();
    assert!(overlaps.is_empty(), "{overlaps:?}");
    assert_eq!(new_seen, 4, "the new template's pods: {pods:?}");
    let running = running_pods(&k, "app=batch");
    assert_eq!(running.len(), 4);
    assert!(running
        .iter()
        .all(|p| p["spec"]["containers"][0]["image"] == "busybox:1.37"
            && p["metadata"]["finalizers"].is_null()));
}

//! One watch per resource type per server process (issue 23): the API server's readers (RBAC
//! and Node authorizers, admission listers, PodSecurity, the aggregator's availability
//! controller), the scheduler and the controllers share one informer factory. With the real binary: once every controller is running (new namespaces
//! get their `default` ServiceAccount and `kube-root-ca.crt`, a Deployment gets its
//! ReplicaSet) and the set of watches has stopped growing, `/metrics` counts no more
//! successful watches of each type than the shared informer's and the garbage collector's
//! (metadata only, its own).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common;
use crate::common::kubectl::Kubectl;
use crate::common::K3rs;

/// The successful watches (`code="200"`) served so far, by resource.
fn watches(server: &K3rs) -> BTreeMap<String, u64> {
    let tls = server.data_dir().join("server/tls");
    let (cert, key) = (tls.join("client-admin.crt"), tls.join("client-admin.key"));
    let url = format!("{}/metrics", server.server_url());
    let ca = tls.join("server-ca.crt");
    let (code, text) =
        common::https::request("GET", &url, &ca, Some((cert.as_path(), key.as_path())));
    assert_eq!(code, 200, "{text}");
    let mut by_resource = BTreeMap::new();
    for line in text.lines() {
        let Some(labels) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        if !labels.contains("verb=\"WATCH\"") || !labels.contains("code=\"200\"") {
            continue;
        }
        let resource = labels
            .split("resource=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_default();
        let n: u64 = line
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        *by_resource.entry(resource.to_string()).or_default() += n;
    }
    by_resource
}

/// Types watched by at most two watches in the process: the shared informer's and the
/// garbage collector's. The types the API server reads as well as the controllers
/// (namespaces: PodSecurity, NamespaceLifecycle and the namespace controllers; clusterroles:
/// the RBAC authorizer and the aggregation controller; resourcequotas, serviceaccounts and
/// storageclasses: admission's listers and their controllers) were watched once more, by a
/// second factory, before the process had one; services once more by the aggregator's
/// availability watch; pods, persistentvolumes, ingresses and ingressclasses by the node
/// authorizer's graph.
const ONCE_PER_PROCESS: &[&str] = &[
    "replicasets",
    "replicationcontrollers",
    "deployments",
    "statefulsets",
    "daemonsets",
    "jobs",
    "cronjobs",
    "horizontalpodautoscalers",
    "poddisruptionbudgets",
    "certificatesigningrequests",
    "nodes",
    "namespaces",
    "clusterroles",
    "clusterrolebindings",
    "roles",
    "rolebindings",
    "resourcequotas",
    "serviceaccounts",
    "limitranges",
    "priorityclasses",
    "storageclasses",
    "services",
    "pods",
    "persistentvolumes",
    "ingresses",
    "ingressclasses",
];

#[test]
fn each_type_is_watched_once_per_process_by_the_api_server_and_the_controllers() {
    let (mut server, k) = Kubectl::start_server(&["--disable-scheduler"]);
    // Controllers at work: the namespace's default account and root CA, a Deployment's set.
    k.ok(&["create", "namespace", "shared"]);
    k.ok(&[
        "create",
        "deployment",
        "web",
        "-n",
        "shared",
        "--image=pause",
    ]);
    common::wait_for(
        "the namespace's account, root CA and the Deployment's ReplicaSet",
        Duration::from_secs(90),
        || {
            server.assert_running();
            let got = |what: &[&str]| {
                let mut args = vec!["get", "-n", "shared", "-o", "name"];
                args.extend_from_slice(what);
                let out = k.run(&args);
                out.ok && !out.stdout.trim().is_empty()
            };
            (got(&["serviceaccount", "default"])
                && got(&["configmap", "kube-root-ca.crt"])
                && got(&["replicaset"]))
            .then_some(())
        },
    );
    // Every controller has started its watches once the count stops growing.
    let mut last = watches(&server);
    let mut stable_since = Instant::now();
    common::wait_for("the watches to settle", Duration::from_secs(120), || {
        std::thread::sleep(Duration::from_secs(2));
        let now = watches(&server);
        if now != last {
            last = now;
            stable_since = Instant::now();
        }
        (stable_since.elapsed() >= Duration::from_secs(10)).then_some(())
    });

    let over: Vec<String> = ONCE_PER_PROCESS
        .iter()
        .filter_map(|r| {
            let n = last.get(*r).copied().unwrap_or(0);
            (n > 2).then(|| format!("{r}: {n} watches (at most 2)"))
        })
        .collect();
    assert!(over.is_empty(), "{over:#?}\nall: {last:#?}");
    // Not vacuous: the controllers' types are watched at all.
    for r in [
        "replicasets",
        "deployments",
        "namespaces",
        "services",
        "clusterroles",
        "resourcequotas",
        "serviceaccounts",
    ] {
        assert!(last.get(r).copied().unwrap_or(0) >= 1, "{r}: {last:#?}");
    }
}

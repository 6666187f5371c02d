//! End to end: the real `k3rs server` and the real `kubectl` against the built-in resources of
//! part A (core/v1 persistentvolumes, persistentvolumeclaims, resourcequotas, limitranges,
//! replicationcontrollers, podtemplates; apps/v1 statefulsets, daemonsets,
//! controllerrevisions; batch/v1 jobs, cronjobs; autoscaling/v2 horizontalpodautoscalers;
//! policy/v1 poddisruptionbudgets) and the pod subresources binding, eviction,
//! ephemeralcontainers, log and exec. For each kind: discovery (short names, verbs), `explain`,
//! a valid object from YAML, its Table with kube-apiserver's columns, and a 422 naming
//! upstream's field paths for an invalid one; then scale, defaults, bind and evict.

use crate::common;
use crate::common::kinds::{round_trip, start, RoundTrip};
use crate::common::kubectl::Kubectl;

/// One kind: a valid object, the `kubectl get` header and the first cells of its row, and an
/// invalid object with the field paths its 422 must name.
struct Case {
    resource: &'static str,
    short: &'static str,
    name: &'static str,
    explain: &'static str,
    valid: &'static str,
    header: &'static [&'static str],
    cells: &'static [&'static str],
    invalid: &'static str,
    fields: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        resource: "persistentvolumes",
        short: "pv",
        name: "pv1",
        explain: "pv.spec.hostPath.path",
        valid: "\
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/k3rs-pv1}
",
        header: &[
            "NAME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "RECLAIM",
            "POLICY",
            "STATUS",
            "CLAIM",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "REASON",
            "AGE",
        ],
        cells: &["pv1", "1Gi", "RWO", "Retain", "Pending"],
        invalid: "\
apiVersion: v1
kind: PersistentVolume
metadata: {name: badpv}
spec:
  accessModes: [Sometimes]
  hostPath: {path: /tmp/x}
",
        fields: &["spec.accessModes", "spec.capacity"],
    },
    Case {
        resource: "persistentvolumeclaims",
        short: "pvc",
        name: "claim1",
        explain: "pvc.spec.resources.requests",
        valid: "\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim1}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
",
        header: &[
            "NAME",
            "STATUS",
            "VOLUME",
            "CAPACITY",
            "ACCESS",
            "MODES",
            "STORAGECLASS",
            "VOLUMEATTRIBUTESCLASS",
            "AGE",
        ],
        cells: &["claim1", "Pending"],
        invalid: "\
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: badclaim}
spec:
  accessModes: [ReadWriteOnce]
",
        fields: &["spec.resources[storage]"],
    },
    Case {
        resource: "resourcequotas",
        short: "quota",
        name: "quota1",
        explain: "quota.spec.hard",
        valid: "\
apiVersion: v1
kind: ResourceQuota
metadata: {name: quota1}
spec:
  hard: {pods: '10'}
",
        header: &["NAME", "AGE", "REQUEST", "LIMIT"],
        cells: &["quota1"],
        invalid: "\
apiVersion: v1
kind: ResourceQuota
metadata: {name: badquota}
spec:
  hard: {pods: '-1'}
",
        fields: &["spec.hard[pods]"],
    },
    Case {
        resource: "limitranges",
        short: "limits",
        name: "limits1",
        explain: "limits.spec.limits.max",
        valid: "\
apiVersion: v1
kind: LimitRange
metadata: {name: limits1}
spec:
  limits:
  - {type: Container, max: {cpu: '2'}, min: {memory: 64Mi}}
",
        header: &["NAME", "CREATED", "AT"],
        cells: &["limits1"],
        invalid: "\
apiVersion: v1
kind: LimitRange
metadata: {name: badlimits}
spec:
  limits:
  - {type: Container, max: {cpu: '1'}, min: {cpu: '2'}}
",
        fields: &["spec.limits[0].min[cpu]"],
    },
    Case {
        resource: "replicationcontrollers",
        short: "rc",
        name: "rc1",
        explain: "rc.spec.template.spec.containers",
        valid: "\
apiVersion: v1
kind: ReplicationController
metadata: {name: rc1}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: rc1}}
    spec:
      containers: [{name: c, image: nginx:1.27}]
",
        header: &["NAME", "DESIRED", "CURRENT", "READY", "AGE"],
        cells: &["rc1", "2", "0", "0"],
        invalid: "\
apiVersion: v1
kind: ReplicationController
metadata: {name: badrc}
spec:
  replicas: -1
  template:
    metadata: {labels: {app: badrc}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: nginx:1.27}]
",
        fields: &["spec.replicas", "spec.template.spec.restartPolicy"],
    },
    Case {
        resource: "podtemplates",
        short: "",
        name: "pt1",
        explain: "podtemplates.template.spec",
        valid: "\
apiVersion: v1
kind: PodTemplate
metadata: {name: pt1}
template:
  metadata: {labels: {app: pt1}}
  spec:
    containers: [{name: c, image: nginx:1.27}]
",
        header: &["NAME", "CONTAINERS", "IMAGES", "POD", "LABELS"],
        cells: &["pt1", "c", "nginx:1.27", "app=pt1"],
        invalid: "\
apiVersion: v1
kind: PodTemplate
metadata: {name: badpt}
template:
  spec:
    containers: [{name: c}]
",
        fields: &["template.spec.containers[0].image"],
    },
    Case {
        resource: "statefulsets.apps",
        short: "sts",
        name: "sts1",
        explain: "sts.spec.updateStrategy.rollingUpdate",
        valid: "\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: sts1}
spec:
  serviceName: sts1
  selector: {matchLabels: {app: sts1}}
  template:
    metadata: {labels: {app: sts1}}
    spec:
      containers: [{name: c, image: nginx:1.27}]
",
        header: &["NAME", "READY", "AGE"],
        cells: &["sts1", "0/1"],
        invalid: "\
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: badsts}
spec:
  podManagementPolicy: Random
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: b}}
    spec:
      containers: [{name: c, image: nginx:1.27}]
",
        fields: &["spec.podManagementPolicy", "spec.template.metadata.labels"],
    },
    Case {
        resource: "daemonsets.apps",
        short: "ds",
        name: "ds1",
        explain: "ds.spec.updateStrategy",
        valid: "\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: ds1}
spec:
  selector: {matchLabels: {app: ds1}}
  template:
    metadata: {labels: {app: ds1}}
    spec:
      containers: [{name: c, image: nginx:1.27}]
",
        header: &[
            "NAME",
            "DESIRED",
            "CURRENT",
            "READY",
            "UP-TO-DATE",
            "AVAILABLE",
            "NODE",
            "SELECTOR",
            "AGE",
        ],
        cells: &["ds1", "0", "0", "0", "0", "0", "<none>"],
        invalid: "\
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: badds}
spec:
  selector: {}
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: nginx:1.27}]
",
        fields: &["spec.selector", "spec.template.spec.restartPolicy"],
    },
    Case {
        resource: "controllerrevisions.apps",
        short: "",
        name: "cr1",
        explain: "controllerrevisions.revision",
        valid: "\
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: cr1}
revision: 1
data: {spec: {template: {}}}
",
        header: &["NAME", "CONTROLLER", "REVISION", "AGE"],
        cells: &["cr1", "<none>", "1"],
        invalid: "\
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: badcr}
revision: -1
",
        fields: &["data", "revision"],
    },
    Case {
        resource: "jobs.batch",
        short: "",
        name: "job1",
        explain: "jobs.spec.backoffLimit",
        valid: "\
apiVersion: batch/v1
kind: Job
metadata: {name: job1}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox:1.36}]
",
        header: &["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
        cells: &["job1", "Running", "0/1"],
        invalid: "\
apiVersion: batch/v1
kind: Job
metadata: {name: badjob}
spec:
  backoffLimit: -1
  template:
    spec:
      containers: [{name: c, image: busybox:1.36}]
",
        fields: &["spec.backoffLimit", "spec.template.spec.restartPolicy"],
    },
    Case {
        resource: "cronjobs.batch",
        short: "cj",
        name: "cj1",
        explain: "cj.spec.jobTemplate.spec.template",
        valid: "\
apiVersion: batch/v1
kind: CronJob
metadata: {name: cj1}
spec:
  schedule: '@hourly'
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: OnFailure
          containers: [{name: c, image: busybox:1.36}]
",
        header: &[
            "NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE",
        ],
        cells: &["cj1", "@hourly", "<none>", "False", "0", "<none>"],
        invalid: "\
apiVersion: batch/v1
kind: CronJob
metadata: {name: badcj}
spec:
  schedule: every minute
  concurrencyPolicy: Sometimes
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox:1.36}]
",
        fields: &["spec.schedule", "spec.concurrencyPolicy"],
    },
    Case {
        resource: "horizontalpodautoscalers.autoscaling",
        short: "hpa",
        name: "hpa1",
        explain: "hpa.spec.metrics.resource.target",
        valid: "\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: hpa1}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: StatefulSet, name: sts1}
  maxReplicas: 5
",
        header: &[
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE",
        ],
        cells: &[
            "hpa1",
            "StatefulSet/sts1",
            "cpu:",
            "<unknown>/80%",
            "1",
            "5",
            "0",
        ],
        invalid: "\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: badhpa}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment}
  minReplicas: 3
  maxReplicas: 2
",
        fields: &["spec.maxReplicas", "spec.scaleTargetRef.name"],
    },
    Case {
        resource: "poddisruptionbudgets.policy",
        short: "pdb",
        name: "pdb1",
        explain: "pdb.spec.minAvailable",
        valid: "\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pdb1}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: guarded}}
",
        header: &[
            "NAME",
            "MIN",
            "AVAILABLE",
            "MAX",
            "UNAVAILABLE",
            "ALLOWED",
            "DISRUPTIONS",
            "AGE",
        ],
        cells: &["pdb1", "1", "N/A", "0"],
        invalid: "\
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: badpdb}
spec:
  minAvailable: 1
  maxUnavailable: 1
  unhealthyPodEvictionPolicy: Never
",
        fields: &["spec.minAvailable", "spec.unhealthyPodEvictionPolicy"],
    },
];

const ALL_VERBS: &str = "create,delete,deletecollection,get,list,patch,update,watch";

fn json(k: &Kubectl, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&k.ok(&all)).unwrap()
}

/// `kubectl api-resources -o wide` lists each kind with its short name and every verb;
/// `kubectl explain` renders a nested field of each.
fn check_discovery(k: &Kubectl) {
    let res = k.ok(&["api-resources", "-o", "wide", "--no-headers"]);
    for case in CASES {
        let plural = case.resource.split('.').next().unwrap();
        let line = res
            .lines()
            .find(|l| l.split_whitespace().next() == Some(plural))
            .unwrap_or_else(|| panic!("{plural} missing from api-resources: {res}"));
        if !case.short.is_empty() {
            assert_eq!(line.split_whitespace().nth(1), Some(case.short), "{line}");
        }
        assert!(line.contains(ALL_VERBS), "{line}");
        let field = case.explain.rsplit('.').next().unwrap();
        let out = k.ok(&["explain", case.explain]);
        assert!(
            out.contains(&format!("FIELD: {field}")),
            "{}: {out}",
            case.explain
        );
    }
    // Pods' subresources as kubectl drain and kubectl debug look for them.
    let v1: serde_json::Value = serde_json::from_str(&k.ok(&["get", "--raw", "/api/v1"])).unwrap();
    let sub = |name: &str| {
        v1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not in /api/v1"))
    };
    let eviction = sub("pods/eviction");
    assert_eq!(
        (&eviction["group"], &eviction["version"], &eviction["kind"]),
        (&"policy".into(), &"v1".into(), &"Eviction".into())
    );
    assert_eq!(sub("pods/binding")["verbs"], serde_json::json!(["create"]));
    assert_eq!(
        sub("pods/ephemeralcontainers")["verbs"],
        serde_json::json!(["get", "patch", "update"])
    );
    assert_eq!(
        sub("replicationcontrollers/scale")["kind"],
        serde_json::json!("Scale")
    );
}

/// Every kind: create from YAML, read back as a Table, and get a 422 with upstream's field
/// paths for the invalid object.
fn check_cases(k: &Kubectl) {
    for case in CASES {
        round_trip(
            k,
            &RoundTrip {
                resource: case.resource,
                name: case.name,
                valid: case.valid,
                header: case.header,
                cells: case.cells,
                invalid: case.invalid,
                fields: case.fields,
            },
        );
    }
}

/// What the server filled in (`SetDefaults_*` and a Job's generated selector).
fn check_defaults(k: &Kubectl) {
    let job = json(k, &["get", "job", "job1"]);
    let uid = job["metadata"]["uid"].as_str().unwrap();
    let spec = &job["spec"];
    assert_eq!(
        (
            &spec["completions"],
            &spec["parallelism"],
            &spec["backoffLimit"]
        ),
        (&1.into(), &1.into(), &6.into())
    );
    assert_eq!(
        spec["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        uid
    );
    let labels = &spec["template"]["metadata"]["labels"];
    assert_eq!(labels["batch.kubernetes.io/job-name"], "job1");
    assert_eq!(labels["controller-uid"], uid);
    assert_eq!(job["metadata"]["labels"]["job-name"], "job1");

    let cj = json(k, &["get", "cronjob", "cj1"]);
    assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");
    assert_eq!(cj["spec"]["suspend"], false);
    assert_eq!(cj["spec"]["successfulJobsHistoryLimit"], 3);
    assert_eq!(cj["spec"]["failedJobsHistoryLimit"], 1);

    let sts = json(k, &["get", "sts", "sts1"]);
    assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        sts["spec"]["updateStrategy"],
        serde_json::json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );
    let rc = json(k, &["get", "rc", "rc1"]);
    assert_eq!(rc["spec"]["selector"], serde_json::json!({"app": "rc1"}));
    let lr = json(k, &["get", "limits", "limits1"]);
    assert_eq!(
        lr["spec"]["limits"][0]["defaultRequest"],
        serde_json::json!({"cpu": "2", "memory": "64Mi"})
    );
    let hpa = json(k, &["get", "hpa", "hpa1"]);
    assert_eq!(hpa["spec"]["minReplicas"], 1);
    assert_eq!(
        hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    // The job's template is immutable; its labels are not.
    k.fails_with(
        &[
            "patch",
            "job",
            "job1",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"busybox:1.37"}]"#,
        ],
        None,
        "spec.template: Invalid value",
    );
    k.ok(&["label", "job", "job1", "tier=batch"]);
}

/// `kubectl scale` through the scale subresource; field selectors of the new kinds.
fn check_scale(k: &Kubectl) {
    k.ok(&["scale", "rc", "rc1", "--replicas=3"]);
    k.ok(&["scale", "sts", "sts1", "--replicas=4"]);
    let rc = json(k, &["get", "rc", "rc1"]);
    assert_eq!(rc["spec"]["replicas"], 3);
    assert_eq!(rc["metadata"]["generation"], 2);
    assert_eq!(json(k, &["get", "sts", "sts1"])["spec"]["replicas"], 4);
    let scale: serde_json::Value = serde_json::from_str(&k.ok(&[
        "get",
        "--raw",
        "/api/v1/namespaces/default/replicationcontrollers/rc1/scale",
    ]))
    .unwrap();
    assert_eq!(scale["spec"]["replicas"], 3);
    assert_eq!(scale["status"]["selector"], "app=rc1");
    let names = k.ok(&[
        "get",
        "rc",
        "--field-selector",
        "status.replicas=0",
        "-o",
        "name",
    ]);
    assert_eq!(names.trim(), "replicationcontroller/rc1");
    let jobs = k.ok(&[
        "get",
        "jobs",
        "--field-selector",
        "status.successful=1",
        "-o",
        "name",
    ]);
    assert_eq!(jobs.trim(), "");
    k.fails_with(
        &["get", "pvc", "--field-selector", "spec.nodeName=x"],
        None,
        "field label not supported",
    );
}

fn pod(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: guarded}}}}\n\
         spec:\n  containers: [{{name: app, image: nginx:1.27}}]\n"
    )
}

fn post(k: &Kubectl, path: &str, body: &str) -> common::kubectl::Out {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), body).unwrap();
    k.run(&[
        "create",
        "--raw",
        path,
        "-f",
        &file.path().display().to_string(),
    ])
}

/// Binding sets the node once (409 after); log and exec are clear errors without a kubelet;
/// `kubectl debug` adds an ephemeral container.
fn check_binding(k: &Kubectl) {
    k.ok_stdin(&["create", "-f", "-"], Some(&pod("p1")));
    let err = k.fails_with(&["logs", "p1"], None, "does not have a host assigned");
    assert!(err.contains("BadRequest"), "{err}");
    let binding = r#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"p1"},"target":{"kind":"Node","name":"node-a"}}"#;
    let path = "/api/v1/namespaces/default/pods/p1/binding";
    let out = post(k, path, binding);
    assert!(out.ok && out.stdout.contains("Success"), "{out:?}");
    let p = json(k, &["get", "pod", "p1"]);
    assert_eq!(p["spec"]["nodeName"], "node-a");
    assert_eq!(p["status"]["conditions"][0]["type"], "PodScheduled");
    let again = post(k, path, &binding.replace("node-a", "node-b"));
    assert!(!again.ok, "{again:?}");
    assert!(
        again.stderr.contains("Conflict")
            && again
                .stderr
                .contains("pod p1 is already assigned to node \"node-a\""),
        "{again:?}"
    );
    let bad = post(k, path, &binding.replace("\"Node\"", "\"Pod\""));
    assert!(bad.stderr.contains("target.kind"), "{bad:?}");
    k.fails_with(&["exec", "p1", "--", "ls"], None, "node-a");
    k.ok(&[
        "debug",
        "p1",
        "--image=busybox:1.36",
        "-c",
        "dbg",
        "--target=app",
    ]);
    let p = json(k, &["get", "pod", "p1"]);
    assert_eq!(p["spec"]["ephemeralContainers"][0]["name"], "dbg");
    assert_eq!(
        p["spec"]["ephemeralContainers"][0]["terminationMessagePolicy"],
        "File"
    );
    k.fails_with(
        &["debug", "p1", "--image=busybox:1.36", "-c", "app"],
        None,
        "spec.ephemeralContainers[1].name: Duplicate value",
    );
    check_pod_update(k);
}

/// A pod's image may change in place; the rest of its spec may not (kube's ValidatePodUpdate).
fn check_pod_update(k: &Kubectl) {
    k.ok(&["set", "image", "pod/p1", "app=nginx:1.28"]);
    let p = json(k, &["get", "pod", "p1"]);
    assert_eq!(p["spec"]["containers"][0]["image"], "nginx:1.28");
    let ports = r#"{"spec":{"containers":[{"name":"app","ports":[{"containerPort":81}]}]}}"#;
    let err = k.fails_with(
        &["patch", "pod", "p1", "-p", ports],
        None,
        "The Pod \"p1\" is invalid: spec: Forbidden: pod updates may not change fields other \
         than `spec.containers[*].image`",
    );
    assert!(err.contains("spec.containers[0].ports"), "{err}");
    let deadline = |s: &str| format!(r#"{{"spec":{{"activeDeadlineSeconds":{s}}}}}"#);
    k.ok(&["patch", "pod", "p1", "-p", &deadline("60")]);
    k.fails_with(
        &["patch", "pod", "p1", "-p", &deadline("120")],
        None,
        "spec.activeDeadlineSeconds: Invalid value: 120: must be less than or equal to previous value",
    );
}

/// Eviction honours the PodDisruptionBudget `pdb1` (selector app=guarded): 429 while it
/// allows no disruption, then a delete that spends the one allowed.
fn check_eviction(k: &Kubectl) {
    let eviction = |name: &str| {
        format!(
            r#"{{"apiVersion":"policy/v1","kind":"Eviction","metadata":{{"name":"{name}"}},"deleteOptions":{{"gracePeriodSeconds":0}}}}"#
        )
    };
    let path = "/api/v1/namespaces/default/pods/p1/eviction";
    // A running, ready pod counts against the budget.
    k.ok(&[
        "patch",
        "pod",
        "p1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    // (Before the budget is processed the answer is a 429 with Retry-After, which clients
    // retry by themselves; the eviction plan's unit tests cover it.)
    k.ok(&[
        "patch",
        "pdb",
        "pdb1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"observedGeneration":1,"disruptionsAllowed":0,"currentHealthy":1,"desiredHealthy":1,"expectedPods":1}}"#,
    ]);
    let blocked = post(k, path, &eviction("p1"));
    assert!(!blocked.ok, "{blocked:?}");
    assert!(
        blocked.stderr.contains("TooManyRequests")
            && blocked
                .stderr
                .contains("Cannot evict pod as it would violate the pod's disruption budget."),
        "{blocked:?}"
    );
    assert!(json(k, &["get", "pod", "p1"])["metadata"]["name"] == "p1");
    k.ok(&[
        "patch",
        "pdb",
        "pdb1",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"disruptionsAllowed":1}}"#,
    ]);
    let out = post(k, path, &eviction("p1"));
    assert!(out.ok && out.stdout.contains("Success"), "{out:?}");
    k.fails_with(&["get", "pod", "p1"], None, "NotFound");
    let pdb = json(k, &["get", "pdb", "pdb1"]);
    assert_eq!(pdb["status"]["disruptionsAllowed"], 0);
    assert!(pdb["status"]["disruptedPods"]["p1"].is_string(), "{pdb}");
    // A pending pod is evicted without consulting budgets; names must match the URL.
    k.ok_stdin(&["create", "-f", "-"], Some(&pod("p2")));
    let wrong = post(
        k,
        "/api/v1/namespaces/default/pods/p2/eviction",
        &eviction("p1"),
    );
    assert!(wrong.stderr.contains("BadRequest"), "{wrong:?}");
    let out = post(
        k,
        "/api/v1/namespaces/default/pods/p2/eviction",
        &eviction("p2"),
    );
    assert!(out.ok, "{out:?}");
    k.fails_with(&["get", "pod", "p2"], None, "NotFound");
    let missing = post(
        k,
        "/api/v1/namespaces/default/pods/nope/eviction",
        &eviction("nope"),
    );
    assert!(missing.stderr.contains("NotFound"), "{missing:?}");
}

/// `kubectl drain` goes through the eviction subresource: a free pod is evicted, a pod whose
/// budget (`pdb1`, spent by [`check_eviction`]) allows no disruption is refused with the 429's
/// message until drain gives up.
fn check_drain(k: &Kubectl) {
    k.ok_stdin(
        &["create", "-f", "-"],
        Some("apiVersion: v1\nkind: Node\nmetadata: {name: node-b}\n"),
    );
    let bound = |name: &str, app: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {{app: {app}}}}}\n\
             spec:\n  nodeName: node-b\n  containers: [{{name: app, image: nginx:1.27}}]\n"
        )
    };
    k.ok_stdin(&["create", "-f", "-"], Some(&bound("free", "free")));
    let drain = [
        "drain",
        "node-b",
        "--ignore-daemonsets",
        "--force",
        "--grace-period=0",
        "--timeout=8s",
    ];
    let out = k.ok(&drain);
    assert!(out.contains("pod/free evicted"), "{out}");
    k.fails_with(&["get", "pod", "free"], None, "NotFound");
    k.ok_stdin(&["create", "-f", "-"], Some(&bound("held", "guarded")));
    k.ok(&[
        "patch",
        "pod",
        "held",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    let err = k.fails_with(
        &drain,
        None,
        "Cannot evict pod as it would violate the pod's disruption budget.",
    );
    assert!(err.contains("held"), "{err}");
    assert_eq!(json(k, &["get", "pod", "held"])["metadata"]["name"], "held");
}

#[test]
fn part_a_resources_with_kubectl() {
    let (_server, k) = start();
    check_discovery(&k);
    check_cases(&k);
    check_defaults(&k);
    check_scale(&k);
    check_binding(&k);
    check_eviction(&k);
    check_drain(&k);
}

//! delete with --cascade=background|foreground|orphan, --grace-period, --wait, and kubectl
//! wait --for=condition / --for=delete. There is no garbage collector yet: what is asserted
//! is what the API server does (the foregroundDeletion / orphan finalizers and the
//! deletionTimestamp, then the delete once the finalizers are gone); deletes that would need
//! the collector run with --wait=false.

use super::{fixture, Ctx};

/// Deletes `what` with `--cascade=<cascade> --wait=false` and checks that it stays, deleting,
/// held by `finalizer` alone.
fn delete_pending(c: &Ctx, what: &str, cascade: &str, finalizer: &str) {
    let cascade = format!("--cascade={cascade}");
    c.ok(&["delete", what, &cascade, "--wait=false"]);
    let state = c.jsonpath(what, "{.metadata.finalizers} {.metadata.deletionTimestamp}");
    let (finalizers, timestamp) = state.split_once(' ').unwrap_or((&state, ""));
    assert_eq!(finalizers, format!("[\"{finalizer}\"]"), "{what}");
    assert!(
        timestamp.ends_with('Z'),
        "{what}: no deletionTimestamp in {state:?}"
    );
}

pub fn cascade_and_grace(c: &Ctx) {
    // background (kubectl's default): gone at once; --wait waits for that.
    c.ok(&["create", "configmap", "bg"]);
    assert_eq!(
        c.ok(&[
            "delete",
            "configmap",
            "bg",
            "--cascade=background",
            "--wait=true"
        ]),
        "configmap \"bg\" deleted\n"
    );
    c.fails_with(&["get", "cm", "bg"], None, "configmaps \"bg\" not found");
    c.fails_with(&["delete", "cm", "bg"], None, "configmaps \"bg\" not found");
    assert!(c
        .ok(&["delete", "cm", "bg", "--ignore-not-found"])
        .is_empty());

    // foreground: the object stays, deleting, with the foregroundDeletion finalizer.
    c.ok(&["apply", "-f", &fixture("deployment.yaml")]);
    delete_pending(c, "deployment/web", "foreground", "foregroundDeletion");
    // Updates that remove the last finalizer complete the delete (what the GC will do).
    c.ok(&[
        "patch",
        "deployment",
        "web",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    c.fails_with(&["get", "deploy", "web"], None, "not found");

    // orphan: the orphan finalizer.
    c.ok(&["create", "configmap", "orphaned"]);
    delete_pending(c, "configmap/orphaned", "orphan", "orphan");
    // A deleting object takes no new finalizers' worth of resurrection: delete again is fine.
    c.ok(&["delete", "configmap", "orphaned", "--wait=false"]);
    c.ok(&[
        "patch",
        "configmap",
        "orphaned",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    c.fails_with(&["get", "cm", "orphaned"], None, "not found");

    // A user finalizer holds the object; --wait gives up after --timeout with the object
    // still there.
    let held =
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: held, finalizers: [example.com/hold]}\n";
    c.ok_stdin(&["create", "-f", "-"], held);
    let out = c.run(&["delete", "configmap", "held", "--timeout=2s"]);
    assert!(
        !out.ok && out.stderr.contains("timed out waiting"),
        "{out:?}"
    );
    assert_eq!(
        c.jsonpath("cm/held", "{.metadata.finalizers}"),
        r#"["example.com/hold"]"#
    );
    // Removing the finalizer while kubectl waits completes the delete and the wait.
    let waiting = c
        .spawn(&[
            "delete",
            "configmap",
            "held",
            "--wait=true",
            "--timeout=30s",
        ])
        .until_watching();
    c.ok(&[
        "patch",
        "configmap",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":[]}}"#,
    ]);
    let out = waiting.finish();
    assert!(
        out.ok && out.stdout == "configmap \"held\" deleted\n",
        "{out:?}"
    );
    c.fails_with(&["get", "cm", "held"], None, "not found");

    // --grace-period: --grace-period=0 --force deletes at once; a pod without a kubelet
    // (no node) is deleted at once too, like kube-apiserver does for unscheduled pods.
    c.ok(&["create", "configmap", "forced"]);
    let out = c.run(&[
        "delete",
        "configmap",
        "forced",
        "--grace-period=0",
        "--force",
    ]);
    assert!(
        out.ok && out.stdout.contains("configmap \"forced\" force deleted"),
        "{out:?}"
    );
    c.fails_with(&["get", "cm", "forced"], None, "not found");
    c.ok(&["apply", "-f", &fixture("pod.yaml")]);
    c.ok(&[
        "delete",
        "pod",
        "p1",
        "--grace-period=5",
        "--wait=true",
        "--timeout=20s",
    ]);
    c.fails_with(&["get", "pod", "p1"], None, "not found");

    // delete by label and --all.
    c.ok(&["apply", "-f", &fixture("dir")]);
    let out = c.ok(&["delete", "cm,sa", "-l", "bundle=dir"]);
    assert_eq!(
        out,
        "configmap \"dir-a\" deleted\nconfigmap \"dir-c\" deleted\nserviceaccount \"dir-b\" deleted\n"
    );
    c.ok(&["create", "configmap", "x1"]);
    c.ok(&["create", "configmap", "x2"]);
    c.ok(&["delete", "cm", "--all"]);
    // The root-CA publisher puts its ConfigMap back (as kube-controller-manager does).
    let left = c.ok(&["get", "cm", "-o", "name"]);
    assert!(
        left.lines().all(|l| l == "configmap/kube-root-ca.crt"),
        "{left}"
    );
    // A deleting namespace refuses new content, then goes once empty.
    c.ok(&["delete", "namespace", &c.ns, "--wait=true", "--timeout=30s"]);
    c.fails_with(&["get", "namespace", &c.ns], None, "not found");
}

pub fn wait_for(c: &Ctx) {
    c.ok(&["apply", "-f", &fixture("deployment.yaml")]);
    let waiting = c
        .spawn(&[
            "wait",
            "--for=condition=Available",
            "deployment/web",
            "--timeout=30s",
        ])
        .until_watching();
    // No controller runs: the test plays the deployment controller through /status.
    let status = r#"{"status":{"observedGeneration":1,"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"ok","lastUpdateTime":"2026-01-01T00:00:00Z","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}"#;
    c.ok(&[
        "patch",
        "deployment",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        status,
    ]);
    let out = waiting.finish();
    assert!(out.ok, "{out:?}");
    assert_eq!(out.stdout, "deployment.apps/web condition met\n");
    // A condition that is already met returns at once; one that never is times out.
    c.ok(&[
        "wait",
        "--for=condition=Available=True",
        "deployment/web",
        "--timeout=5s",
    ]);
    let out = c.run(&[
        "wait",
        "--for=condition=Progressing",
        "deployment/web",
        "--timeout=2s",
    ]);
    assert!(
        !out.ok && out.stderr.contains("timed out waiting for the condition"),
        "{out:?}"
    );
    // --for=jsonpath as well.
    c.ok(&[
        "wait",
        "--for=jsonpath={.spec.replicas}=2",
        "deployment/web",
        "--timeout=5s",
    ]);

    // --for=delete: returns once the object is gone.
    c.ok(&["create", "configmap", "doomed"]);
    let waiting = c
        .spawn(&["wait", "--for=delete", "configmap/doomed", "--timeout=30s"])
        .until_watching();
    c.ok(&["delete", "configmap", "doomed"]);
    let out = waiting.finish();
    assert!(out.ok, "{out:?}");
    assert_eq!(out.stdout, "configmap/doomed condition met\n");
    // Of an object that does not exist: met at once.
    c.ok(&["wait", "--for=delete", "configmap/never", "--timeout=5s"]);
}

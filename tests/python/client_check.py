"""The Python `kubernetes` client (pip) against a k3rs server.

Run by tests/python_client.rs: `python3 client_check.py <namespace>` with KUBECONFIG set.
Exits non-zero (with a traceback) on the first failed check; prints "all checks passed".
"""

import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def expect_status(code, call, *args, **kwargs):
    try:
        call(*args, **kwargs)
    except ApiException as e:
        assert e.status == code, f"expected {code}, got {e.status}: {e.body}"
        return e
    raise AssertionError(f"expected HTTP {code}, the call succeeded")


def main(ns):
    config.load_kube_config()
    core = client.CoreV1Api()
    apps = client.AppsV1Api()

    # Discovery-free calls first: version and the namespace of this run.
    version = client.VersionApi().get_code()
    assert version.major == "1", version
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))

    # CRUD on ConfigMaps.
    def cm(name, labels, data):
        meta = client.V1ObjectMeta(name=name, labels=labels)
        return core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=meta, data=data))

    c1 = cm("c1", {"app": "a", "tier": "x"}, {"k": "v"})
    assert c1.metadata.uid and c1.metadata.resource_version, c1.metadata
    got = core.read_namespaced_config_map("c1", ns)
    assert got.data == {"k": "v"}, got.data
    got.data["k"] = "v2"
    replaced = core.replace_namespaced_config_map("c1", ns, got)
    assert replaced.data == {"k": "v2"}, replaced.data
    assert int(replaced.metadata.resource_version) > int(c1.metadata.resource_version)
    stale = got
    stale.metadata.resource_version = c1.metadata.resource_version
    stale.data["k"] = "lost"
    expect_status(409, core.replace_namespaced_config_map, "c1", ns, stale)
    expect_status(409, cm, "c1", {}, {})
    expect_status(404, core.read_namespaced_config_map, "missing", ns)
    bad = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="Bad_Name"))
    err = expect_status(422, core.create_namespaced_config_map, ns, bad)
    assert "metadata.name" in err.body, err.body

    # Lists with label and field selectors, and paging.
    cm("c2", {"app": "b"}, {})
    cm("c3", {"app": "a", "tier": "y"}, {})

    # (The root-CA publisher's kube-root-ca.crt is in every namespace; it has no labels.)
    def names(**kwargs):
        items = core.list_namespaced_config_map(ns, **kwargs).items
        return sorted(i.metadata.name for i in items if i.metadata.name != "kube-root-ca.crt")

    assert names() == ["c1", "c2", "c3"], names()
    assert names(label_selector="app=a") == ["c1", "c3"]
    assert names(label_selector="app=a,tier!=x") == ["c3"]
    assert names(label_selector="app in (b),!tier") == ["c2"]
    assert names(field_selector="metadata.name=c2") == ["c2"]
    assert names(label_selector="app=a", field_selector="metadata.name!=c1") == ["c3"]
    expect_status(400, core.list_namespaced_config_map, ns, label_selector="app=(")
    page = core.list_namespaced_config_map(ns, limit=2, label_selector="app")
    assert [i.metadata.name for i in page.items] == ["c1", "c2"]
    assert page.metadata._continue
    rest = core.list_namespaced_config_map(
        ns, limit=2, label_selector="app", _continue=page.metadata._continue)
    assert [i.metadata.name for i in rest.items] == ["c3"]
    assert not rest.metadata._continue
    everywhere = core.list_config_map_for_all_namespaces(label_selector="app=b")
    assert [(i.metadata.namespace, i.metadata.name) for i in everywhere.items] == [(ns, "c2")]

    # Watch from a resourceVersion: exactly the later changes, in order; timeout_seconds ends
    # the stream (the loop returns by itself).
    rv = core.list_namespaced_config_map(ns).metadata.resource_version
    cm("w", {"watched": "yes"}, {"n": "1"})
    core.patch_namespaced_config_map("w", ns, {"data": {"n": "2"}})
    core.delete_namespaced_config_map("w", ns)
    started = time.monotonic()
    events = []
    for ev in watch.Watch().stream(
        core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=2,
        label_selector="watched=yes",
    ):
        events.append((ev["type"], ev["object"].metadata.name, (ev["object"].data or {}).get("n")))
    assert events == [("ADDED", "w", "1"), ("MODIFIED", "w", "2"), ("DELETED", "w", "2")], events
    assert time.monotonic() - started < 60
    # Without a resourceVersion: the current objects arrive as ADDED, then the stream ends.
    initial = [
        (ev["type"], ev["object"].metadata.name)
        for ev in watch.Watch().stream(
            core.list_namespaced_config_map, ns, timeout_seconds=1, label_selector="app=a")
    ]
    assert sorted(initial) == [("ADDED", "c1"), ("ADDED", "c3")], initial

    # Strategic merge patch (the client's content type for a dict body): containers merge by
    # name instead of replacing the list.
    container = client.V1Container(name="web", image="nginx:1.27")
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="web"),
        spec=client.V1DeploymentSpec(
            replicas=1,
            selector=client.V1LabelSelector(match_labels={"app": "web"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "web"}),
                spec=client.V1PodSpec(containers=[container]),
            ),
        ),
    )
    created = apps.create_namespaced_deployment(ns, deployment)
    assert created.spec.template.spec.containers[0].image_pull_policy == "IfNotPresent"
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "busybox:1.36"},
        {"name": "web", "image": "nginx:1.28"},
    ]}}}}
    patched = apps.patch_namespaced_deployment("web", ns, patch)
    images = {c.name: c.image for c in patched.spec.template.spec.containers}
    assert images == {"web": "nginx:1.28", "sidecar": "busybox:1.36"}, images
    assert patched.metadata.generation == 2, patched.metadata.generation
    scaled = apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 3}})
    assert scaled.spec.replicas == 3
    assert apps.read_namespaced_deployment("web", ns).spec.replicas == 3
    # A status update through the status subresource leaves the spec alone.
    apps.patch_namespaced_deployment_status("web", ns, {"status": {"observedGeneration": 3}})
    assert apps.read_namespaced_deployment("web", ns).status.observed_generation == 3

    # Delete.
    status = core.delete_namespaced_config_map("c1", ns)
    status = status if isinstance(status, dict) else status.to_dict()
    assert status["kind"] == "Status" and status["status"] == "Success", status
    expect_status(404, core.read_namespaced_config_map, "c1", ns)
    apps.delete_namespaced_deployment("web", ns, propagation_policy="Background")
    expect_status(404, apps.read_namespaced_deployment, "web", ns)
    # Services' registry answers a DELETE with the deleted Service, which the typed client
    # decodes as a V1Service (a Status would not decode).
    core.create_namespaced_service(ns, {"metadata": {"name": "svc"},
                                        "spec": {"ports": [{"port": 80}]}})
    deleted = core.delete_namespaced_service("svc", ns)
    assert deleted.kind == "Service" and deleted.metadata.name == "svc", deleted
    assert deleted.spec.ports[0].port == 80, deleted
    expect_status(404, core.read_namespaced_service, "svc", ns)
    print("python client: all checks passed")


if __name__ == "__main__":
    main(sys.argv[1])

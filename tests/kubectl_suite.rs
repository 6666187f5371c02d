//! End to end: the kubectl acceptance suite. The real `k3rs server --disable-agent` with its
//! Kubernetes API on loopback, driven by the real `kubectl` (1.32), once on the embedded
//! datastore and once on a real etcd 3.4 over mutual TLS (`--datastore-endpoint https://…`
//! with `--datastore-cafile/certfile/keyfile`).
//!
//! One server per backend runs every scenario of `kubectl_suite/`, each in its own namespace
//! (a few at a time); the manifests are under `tests/fixtures/kubectl/`.

mod common;
#[path = "kubectl_suite/mod.rs"]
mod suite;

#[test]
fn kubectl_suite_on_the_embedded_datastore() {
    suite::run(suite::Backend::Embedded);
}

#[test]
fn kubectl_suite_on_an_external_etcd_over_tls() {
    suite::run(suite::Backend::EtcdTls);
}

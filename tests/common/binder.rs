//! A stand-in for the scheduler in tests until it runs in main: binds every pending pod (no
//! `spec.nodeName`) to the given nodes round-robin through `pods/binding`, as kube-scheduler
//! binds. It polls the pod list every 100 ms; the nodes' kubelets (hollow nodes) do the rest.

use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;

use super::kube::{KubeClient, Kubeconfig};

/// Binds pending pods until dropped.
pub struct Binder {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Binder {
    /// Starts binding against the server of `kubeconfig` (the admin's).
    pub fn start(kubeconfig: &Path, nodes: &[&str]) -> Binder {
        let cfg = Kubeconfig::read(kubeconfig).expect("kubeconfig");
        let nodes: Vec<String> = nodes.iter().map(|n| n.to_string()).collect();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                tokio::select! {
                    _ = run(&cfg, &nodes) => {}
                    _ = rx => {}
                }
            });
        });
        Binder {
            stop: Some(tx),
            thread: Some(thread),
        }
    }
}

impl Drop for Binder {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Binds forever; a failed request (the server restarting or stopping) is retried.
async fn run(cfg: &Kubeconfig, nodes: &[String]) {
    let mut next = 0usize;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if let Err(e) = bind_pending(cfg, nodes, &mut next).await {
            eprintln!("binder: {e}");
        }
    }
}

async fn bind_pending(cfg: &Kubeconfig, nodes: &[String], next: &mut usize) -> anyhow::Result<()> {
    let client = KubeClient::connect(cfg).await?;
    loop {
        let list = client
            .ok("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3D", None)
            .await?;
        for pod in list["items"].as_array().into_iter().flatten() {
            if !pod["metadata"]["deletionTimestamp"].is_null() {
                continue;
            }
            let ns = pod["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            let node = &nodes[*next % nodes.len()];
            *next += 1;
            let binding = json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": node}
            });
            // Conflicts and 404s are races with the controllers: the next round looks again.
            let path = format!("/api/v1/namespaces/{ns}/pods/{name}/binding");
            client.request("POST", &path, Some(&binding)).await?;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

//! The writer task of an [`EventRecorder`](super::EventRecorder): the thin async shell around
//! the [`Correlator`].

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{Correlator, Write};

/// Writes the Events of `rx` through the current client of `client` (the kubelet's client
/// changes when its certificate rotates) until `stop` or until every sender is gone and the
/// queue is empty.
pub async fn write(
    client: watch::Receiver<kube::Client>,
    mut rx: mpsc::Receiver<Event>,
    stop: CancellationToken,
) {
    let mut correlator = Correlator::default();
    loop {
        let event = tokio::select! {
            _ = stop.cancelled() => return,
            ev = rx.recv() => match ev { Some(ev) => ev, None => return },
        };
        let reason = event.reason.clone().unwrap_or_default();
        let Some(write) = correlator.correlate(event, Timestamp::now()) else {
            tracing::debug!(%reason, "event skipped by the spam filter");
            continue;
        };
        let kube = client.borrow().clone();
        if let Err(e) = apply(kube, write).await {
            tracing::warn!(%reason, "event not recorded: {e}");
        }
    }
}

/// Creates or patches one Event; a patch of an Event that is gone creates it.
async fn apply(client: kube::Client, write: Write) -> kube::Result<()> {
    match write {
        Write::Create(event) => create(client, &event).await,
        Write::Patch {
            namespace,
            name,
            patch,
            event,
        } => {
            let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
            let r = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await;
            match r {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => create(client, &event).await,
                Err(e) => Err(e),
            }
        }
    }
}

async fn create(client: kube::Client, event: &Event) -> kube::Result<()> {
    let ns = event.metadata.namespace.as_deref().unwrap_or("default");
    let api: Api<Event> = Api::namespaced(client, ns);
    api.create(&PostParams::default(), event).await.map(|_| ())
}

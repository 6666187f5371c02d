//! The writer task of an [`EventRecorder`](super::EventRecorder): the thin async shell around
//! the [`Correlator`].
//!
//! A write that fails because the API server could not be reached is tried again, up to
//! [`TRIES`] times [`RETRY`] apart (client-go's `recordToSink`: 12 tries, 10 s apart); one
//! the API server answered with an error (invalid, namespace terminating, already exists) is
//! dropped at once, as upstream does. Events queue behind a write being retried.

use k8s_openapi::api::core::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::{Correlator, Write};

/// How many times one Event write is tried (client-go's `maxTriesPerEvent`).
pub const TRIES: u32 = 12;
/// The pause between two tries of one Event write (client-go's `sleepDuration`).
pub const RETRY: std::time::Duration = std::time::Duration::from_secs(10);

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
        for attempt in 1..=TRIES {
            let kube = client.borrow().clone();
            let e = match apply(kube, write.clone()).await {
                Ok(()) => break,
                Err(e) => e,
            };
            if !retryable(&e) || attempt == TRIES {
                tracing::warn!(%reason, attempt, "event not recorded: {e}");
                break;
            }
            tracing::debug!(%reason, attempt, "event write failed, retrying: {e}");
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(RETRY) => {}
            }
        }
    }
}

/// Whether a failed write is worth trying again: not when the API server answered (it
/// refused this Event and would again), only when it could not be reached.
fn retryable(e: &kube::Error) -> bool {
    !matches!(e, kube::Error::Api(_) | kube::Error::SerdeError(_))
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use http_body_util::BodyExt;
    use k8s_openapi::api::core::v1::ObjectReference;

    use super::*;
    use crate::events::{EventRecorder, EventType};

    /// A client whose API server is unreachable for the first `down` requests, then answers
    /// every request with `status`; it counts the requests.
    fn client(down: u32, status: u16) -> (kube::Client, Arc<AtomicU32>) {
        let seen = Arc::new(AtomicU32::new(0));
        let count = seen.clone();
        let svc = tower::service_fn(move |req: hyper::Request<kube::client::Body>| {
            let n = count.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < down {
                    return Err::<hyper::Response<kube::client::Body>, std::io::Error>(
                        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused"),
                    );
                }
                let body = req.into_body().collect().await.map(|b| b.to_bytes());
                let body = match (status, body) {
                    (201, Ok(event)) => event.to_vec(),
                    _ => br#"{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422}"#.to_vec(),
                };
                Ok(hyper::Response::builder()
                    .status(status)
                    .header("content-type", "application/json")
                    .body(kube::client::Body::from(body))
                    .expect("a response"))
            }
        });
        (kube::Client::new(svc, "default"), seen)
    }

    async fn record_one(client: kube::Client) {
        let (recorder, rx) = EventRecorder::channel("test", "host");
        let pod = ObjectReference {
            kind: Some("Pod".into()),
            name: Some("web".into()),
            namespace: Some("prod".into()),
            ..ObjectReference::default()
        };
        recorder.publish(&pod, EventType::Normal, "Pulled", "pulled");
        drop(recorder);
        let (_tx, client) = watch::channel(client);
        write(client, rx, CancellationToken::new()).await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreachable_api_server_is_tried_again_until_it_answers() {
        let (c, seen) = client(3, 201);
        let start = tokio::time::Instant::now();
        record_one(c).await;
        assert_eq!(
            seen.load(Ordering::SeqCst),
            4,
            "three failures, then the create"
        );
        assert_eq!(start.elapsed(), RETRY * 3);
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_after_twelve_tries() {
        let (c, seen) = client(u32::MAX, 201);
        record_one(c).await;
        assert_eq!(seen.load(Ordering::SeqCst), TRIES);
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_the_api_server_refuses_is_not_tried_again() {
        let (c, seen) = client(0, 422);
        record_one(c).await;
        assert_eq!(seen.load(Ordering::SeqCst), 1);
    }
}

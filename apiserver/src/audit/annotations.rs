//! Audit annotations a request's handling adds (`k8s.io/apiserver/pkg/audit`'s
//! `AddAuditAnnotation`): admission plugins call [`add`]; the router copies what was collected
//! into the request's audit event before its `ResponseComplete` stage is written.
//!
//! # Guarantees
//! - The first value added for a key wins (upstream logs and ignores a conflicting second).
//! - Outside a request ([`scope`] not entered, e.g. in a background task, or when the server
//!   audits nothing) [`add`] does nothing.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;

tokio::task_local! {
    static ANNOTATIONS: RefCell<BTreeMap<String, String>>;
}

/// Records `key: value` for the current request's audit event.
pub fn add(key: impl Into<String>, value: impl Into<String>) {
    let _ = ANNOTATIONS.try_with(|a| {
        a.borrow_mut()
            .entry(key.into())
            .or_insert_with(|| value.into());
    });
}

/// Runs `f` as one request: returns its output and the annotations added while it ran.
pub async fn scope<F: Future>(f: F) -> (F::Output, BTreeMap<String, String>) {
    ANNOTATIONS
        .scope(RefCell::new(BTreeMap::new()), async move {
            let out = f.await;
            let annotations = ANNOTATIONS.with(|a| a.take());
            (out, annotations)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn first_value_wins() {
        let ((), a) = scope(async {
            add("k", "first");
            add("k", "second");
            add("j", "v");
        })
        .await;
        assert_eq!(
            a,
            BTreeMap::from([("j".into(), "v".into()), ("k".into(), "first".into())])
        );
    }

    #[tokio::test]
    async fn outside_a_request_nothing_happens() {
        add("lost", "v");
        let ((), a) = scope(async {}).await;
        assert!(a.is_empty());
    }
}

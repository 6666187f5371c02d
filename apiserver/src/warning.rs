//! Warnings a request's handling adds for the client (`k8s.io/apiserver/pkg/warning`): any
//! code that runs inside a request (admission plugins, strategies) calls [`add`]; the router
//! turns what was collected into `Warning: 299 - "<text>"` headers, which kubectl prints as
//! `Warning: <text>`.
//!
//! # Guarantees
//! - A warning added twice in one request is sent once, in the order first added.
//! - Outside a request ([`scope`] not entered, e.g. in a background task) [`add`] does nothing.
//! - Warnings reach the client on success and on error responses alike.

use std::cell::RefCell;
use std::future::Future;

tokio::task_local! {
    static WARNINGS: RefCell<Vec<String>>;
}

/// Records `text` for the current request (ignored outside one, and when already recorded).
pub fn add(text: impl Into<String>) {
    let text = text.into();
    let _ = WARNINGS.try_with(|w| {
        let mut w = w.borrow_mut();
        if !w.contains(&text) {
            w.push(text);
        }
    });
}

/// Runs `f` as one request: returns its output and the warnings added while it ran.
pub async fn scope<F: Future>(f: F) -> (F::Output, Vec<String>) {
    WARNINGS
        .scope(RefCell::new(Vec::new()), async move {
            let out = f.await;
            let warnings = WARNINGS.with(|w| w.take());
            (out, warnings)
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn collects_in_order_once_each() {
        let ((), w) = scope(async {
            add("b");
            add("a");
            add("b");
        })
        .await;
        assert_eq!(w, vec!["b".to_string(), "a".to_string()]);
    }

    #[tokio::test]
    async fn outside_a_request_nothing_happens() {
        add("lost");
        let ((), w) = scope(async {}).await;
        assert!(w.is_empty());
    }
}

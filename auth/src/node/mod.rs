//! The Node authorizer (`--authorization-mode=Node`): kubelets (`system:node:<name>` in
//! `system:nodes`) may read only what the pods bound to them reference, and do what upstream's
//! node rules allow; see [`decide`] for the decision and [`graph`] for the relations.

pub mod decide;
pub mod graph;
pub mod populator;
pub mod refs;

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;

use super::authz::{Authorizer, Decision};
use super::Attributes;
use graph::Graph;

/// The authorizer, sharing its graph with the [`populator`].
#[derive(Debug, Clone, Default)]
pub struct NodeAuthorizer {
    graph: Arc<RwLock<Graph>>,
}

impl NodeAuthorizer {
    /// An authorizer with an empty graph (a [`populator`] must fill it).
    pub fn new() -> NodeAuthorizer {
        NodeAuthorizer::default()
    }

    /// The graph the populator keeps current.
    pub fn graph(&self) -> Arc<RwLock<Graph>> {
        self.graph.clone()
    }
}

impl Authorizer for NodeAuthorizer {
    fn authorize<'a>(&'a self, attrs: &'a Attributes) -> BoxFuture<'a, Decision> {
        let g = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let d = decide::decide(attrs, &g);
        Box::pin(async move { d })
    }
}

//! The NodeRestriction admission plugin: [`k3rs_auth::node_restriction`]'s pure check applied
//! to every create, update and delete (pods, nodes, leases, … as the check decides).

use futures::future::BoxFuture;
use futures::FutureExt;

use super::{forbidden, Attributes, Operation, Validating};
use crate::registry::Registry;
use k3rs_apimachinery::status::ApiResult;
use k3rs_auth::node_restriction::{admit, Operation as NodeOperation, Request};

/// Refuses (403) the writes a node (`system:node:<name>`) may not make.
pub struct NodeRestriction;

impl Validating for NodeRestriction {
    fn name(&self) -> &'static str {
        "NodeRestriction"
    }

    fn validate<'a>(&'a self, a: &'a Attributes, _: &'a Registry) -> BoxFuture<'a, ApiResult<()>> {
        async move { check(a) }.boxed()
    }
}

fn check(a: &Attributes) -> ApiResult<()> {
    let Some(user) = &a.user else { return Ok(()) };
    let operation = match a.operation {
        Operation::Create => NodeOperation::Create,
        Operation::Update => NodeOperation::Update,
        Operation::Delete => NodeOperation::Delete,
        Operation::Connect => return Ok(()),
    };
    let name = a.subject_name();
    let name = if a.object.is_none() && a.name.is_empty() {
        ""
    } else {
        name.as_str()
    };
    let r = Request {
        operation,
        group: a.resource.group,
        resource: a.resource.plural,
        subresource: a.subresource.as_deref().unwrap_or(""),
        namespace: &a.namespace,
        name,
        object: a.object.as_ref(),
        old: a.old_object.as_deref(),
    };
    admit(user, &r).map_err(|why| forbidden(a, &why.to_string()))
}

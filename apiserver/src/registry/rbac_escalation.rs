//! Escalation prevention on RBAC writes (upstream's policy-based role and binding storage):
//! a Role/ClusterRole may only hold rules its author holds (or may `escalate`); a binding
//! may only reference a role whose rules its author holds (or may `bind`).
//! `system:masters` is exempt; the decision itself is
//! [`confirm_no_escalation`](k3rs_auth::rbac::escalation::confirm_no_escalation).

use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use serde_json::Value;

use super::{Target, WriteCheck};
use k3rs_apimachinery::status::{ApiError, ApiResult, Subject};
use k3rs_auth::authz::{Chain, Decision};
use k3rs_auth::rbac::escalation::confirm_no_escalation;
use k3rs_auth::rbac::resolver::{role_ref_rules, PolicySource};
use k3rs_auth::rbac::rules::{rule, url_rule};
use k3rs_auth::user::SYSTEM_MASTERS;
use k3rs_auth::{Attributes, UserInfo};

const GROUP: &str = "rbac.authorization.k8s.io";

/// The check, over the authorizer's policy and chain.
pub struct RbacEscalation {
    pub source: Arc<dyn PolicySource>,
    pub authz: Chain,
}

fn rules_of(v: &Value) -> Vec<PolicyRule> {
    serde_json::from_value(v["rules"].clone()).unwrap_or_default()
}

impl RbacEscalation {
    /// Whether the authorizer allows `verb` on `resource/name` (escalate, bind).
    async fn allowed(
        &self,
        user: &Arc<UserInfo>,
        verb: &str,
        resource: &str,
        ns: &str,
        name: &str,
    ) -> bool {
        let a = Attributes {
            user: user.clone(),
            verb: verb.into(),
            resource_request: true,
            path: String::new(),
            namespace: ns.into(),
            api_group: GROUP.into(),
            api_version: "v1".into(),
            resource: resource.into(),
            subresource: String::new(),
            name: name.into(),
        };
        self.authz.authorize(&a).await == Decision::Allow
    }

    async fn check_role(
        &self,
        t: &Target,
        new: &Value,
        old: Option<&Value>,
        user: &Arc<UserInfo>,
    ) -> ApiResult<()> {
        let unchanged = old.is_some_and(|o| {
            o["rules"] == new["rules"] && o["aggregationRule"] == new["aggregationRule"]
        });
        let ns = t.namespace.as_deref().unwrap_or("");
        let name = new["metadata"]["name"].as_str().unwrap_or(t.name());
        if unchanged
            || self
                .allowed(user, "escalate", t.resource.plural, ns, name)
                .await
        {
            return Ok(());
        }
        let subject = Subject {
            group: GROUP,
            kind: t.resource.plural,
            name,
        };
        if new["aggregationRule"].is_object() {
            let full = [rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])];
            if confirm_no_escalation(self.source.as_ref(), user, ns, &full).is_err() {
                return Err(ApiError::forbidden(
                    subject,
                    "must have cluster-admin privileges to use the aggregationRule",
                ));
            }
        }
        confirm_no_escalation(self.source.as_ref(), user, ns, &rules_of(new))
            .map_err(|msg| ApiError::forbidden(subject, &msg.to_string()))
    }

    async fn check_binding(
        &self,
        t: &Target,
        new: &Value,
        old: Option<&Value>,
        user: &Arc<UserInfo>,
    ) -> ApiResult<()> {
        if old.is_some_and(|o| o["roleRef"] == new["roleRef"] && o["subjects"] == new["subjects"]) {
            return Ok(());
        }
        let Ok(role_ref) = serde_json::from_value::<RoleRef>(new["roleRef"].clone()) else {
            return Ok(()); // validation answers for a malformed roleRef
        };
        let ns = t.namespace.as_deref().unwrap_or("");
        let role_resource = if role_ref.kind == "Role" {
            "roles"
        } else {
            "clusterroles"
        };
        if self
            .allowed(user, "bind", role_resource, ns, &role_ref.name)
            .await
        {
            return Ok(());
        }
        let subject = Subject {
            group: GROUP,
            kind: t.resource.plural,
            name: new["metadata"]["name"].as_str().unwrap_or(t.name()),
        };
        let rules = role_ref_rules(self.source.as_ref(), &role_ref, ns)
            .map_err(|e| ApiError::forbidden(subject, &e.to_string()))?;
        confirm_no_escalation(self.source.as_ref(), user, ns, rules.rules())
            .map_err(|msg| ApiError::forbidden(subject, &msg.to_string()))
    }
}

impl WriteCheck for RbacEscalation {
    fn check<'a>(
        &'a self,
        t: &'a Target,
        new: &'a Value,
        old: Option<&'a Value>,
        user: &'a Arc<UserInfo>,
    ) -> BoxFuture<'a, ApiResult<()>> {
        Box::pin(async move {
            if t.resource.group != GROUP || user.in_group(SYSTEM_MASTERS) {
                return Ok(());
            }
            match t.resource.plural {
                "roles" | "clusterroles" => self.check_role(t, new, old, user).await,
                "rolebindings" | "clusterrolebindings" => {
                    self.check_binding(t, new, old, user).await
                }
                _ => Ok(()),
            }
        })
    }
}

//! Who may do what: authentication, authorization (RBAC, Node, webhook modes), audit,
//! certificates and tokens, admission plugins, pod security and secrets encryption.
//!
//! One test binary for the area: each file here is a module, reaching the shared helpers as
//! `crate::common`.

// A test crate: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

#[path = "../common/mod.rs"]
mod common;

mod admission_pod_defaults;
mod admission_quota;
mod admission_service_account;
mod admission_webhooks;
mod api_audit;
mod api_authn;
mod api_authn_extra;
mod api_authn_oidc;
mod api_authn_webhook;
mod api_authorization_mode;
mod api_rbac;
mod api_serviceaccount_tokens;
mod bootstrap_tokens;
mod certificates;
mod certificates_api;
mod node_auth;
mod pod_security;
mod secrets_encryption;
mod slow_clients;

//! What every k3rs component shares, server and agent alike (DESIGN.md: the agent never
//! depends on the server crates, and the scheduler and controllers see only a `kube::Client`
//! and this crate). Upstream spreads these over `k8s.io/apimachinery`, `k8s.io/apiserver`'s
//! request info and `k8s.io/component-helpers`.
//!
//! - API errors as Kubernetes `Status` ([`status`]), name and label validation
//!   ([`validation`]), label and field selectors ([`selector`]), the request as parsed once
//!   ([`request_info`]), object metadata and times ([`meta`]).
//! - Quantities ([`quantity`]), pod resource requests ([`resources`]), quota usage
//!   ([`quota`]), node selection and tolerations ([`scheduling`]), volume matching
//!   ([`volume`]).
//! - Client identities for in-process components ([`clients`], [`users`]), certificate
//!   signer names ([`signers`]); supervised, named tasks ([`tasks`]); shared watches and
//!   caches per resource type ([`informers`]).
//! - Go durations ([`duration`]), cron schedules ([`cron`]), `--*-arg` flags
//!   ([`component_args`]), the built-in resource catalog ([`catalog`]), events ([`events`]).
//! - TLS serving ([`tls`]) and HTTPS requests that pin a CA ([`https`]); atomic private
//!   files ([`fs`]), the node's address ([`net`]), its labels ([`labels`]) and systemd
//!   notification ([`sd_notify`]).
//! - What in-process caches keep of an object ([`transform`]).

pub mod agent_config;
pub mod catalog;
pub mod clients;
pub mod component_args;
pub mod cron;
pub mod duration;
pub mod events;
pub mod fs;
pub mod generated_names;
pub mod https;
pub mod informers;
pub mod ingress_class;
pub mod labels;
pub mod meta;
pub mod names;
pub mod net;
pub mod quantity;
pub mod quota;
pub mod request_info;
pub mod resources;
pub mod scheduling;
pub mod sd_notify;
pub mod selector;
pub mod semantic;
pub mod serviceaccount;
pub mod signers;
pub mod status;
pub mod system_image;
pub mod tasks;
pub mod tls;
pub mod transform;
pub mod users;
pub mod validation;
pub mod version;
pub mod volume;

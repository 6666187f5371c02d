//! Quota usage, shared by the ResourceQuota admission plugin and the quota controller
//! (upstream's `pkg/quota/v1/evaluator`): what an object uses ([`usage`]), whether a quota
//! tracks it and what it allows ([`check`]), in exact milli-unit arithmetic ([`amount`]).

pub mod amount;
pub mod check;
pub mod usage;

//! Container probes (upstream's `pkg/kubelet/prober`): liveness, readiness and startup probes
//! run by one worker per container and probe ([`manager`]), decided by a pure core
//! ([`state`]), executed through CRI `ExecSync`, HTTP(S) or TCP ([`check`], [`http`]). Their
//! results are the planner's [`crate::kubelet::plan::ProbeResults`].

pub mod check;
pub mod http;
pub mod manager;
pub mod state;

pub use manager::Manager;

//! `pod_status`: the pod's API status from the runtime's view (upstream's
//! `generateAPIPodStatus` plus what the status manager keeps: `startTime`, condition transition
//! times, a terminal phase once reached).

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{ContainerStatus, HostIP, PodCondition, PodIP, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use super::conditions::{self, stamp, KUBELET_OWNED};
use super::container_status::{container_statuses, StatusInputs};
use super::lifecycle::sandbox_changed;
use super::observed::{ContainerState, SandboxState};
use super::phase::phase;
use super::qos::qos_class;
use super::spec::{api_phase_is_terminal, containers, host_network, init_containers, is_deleting};

/// Generates the status for `pod` (its current `status` is the previous one). `host_ips`: the
/// node's InternalIPs, the pod's `hostIP(s)` (and `podIP(s)` of host-network pods).
pub fn pod_status(inputs: StatusInputs<'_>, host_ips: &[IpAddr], now: Timestamp) -> PodStatus {
    let StatusInputs { pod, observed, .. } = inputs;
    let old = pod.status.clone().unwrap_or_default();
    let init = container_statuses(inputs, init_containers(pod), true);
    let regular = container_statuses(inputs, containers(pod), false);

    let stopped = !observed
        .containers
        .iter()
        .any(|c| c.state == ContainerState::Running);
    let terminal = (is_deleting(pod) || api_phase_is_terminal(pod)) && stopped;
    let mut phase = phase(pod, &init, &regular, terminal).to_string();
    if !matches!(phase.as_str(), "Succeeded" | "Failed") && api_phase_is_terminal(pod) {
        phase = old.phase.clone().unwrap_or_default();
    }

    let all: Vec<ContainerStatus> = init.iter().chain(&regular).cloned().collect();
    let old_conditions = old.conditions.clone().unwrap_or_default();
    let mut conds: Vec<PodCondition> = old_conditions
        .iter()
        .filter(|c| !KUBELET_OWNED.contains(&c.type_.as_str()))
        .cloned()
        .collect();
    let sandbox_ready = !sandbox_changed(pod, observed).create;
    conds.push(conditions::ready_to_start_containers(sandbox_ready));
    conds.push(conditions::initialized(pod, &all, &phase));
    let ready = conditions::ready(pod, &conds, &all, &phase);
    conds.push(ready);
    conds.push(conditions::containers_ready(pod, &all, &phase));
    conds.push(conditions::scheduled());
    let conds = conds
        .into_iter()
        .map(|c| {
            if KUBELET_OWNED.contains(&c.type_.as_str()) {
                stamp(c, &old_conditions, now)
            } else {
                c
            }
        })
        .collect();

    let host: Vec<String> = host_ips.iter().map(|ip| ip.to_string()).collect();
    let sandbox_ips: Vec<String> = observed
        .sandboxes_newest_first()
        .first()
        .filter(|s| s.state == SandboxState::Ready)
        .map(|s| {
            s.ip.iter()
                .chain(&s.additional_ips)
                .map(|ip| ip.to_string())
                .collect()
        })
        .unwrap_or_default();
    let pod_ips: Vec<String> = if host_network(pod) {
        host.clone()
    } else if sandbox_ips.is_empty() {
        old.pod_ips.iter().flatten().map(|p| p.ip.clone()).collect()
    } else {
        sandbox_ips
    };

    let same_phase = old.phase.as_deref() == Some(phase.as_str());
    PodStatus {
        phase: Some(phase),
        reason: old.reason.clone().filter(|_| same_phase),
        message: old.message.clone().filter(|_| same_phase),
        conditions: Some(conds),
        host_ip: host.first().cloned(),
        host_ips: (!host.is_empty())
            .then(|| host.iter().map(|ip| HostIP { ip: ip.clone() }).collect()),
        pod_ip: pod_ips.first().cloned(),
        pod_ips: (!pod_ips.is_empty())
            .then(|| pod_ips.iter().map(|ip| PodIP { ip: ip.clone() }).collect()),
        start_time: old.start_time.clone().or(Some(Time(now))),
        qos_class: Some(qos_class(pod)),
        init_container_statuses: (!init.is_empty()).then_some(init),
        container_statuses: Some(regular),
        nominated_node_name: old.nominated_node_name.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests;

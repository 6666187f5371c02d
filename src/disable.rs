//! `k3rs server --disable <component>` (k3s's flag): which packaged components not to run.
//!
//! k3s's valid items are `coredns`, `servicelb`, `traefik`, `local-storage`, `metrics-server`
//! and `runtimes`. k3rs ships five of them as built-ins rather than manifests, and takes
//! `network-policy` and `ingress` as well (the first a separate flag in k3s, the second
//! k3rs's own name for what `traefik` names):
//! - `coredns`: the cluster DNS (the `kube-system/kube-dns` Service, the `cluster-dns`
//!   controller that gives it endpoints, and the embedded agent's DNS server);
//! - `servicelb`: the `servicelb` controller (LoadBalancer Services then stay pending);
//! - `local-storage`: the local-path provisioner and its `local-path` StorageClass;
//! - `metrics-server`: the API server's built-in `metrics.k8s.io` API (its kubelet scraper
//!   and the group in discovery), so that a user can install their own metrics server.
//! - `traefik` or `ingress`: the built-in ingress controller: the server's `ingress`
//!   controller (which creates the default `k3rs` IngressClass and writes Ingress status)
//!   and the listeners of the embedded agent and of the agents that join (they learn it
//!   from `/v1-k3rs/agent-config`; an agent's own `--disable-ingress` turns off just its own);
//! - `network-policy`: NetworkPolicy enforcement on the server's own node and on the agents
//!   that join (k3s's `--disable-network-policy`, which both commands also take; agents learn
//!   it from `/v1-k3rs/agent-config`).
//!
//! `runtimes` names a component k3rs does not ship: disabling it changes nothing, which the
//! server says in a warning. Anything else is refused with the list of valid items, so a typo
//! does not leave a component running silently.
//!
//! Disabling never deletes objects a previous start created (unlike k3s's manifests): a user
//! who turns off `coredns` usually installs their own, whose Service is also `kube-dns`.

/// A `--disable` item that is not one of k3s's packaged components.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--disable: {0:?} is not a packaged component (valid items: {VALID})")]
pub struct UnknownComponent(pub String);

const VALID: &str =
    "coredns, servicelb, traefik, local-storage, metrics-server, runtimes, network-policy, ingress";

/// Components k3s packages that k3rs does not ship (`--disable` of one is a no-op).
const NOT_SHIPPED: &[&str] = &["runtimes"];

/// What `--disable` turns off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Disabled {
    /// `coredns`: no `kube-dns` Service, no `cluster-dns` controller, no embedded DNS.
    pub coredns: bool,
    /// `servicelb`: no `servicelb` controller.
    pub servicelb: bool,
    /// `local-storage`: no local-path provisioner.
    pub local_storage: bool,
    /// `metrics-server`: no built-in metrics API.
    pub metrics_server: bool,
    /// `network-policy`: the embedded agent enforces no NetworkPolicies.
    pub network_policy: bool,
    /// `traefik` or `ingress`: no ingress controller, no default IngressClass.
    pub ingress: bool,
    /// Items naming components k3rs does not ship, in the order given.
    pub not_shipped: Vec<String>,
}

impl Disabled {
    /// Parses the `--disable` items (already split at commas); blank items are ignored.
    pub fn parse(items: &[String]) -> Result<Disabled, UnknownComponent> {
        let mut d = Disabled::default();
        for item in items.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            match item {
                "coredns" => d.coredns = true,
                "servicelb" => d.servicelb = true,
                "local-storage" => d.local_storage = true,
                "metrics-server" => d.metrics_server = true,
                "network-policy" => d.network_policy = true,
                "traefik" | "ingress" => d.ingress = true,
                other if NOT_SHIPPED.contains(&other) => {
                    if !d.not_shipped.iter().any(|n| n == other) {
                        d.not_shipped.push(other.to_string());
                    }
                }
                other => return Err(UnknownComponent(other.to_string())),
            }
        }
        Ok(d)
    }

    /// The `--controllers` names of the in-process controllers these items turn off.
    pub fn controllers(&self) -> Vec<&'static str> {
        let mut off = Vec::new();
        if self.coredns {
            off.push("cluster-dns");
        }
        if self.servicelb {
            off.push("servicelb");
        }
        if self.ingress {
            off.push("ingress");
        }
        off
    }

    /// One warning per item that changes nothing.
    pub fn warnings(&self) -> Vec<String> {
        self.not_shipped
            .iter()
            .map(|c| format!("--disable {c}: k3rs does not ship {c}; nothing to disable"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<Disabled, UnknownComponent> {
        Disabled::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn shipped_components_are_turned_off() {
        let d = parse(&[
            "coredns",
            " servicelb",
            "local-storage",
            "metrics-server",
            "network-policy",
            "traefik",
        ])
        .unwrap();
        assert!(
            d.coredns && d.servicelb && d.local_storage && d.metrics_server && d.network_policy
        );
        assert!(d.ingress);
        assert_eq!(d.controllers(), ["cluster-dns", "servicelb", "ingress"]);
        assert!(d.warnings().is_empty());
    }

    #[test]
    fn nothing_given_disables_nothing() {
        let d = parse(&["", " "]).unwrap();
        assert_eq!(d, Disabled::default());
        assert!(d.controllers().is_empty());
    }

    #[test]
    fn components_k3rs_does_not_ship_only_warn_once_each() {
        let d = parse(&["runtimes", "runtimes"]).unwrap();
        assert!(!d.coredns && !d.servicelb && !d.local_storage && !d.metrics_server);
        assert!(!d.network_policy && !d.ingress);
        assert_eq!(d.not_shipped, ["runtimes"]);
        assert_eq!(
            d.warnings(),
            ["--disable runtimes: k3rs does not ship runtimes; nothing to disable"]
        );
    }

    #[test]
    fn ingress_is_disabled_by_either_name() {
        for name in ["traefik", "ingress"] {
            let d = parse(&[name]).unwrap();
            assert!(d.ingress && d.warnings().is_empty(), "{name}");
            assert_eq!(d.controllers(), ["ingress"]);
        }
    }

    #[test]
    fn unknown_items_are_refused_by_name() {
        for bad in ["core-dns", "CoreDNS", "scheduler", "servicelb;", "*"] {
            let e = parse(&["servicelb", bad]).unwrap_err();
            assert_eq!(e, UnknownComponent(bad.to_string()));
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
            assert!(e.to_string().contains("valid items: coredns"), "{e}");
        }
    }
}

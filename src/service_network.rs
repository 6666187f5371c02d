//! The service network's well-known addresses, decided once from `--service-cidr` and
//! `--cluster-dns` so that every part agrees: the `kubernetes` Service takes the first address,
//! the `kube-dns` Service and the kubelets' pod nameserver take the cluster DNS address (k3s's
//! default: the tenth address, 10.43.0.10 of 10.43.0.0/16).

use std::net::IpAddr;

use k3rs_apiserver::resources::cluster_ip;

/// A `--cluster-dns` that cannot serve the cluster.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("--cluster-dns {dns} is not inside --service-cidr {cidr}")]
    Outside { dns: IpAddr, cidr: ipnet::IpNet },
    #[error(
        "--cluster-dns {0} is the `kubernetes` Service's address (the first of --service-cidr)"
    )]
    KubernetesService(IpAddr),
    #[error("--service-cidr {0} has fewer than 10 addresses: pass --cluster-dns")]
    TooSmall(ipnet::IpNet),
}

/// The cluster DNS address: `given`, else the tenth address of `service_cidr`.
pub fn cluster_dns(service_cidr: ipnet::IpNet, given: Option<IpAddr>) -> Result<IpAddr, Error> {
    let Some(dns) = given else {
        return cluster_ip::cluster_dns_ip(&service_cidr).ok_or(Error::TooSmall(service_cidr));
    };
    let edge = dns == service_cidr.network()
        || matches!(service_cidr, ipnet::IpNet::V4(_)) && dns == service_cidr.broadcast();
    if !service_cidr.contains(&dns) || edge {
        return Err(Error::Outside {
            dns,
            cidr: service_cidr,
        });
    }
    if cluster_ip::first_ip(&service_cidr) == Some(dns) {
        return Err(Error::KubernetesService(dns));
    }
    Ok(dns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> ipnet::IpNet {
        s.parse().unwrap()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_default_follows_the_service_cidr() {
        assert_eq!(cluster_dns(net("10.43.0.0/16"), None), Ok(ip("10.43.0.10")));
        assert_eq!(cluster_dns(net("10.96.0.0/12"), None), Ok(ip("10.96.0.10")));
        assert_eq!(
            cluster_dns(net("10.0.0.0/29"), None),
            Err(Error::TooSmall(net("10.0.0.0/29")))
        );
    }

    #[test]
    fn a_given_address_must_be_a_free_host_of_the_service_cidr() {
        let cidr = net("10.96.0.0/16");
        assert_eq!(
            cluster_dns(cidr, Some(ip("10.96.0.53"))),
            Ok(ip("10.96.0.53"))
        );
        assert_eq!(
            cluster_dns(cidr, Some(ip("10.43.0.10")))
                .unwrap_err()
                .to_string(),
            "--cluster-dns 10.43.0.10 is not inside --service-cidr 10.96.0.0/16"
        );
        assert!(cluster_dns(cidr, Some(ip("10.96.0.0"))).is_err());
        assert!(cluster_dns(cidr, Some(ip("10.96.255.255"))).is_err());
        assert_eq!(
            cluster_dns(cidr, Some(ip("10.96.0.1"))),
            Err(Error::KubernetesService(ip("10.96.0.1")))
        );
    }
}

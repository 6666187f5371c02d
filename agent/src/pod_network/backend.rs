//! Which backend a node runs: the cluster has one, the server's `--flannel-backend`, which
//! agents learn from the server ([`k3rs_apimachinery::agent_config`]) as k3s agents do (in
//! k3s `--flannel-backend` is a server flag). [`decide`] is the decision, without I/O:
//!
//! | agent's flag | server says | backend |
//! |---|---|---|
//! | none | `b` | `b` |
//! | `b` | `b` | `b` |
//! | `a` | `b` (`a` ≠ `b`) | refused: [`BackendError::Conflict`] names both |
//! | `a` | nothing (an older server, or no answer) | `a` |
//! | none | nothing | [`Backend::DEFAULT`] (vxlan) |
//! | none | a value this agent does not run | refused: [`BackendError::Unknown`] |

use std::fmt;
use std::str::FromStr;

/// A pod network backend k3rs runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A VXLAN overlay (`flannel.1`): nodes on any routed network.
    Vxlan,
    /// Routes to other nodes' pod CIDRs through their addresses: nodes on one L2 network.
    HostGw,
    /// No routes to other nodes' pods (someone else's pod network).
    None,
}

impl Backend {
    /// The backend when neither the agent nor its server says one.
    pub const DEFAULT: Backend = Backend::Vxlan;

    /// The `--flannel-backend` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Vxlan => "vxlan",
            Backend::HostGw => "host-gw",
            Backend::None => "none",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `--flannel-backend` value k3rs does not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown flannel backend {0:?} (k3rs runs vxlan, host-gw or none)")]
pub struct UnknownBackend(pub String);

impl FromStr for Backend {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> Result<Backend, UnknownBackend> {
        [Backend::Vxlan, Backend::HostGw, Backend::None]
            .into_iter()
            .find(|b| b.as_str() == s)
            .ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

/// Where the decided backend came from (for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The server's, which the agent's flag (if given) agrees with.
    Server,
    /// The agent's own flag: the server did not say.
    Flag,
    /// Neither said: [`Backend::DEFAULT`].
    Default,
}

/// Why the agent cannot run the cluster's backend.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The agent's own flag names another backend than the server's.
    #[error(
        "--flannel-backend={own} differs from the server's flannel backend {server}: a cluster \
         has one pod network backend, set on the servers; start the agent without \
         --flannel-backend (it takes the server's) or with --flannel-backend={server}"
    )]
    Conflict {
        /// The agent's `--flannel-backend`.
        own: Backend,
        /// The server's.
        server: String,
    },
    /// The server's backend is none this agent runs.
    #[error(
        "the server's flannel backend {0:?} is not one this agent runs (vxlan, host-gw or \
         none); upgrade the agent"
    )]
    Unknown(String),
}

/// The backend of an agent whose own `--flannel-backend` is `own` (`None`: not given) and
/// whose server said `server` (`None`: it did not say).
pub fn decide(
    own: Option<Backend>,
    server: Option<&str>,
) -> Result<(Backend, Source), BackendError> {
    match (own, server) {
        (Some(own), Some(s)) if own.as_str() == s => Ok((own, Source::Server)),
        (Some(own), Some(s)) => Err(BackendError::Conflict {
            own,
            server: s.to_string(),
        }),
        (Some(own), None) => Ok((own, Source::Flag)),
        (None, Some(s)) => s
            .parse()
            .map(|b| (b, Source::Server))
            .map_err(|_| BackendError::Unknown(s.to_string())),
        (None, None) => Ok((Backend::DEFAULT, Source::Default)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Backend::{HostGw, Vxlan};

    #[test]
    fn the_servers_backend_unless_it_is_silent() {
        assert_eq!(decide(None, Some("host-gw")), Ok((HostGw, Source::Server)));
        assert_eq!(
            decide(None, Some("none")),
            Ok((Backend::None, Source::Server))
        );
        assert_eq!(
            decide(Some(HostGw), Some("host-gw")),
            Ok((HostGw, Source::Server))
        );
        assert_eq!(decide(Some(HostGw), None), Ok((HostGw, Source::Flag)));
        assert_eq!(decide(None, None), Ok((Vxlan, Source::Default)));
    }

    #[test]
    fn a_differing_flag_or_an_unknown_server_value_is_refused() {
        let e = decide(Some(Vxlan), Some("host-gw")).unwrap_err();
        assert_eq!(
            e,
            BackendError::Conflict {
                own: Vxlan,
                server: "host-gw".into()
            }
        );
        let message = e.to_string();
        assert!(
            message.contains(
                "--flannel-backend=vxlan differs from the server's flannel backend host-gw"
            ),
            "{message}"
        );
        assert_eq!(
            decide(None, Some("wireguard-native")),
            Err(BackendError::Unknown("wireguard-native".into()))
        );
        assert!(matches!(
            decide(Some(Vxlan), Some("wireguard-native")),
            Err(BackendError::Conflict { .. })
        ));
    }

    #[test]
    fn flag_values_round_trip() {
        for b in [Vxlan, HostGw, Backend::None] {
            assert_eq!(b.as_str().parse::<Backend>(), Ok(b));
        }
        assert_eq!(
            "wireguard-native".parse::<Backend>(),
            Err(UnknownBackend("wireguard-native".into()))
        );
    }
}

//! `k3rs token create|list|delete` against a running server, with the admin credentials the
//! server keeps in its data dir (`<data-dir>/server/cred/admin.kubeconfig`, as k3s).

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;

use super::{secret_object, table, validate, SpecError, Token, TokenSpec};
use k3rs_auth::bootstrap_token as bt;

/// What `k3rs token` can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The token or its spec is invalid.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The kubeconfig cannot be read.
    #[error("reading the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The server CA cannot be read.
    #[error("reading the server CA {path}: {source}")]
    Ca {
        /// The file.
        path: PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// No client could be made from the kubeconfig.
    #[error("connecting to the API server: {0}")]
    Client(#[source] kube::Error),
    /// The API server refused or failed a request.
    #[error("{what}: {source}")]
    Api {
        /// What was asked (e.g. `listing bootstrap token secrets`).
        what: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// The admin kubeconfig a server writes under its data dir.
pub fn admin_kubeconfig(data_dir: &Path) -> PathBuf {
    data_dir.join("server/cred/admin.kubeconfig")
}

/// A client for the server whose data dir is `data_dir` (or the given kubeconfig).
pub async fn connect(kubeconfig: &Path) -> Result<kube::Client, Error> {
    let kc =
        kube::config::Kubeconfig::read_from(kubeconfig).map_err(|source| Error::Kubeconfig {
            path: kubeconfig.to_path_buf(),
            source,
        })?;
    let cfg = kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|source| Error::Kubeconfig {
            path: kubeconfig.to_path_buf(),
            source,
        })?;
    kube::Client::try_from(cfg).map_err(Error::Client)
}

fn secrets(client: &kube::Client) -> Api<Secret> {
    Api::namespaced(client.clone(), bt::NAMESPACE)
}

/// Creates a token (the given one, or a new random one) and returns it in the full
/// `K10<hash>::<id>.<secret>` form for the CA file `ca_file`.
pub async fn create(
    client: &kube::Client,
    ca_file: &Path,
    token: Option<&str>,
    spec: &TokenSpec,
) -> Result<String, Error> {
    validate(spec)?;
    let token = match token {
        Some(t) => Token::parse(t)?,
        None => Token::generate(),
    };
    let ca = std::fs::read(ca_file).map_err(|source| Error::Ca {
        path: ca_file.to_path_buf(),
        source,
    })?;
    let obj: Secret =
        serde_json::from_value(secret_object(&token, spec, std::time::SystemTime::now()))
            .expect("the token Secret is a valid Secret");
    secrets(client)
        .create(&PostParams::default(), &obj)
        .await
        .map_err(|source| Error::Api {
            what: format!("creating secret {}", token.secret_name()),
            source,
        })?;
    Ok(token.full(&ca))
}

/// `kubeadm token list`'s table of every bootstrap token Secret.
pub async fn list(client: &kube::Client) -> Result<String, Error> {
    let list = secrets(client)
        .list(&ListParams::default().fields(&format!("type={}", bt::SECRET_TYPE)))
        .await
        .map_err(|source| Error::Api {
            what: "listing bootstrap token secrets".into(),
            source,
        })?;
    let now = k8s_openapi::jiff::Timestamp::now();
    let rows: Vec<_> = list
        .items
        .iter()
        .filter_map(|s| serde_json::to_value(s).ok())
        .filter_map(|v| table::row(&v, now))
        .collect();
    Ok(table::render(&rows))
}

/// Deletes the token with id `id` (or given as `<id>.<secret>` / full form).
pub async fn delete(client: &kube::Client, id: &str) -> Result<String, Error> {
    let id = match Token::parse(id) {
        Ok(t) => t.id,
        Err(_) if super::valid_id(id) => id.to_string(),
        Err(e) => return Err(e.into()),
    };
    let name = format!("{}{id}", bt::SECRET_PREFIX);
    secrets(client)
        .delete(&name, &DeleteParams::default())
        .await
        .map_err(|source| Error::Api {
            what: format!("deleting secret {name}"),
            source,
        })?;
    Ok(format!("bootstrap token {id:?} deleted"))
}

/// One `k3rs token` invocation.
#[derive(Debug, Clone)]
pub enum Command {
    /// `create [TOKEN]`: the given `<id>.<secret>` or a random one.
    Create {
        /// `<id>.<secret>` (or the full `K10…` form); `None` generates one.
        token: Option<String>,
        /// Its TTL, usages, groups and description.
        spec: TokenSpec,
    },
    /// `list`: kubeadm's table of the bootstrap tokens.
    List,
    /// `delete ID…`: deletes the tokens' Secrets.
    Delete {
        /// Token ids, or whole tokens (their id is used).
        ids: Vec<String>,
    },
}

/// Runs `cmd` against the server of `data_dir` (through `kubeconfig` if given, else the
/// server's own admin kubeconfig) and returns what to print.
pub async fn run(
    data_dir: &Path,
    kubeconfig: Option<&Path>,
    cmd: Command,
) -> Result<String, Error> {
    let default = admin_kubeconfig(data_dir);
    let client = connect(kubeconfig.unwrap_or(&default)).await?;
    match cmd {
        Command::Create { token, spec } => {
            let ca = data_dir.join("server/tls/server-ca.crt");
            Ok(format!(
                "{}\n",
                create(&client, &ca, token.as_deref(), &spec).await?
            ))
        }
        Command::List => list(&client).await,
        Command::Delete { ids } => {
            let mut out = String::new();
            for id in ids {
                out.push_str(&delete(&client, &id).await?);
                out.push('\n');
            }
            Ok(out)
        }
    }
}

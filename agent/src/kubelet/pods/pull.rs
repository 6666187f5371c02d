//! Pulling a container's image with the pod's `imagePullSecrets` (upstream's
//! `kuberuntime_image.PullImage`): the secrets are read, the credentials matching the image
//! tried in turn (the first that pulls wins), or an anonymous pull when none match. Secrets
//! that cannot be read are reported (`FailedToRetrieveImagePullSecret`) and the pull goes on
//! without them, as upstream.

use k8s_openapi::api::core::v1::{Pod, Secret};

use super::sync::Executor;
use crate::cri::{error::Error as CriError, pb};
use crate::kubelet::credentials::{self, repository};
use crate::kubelet::events::WARNING;

/// Why a pull failed; the message is the container's `ErrImagePull` message.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// A pull secret is malformed.
    #[error("{0}")]
    Secret(#[from] credentials::Error),
    /// The runtime refused every attempt (one per matching credential, or the anonymous one).
    #[error("{}", aggregate(.0))]
    Runtime(Vec<CriError>),
}

/// Upstream's `utilerrors.NewAggregate` text: the one error, or `[e1, e2]`.
fn aggregate(errors: &[CriError]) -> String {
    match errors {
        [one] => one.to_string(),
        many => {
            let texts: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("[{}]", texts.join(", "))
        }
    }
}

impl Executor {
    /// The pod's pull secrets that exist; an Event names those that could not be read.
    async fn pull_secrets(&self, pod: &Pod) -> Vec<Secret> {
        let ns = Self::namespace(pod);
        let names = pod
            .spec
            .iter()
            .flat_map(|s| s.image_pull_secrets.iter().flatten())
            .map(|r| r.name.clone());
        let (mut found, mut missing) = (Vec::new(), Vec::new());
        for name in names {
            match self.api.secret(ns, &name).await {
                Ok(Some(s)) => found.push(s),
                Ok(None) => missing.push(name),
                Err(e) => {
                    tracing::warn!(secret = %name, "reading an image pull secret: {e}");
                    missing.push(name);
                }
            }
        }
        if !missing.is_empty() {
            let message = format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image \
                 may not succeed.",
                missing.join(", ")
            );
            self.events
                .pod(pod, WARNING, "FailedToRetrieveImagePullSecret", message);
        }
        found
    }

    /// Pulls `image` for `pod`; the image reference on success.
    pub(super) async fn pull(
        &self,
        pod: &Pod,
        image: &str,
        sandbox_config: Option<pb::PodSandboxConfig>,
    ) -> Result<String, PullError> {
        let keyring = credentials::keyring(&self.pull_secrets(pod).await)?;
        let spec = pb::ImageSpec {
            image: image.to_string(),
            ..Default::default()
        };
        let creds = keyring.lookup(&repository(image));
        let auths: Vec<Option<pb::AuthConfig>> = if creds.is_empty() {
            vec![None]
        } else {
            creds
                .into_iter()
                .map(|c| {
                    Some(pb::AuthConfig {
                        username: c.username,
                        password: c.password,
                        ..Default::default()
                    })
                })
                .collect()
        };
        let mut errors = Vec::new();
        for auth in auths {
            match (self.images)
                .pull_image(spec.clone(), auth, sandbox_config.clone())
                .await
            {
                Ok(reference) => return Ok(reference),
                Err(e) => errors.push(e),
            }
        }
        Err(PullError::Runtime(errors))
    }
}

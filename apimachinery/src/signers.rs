//! The built-in signer names of `certificates.k8s.io/v1` (upstream's
//! `k8s.io/api/certificates/v1` constants): what a CertificateSigningRequest's `signerName`
//! says, what the kubelet asks for, what the signing and approving controllers handle and
//! what the bootstrap RBAC policy grants.

/// Client certificates for the API server, any user (the controller manager signs them with
/// the client CA).
pub const KUBE_APISERVER_CLIENT: &str = "kubernetes.io/kube-apiserver-client";
/// Kubelet client certificates: `system:node:<name>` in `system:nodes`, signed with the
/// client CA.
pub const KUBELET_CLIENT: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// Kubelet serving certificates (signed with the server CA, as k3s does).
pub const KUBELET_SERVING: &str = "kubernetes.io/kubelet-serving";
/// Requests from before signer names; never signed by the built-in signers.
pub const LEGACY_UNKNOWN: &str = "kubernetes.io/legacy-unknown";

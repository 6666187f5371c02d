//! Which Ingresses the built-in ingress controller serves: its IngressClass (`k3rs`,
//! controller `k3rs.io/ingress`), and upstream's rule for an Ingress's class (shared by the
//! agent, which routes them, and the server's controller, which writes their status).
//!
//! An Ingress names its class in `spec.ingressClassName`, else in the deprecated annotation
//! `kubernetes.io/ingress.class`; one that names none belongs to the cluster's default class
//! (the IngressClass annotated `ingressclass.kubernetes.io/is-default-class: "true"`), as
//! upstream's `DefaultIngressClass` admission would have set it. With several default classes
//! (which upstream's admission refuses) a classless Ingress is nobody's.

use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use serde_json::json;

/// The built-in IngressClass.
pub const CLASS: &str = "k3rs";
/// Its `spec.controller`.
pub const CONTROLLER: &str = "k3rs.io/ingress";
/// The annotation that makes an IngressClass the default one.
pub const DEFAULT_ANNOTATION: &str = "ingressclass.kubernetes.io/is-default-class";
/// The deprecated class annotation on an Ingress.
pub const CLASS_ANNOTATION: &str = "kubernetes.io/ingress.class";

/// The built-in IngressClass, the cluster's default.
pub fn ingress_class() -> IngressClass {
    serde_json::from_value(json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": CLASS, "annotations": {DEFAULT_ANNOTATION: "true"}},
        "spec": {"controller": CONTROLLER},
    }))
    .expect("an IngressClass")
}

fn is_default(class: &IngressClass) -> bool {
    class
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DEFAULT_ANNOTATION))
        .is_some_and(|v| v == "true")
}

/// The class `ingress` names, if any.
pub fn named_class(ingress: &Ingress) -> Option<&str> {
    ingress
        .spec
        .as_ref()
        .and_then(|s| s.ingress_class_name.as_deref())
        .or_else(|| {
            ingress
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CLASS_ANNOTATION))
                .map(String::as_str)
        })
        .filter(|c| !c.is_empty())
}

/// Whether the built-in controller serves `ingress`, given the cluster's IngressClasses.
pub fn is_ours(ingress: &Ingress, classes: &[IngressClass]) -> bool {
    serves(named_class(ingress), classes)
}

/// Whether the built-in controller serves the Ingresses that name `class` (`None`: name
/// none), given the cluster's IngressClasses.
pub fn serves<'a>(
    class: Option<&str>,
    classes: impl IntoIterator<Item = &'a IngressClass>,
) -> bool {
    let ours = |c: &IngressClass| {
        c.spec.as_ref().and_then(|s| s.controller.as_deref()) == Some(CONTROLLER)
    };
    let mut classes = classes.into_iter();
    match class {
        Some(name) => classes.any(|c| c.metadata.name.as_deref() == Some(name) && ours(c)),
        None => {
            let mut defaults = classes.filter(|c| is_default(c));
            matches!((defaults.next(), defaults.next()), (Some(c), None) if ours(c))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ingress(class: Option<&str>, annotation: Option<&str>) -> Ingress {
        let mut v = json!({"metadata": {"name": "i", "namespace": "ns"}, "spec": {}});
        if let Some(c) = class {
            v["spec"]["ingressClassName"] = json!(c);
        }
        if let Some(a) = annotation {
            v["metadata"]["annotations"] = json!({CLASS_ANNOTATION: a});
        }
        serde_json::from_value(v).unwrap()
    }

    fn class(name: &str, controller: &str, default: bool) -> IngressClass {
        let mut c = ingress_class();
        c.metadata.name = Some(name.into());
        c.spec.as_mut().unwrap().controller = Some(controller.into());
        if !default {
            c.metadata.annotations = None;
        }
        c
    }

    #[test]
    fn the_class_is_named_by_field_then_annotation() {
        let classes = [
            class(CLASS, CONTROLLER, false),
            class("traefik", "traefik.io/ingress-controller", false),
        ];
        assert!(is_ours(&ingress(Some("k3rs"), None), &classes));
        assert!(is_ours(&ingress(None, Some("k3rs")), &classes));
        assert!(!is_ours(&ingress(Some("traefik"), Some("k3rs")), &classes));
        assert!(!is_ours(&ingress(Some("nginx"), None), &classes));
        // A classless Ingress with no default class is nobody's.
        assert!(!is_ours(&ingress(None, None), &classes));
    }

    #[test]
    fn classless_ingresses_belong_to_the_single_default_class() {
        assert!(is_ours(&ingress(None, None), &[ingress_class()]));
        assert!(is_ours(&ingress(None, Some("")), &[ingress_class()]));
        let other_default = class("nginx", "k8s.io/ingress-nginx", true);
        assert!(!is_ours(
            &ingress(None, None),
            std::slice::from_ref(&other_default)
        ));
        assert!(!is_ours(
            &ingress(None, None),
            &[ingress_class(), other_default]
        ));
        assert!(!is_ours(&ingress(Some("k3rs"), None), &[]));
    }
}

//! APIServices as `kubectl get apiservices` shows them (kube-aggregator's printer): the
//! Service (or `Local`) and the `Available` condition, with its reason when not `True`.

use serde_json::{json, Value};

use super::printers::{age, name, str_of, Column, AGE, NAME};

pub const APISERVICE_COLUMNS: &[Column] = &[
    NAME,
    Column::new(
        "Service",
        "string",
        "The reference to the service that hosts this API endpoint.",
    ),
    Column::new("Available", "string", "Whether this service is available."),
    AGE,
];

pub fn apiservice_cells(svc: &Value, now: i64) -> Vec<Value> {
    let service = &svc["spec"]["service"];
    let service = if service.is_object() {
        format!(
            "{}/{}",
            str_of(&service["namespace"]),
            str_of(&service["name"])
        )
    } else {
        "Local".to_string()
    };
    let available = svc["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Available")
        .map(|c| match str_of(&c["status"]) {
            "True" => "True".to_string(),
            status => format!("{status} ({})", str_of(&c["reason"])),
        })
        .unwrap_or_else(|| "Unknown".to_string());
    vec![name(svc), json!(service), json!(available), age(svc, now)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_and_service_backed() {
        let local = json!({"metadata": {"name": "v1.apps"}, "spec": {},
            "status": {"conditions": [{"type": "Available", "status": "True", "reason": "Local"}]}});
        assert_eq!(
            apiservice_cells(&local, 0)[..3],
            [json!("v1.apps"), json!("Local"), json!("True")]
        );
        let down = json!({"metadata": {"name": "v1alpha1.wardle.example.com"},
            "spec": {"service": {"namespace": "wardle", "name": "api"}},
            "status": {"conditions": [{"type": "Available", "status": "False", "reason": "ServiceNotFound"}]}});
        assert_eq!(
            apiservice_cells(&down, 0)[1..3],
            [json!("wardle/api"), json!("False (ServiceNotFound)")]
        );
        let new = json!({"metadata": {"name": "v1.x"}, "spec": {"service": {"namespace": "a", "name": "b"}}});
        assert_eq!(apiservice_cells(&new, 0)[2], json!("Unknown"));
    }
}

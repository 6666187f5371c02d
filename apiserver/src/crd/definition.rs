//! The CustomResourceDefinition's own defaulting and validation (apiextensions-apiserver's
//! `SetDefaults` and `ValidateCustomResourceDefinition`): names, scope, versions with
//! exactly one storage version, structural schemas, printer columns and the scale paths.

use serde_json::{json, Value};

use super::jsonpath;
use super::schema::validate as schema_validate;
use k3rs_apimachinery::status::Cause;
use k3rs_apimachinery::validation;

/// The conversion strategies this server implements.
const CONVERSION: &[&str] = &["None"];
const SCOPES: &[&str] = &["Cluster", "Namespaced"];
const COLUMN_TYPES: &[&str] = &["integer", "number", "string", "boolean", "date"];
const SCHEMA_TYPES: &[&str] = &["array", "boolean", "integer", "number", "object", "string"];

/// `SetDefaults_CustomResourceDefinition`: singular and listKind from the kind, conversion
/// strategy None.
pub fn defaults(crd: &mut Value) {
    let spec = &mut crd["spec"];
    if !spec.is_object() {
        return;
    }
    let kind = spec["names"]["kind"].as_str().unwrap_or("").to_string();
    if spec["names"].is_object() && !kind.is_empty() {
        if spec["names"]["singular"].as_str().is_none_or(str::is_empty) {
            spec["names"]["singular"] = json!(kind.to_lowercase());
        }
        if spec["names"]["listKind"].as_str().is_none_or(str::is_empty) {
            spec["names"]["listKind"] = json!(format!("{kind}List"));
        }
    }
    if spec.get("conversion").is_none_or(Value::is_null) {
        spec["conversion"] = json!({"strategy": "None"});
    }
}

fn dns1035(field: String, v: &str, out: &mut Vec<Cause>) {
    let ok = !v.is_empty()
        && v.len() <= 63
        && v.starts_with(|c: char| c.is_ascii_lowercase())
        && !v.ends_with('-')
        && v.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        out.push(Cause::invalid(
            field,
            v,
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ));
    }
}

/// Every violation of the CRD's rules.
pub fn validate(crd: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or("");
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    if name != format!("{plural}.{group}") {
        out.push(Cause::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    if group.is_empty() {
        out.push(Cause::required("spec.group", ""));
    } else {
        out.extend(validation::validate_name(
            group,
            k3rs_apimachinery::catalog::NameRule::Subdomain,
            "spec.group",
        ));
        if !group.contains('.') {
            out.push(Cause::invalid(
                "spec.group",
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
    match spec["scope"].as_str() {
        None | Some("") => out.push(Cause::required("spec.scope", "")),
        Some(s) if !SCOPES.contains(&s) => out.push(Cause::not_supported("spec.scope", s, SCOPES)),
        _ => {}
    }
    names_rules(names, &mut out);
    let strategy = spec["conversion"]["strategy"].as_str().unwrap_or("None");
    if !CONVERSION.contains(&strategy) {
        out.push(Cause::not_supported(
            "spec.conversion.strategy",
            strategy,
            CONVERSION,
        ));
    }
    versions_rules(spec, &mut out);
    out
}

fn names_rules(names: &Value, out: &mut Vec<Cause>) {
    let at = "spec.names";
    for (k, required) in [("plural", true), ("singular", false)] {
        match names[k].as_str() {
            Some(v) if !v.is_empty() => dns1035(format!("{at}.{k}"), v, out),
            _ if required => out.push(Cause::required(format!("{at}.{k}"), "")),
            _ => {}
        }
    }
    let kind = names["kind"].as_str().unwrap_or("");
    if kind.is_empty() {
        out.push(Cause::required(format!("{at}.kind"), ""));
    }
    let list_kind = names["listKind"].as_str().unwrap_or("");
    if !kind.is_empty() && list_kind == kind {
        out.push(Cause::invalid(
            format!("{at}.listKind"),
            list_kind,
            "kind and listKind may not be the same",
        ));
    }
    for k in ["shortNames", "categories"] {
        for (i, v) in names[k].as_array().into_iter().flatten().enumerate() {
            dns1035(format!("{at}.{k}[{i}]"), v.as_str().unwrap_or(""), out);
        }
    }
}

fn versions_rules(spec: &Value, out: &mut Vec<Cause>) {
    let versions = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if versions.is_empty() {
        out.push(Cause::required(
            "spec.versions",
            "must have at least one version",
        ));
        return;
    }
    let storage = versions.iter().filter(|v| v["storage"] == true).count();
    if storage != 1 {
        out.push(Cause::invalid(
            "spec.versions",
            &Value::Array(versions.to_vec()).to_string(),
            "must have exactly one version marked as storage version",
        ));
    }
    if !versions.iter().any(|v| v["served"] == true) {
        out.push(Cause::invalid(
            "spec.versions",
            &Value::Array(versions.to_vec()).to_string(),
            "must have at least one version marked as served",
        ));
    }
    let mut seen = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let at = format!("spec.versions[{i}]");
        let name = v["name"].as_str().unwrap_or("");
        dns1035(format!("{at}.name"), name, out);
        if seen.contains(&name) {
            out.push(Cause {
                reason: "FieldValueDuplicate",
                field: format!("{at}.name"),
                message: format!("Duplicate value: {}", json!(name)),
            });
        }
        seen.push(name);
        match v["schema"].get("openAPIV3Schema") {
            Some(s) if s.is_object() => {
                let sat = format!("{at}.schema.openAPIV3Schema");
                if s["type"].as_str().is_some_and(|t| t != "object") {
                    out.push(Cause::invalid(
                        format!("{sat}.type"),
                        s["type"].as_str().unwrap_or(""),
                        "must be object at the root",
                    ));
                }
                structural(s, &sat, "", out);
                super::schema::rules_cost::check(s, &sat, out);
            }
            _ => out.push(Cause::required(
                format!("{at}.schema.openAPIV3Schema"),
                "schemas are required",
            )),
        }
        columns_rules(&v["additionalPrinterColumns"], &at, out);
        if let Some(sc) = v["subresources"].get("scale").filter(|s| s.is_object()) {
            let sat = format!("{at}.subresources.scale");
            for (k, prefixes) in [
                ("specReplicasPath", &[".spec."][..]),
                ("statusReplicasPath", &[".status."][..]),
                ("labelSelectorPath", &[".spec.", ".status."][..]),
            ] {
                let p = sc[k].as_str();
                if p.is_none() && k != "labelSelectorPath" {
                    out.push(Cause::required(format!("{sat}.{k}"), ""));
                }
                if let Some(p) = p {
                    let plain = jsonpath::parse(p).is_ok_and(|steps| {
                        steps.iter().all(|s| matches!(s, jsonpath::Step::Field(_)))
                    });
                    if !plain || !prefixes.iter().any(|x| p.starts_with(x)) {
                        out.push(Cause::invalid(
                            format!("{sat}.{k}"),
                            p,
                            &format!("should be a json path under {}", prefixes.join(" or ")),
                        ));
                    }
                }
            }
        }
    }
}

fn columns_rules(columns: &Value, at: &str, out: &mut Vec<Cause>) {
    for (i, c) in columns.as_array().into_iter().flatten().enumerate() {
        let cat = format!("{at}.additionalPrinterColumns[{i}]");
        if c["name"].as_str().is_none_or(str::is_empty) {
            out.push(Cause::required(format!("{cat}.name"), ""));
        }
        match c["type"].as_str() {
            Some(t) if COLUMN_TYPES.contains(&t) => {}
            Some(t) => out.push(Cause::not_supported(format!("{cat}.type"), t, COLUMN_TYPES)),
            None => out.push(Cause::required(format!("{cat}.type"), "")),
        }
        match c["jsonPath"].as_str() {
            Some(p) => {
                if let Err(e) = jsonpath::parse(p) {
                    out.push(Cause::invalid(format!("{cat}.jsonPath"), p, &e.0));
                }
            }
            None => out.push(Cause::required(format!("{cat}.jsonPath"), "")),
        }
    }
}

/// Structural schema rules: every specified field has a type (unless it is int-or-string or
/// preserves unknown fields), patterns compile, defaults validate against their schema, and
/// `metadata` at the root only restricts `name` and `generateName`.
fn structural(s: &Value, at: &str, cr_path: &str, out: &mut Vec<Cause>) {
    use super::schema::structural::{self, Level};
    let root = cr_path.is_empty();
    let level = if root {
        Level::Root
    } else if at.ends_with(".items") {
        Level::Item
    } else {
        Level::Field
    };
    let typ = s["type"].as_str().unwrap_or("");
    let untyped_ok = s["x-kubernetes-int-or-string"] == true
        || s["x-kubernetes-preserve-unknown-fields"] == true
        || s["x-kubernetes-embedded-resource"] == true;
    if typ.is_empty() && !untyped_ok {
        out.push(Cause::required(
            format!("{at}.type"),
            structural::missing_type_detail(level),
        ));
    } else if !typ.is_empty() && !SCHEMA_TYPES.contains(&typ) {
        out.push(Cause::not_supported(
            format!("{at}.type"),
            typ,
            SCHEMA_TYPES,
        ));
    }
    structural::node_rules(s, at, level, out);
    super::schema::rules_definition::check(s, at, out);
    if let Some(d) = s.get("default") {
        if s["nullable"] != true || !d.is_null() {
            for c in schema_validate::validate_at(s, d, cr_path) {
                let rest = c.field.strip_prefix(cr_path).unwrap_or("");
                out.push(Cause {
                    field: format!("{at}.default{rest}"),
                    ..c
                });
            }
        }
    }
    if typ == "array" && s.get("items").is_none_or(|i| !i.is_object()) {
        out.push(Cause::required(format!("{at}.items"), "must be specified"));
    }
    if let Some(Value::Object(props)) = s.get("properties") {
        if s.get("additionalProperties")
            .is_some_and(|a| a.is_object() || a == true)
        {
            out.push(Cause::forbidden(
                format!("{at}.additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        for (k, sub) in props {
            let pat = format!("{at}.properties[{k}]");
            if root && k == "metadata" {
                let allowed = sub["properties"]
                    .as_object()
                    .is_none_or(|m| m.keys().all(|x| x == "name" || x == "generateName"));
                if !allowed {
                    out.push(Cause::forbidden(
                        pat.clone(),
                        "must not specify anything other than name and generateName, but metadata is implicitly specified",
                    ));
                }
                continue;
            }
            structural(sub, &pat, &super::schema::child(cr_path, k), out);
        }
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        structural(items, &format!("{at}.items"), &format!("{cr_path}[*]"), out);
    }
    if let Some(a) = s.get("additionalProperties").filter(|a| a.is_object()) {
        structural(
            a,
            &format!("{at}.additionalProperties"),
            &super::schema::child(cr_path, "*"),
            out,
        );
    }
}

/// Fields an update may not change.
pub fn validate_update(old: &Value, new: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    for (field, path) in [
        ("spec.group", ["spec", "group"]),
        ("spec.scope", ["spec", "scope"]),
    ] {
        let (o, n) = (&old[path[0]][path[1]], &new[path[0]][path[1]]);
        if o != n {
            out.push(Cause::invalid(
                field,
                n.as_str().unwrap_or(""),
                "field is immutable",
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn widget() -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}}}}}},
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}},
                "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}]}})
    }

    fn fields(crd: &Value) -> Vec<String> {
        validate(crd)
            .into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn a_good_crd_is_accepted_and_defaulted() {
        let mut crd = widget();
        defaults(&mut crd);
        assert_eq!(crd["spec"]["names"]["singular"], "widget");
        assert_eq!(crd["spec"]["names"]["listKind"], "WidgetList");
        assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
        assert_eq!(fields(&crd), Vec::<String>::new());
    }

    #[test]
    fn bad_crds_are_rejected_with_upstream_paths() {
        let mut crd = widget();
        crd["metadata"]["name"] = json!("gadgets.example.com");
        crd["spec"]["scope"] = json!("Global");
        crd["spec"]["versions"][0]["storage"] = json!(false);
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["x"] = json!({"description": "no type"});
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["size"]["default"] = json!("one");
        crd["spec"]["versions"][0]["additionalPrinterColumns"][0]["type"] = json!("float");
        crd["spec"]["versions"][0]["subresources"]["scale"]["specReplicasPath"] =
            json!(".status.size");
        let got = fields(&crd);
        for want in [
            "metadata.name: Invalid value: \"gadgets.example.com\": must be spec.names.plural+\".\"+spec.group",
            "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\"",
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[x].type: Required value: must not be empty for specified object fields",
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].default: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
            "spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: \"float\": supported values: \"integer\", \"number\", \"string\", \"boolean\", \"date\"",
            "spec.versions[0].subresources.scale.specReplicasPath: Invalid value: \".status.size\": should be a json path under .spec.",
        ] {
            assert!(got.iter().any(|g| g == want), "missing {want}\nin {got:#?}");
        }
        assert!(got
            .iter()
            .any(|g| g.starts_with("spec.versions: Invalid value:")
                && g.ends_with("must have exactly one version marked as storage version")));
        assert_eq!(got.len(), 7, "{got:#?}");
        let mut bad_group = widget();
        bad_group["spec"]["group"] = json!("example");
        bad_group["metadata"]["name"] = json!("widgets.example");
        assert_eq!(
            fields(&bad_group),
            ["spec.group: Invalid value: \"example\": should be a domain with at least one dot"]
        );
    }

    #[test]
    fn group_and_scope_are_immutable() {
        let old = widget();
        let mut new = widget();
        new["spec"]["scope"] = json!("Cluster");
        assert_eq!(validate_update(&old, &new)[0].field, "spec.scope");
        assert!(validate_update(&old, &old).is_empty());
    }
}

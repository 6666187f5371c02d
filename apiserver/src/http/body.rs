//! Request bodies: JSON or YAML (3 MiB at most), checked against the kind and apiVersion the
//! path serves.

use axum::body::Body;
use axum::http::HeaderMap;
use serde_json::Value;

use k3rs_apimachinery::catalog::Resource;
use k3rs_apimachinery::status::{ApiError, ApiResult};

/// kube-apiserver's request body limit.
pub const MAX_BODY: usize = 3 * 1024 * 1024;

/// The media type of the body (without parameters), `application/json` when absent.
pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "application/json".to_string())
}

/// Reads at most [`MAX_BODY`] bytes (413 beyond).
pub async fn read(body: Body) -> ApiResult<axum::body::Bytes> {
    axum::body::to_bytes(body, MAX_BODY).await.map_err(|e| {
        let too_large = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
            || e.to_string().contains("length limit");
        if too_large {
            ApiError::too_large(
                "the server has received a request that is too large (limit is 3MiB)",
            )
        } else {
            ApiError::bad_request(format!("reading the request body: {e}"))
        }
    })
}

/// Parses a JSON or YAML object body.
pub fn parse(media: &str, bytes: &[u8]) -> ApiResult<Value> {
    let value: Value = match media {
        "application/json" | "*/*" => serde_json::from_slice(bytes).map_err(|e| {
            ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
        })?,
        super::protobuf::MEDIA_TYPE => super::protobuf::decode(bytes)?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => {
            if flow_depth(bytes) > MAX_YAML_FLOW_DEPTH {
                return Err(ApiError::bad_request(format!(
                    "error converting YAML to JSON: yaml: exceeded max depth of {MAX_YAML_FLOW_DEPTH}"
                )));
            }
            serde_norway::from_slice(bytes).map_err(|e| {
                ApiError::bad_request(format!("error converting YAML to JSON: yaml: {e}"))
            })?
        }
        other => return Err(ApiError::unsupported_media_type(other)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "couldn't get version/kind; json parse error: the body must be an object",
        ));
    }
    Ok(value)
}

/// How deep `[`/`{` may nest in a YAML body before it is refused unparsed: the YAML parser
/// takes time quadratic in the nesting of flow collections (100,000 levels: over a minute),
/// while the decoder refuses more than 128 levels anyway. High enough that brackets inside
/// scalars never reach it.
pub const MAX_YAML_FLOW_DEPTH: usize = 1000;

/// The deepest nesting of `[`/`{` in `bytes` outside quoted scalars and comments (an
/// over-estimate elsewhere, e.g. brackets inside plain or block scalars).
pub fn flow_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut quote: Option<u8> = None;
    let mut comment = false;
    let mut prev = b'\n';
    for &b in bytes {
        match (quote, comment, b) {
            (_, true, b'\n') => comment = false,
            (_, true, _) => {}
            (Some(q), _, _) if b == q => quote = None,
            (Some(_), _, _) => {}
            (None, _, b'"' | b'\'') => quote = Some(b),
            (None, _, b'#') if prev.is_ascii_whitespace() => comment = true,
            (None, _, b'[' | b'{') => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            (None, _, b']' | b'}') => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = b;
    }
    deepest
}

/// Checks (and fills in when absent) `apiVersion` and `kind` against what the path serves.
pub fn check_kind(obj: &mut Value, group_version: &str, kind: &str) -> ApiResult<()> {
    match obj.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => obj["apiVersion"] = Value::from(group_version),
        Some(v) if v == group_version => {}
        Some(v) => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({group_version})"
            )))
        }
    }
    match obj.get("kind").and_then(Value::as_str) {
        None | Some("") => obj["kind"] = Value::from(kind),
        Some(k) if k == kind => {}
        Some(k) => {
            return Err(ApiError::bad_request(format!(
                "{k} in version {group_version:?} cannot be handled as a {kind}: the kind in the data ({k}) does not match the expected kind ({kind})"
            )))
        }
    }
    Ok(())
}

/// The resource's kind and group-version for a body at `subresource`.
pub fn expected_kind(r: &Resource, subresource: Option<&str>) -> (String, String) {
    match subresource.and_then(|s| r.subresources.iter().find(|x| x.name == s)) {
        Some(s) if s.name != "status" => {
            let gv = if s.group.is_empty() {
                s.version.to_string()
            } else {
                format!("{}/{}", s.group, s.version)
            };
            (gv, s.kind.to_string())
        }
        _ => (r.group_version(), r.kind.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_and_yaml() {
        let j = parse("application/json", br#"{"kind":"ConfigMap"}"#).unwrap();
        let y = parse("application/yaml", b"kind: ConfigMap\n").unwrap();
        assert_eq!(j, y);
        assert_eq!(parse("application/json", b"{").unwrap_err().code, 400);
        assert_eq!(parse("application/yaml", b"a: [").unwrap_err().code, 400);
        assert_eq!(parse("application/json", b"[1]").unwrap_err().code, 400);
        assert_eq!(parse("text/plain", b"{}").unwrap_err().code, 415);
    }

    #[test]
    fn deep_yaml_is_refused_before_the_parser_sees_it() {
        let deep = format!("v: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let t0 = std::time::Instant::now();
        let err = parse("application/yaml", deep.as_bytes()).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(
            err.message.contains("exceeded max depth"),
            "{}",
            err.message
        );
        assert!(t0.elapsed() < std::time::Duration::from_secs(1));
        // Brackets in quotes and comments do not count; real nesting just under the parser's
        // limit parses.
        assert_eq!(flow_depth(b"a: \"[[[\"\nb: '{{' # [[[\nc: [1, [2]]\n"), 2);
        let ok = format!("v: {}{}\n", "[".repeat(100), "]".repeat(100));
        assert!(parse("application/yaml", ok.as_bytes()).is_ok());
    }

    #[test]
    fn billion_laughs_are_refused() {
        let mut y = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for w in ["a", "b", "c", "d", "e", "f", "g", "h", "i"].windows(2) {
            let refs = vec![format!("*{}", w[0]); 9].join(",");
            y.push_str(&format!("{}: &{} [{refs}]\n", w[1], w[1]));
        }
        let err = parse("application/yaml", y.as_bytes()).unwrap_err();
        assert_eq!(err.code, 400, "{}", err.message);
    }

    #[test]
    fn kinds_must_match_the_path() {
        let mut o = json!({});
        check_kind(&mut o, "v1", "ConfigMap").unwrap();
        assert_eq!(o, json!({"apiVersion": "v1", "kind": "ConfigMap"}));
        let mut o = json!({"apiVersion": "v1", "kind": "Pod"});
        assert_eq!(check_kind(&mut o, "v1", "ConfigMap").unwrap_err().code, 400);
        let mut o = json!({"apiVersion": "apps/v2", "kind": "Deployment"});
        assert_eq!(
            check_kind(&mut o, "apps/v1", "Deployment")
                .unwrap_err()
                .code,
            400
        );
    }
}

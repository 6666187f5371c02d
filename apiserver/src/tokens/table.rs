//! `k3rs token list`: the table `kubeadm token list` prints, one row per token Secret.

use serde_json::Value;

use k3rs_auth::bootstrap_token::{self as bt, keys};

/// The columns, in order.
pub const HEADER: [&str; 6] = [
    "TOKEN",
    "TTL",
    "EXPIRES",
    "USAGES",
    "DESCRIPTION",
    "EXTRA GROUPS",
];

/// apimachinery's `ShortHumanDuration` of `secs` (`<invalid>` for more than a second ago).
pub fn short_human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    let (m, h) = (secs / 60, secs / 3600);
    if secs < 60 {
        format!("{secs}s")
    } else if m < 60 {
        format!("{m}m")
    } else if h < 24 {
        format!("{h}h")
    } else if h < 24 * 365 {
        format!("{}d", h / 24)
    } else {
        format!("{}y", h / 24 / 365)
    }
}

/// A token Secret's row; `None` for Secrets that are not well-formed bootstrap tokens.
pub fn row(secret: &Value, now: k8s_openapi::jiff::Timestamp) -> Option<[String; 6]> {
    if secret["type"].as_str() != Some(bt::SECRET_TYPE) {
        return None;
    }
    let d = |k: &str| bt::data_string(secret, k);
    let (id, sec) = (d(keys::TOKEN_ID), d(keys::TOKEN_SECRET));
    bt::parse(&format!("{id}.{sec}"))?;
    let name = secret["metadata"]["name"].as_str().unwrap_or_default();
    if name != format!("{}{id}", bt::SECRET_PREFIX) {
        return None;
    }
    let exp = d(keys::EXPIRATION);
    let (ttl, expires) = match exp.parse::<k8s_openapi::jiff::Timestamp>() {
        _ if exp.is_empty() => ("<forever>".to_string(), "<never>".to_string()),
        Ok(t) => (
            short_human_duration(t.as_second() - now.as_second()),
            t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        ),
        Err(_) => ("<invalid>".to_string(), exp.clone()),
    };
    let mut usages: Vec<String> = secret["data"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, _)| k.strip_prefix(keys::USAGE_PREFIX))
        .filter(|u| d(&format!("{}{u}", keys::USAGE_PREFIX)) == "true")
        .map(str::to_string)
        .collect();
    usages.sort();
    let or_none = |s: String| {
        if s.is_empty() {
            "<none>".to_string()
        } else {
            s
        }
    };
    Some([
        format!("{id}.{sec}"),
        ttl,
        expires,
        or_none(usages.join(",")),
        or_none(d(keys::DESCRIPTION)),
        or_none(d(keys::EXTRA_GROUPS)),
    ])
}

/// The rows under the header, columns padded to their widest cell plus three spaces
/// (kubeadm's tabwriter).
pub fn render(rows: &[[String; 6]]) -> String {
    let header = HEADER.map(str::to_string);
    let all: Vec<&[String; 6]> = std::iter::once(&header).chain(rows).collect();
    let widths: Vec<usize> = (0..6)
        .map(|c| all.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for r in all {
        let line: Vec<String> = (0..6)
            .map(|c| {
                if c == 5 {
                    r[c].clone()
                } else {
                    format!("{:<w$}", r[c], w = widths[c] + 3)
                }
            })
            .collect();
        out.push_str(line.concat().trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::{secret_object, Token, TokenSpec};
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn durations() {
        assert_eq!(short_human_duration(-5), "<invalid>");
        assert_eq!(short_human_duration(-1), "0s");
        assert_eq!(short_human_duration(59), "59s");
        assert_eq!(short_human_duration(3599), "59m");
        assert_eq!(short_human_duration(23 * 3600 + 3599), "23h");
        assert_eq!(short_human_duration(48 * 3600), "2d");
        assert_eq!(short_human_duration(800 * 24 * 3600), "2y");
    }

    #[test]
    fn rows_and_rendering() {
        let t = Token {
            id: "abcdef".into(),
            secret: "0123456789abcdef".into(),
        };
        let created = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let s = secret_object(&t, &TokenSpec::default(), created);
        let now = k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + 3600).unwrap();
        let r = row(&s, now).unwrap();
        assert_eq!(
            r,
            [
                "abcdef.0123456789abcdef",
                "23h",
                "2027-01-16T08:00:00Z",
                "authentication,signing",
                "<none>",
                "system:bootstrappers:k3rs:default-node-token",
            ]
            .map(str::to_string)
        );
        let forever = secret_object(
            &t,
            &TokenSpec {
                ttl: None,
                description: "agents".into(),
                usages: vec![],
                groups: vec![],
            },
            created,
        );
        let f = row(&forever, now).unwrap();
        assert_eq!(
            &f[1..],
            ["<forever>", "<never>", "<none>", "agents", "<none>"]
        );
        assert_eq!(
            render(&[r]),
            "TOKEN                     TTL   EXPIRES                USAGES                   DESCRIPTION   EXTRA GROUPS\n\
             abcdef.0123456789abcdef   23h   2027-01-16T08:00:00Z   authentication,signing   <none>        system:bootstrappers:k3rs:default-node-token\n"
        );
        let mut opaque = s.clone();
        opaque["type"] = "Opaque".into();
        assert_eq!(row(&opaque, now), None);
    }
}

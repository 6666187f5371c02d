//! crictl's tables (`ps`, `pods`, `images`) from CRI replies: pure formatting.

use crate::cri::pb;

/// How many characters of an id the tables show (crictl's truncation).
const SHORT_ID: usize = 13;

/// `id` cut to [`SHORT_ID`] characters (a `sha256:` prefix dropped first).
pub fn short_id(id: &str) -> &str {
    let id = id.strip_prefix("sha256:").unwrap_or(id);
    id.get(..SHORT_ID).unwrap_or(id)
}

/// How long before `now_ns` the runtime timestamp `at_ns` (nanoseconds) was, as crictl's
/// CREATED column says it (`12 seconds ago`, `3 minutes ago`, …).
pub fn ago(at_ns: i64, now_ns: i64) -> String {
    let secs = (now_ns.saturating_sub(at_ns) / 1_000_000_000).max(0);
    let (n, unit) = match secs {
        s if s < 60 => (s, "second"),
        s if s < 3600 => (s / 60, "minute"),
        s if s < 86_400 => (s / 3600, "hour"),
        s => (s / 86_400, "day"),
    };
    format!("{n} {unit}{} ago", if n == 1 { "" } else { "s" })
}

fn container_state(state: i32) -> &'static str {
    match pb::ContainerState::try_from(state) {
        Ok(pb::ContainerState::ContainerCreated) => "Created",
        Ok(pb::ContainerState::ContainerRunning) => "Running",
        Ok(pb::ContainerState::ContainerExited) => "Exited",
        _ => "Unknown",
    }
}

fn sandbox_state(state: i32) -> &'static str {
    match pb::PodSandboxState::try_from(state) {
        Ok(pb::PodSandboxState::SandboxReady) => "Ready",
        _ => "NotReady",
    }
}

/// Left-aligned columns separated by three spaces, like crictl's tabwriter output.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<w$}   "));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// `crictl ps`: containers with their pod's name, newest first.
pub fn containers(list: &[pb::Container], pods: &[pb::PodSandbox], now_ns: i64) -> String {
    let mut list: Vec<&pb::Container> = list.iter().collect();
    list.sort_by_key(|c| std::cmp::Reverse(c.created_at));
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|c| {
            let meta = c.metadata.clone().unwrap_or_default();
            let pod = pods
                .iter()
                .find(|p| p.id == c.pod_sandbox_id)
                .and_then(|p| p.metadata.as_ref())
                .map(|m| m.name.clone())
                .unwrap_or_default();
            let image = c
                .image
                .as_ref()
                .map(|i| i.image.clone())
                .filter(|i| !i.is_empty())
                .unwrap_or_else(|| c.image_ref.clone());
            vec![
                short_id(&c.id).to_string(),
                short_id(&image).to_string(),
                ago(c.created_at, now_ns),
                container_state(c.state).to_string(),
                meta.name,
                meta.attempt.to_string(),
                short_id(&c.pod_sandbox_id).to_string(),
                pod,
            ]
        })
        .collect();
    render(
        &[
            "CONTAINER",
            "IMAGE",
            "CREATED",
            "STATE",
            "NAME",
            "ATTEMPT",
            "POD ID",
            "POD",
        ],
        &rows,
    )
}

/// `crictl pods`: pod sandboxes, newest first.
pub fn pods(list: &[pb::PodSandbox], now_ns: i64) -> String {
    let mut list: Vec<&pb::PodSandbox> = list.iter().collect();
    list.sort_by_key(|p| std::cmp::Reverse(p.created_at));
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|p| {
            let meta = p.metadata.clone().unwrap_or_default();
            let handler = if p.runtime_handler.is_empty() {
                "(default)".to_string()
            } else {
                p.runtime_handler.clone()
            };
            vec![
                short_id(&p.id).to_string(),
                ago(p.created_at, now_ns),
                sandbox_state(p.state).to_string(),
                meta.name,
                meta.namespace,
                meta.attempt.to_string(),
                handler,
            ]
        })
        .collect();
    render(
        &[
            "POD ID",
            "CREATED",
            "STATE",
            "NAME",
            "NAMESPACE",
            "ATTEMPT",
            "RUNTIME",
        ],
        &rows,
    )
}

/// An image size as crictl prints it (`4.26MB`: decimal units, 3 significant digits).
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    let digits = if v >= 100.0 || unit == 0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.digits$}{}", UNITS[unit])
}

/// `crictl images`: one row per tag (`<none>` for an untagged image), sorted by name.
pub fn images(list: &[pb::Image]) -> String {
    let mut rows: Vec<Vec<String>> = Vec::new();
    for image in list {
        let id = short_id(&image.id).to_string();
        let size = size(image.size);
        if image.repo_tags.is_empty() {
            let repo = image
                .repo_digests
                .first()
                .and_then(|d| d.split('@').next())
                .unwrap_or("<none>");
            rows.push(vec![repo.to_string(), "<none>".into(), id, size]);
            continue;
        }
        for tag in &image.repo_tags {
            let (repo, tag) = match tag.rsplit_once(':') {
                Some((repo, t)) if !t.contains('/') => (repo, t),
                _ => (tag.as_str(), "<none>"),
            };
            rows.push(vec![repo.into(), tag.into(), id.clone(), size.clone()]);
        }
    }
    rows.sort();
    render(&["IMAGE", "TAG", "IMAGE ID", "SIZE"], &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_cut_like_crictls() {
        assert_eq!(short_id("sha256:0123456789abcdef0123"), "0123456789abc");
        assert_eq!(short_id("abc"), "abc");
        assert_eq!(short_id(""), "");
    }

    #[test]
    fn ages_and_sizes_read_as_crictls() {
        let s = 1_000_000_000;
        assert_eq!(ago(0, 12 * s), "12 seconds ago");
        assert_eq!(ago(0, 60 * s), "1 minute ago");
        assert_eq!(ago(0, 7300 * s), "2 hours ago");
        assert_eq!(ago(0, 3 * 86_400 * s), "3 days ago");
        assert_eq!(
            ago(10 * s, 0),
            "0 seconds ago",
            "a clock behind the runtime's"
        );
        assert_eq!(size(999), "999B");
        assert_eq!(size(4_260_000), "4.26MB");
        assert_eq!(size(31_500_000), "31.5MB");
        assert_eq!(size(123_000_000_000), "123GB");
    }

    #[test]
    fn tables_list_newest_first_with_the_pod_name() {
        let s = 1_000_000_000;
        let pod = pb::PodSandbox {
            id: "p0123456789abcdef".into(),
            metadata: Some(pb::PodSandboxMetadata {
                name: "web".into(),
                namespace: "default".into(),
                ..Default::default()
            }),
            created_at: 5 * s,
            ..Default::default()
        };
        let container = |id: &str, name: &str, at: i64| pb::Container {
            id: id.into(),
            pod_sandbox_id: pod.id.clone(),
            metadata: Some(pb::ContainerMetadata {
                name: name.into(),
                attempt: 1,
            }),
            image: Some(pb::ImageSpec {
                image: "docker.io/library/busybox:1.35".into(),
                ..Default::default()
            }),
            state: pb::ContainerState::ContainerRunning as i32,
            created_at: at,
            ..Default::default()
        };
        let out = containers(
            &[
                container("c-old", "old", 6 * s),
                container("c-new", "new", 8 * s),
            ],
            std::slice::from_ref(&pod),
            10 * s,
        );
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].starts_with("CONTAINER   IMAGE"), "{out}");
        assert!(lines[1].starts_with("c-new"), "{out}");
        assert!(
            lines[1].contains("2 seconds ago") && lines[1].ends_with("p0123456789ab   web"),
            "{out}"
        );
        assert!(lines[2].contains("Running   old "), "{out}");
        let out = pods(&[pod], 10 * s);
        assert!(
            out.lines()
                .nth(1)
                .unwrap()
                .contains("Ready   web    default     0         (default)"),
            "{out}"
        );
    }

    #[test]
    fn images_have_one_row_per_tag() {
        let out = images(&[
            pb::Image {
                id: "sha256:aaaaaaaaaaaaaaaaaaaa".into(),
                repo_tags: vec![
                    "docker.io/library/busybox:1.35".into(),
                    "localhost:5000/b:x".into(),
                ],
                size: 4_260_000,
                ..Default::default()
            },
            pb::Image {
                id: "sha256:bbbbbbbbbbbbbbbbbbbb".into(),
                repo_digests: vec!["docker.io/k3rs/pause@sha256:cc".into()],
                ..Default::default()
            },
        ]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "IMAGE                       TAG      IMAGE ID        SIZE"
        );
        assert_eq!(
            lines[1],
            "docker.io/k3rs/pause        <none>   bbbbbbbbbbbbb   0B"
        );
        assert_eq!(
            lines[2],
            "docker.io/library/busybox   1.35     aaaaaaaaaaaaa   4.26MB"
        );
        assert_eq!(
            lines[3],
            "localhost:5000/b            x        aaaaaaaaaaaaa   4.26MB"
        );
    }
}

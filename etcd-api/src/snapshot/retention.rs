//! Which snapshots to keep (pure), and the `ls` table.

/// The name of a snapshot taken at `unix_secs`: `<base>-<node>-<unix seconds>` (k3s's).
pub fn snapshot_name(base: &str, node: &str, unix_secs: i64) -> String {
    format!("{base}-{node}-{unix_secs}")
}

/// The time in a snapshot's name, if it is one of `<base>-<node>-`'s.
fn taken_at(name: &str, prefix: &str) -> Option<i64> {
    let secs = name.strip_prefix(prefix)?;
    (!secs.is_empty() && secs.bytes().all(|b| b.is_ascii_digit()))
        .then(|| secs.parse().ok())
        .flatten()
}

/// The snapshots of `<base>-<node>-` beyond the newest `keep` (newest by the time in the
/// name, then by name), oldest first. Other files are never pruned. `keep` 0 keeps all, as
/// k3s treats a retention of 0.
pub fn to_prune(names: &[String], base: &str, node: &str, keep: usize) -> Vec<String> {
    if keep == 0 {
        return Vec::new();
    }
    let prefix = format!("{base}-{node}-");
    let mut ours: Vec<(i64, &String)> = names
        .iter()
        .filter_map(|n| taken_at(n, &prefix).map(|t| (t, n)))
        .collect();
    ours.sort();
    let excess = ours.len().saturating_sub(keep);
    ours[..excess].iter().map(|(_, n)| (*n).clone()).collect()
}

/// One `ls` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// The snapshot's name.
    pub name: String,
    /// `file://` URL of the snapshot.
    pub location: String,
    /// Its size in bytes.
    pub size: u64,
    /// Unix seconds.
    pub created: i64,
}

/// k3s's `etcd-snapshot ls` table: Name, Location, Size, Created (RFC 3339, UTC), columns
/// aligned with one space of padding (k3s's tabwriter).
pub fn table(rows: &[Listed]) -> String {
    let created = |s: i64| {
        k8s_openapi::jiff::Timestamp::from_second(s)
            .map_or_else(|_| s.to_string(), |t| t.to_string())
    };
    let cells: Vec<[String; 4]> = std::iter::once([
        "Name".to_string(),
        "Location".to_string(),
        "Size".to_string(),
        "Created".to_string(),
    ])
    .chain(rows.iter().map(|r| {
        [
            r.name.clone(),
            r.location.clone(),
            r.size.to_string(),
            created(r.created),
        ]
    }))
    .collect();
    let widths: Vec<usize> = (0..4)
        .map(|i| cells.iter().map(|c| c[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for c in &cells {
        let line = format!(
            "{:w0$} {:w1$} {:w2$} {}",
            c[0],
            c[1],
            c[2],
            c[3],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn prunes_the_oldest_of_one_name_and_node_only() {
        let all = names(&[
            "etcd-snapshot-n1-1000",
            "etcd-snapshot-n1-900",
            "etcd-snapshot-n1-1100",
            "etcd-snapshot-n1-20",
            "etcd-snapshot-n2-10",
            "on-demand-n1-5",
            "etcd-snapshot-n1-abc",
            "etcd-snapshot-n1-",
            "etcd-snapshot-n1-1200.part",
        ]);
        assert_eq!(
            to_prune(&all, "etcd-snapshot", "n1", 2),
            names(&["etcd-snapshot-n1-20", "etcd-snapshot-n1-900"])
        );
        assert_eq!(
            to_prune(&all, "etcd-snapshot", "n1", 4),
            Vec::<String>::new()
        );
        assert_eq!(
            to_prune(&all, "etcd-snapshot", "n1", 0),
            Vec::<String>::new()
        );
        assert_eq!(to_prune(&all, "on-demand", "n1", 1), Vec::<String>::new());
        assert_eq!(
            to_prune(&all, "etcd-snapshot", "n2", 1),
            Vec::<String>::new()
        );
        assert_eq!(snapshot_name("on-demand", "n1", 7), "on-demand-n1-7");
    }

    #[test]
    fn table_is_aligned_like_k3s() {
        let rows = [
            Listed {
                name: "on-demand-n1-1700000000".into(),
                location: "file:///d/on-demand-n1-1700000000".into(),
                size: 2048,
                created: 1_700_000_000,
            },
            Listed {
                name: "x".into(),
                location: "file:///d/x".into(),
                size: 5,
                created: 0,
            },
        ];
        assert_eq!(
            table(&rows),
            "Name                    Location                          Size Created\n\
             on-demand-n1-1700000000 file:///d/on-demand-n1-1700000000 2048 2023-11-14T22:13:20Z\n\
             x                       file:///d/x                       5    1970-01-01T00:00:00Z\n"
        );
    }
}

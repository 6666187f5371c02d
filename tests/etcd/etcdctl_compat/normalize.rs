//! Normalizes etcdctl output so that two stores can be compared: only the things that are
//! legitimately different between two servers are replaced — lease IDs (mapped to `<LEASEn>` in
//! order of grant), member/cluster IDs (also in alarms), member names and peer URLs, raft term/index, db sizes,
//! the server version, the endpoint URL, timings and the client's log timestamps. Revisions,
//! keys, values, versions, counts, error texts and exit codes are compared exactly.

use std::path::Path;

use regex::{Captures, Regex};
use serde_json::Value;

use crate::common::Endpoint;

#[derive(Debug)]
pub struct Normalizer {
    url: String,
    addr: String,
    snap: String,
    /// Lease IDs as etcdctl prints them (`%016x`), in order of grant.
    leases: Vec<String>,
    re_lease: Regex,
    re_granted: Regex,
    re_remaining: Regex,
    re_attached: Regex,
    re_took: Regex,
    re_fields_lease: Regex,
    re_fields_hdr: Regex,
    re_alarm_member: Regex,
}

impl Normalizer {
    pub fn new(ep: &Endpoint, snap: &Path) -> Normalizer {
        Normalizer {
            url: ep.url.clone(),
            addr: ep.addr().to_string(),
            snap: snap.display().to_string(),
            leases: Vec::new(),
            re_lease: Regex::new(r"\blease ([0-9a-f]{16})\b").unwrap(),
            re_granted: Regex::new(r"\blease ([0-9a-f]{16}) granted with TTL").unwrap(),
            re_remaining: Regex::new(r"remaining\(-?\d+s\)").unwrap(),
            re_attached: Regex::new(r"attached keys\(\[([^\]]*)\]\)").unwrap(),
            re_took: Regex::new(r"took = \S+").unwrap(),
            re_fields_lease: Regex::new(r#"^"(Prev)?Lease" : (\d+)$"#).unwrap(),
            re_fields_hdr: Regex::new(r#"^"(ClusterID|MemberID|RaftTerm|Revision)" : \d+$"#)
                .unwrap(),
            re_alarm_member: Regex::new(r"memberID:\d+").unwrap(),
        }
    }

    /// Lease IDs granted so far (hex, as etcdctl prints and accepts them), in order.
    pub fn leases(&self) -> &[String] {
        &self.leases
    }

    /// Remembers the lease IDs granted in `stdout` (`lease <id> granted with TTL(..)`).
    pub fn learn_leases(&mut self, stdout: &str) {
        for c in self.re_granted.captures_iter(stdout) {
            let id = c[1].to_string();
            if !self.leases.contains(&id) {
                self.leases.push(id);
            }
        }
    }

    fn lease_name_hex(&self, hex: &str) -> Option<String> {
        let i = self.leases.iter().position(|l| l == hex)?;
        Some(format!("<LEASE{}>", i + 1))
    }

    fn lease_name_dec(&self, dec: i64) -> Option<String> {
        let i = self
            .leases
            .iter()
            .position(|l| i64::from_str_radix(l, 16).ok() == Some(dec))?;
        Some(format!("<LEASE{}>", i + 1))
    }

    /// The normalized text of one run: stdout, then stderr, then the exit status.
    pub fn output(
        &self,
        command: &str,
        code: Option<i32>,
        stdout: &str,
        stderr: &str,
        background: bool,
    ) -> String {
        let mut out = self.stdout(command, &self.paths(stdout), background);
        let err = self.stderr(&self.paths(stderr));
        if !err.is_empty() {
            out.push_str("[stderr]\n");
            out.push_str(&err);
        }
        out.push_str(&match (code, background) {
            (Some(c), _) => format!("[exit {c}]\n"),
            (None, true) => "[still running when stopped]\n".to_string(),
            (None, false) => "[killed: no exit within the timeout]\n".to_string(),
        });
        out
    }

    fn paths(&self, s: &str) -> String {
        s.replace(&self.snap, "<SNAP>")
            .replace(&self.url, "<ENDPOINT>")
            .replace(&self.addr, "<ADDR>")
    }

    fn stdout(&self, command: &str, s: &str, background: bool) -> String {
        if command.contains("-w json") {
            if let Ok(mut v) = serde_json::from_str::<Value>(s.trim()) {
                self.json(&mut v, "");
                return serde_json::to_string_pretty(&v).unwrap() + "\n";
            }
        }
        if command.contains("-w table") {
            return table(s);
        }
        let columns: &[usize] = if command.starts_with("endpoint status") {
            // endpoint, ID, version, db size, leader, learner, term, index, applied, errors
            &[1, 2, 3, 6, 7, 8]
        } else if command.starts_with("member list") {
            // ID, status, name, peer URLs, client URLs, learner
            &[0, 2, 3]
        } else {
            &[]
        };
        let mut lines: Vec<String> = Vec::new();
        let mut lease_list = false;
        for line in s.lines() {
            if background && self.re_fields_hdr.is_match(line) {
                // Response headers of a watch depend on how the server batches events.
                continue;
            }
            let mut line = self.text_line(line);
            if !columns.is_empty() {
                line = blank_columns(&line, ", ", columns);
            }
            if lease_list && self.leases.iter().any(|l| line.trim() == l) {
                line = self.lease_name_hex(line.trim()).unwrap();
            }
            if line.starts_with("found ") && line.ends_with(" leases") {
                lease_list = true;
            }
            lines.push(line);
        }
        if lease_list {
            // etcd lists leases in map order.
            lines[1..].sort();
        }
        lines.into_iter().map(|l| l + "\n").collect()
    }

    fn text_line(&self, line: &str) -> String {
        let line =
            self.re_lease
                .replace_all(line, |c: &Captures| match self.lease_name_hex(&c[1]) {
                    Some(name) => format!("lease {name}"),
                    None => c[0].to_string(),
                });
        let line = self.re_remaining.replace_all(&line, "remaining(<r>s)");
        let line = self.re_attached.replace_all(&line, |c: &Captures| {
            let mut keys: Vec<&str> = c[1].split_whitespace().collect();
            keys.sort();
            format!("attached keys([{}])", keys.join(" "))
        });
        let line = self.re_took.replace_all(&line, "took = <took>");
        let line = self.re_alarm_member.replace_all(&line, "memberID:<ID>");
        let line = self.re_fields_lease.replace_all(&line, |c: &Captures| {
            let dec: i64 = c[2].parse().unwrap_or(0);
            let name = self.lease_name_dec(dec).unwrap_or_else(|| c[2].to_string());
            format!("\"{}Lease\" : {name}", c.get(1).map_or("", |m| m.as_str()))
        });
        let mut line = line.into_owned();
        for hdr in ["ClusterID", "MemberID", "RaftTerm"] {
            if line.starts_with(&format!("\"{hdr}\" : ")) {
                line = format!("\"{hdr}\" : <{hdr}>");
            }
        }
        line
    }

    fn json(&self, v: &mut Value, parent: &str) {
        match v {
            Value::Array(items) => items.iter_mut().for_each(|i| self.json(i, parent)),
            Value::Object(map) => {
                let self_id = map
                    .get("header")
                    .and_then(|h| h.get("member_id"))
                    .and_then(Value::as_u64);
                for (k, child) in map.iter_mut() {
                    let replace = matches!(
                        (parent, k.as_str()),
                        ("header", "cluster_id" | "member_id" | "raft_term")
                            | (
                                "Status",
                                "version"
                                    | "dbSize"
                                    | "dbSizeInUse"
                                    | "raftIndex"
                                    | "raftTerm"
                                    | "raftAppliedIndex"
                            )
                            | ("members", "ID" | "name" | "peerURLs")
                            | ("alarms", "memberID")
                            | (_, "took")
                    );
                    if replace {
                        *child = Value::String(format!("<{k}>"));
                    } else if k == "errors" {
                        // Status lists raised alarms with their member IDs.
                        for e in child.as_array_mut().into_iter().flatten() {
                            if let Some(text) = e.as_str() {
                                let text = self.re_alarm_member.replace_all(text, "memberID:<ID>");
                                *e = Value::String(text.into_owned());
                            }
                        }
                    } else if parent == "Status" && k == "leader" {
                        let is_self = self_id.is_some() && child.as_u64() == self_id;
                        *child = Value::String(if is_self { "<self>" } else { "<other>" }.into());
                    } else if matches!(k.as_str(), "lease" | "ID" | "id") && child.is_number() {
                        if let Some(name) = child.as_i64().and_then(|d| self.lease_name_dec(d)) {
                            *child = Value::String(name);
                        }
                    } else {
                        self.json(child, k);
                    }
                }
            }
            _ => {}
        }
    }

    fn stderr(&self, s: &str) -> String {
        let mut out = String::new();
        for line in s.lines() {
            match serde_json::from_str::<Value>(line) {
                Ok(Value::Object(log)) if log.contains_key("level") => {
                    let field = |k: &str| log.get(k).and_then(Value::as_str).unwrap_or("");
                    out.push_str(&format!("[log {}] {}", field("level"), field("msg")));
                    if !field("error").is_empty() {
                        out.push_str(&format!(" error={}", field("error")));
                    }
                    out.push('\n');
                }
                _ => {
                    out.push_str(&self.text_line(line));
                    out.push('\n');
                }
            }
        }
        out
    }
}

/// Replaces the cells at `columns` (0-based) of a `sep`-separated line with `<n>`.
fn blank_columns(line: &str, sep: &str, columns: &[usize]) -> String {
    line.split(sep)
        .enumerate()
        .map(|(i, cell)| {
            if columns.contains(&i) {
                format!("<{i}>")
            } else {
                cell.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(sep)
}

/// Column headers whose cells differ legitimately between two servers.
const VOLATILE_COLUMNS: &[&str] = &[
    "ID",
    "VERSION",
    "DB SIZE",
    "RAFT TERM",
    "RAFT INDEX",
    "RAFT APPLIED INDEX",
    "NAME",
    "PEER ADDRS",
    "TOOK",
];

/// An etcdctl table without borders or padding, volatile columns blanked.
fn table(s: &str) -> String {
    let mut header: Vec<String> = Vec::new();
    let mut out = String::new();
    for line in s.lines() {
        if line.starts_with('+') {
            continue;
        }
        if !line.starts_with('|') {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let cells: Vec<String> = line
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect();
        if header.is_empty() {
            header = cells.clone();
            out.push_str(&cells.join(" | "));
        } else {
            let row: Vec<String> = cells
                .iter()
                .enumerate()
                .map(|(i, c)| match header.get(i) {
                    Some(h) if VOLATILE_COLUMNS.contains(&h.as_str()) => format!("<{h}>"),
                    _ => c.clone(),
                })
                .collect();
            out.push_str(&row.join(" | "));
        }
        out.push('\n');
    }
    out
}

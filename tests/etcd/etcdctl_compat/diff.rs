//! A readable report of where two transcripts differ.

use super::runner::Record;

/// `None` if both transcripts are identical, else a report of every differing step with a
/// line diff of the two outputs.
pub fn compare(
    left_name: &str,
    left: &[Record],
    right_name: &str,
    right: &[Record],
) -> Option<String> {
    let mut report = String::new();
    let mut differing = 0;
    for (i, (l, r)) in left.iter().zip(right).enumerate() {
        assert_eq!(
            l.command, r.command,
            "both transcripts come from the same script"
        );
        if l.output == r.output {
            continue;
        }
        differing += 1;
        report.push_str(&format!("\n=== step {}: etcdctl {}\n", i + 1, l.command));
        report.push_str(&format!("--- {left_name}\n+++ {right_name}\n"));
        report.push_str(&line_diff(&l.output, &r.output));
    }
    if left.len() != right.len() {
        report.push_str(&format!(
            "\ntranscript lengths differ: {} vs {}\n",
            left.len(),
            right.len()
        ));
        differing += 1;
    }
    (differing > 0).then(|| format!("{differing} of {} steps differ:{report}", left.len()))
}

/// A unified-style diff (every line, `-` left only, `+` right only) by longest common subsequence.
pub fn line_diff(a: &str, b: &str) -> String {
    let a: Vec<&str> = a.lines().collect();
    let b: Vec<&str> = b.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            out.push_str(&format!("  {}\n", a[i]));
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            out.push_str(&format!("+ {}\n", b[j]));
            j += 1;
        } else {
            out.push_str(&format!("- {}\n", a[i]));
            i += 1;
        }
    }
    out
}

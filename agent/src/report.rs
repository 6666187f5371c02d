//! Error messages for the log: an error with its whole `source()` chain on one line.

/// `e`, then each of its sources, joined with `: `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

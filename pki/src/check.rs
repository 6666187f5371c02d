//! `k3rs certificate check`: every certificate file of a node, its subject, usages and expiry,
//! and whether it is fine, due for renewal (within [`RENEW_BEFORE`] of expiry, which the next
//! start renews), expired or not valid yet, printed like k3s's `certificate check` (text lines
//! or a table). The status decision is pure ([`status`]); reading files is separate.

use std::path::{Path, PathBuf};

use k8s_openapi::jiff::Timestamp;

use super::renew::RENEW_BEFORE;

/// A certificate's state at some instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Valid now and beyond the renewal window.
    Ok,
    /// Expires within the renewal window: renewed at the next start (leaves) or soon
    /// unusable (CAs).
    Warning,
    /// Past `notAfter`.
    Expired,
    /// Before `notBefore`.
    NotYetValid,
}

impl Status {
    /// The table's STATUS column (k3s's words).
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Warning => "WARNING",
            Status::Expired => "EXPIRED",
            Status::NotYetValid => "NOT YET VALID",
        }
    }
}

/// The state at `now` (unix seconds) of a certificate valid from `not_before` to `not_after`,
/// with renewal `window` seconds ahead of expiry.
pub fn status(not_before: i64, not_after: i64, now: i64, window: i64) -> Status {
    if now < not_before {
        Status::NotYetValid
    } else if now >= not_after {
        Status::Expired
    } else if not_after - now <= window {
        Status::Warning
    } else {
        Status::Ok
    }
}

/// What `check` reports of one certificate file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertInfo {
    /// The file, relative to the data dir.
    pub file: String,
    /// The subject as `CN=…,O=…`.
    pub subject: String,
    /// `CertSign` for CAs, else `ServerAuth`/`ClientAuth`.
    pub usages: Vec<String>,
    /// `notBefore`, unix seconds.
    pub not_before: i64,
    /// `notAfter`, unix seconds.
    pub not_after: i64,
}

/// The certificate files under `<data_dir>/server/tls` and `<data_dir>/agent` (CAs and
/// leaves), sorted, skipping backups (`tls-<ts>`) of earlier rotations.
pub fn files(data_dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in [data_dir.join("server/tls"), data_dir.join("agent")] {
        walk(&dir, &mut out);
    }
    out.sort();
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            // The agent's containerd state holds no certificates of ours.
            Ok(t) if t.is_dir() && entry.file_name() != "containerd" => walk(&path, out),
            Ok(t) if t.is_file() && path.extension().is_some_and(|e| e == "crt") => out.push(path),
            _ => {}
        }
    }
}

/// Why a certificate file could not be inspected.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// The file could not be read.
    #[error("{}: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The read error.
        #[source]
        source: std::io::Error,
    },
    /// The file holds no PEM block.
    #[error("{}: not a PEM certificate: {error}", .path.display())]
    Pem {
        /// The file.
        path: PathBuf,
        /// The PEM parser's error.
        error: x509_parser::nom::Err<x509_parser::error::PEMError>,
    },
    /// The PEM block is not an X.509 certificate.
    #[error("{}: not a certificate: {error}", .path.display())]
    Certificate {
        /// The file.
        path: PathBuf,
        /// The X.509 parser's error.
        error: x509_parser::nom::Err<x509_parser::error::X509Error>,
    },
}

/// Reads the first certificate of a PEM file.
pub fn inspect(data_dir: &Path, path: &Path) -> Result<CertInfo, InspectError> {
    let bytes = std::fs::read(path).map_err(|source| InspectError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&bytes).map_err(|error| InspectError::Pem {
        path: path.to_path_buf(),
        error,
    })?;
    let cert = pem
        .parse_x509()
        .map_err(|error| InspectError::Certificate {
            path: path.to_path_buf(),
            error,
        })?;
    let mut usages = Vec::new();
    if cert.is_ca() {
        usages.push("CertSign".to_string());
    }
    if let Ok(Some(eku)) = cert.extended_key_usage() {
        if eku.value.server_auth {
            usages.push("ServerAuth".to_string());
        }
        if eku.value.client_auth {
            usages.push("ClientAuth".to_string());
        }
    }
    let mut parts: Vec<String> = cert
        .subject()
        .iter_rdn()
        .flat_map(|rdn| rdn.iter())
        .filter_map(|atv| {
            let key = match atv.attr_type().to_id_string().as_str() {
                "2.5.4.3" => "CN",
                "2.5.4.10" => "O",
                _ => return None,
            };
            Some(format!("{key}={}", atv.as_str().ok()?))
        })
        .collect();
    // Most specific first, as k3s prints it (CN before O).
    parts.reverse();
    let subject = parts.join(",");
    Ok(CertInfo {
        file: path
            .strip_prefix(data_dir)
            .unwrap_or(path)
            .display()
            .to_string(),
        subject,
        usages,
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
    })
}

/// `--output text`: one line per certificate.
pub fn render_text(certs: &[CertInfo], now: i64) -> String {
    let window = RENEW_BEFORE.as_secs() as i64;
    let mut out = String::new();
    for c in certs {
        let at = rfc3339(c.not_after);
        let what = match status(c.not_before, c.not_after, now, window) {
            Status::Ok => format!("is ok, expires at {at}"),
            Status::Warning => format!("will expire within 90 days at {at}"),
            Status::Expired => format!("expired at {at}"),
            Status::NotYetValid => format!("is not valid before {}", rfc3339(c.not_before)),
        };
        out.push_str(&format!("{}: certificate {} {what}\n", c.file, c.subject));
    }
    out
}

/// `--output table`: k3s's columns.
pub fn render_table(certs: &[CertInfo], now: i64) -> String {
    let window = RENEW_BEFORE.as_secs() as i64;
    let header = [
        "FILENAME",
        "SUBJECT",
        "USAGES",
        "EXPIRES",
        "RESIDUAL TIME",
        "STATUS",
    ];
    let mut rows: Vec<Vec<String>> = vec![
        header.iter().map(|s| s.to_string()).collect(),
        header.iter().map(|s| "-".repeat(s.len())).collect(),
    ];
    for c in certs {
        rows.push(vec![
            c.file.clone(),
            c.subject.clone(),
            c.usages.join(","),
            expires(c.not_after),
            residual(c.not_after - now),
            status(c.not_before, c.not_after, now, window)
                .as_str()
                .to_string(),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|i| rows.iter().map(|r| r[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("   ").trim_end());
        out.push('\n');
    }
    out
}

fn rfc3339(t: i64) -> String {
    Timestamp::from_second(t)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_else(|_| t.to_string())
}

fn expires(t: i64) -> String {
    Timestamp::from_second(t)
        .map(|t| t.strftime("%b %d, %Y %H:%M UTC").to_string())
        .unwrap_or_else(|_| t.to_string())
}

/// Time left, in the largest whole unit (`1 year`, `89 days`, `5 hours`); `expired` after.
pub fn residual(secs: i64) -> String {
    if secs <= 0 {
        return "expired".to_string();
    }
    let (n, unit) = match secs {
        s if s >= 365 * 86_400 => (s / (365 * 86_400), "year"),
        s if s >= 86_400 => (s / 86_400, "day"),
        s if s >= 3600 => (s / 3600, "hour"),
        s if s >= 60 => (s / 60, "minute"),
        s => (s, "second"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400;

    #[test]
    fn status_at_an_instant() {
        let w = 90 * DAY;
        assert_eq!(status(0, 365 * DAY, 10, w), Status::Ok);
        assert_eq!(status(0, 365 * DAY, 275 * DAY - 1, w), Status::Ok);
        assert_eq!(status(0, 365 * DAY, 275 * DAY, w), Status::Warning);
        assert_eq!(status(0, 365 * DAY, 365 * DAY, w), Status::Expired);
        assert_eq!(status(100, 365 * DAY, 99, w), Status::NotYetValid);
    }

    #[test]
    fn residual_times() {
        assert_eq!(residual(365 * DAY + 5), "1 year");
        assert_eq!(residual(89 * DAY + 3600), "89 days");
        assert_eq!(residual(5 * 3600), "5 hours");
        assert_eq!(residual(61), "1 minute");
        assert_eq!(residual(0), "expired");
    }

    fn info(file: &str, not_after: i64) -> CertInfo {
        CertInfo {
            file: file.into(),
            subject: "CN=system:admin,O=system:masters".into(),
            usages: vec!["ClientAuth".into()],
            not_before: 0,
            not_after,
        }
    }

    #[test]
    fn text_and_table() {
        let certs = [
            info("server/tls/client-admin.crt", 1_800_000_000),
            info("server/tls/old.crt", 1_700_000_000),
        ];
        let now = 1_700_000_000 + 1;
        assert_eq!(
            render_text(&certs, now),
            "server/tls/client-admin.crt: certificate CN=system:admin,O=system:masters is ok, \
             expires at 2027-01-15T08:00:00Z\n\
             server/tls/old.crt: certificate CN=system:admin,O=system:masters expired at \
             2023-11-14T22:13:20Z\n"
        );
        assert_eq!(
            render_table(&certs, now),
            "FILENAME                      SUBJECT                            USAGES       EXPIRES                  RESIDUAL TIME   STATUS\n\
             --------                      -------                            ------       -------                  -------------   ------\n\
             server/tls/client-admin.crt   CN=system:admin,O=system:masters   ClientAuth   Jan 15, 2027 08:00 UTC   3 years         OK\n\
             server/tls/old.crt            CN=system:admin,O=system:masters   ClientAuth   Nov 14, 2023 22:13 UTC   expired         EXPIRED\n"
        );
    }
}

//! Client-certificate chain verification, remembered per chain. The authenticators that check
//! a request's certificate against their own CA (the authenticating proxy's, the client CA)
//! run on every request, and every request of a keep-alive connection presents the same
//! chain: verifying its signatures each time was about 4 % of the server's CPU at 5,000
//! hollow nodes (docs/scale.md). Upstream kube-apiserver verifies per request; this gives the
//! same answers for less.
//!
//! # Guarantees
//! - A verdict is found only for exactly the same chain (every certificate's bytes, in order:
//!   equality, not a hash).
//! - A success is reused only while the time lies within every presented certificate's
//!   validity (notBefore..=notAfter): a certificate that expires is refused from that second
//!   on, as without the memory. Any verdict is reused for at most [`TTL_SECS`] after it was
//!   made, and not at a time before it was made (a clock stepped back verifies again).
//! - At most [`CAPACITY`] chains are remembered; a full memory first drops what is stale, else
//!   everything (a flood of distinct certificates costs verification, never memory).
//! - The verifier's trust anchors are fixed when it is built, so a verdict cannot outlive the
//!   CA it was checked against.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::ClientCertVerifier;

/// How long any verdict is reused, in seconds.
pub const TTL_SECS: u64 = 300;
/// The most chains remembered.
pub const CAPACITY: usize = 1024;

/// One remembered verdict.
#[derive(Debug, Clone)]
struct Verdict {
    /// The verification's error, if it failed.
    error: Option<String>,
    /// Reused while `from <= now <= until` (seconds since the epoch).
    from: u64,
    until: u64,
}

/// A client-certificate verifier with a memory of its verdicts.
#[derive(Debug)]
pub struct CachedVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    verdicts: Mutex<HashMap<Box<[CertificateDer<'static>]>, Verdict>>,
}

impl CachedVerifier {
    /// Remembers the verdicts of `inner`.
    pub fn new(inner: Arc<dyn ClientCertVerifier>) -> CachedVerifier {
        CachedVerifier {
            inner,
            verdicts: Mutex::new(HashMap::new()),
        }
    }

    /// Verifies `chain` (leaf first) at `now`: `Err` with the verifier's message when it does
    /// not chain to the CA or is outside its validity; an empty chain is an error.
    pub fn verify(&self, chain: &[CertificateDer<'static>], now: UnixTime) -> Result<(), String> {
        let Some((leaf, intermediates)) = chain.split_first() else {
            return Err("no client certificate".into());
        };
        let secs = now.as_secs();
        if let Some(v) = self.lock().get(chain) {
            if v.from <= secs && secs <= v.until {
                return v.error.clone().map_or(Ok(()), Err);
            }
        }
        let result = (self.inner)
            .verify_client_cert(leaf, intermediates, now)
            .map(|_| ())
            .map_err(|e| e.to_string());
        let ttl_end = secs.saturating_add(TTL_SECS);
        let verdict = match &result {
            Ok(()) => Verdict {
                error: None,
                from: secs,
                until: not_after(chain).map_or(secs, |t| t.min(ttl_end)),
            },
            Err(e) => Verdict {
                error: Some(e.clone()),
                from: secs,
                until: ttl_end,
            },
        };
        let mut verdicts = self.lock();
        if verdicts.len() >= CAPACITY {
            verdicts.retain(|_, v| v.from <= secs && secs <= v.until);
            if verdicts.len() >= CAPACITY {
                verdicts.clear();
            }
        }
        verdicts.insert(chain.into(), verdict);
        result
    }

    /// How many chains are remembered.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no chain is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<[CertificateDer<'static>]>, Verdict>> {
        self.verdicts.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The earliest notAfter of `chain`'s certificates (seconds since the epoch); `None` if one
/// does not parse or is before 1970. (The verification itself checked notBefore.)
fn not_after(chain: &[CertificateDer<'_>]) -> Option<u64> {
    chain.iter().try_fold(u64::MAX, |earliest, cert| {
        let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).ok()?;
        let not_after = u64::try_from(parsed.validity().not_after.timestamp()).ok()?;
        Some(earliest.min(not_after))
    })
}

#[cfg(test)]
mod tests;

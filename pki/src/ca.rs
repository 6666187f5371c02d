//! Certificate authorities and the leaf certificates they sign.

use std::net::IpAddr;
use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType, SerialNumber,
};

use super::files::{read_optional, write_atomic, PRIVATE, PUBLIC};
use super::Error;

/// Validity of a CA certificate.
pub const CA_YEARS: i32 = 10;
/// Validity of a leaf certificate.
pub const LEAF_YEARS: i32 = 1;

/// A CA that can sign leaves: its certificate (PEM, as on disk) and its signing key.
pub struct Authority {
    /// The CA certificate, PEM, byte for byte as on disk.
    pub cert_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Authority {
    /// Loads the existing CA `<stem>.crt`/`<stem>.key` under `dir` (never creates one).
    pub fn load(dir: &Path, stem: &str) -> Result<Authority, Error> {
        let crt = dir.join(format!("{stem}.crt"));
        let key = dir.join(format!("{stem}.key"));
        let missing = |path: &Path| Error::Incomplete {
            present: dir.to_path_buf(),
            missing: path.to_path_buf(),
        };
        let cert_pem = read_optional(&crt)?.ok_or_else(|| missing(&crt))?;
        let key_pem = read_optional(&key)?.ok_or_else(|| missing(&key))?;
        let signing_key = KeyPair::from_pem(&key_pem).map_err(|source| Error::Load {
            path: key.clone(),
            source,
        })?;
        let issuer = Issuer::from_ca_cert_pem(&cert_pem, signing_key)
            .map_err(|source| Error::Load { path: crt, source })?;
        Ok(Authority { cert_pem, issuer })
    }

    /// What signs certificates in this CA's name.
    pub fn issuer(&self) -> &Issuer<'static, KeyPair> {
        &self.issuer
    }
}

impl std::fmt::Debug for Authority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authority").finish_non_exhaustive()
    }
}

/// What a leaf certificate is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// `serverAuth` only.
    Server,
    /// `clientAuth` only.
    Client,
    /// Both (the etcd member certificates).
    ServerAndClient,
}

/// A leaf certificate to keep on disk.
#[derive(Debug, Clone)]
pub struct LeafSpec {
    /// The subject's CN (a user name for client certificates).
    pub common_name: String,
    /// The subject's O (a group for client certificates).
    pub organization: Option<String>,
    /// DNS SANs.
    pub dns_names: Vec<String>,
    /// IP SANs.
    pub ips: Vec<IpAddr>,
    /// The extended key usages.
    pub usage: Usage,
}

/// Loads the CA `<stem>.crt`/`<stem>.key` under `dir`, creating both when neither exists.
pub fn load_or_create_ca(
    dir: &Path,
    stem: &str,
    common_name_prefix: &str,
) -> Result<Authority, Error> {
    let crt = dir.join(format!("{stem}.crt"));
    let key = dir.join(format!("{stem}.key"));
    match (read_optional(&crt)?, read_optional(&key)?) {
        (Some(cert_pem), Some(key_pem)) => {
            let load = |source| Error::Load {
                path: crt.clone(),
                source,
            };
            let signing_key = KeyPair::from_pem(&key_pem).map_err(|source| Error::Load {
                path: key.clone(),
                source,
            })?;
            let issuer = Issuer::from_ca_cert_pem(&cert_pem, signing_key).map_err(load)?;
            Ok(Authority { cert_pem, issuer })
        }
        (None, None) => {
            let generate = |source| Error::Generate {
                what: crt.display().to_string(),
                source,
            };
            let signing_key = KeyPair::generate().map_err(generate)?;
            let now = unix_now();
            let mut params = CertificateParams::default();
            params.distinguished_name = dn(&format!("{common_name_prefix}@{now}"), None);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.key_usages = vec![
                KeyUsagePurpose::KeyCertSign,
                KeyUsagePurpose::CrlSign,
                KeyUsagePurpose::DigitalSignature,
            ];
            set_validity(&mut params, CA_YEARS);
            params.serial_number = Some(random_serial());
            let cert = params.self_signed(&signing_key).map_err(generate)?;
            // The key first: a certificate on disk always has its key.
            write_atomic(&key, signing_key.serialize_pem().as_bytes(), PRIVATE)?;
            let cert_pem = cert.pem();
            write_atomic(&crt, cert_pem.as_bytes(), PUBLIC)?;
            Ok(Authority {
                cert_pem,
                issuer: Issuer::new(params, signing_key),
            })
        }
        (Some(_), None) => Err(Error::Incomplete {
            present: crt,
            missing: key,
        }),
        (None, Some(_)) => Err(Error::Incomplete {
            present: key,
            missing: crt,
        }),
    }
}

/// Makes sure `<stem>.crt`/`<stem>.key` under `dir` exist, signing a new leaf with `ca` when
/// neither does. An existing pair is reused as is.
pub fn ensure_leaf(dir: &Path, stem: &str, spec: &LeafSpec, ca: &Authority) -> Result<(), Error> {
    ensure_leaf_renewing(dir, stem, spec, ca, super::renew::RENEW_BEFORE)
}

/// [`ensure_leaf`], reissuing an existing leaf that must be renewed `renew_before` ahead.
pub fn ensure_leaf_renewing(
    dir: &Path,
    stem: &str,
    spec: &LeafSpec,
    ca: &Authority,
    renew_before: std::time::Duration,
) -> Result<(), Error> {
    let crt = dir.join(format!("{stem}.crt"));
    let key = dir.join(format!("{stem}.key"));
    match (read_optional(&crt)?, key.exists()) {
        (Some(pem), true) => {
            let now = std::time::SystemTime::now();
            match super::renew::renewal_reason(
                &ca.cert_pem,
                pem.as_bytes(),
                spec,
                renew_before,
                now,
            ) {
                None => return Ok(()),
                Some(reason) => {
                    tracing::info!(cert = %crt.display(), %reason, "renewing certificate")
                }
            }
        }
        (Some(_), false) => {
            return Err(Error::Incomplete {
                present: crt,
                missing: key,
            })
        }
        (None, true) => {
            return Err(Error::Incomplete {
                present: key,
                missing: crt,
            })
        }
        (None, false) => {}
    }
    let generate = |source| Error::Generate {
        what: crt.display().to_string(),
        source,
    };
    let leaf_key = KeyPair::generate().map_err(generate)?;
    let mut params = CertificateParams::default();
    params.distinguished_name = dn(&spec.common_name, spec.organization.as_deref());
    params.subject_alt_names = sans(spec);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = match spec.usage {
        Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
        Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
        Usage::ServerAndClient => vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ],
    };
    params.use_authority_key_identifier_extension = true;
    set_validity(&mut params, LEAF_YEARS);
    params.serial_number = Some(random_serial());
    let cert = params.signed_by(&leaf_key, &ca.issuer).map_err(generate)?;
    write_atomic(&key, leaf_key.serialize_pem().as_bytes(), PRIVATE)?;
    write_atomic(&crt, cert.pem().as_bytes(), PUBLIC)?;
    Ok(())
}

fn dn(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    if let Some(o) = organization {
        dn.push(DnType::OrganizationName, o);
    }
    dn.push(DnType::CommonName, common_name);
    dn
}

fn sans(spec: &LeafSpec) -> Vec<SanType> {
    let mut out: Vec<SanType> = Vec::new();
    for name in &spec.dns_names {
        // A name that is not a valid IA5 string (odd hostnames) is skipped, not fatal.
        if let Ok(ia5) = name.clone().try_into() {
            let san = SanType::DnsName(ia5);
            if !out.contains(&san) {
                out.push(san);
            }
        }
    }
    for ip in &spec.ips {
        let san = SanType::IpAddress(*ip);
        if !out.contains(&san) {
            out.push(san);
        }
    }
    out
}

fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] &= 0x7f; // positive
    bytes[0] |= 0x01; // and no leading zero byte to strip
    SerialNumber::from_slice(&bytes)
}

/// Valid from the start of today (UTC) for `years` years (from February 29 to February 28
/// when the last year is not a leap year).
fn set_validity(params: &mut CertificateParams, years: i32) {
    let (y, m, d) = civil_from_days(unix_now().div_euclid(86_400));
    params.not_before = rcgen::date_time_ymd(y, m, d);
    params.not_after = rcgen::date_time_ymd(y + years, m, last_day(y + years, m, d));
}

/// `d`, or February 28 when `y` has no February 29.
fn last_day(y: i32, m: u8, d: u8) -> u8 {
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if m == 2 && d == 29 && !leap {
        28
    } else {
        d
    }
}

fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// Days since 1970-01-01 → (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y as i32, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_511), (2026, 2, 27));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn a_year_ends_on_the_same_day_except_after_a_leap_day() {
        // Certificates issued on the 29th to 31st once lost up to three days.
        assert_eq!(last_day(2027, 11, 29), 29);
        assert_eq!(last_day(2027, 12, 31), 31);
        assert_eq!(last_day(2029, 2, 29), 28);
        assert_eq!(last_day(2028, 2, 29), 29);
        assert_eq!(last_day(2100, 2, 29), 28);
        assert_eq!(last_day(2400, 2, 29), 29);
    }
}

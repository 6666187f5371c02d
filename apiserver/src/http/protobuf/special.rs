//! The JSON forms of the apimachinery types with their own marshalling: times, durations.

use super::Error;

/// meta/v1 Time: `2006-01-02T15:04:05Z` (seconds; upstream drops nanoseconds).
pub fn format_time(seconds: i64) -> Result<String, Error> {
    let ts = jiff::Timestamp::from_second(seconds)
        .map_err(|e| Error::Malformed(format!("time out of range: {e}")))?;
    Ok(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
}

/// meta/v1 MicroTime: `2006-01-02T15:04:05.000000Z`.
pub fn format_micro_time(seconds: i64, nanos: i32) -> Result<String, Error> {
    let seconds_part = format_time(seconds)?;
    let micros = nanos.clamp(0, 999_999_999) / 1000;
    Ok(format!(
        "{}.{micros:06}Z",
        seconds_part.trim_end_matches('Z')
    ))
}

/// `(seconds, nanos)` of an RFC 3339 time.
pub fn parse_time(s: &str) -> Option<(i64, i32)> {
    let ts: jiff::Timestamp = s.parse().ok()?;
    Some((ts.as_second(), ts.subsec_nanosecond()))
}

/// Go's `time.Duration.String()`: `1h2m3.5s`, `1.5ms`, `0s`.
pub fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".into();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let n = nanos.unsigned_abs();
    if n < 1_000_000_000 {
        let (unit, scale) = match n {
            n if n < 1_000 => return format!("{sign}{n}ns"),
            n if n < 1_000_000 => ("µs", 1_000),
            _ => ("ms", 1_000_000),
        };
        return format!("{sign}{}{unit}", fraction(n, scale));
    }
    let (h, rest) = (n / 3_600_000_000_000, n % 3_600_000_000_000);
    let (m, s) = (rest / 60_000_000_000, rest % 60_000_000_000);
    let mut out = sign.to_string();
    if h > 0 {
        out += &format!("{h}h");
    }
    if h > 0 || m > 0 {
        out += &format!("{m}m");
    }
    out + &format!("{}s", fraction(s, 1_000_000_000))
}

/// `n / scale` with the fraction's trailing zeros dropped (`1500, 1000` → `1.5`).
fn fraction(n: u64, scale: u64) -> String {
    let (whole, frac) = (n / scale, n % scale);
    if frac == 0 {
        return whole.to_string();
    }
    let width = scale.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// Parses Go's duration strings (`1h2m3.5s`, `300ms`, `-1.5h`) into nanoseconds.
pub fn parse_duration(s: &str) -> Option<i64> {
    let (sign, mut rest) = match s.strip_prefix('-') {
        Some(r) => (-1.0, r),
        None => (1.0, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest == "0" {
        return Some(0);
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|&e| e > 0)?;
        let number: f64 = rest[..end].parse().ok()?;
        rest = &rest[end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit_end..];
    }
    Some((sign * total).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_upstream_formats_them() {
        assert_eq!(format_time(0).unwrap(), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(1_700_000_000).unwrap(), "2023-11-14T22:13:20Z");
        assert_eq!(
            format_micro_time(1_700_000_000, 123_456_789).unwrap(),
            "2023-11-14T22:13:20.123456Z"
        );
        assert_eq!(
            parse_time("2023-11-14T22:13:20.123456Z"),
            Some((1_700_000_000, 123_456_000))
        );
        assert_eq!(parse_time("nope"), None);
    }

    #[test]
    fn durations_as_go_formats_them() {
        for (nanos, s) in [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (300_000_000, "300ms"),
            (1_000_000_000, "1s"),
            (3_723_500_000_000, "1h2m3.5s"),
            (60_000_000_000, "1m0s"),
            (-90_000_000_000, "-1m30s"),
        ] {
            assert_eq!(format_duration(nanos), s);
            assert_eq!(parse_duration(s), Some(nanos), "{s}");
        }
        assert_eq!(parse_duration("1x"), None);
    }
}

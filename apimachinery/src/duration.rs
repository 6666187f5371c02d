//! Durations written as Go's `time.ParseDuration` reads them (`1m30s`, `500ms`, `1.5h`), the
//! form upstream components' flags take.

use std::time::Duration;

/// Go's longest duration, in seconds.
const MAX_SECS: f64 = i64::MAX as f64 * 1e-9;

/// Parses a non-negative Go duration (an optional `+` sign); `None` when `s` is not one.
pub fn parse(s: &str) -> Option<Duration> {
    if s == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = s.strip_prefix('+').unwrap_or(s);
    let mut total = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        let value: f64 = num.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = tail;
    }
    // Go's durations end at 2^63 - 1 ns (about 292 years); longer ones do not parse there.
    if total > MAX_SECS {
        return None;
    }
    Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_forms() {
        assert_eq!(parse("40s"), Some(Duration::from_secs(40)));
        assert_eq!(parse("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(parse("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse("0"), Some(Duration::ZERO));
        assert_eq!(parse("+1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(parse("1500μs"), Some(Duration::from_micros(1500)));
        assert_eq!(parse("2562047h"), Some(Duration::from_secs(2562047 * 3600)));
    }

    #[test]
    fn not_durations() {
        for bad in [
            "",
            "+",
            "40",
            "s",
            "1x",
            "1d",
            "-5s",
            "1..2s",
            "soon",
            "2562048h",
            "1e3s",
            "99999999999999999999h",
        ] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}

//! `resource.Quantity` strings (`500m`, `1Gi`, `2e3`): parsed to a number for the comparisons
//! validation makes (min ≤ max, non-negative). Exactness beyond f64 does not matter there.

/// The value of a quantity, or `None` if the string is not one.
pub fn parse(s: &str) -> Option<f64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(split);
    let digits = num.trim_start_matches(['+', '-']);
    if digits.is_empty() || digits == "." || num.len() - digits.len() > 1 {
        return None;
    }
    let n: f64 = num.parse().ok()?;
    let scale = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        e if e.starts_with(['e', 'E']) => 10f64.powi(e[1..].parse::<i32>().ok()?),
        _ => return None,
    };
    Some(n * scale)
}

/// The decoder's complaint about a string that is not a quantity.
pub const FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes() {
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("1Gi"), Some(1073741824.0));
        assert_eq!(parse("2k"), Some(2000.0));
        assert_eq!(parse("1e3"), Some(1000.0));
        assert_eq!(parse("-1"), Some(-1.0));
        assert_eq!(parse("1.5"), Some(1.5));
        for bad in ["", "abc", "1x", "--1", "1Gb", "."] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}

//! Resource quantities (`100m`, `1.5Gi`, `2e3`) as exact numbers: the one quantity type of
//! k3rs (validation, quota, scheduling, the kubelet's QoS, cgroup limits and downward API).
//! Values are held in nano-units, so every suffix from `n` to `Ei` is exact; `milli_value`
//! and `value` round up like upstream's `MilliValue`/`Value`. Quantities whose nano-units do
//! not fit in an i128 (beyond about 10^29) do not parse.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;

/// The decoder's complaint about a string that is not a quantity.
pub const FORMAT_ERROR: &str =
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

/// A parsed quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Quantity {
    nanos: i128,
}

const NANO: i128 = 1_000_000_000;

fn ceil_div(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b > 0 {
        q + 1
    } else {
        q
    }
}

impl Quantity {
    /// Zero.
    pub const ZERO: Quantity = Quantity { nanos: 0 };

    /// `v` whole units.
    pub fn from_value(v: i64) -> Self {
        Quantity {
            nanos: i128::from(v) * NANO,
        }
    }

    /// `m` thousandths of a unit.
    pub fn from_milli(m: i64) -> Self {
        Quantity {
            nanos: i128::from(m) * 1_000_000,
        }
    }

    /// Parses the canonical forms of a Kubernetes quantity; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim();
        let (negative, s) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let num_len = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (num, suffix) = s.split_at(num_len);
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return None;
        }
        // mantissa = int.frac as an integer, scaled down by 10^frac.len()
        let digits = format!("{int}{frac}");
        let mantissa: i128 = digits.parse().ok()?;
        let (mul, div_pow10): (i128, i32) = match suffix {
            "" => (1, 0),
            "Ki" => (1 << 10, 0),
            "Mi" => (1 << 20, 0),
            "Gi" => (1 << 30, 0),
            "Ti" => (1 << 40, 0),
            "Pi" => (1 << 50, 0),
            "Ei" => (1 << 60, 0),
            "n" => (1, 9),
            "u" => (1, 6),
            "m" => (1, 3),
            "k" => (1_000, 0),
            "M" => (1_000_000, 0),
            "G" => (1_000_000_000, 0),
            "T" => (1_000_000_000_000, 0),
            "P" => (1_000_000_000_000_000, 0),
            "E" => (1_000_000_000_000_000_000, 0),
            e if e.starts_with(['e', 'E']) => {
                let exp: i32 = e[1..].parse().ok()?;
                if exp >= 0 {
                    (10i128.checked_pow(exp.try_into().ok()?)?, 0)
                } else {
                    (1, -exp)
                }
            }
            _ => return None,
        };
        // nanos = mantissa * mul * 10^9 / 10^(frac.len() + div_pow10), rounded up
        let scaled = mantissa.checked_mul(mul)?.checked_mul(NANO)?;
        let down =
            10i128.checked_pow(u32::try_from(frac.len()).ok()? + u32::try_from(div_pow10).ok()?)?;
        let nanos = ceil_div(scaled, down);
        Some(Quantity {
            nanos: if negative { -nanos } else { nanos },
        })
    }

    /// Parses an API quantity; unparsable ones count as zero (the API server rejects them).
    pub fn of(q: &ApiQuantity) -> Self {
        Quantity::parse(&q.0).unwrap_or_default()
    }

    /// The value in thousandths, rounded up (cores → millicores).
    pub fn milli_value(self) -> i64 {
        ceil_div(self.nanos, 1_000_000).clamp(i64::MIN.into(), i64::MAX.into()) as i64
    }

    /// The value in units, rounded up (bytes).
    pub fn value(self) -> i64 {
        ceil_div(self.nanos, NANO).clamp(i64::MIN.into(), i64::MAX.into()) as i64
    }

    /// Whether it is zero.
    pub fn is_zero(self) -> bool {
        self.nanos == 0
    }

    /// Whether it is above zero.
    pub fn is_positive(self) -> bool {
        self.nanos > 0
    }

    /// Whether it is below zero.
    pub fn is_negative(self) -> bool {
        self.nanos < 0
    }

    /// Exact division as a rational rounded up (upstream's `convertResourceCPUToString` and
    /// friends divide by the divisor this way).
    pub fn div_ceil(self, divisor: Quantity) -> Option<i64> {
        if divisor.nanos <= 0 {
            return None;
        }
        Some(ceil_div(self.nanos, divisor.nanos).clamp(i64::MIN.into(), i64::MAX.into()) as i64)
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, o: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos.saturating_add(o.nanos),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|| panic!("{s} does not parse"))
    }

    #[test]
    fn cpu_forms() {
        assert_eq!(q("100m").milli_value(), 100);
        assert_eq!(q("1").milli_value(), 1000);
        assert_eq!(q("0.5").milli_value(), 500);
        assert_eq!(q("1.5").milli_value(), 1500);
        assert_eq!(q("2500u").milli_value(), 3);
        assert_eq!(q("1n").milli_value(), 1);
        assert_eq!(q("250m").value(), 1);
        assert_eq!(q("2e3").value(), 2000);
        assert_eq!(q("5e-1").milli_value(), 500);
    }

    #[test]
    fn memory_forms() {
        assert_eq!(q("128Mi").value(), 134_217_728);
        assert_eq!(q("1Gi").value(), 1_073_741_824);
        assert_eq!(q("1.5Gi").value(), 1_610_612_736);
        assert_eq!(q("1G").value(), 1_000_000_000);
        assert_eq!(q("64k").value(), 64_000);
        assert_eq!(q("1Ei").value(), 1 << 60);
        assert_eq!(q("129M").value(), 129_000_000);
        assert_eq!(q("100").value(), 100);
    }

    #[test]
    fn comparisons_and_sums_are_exact() {
        assert_eq!(q("1"), q("1000m"));
        assert_eq!(q("1Ki"), q("1024"));
        assert!(q("0").is_zero());
        assert!(!q("0").is_positive());
        assert!(q("-1").milli_value() < 0);
        assert_eq!((q("100m") + q("0.9")).milli_value(), 1000);
        assert_eq!(q("1Gi").div_ceil(q("1Mi")), Some(1024));
        assert_eq!(q("1").div_ceil(q("1m")), Some(1000));
        assert_eq!(q("1").div_ceil(Quantity::ZERO), None);
    }

    #[test]
    fn junk_is_refused() {
        for bad in ["", "m", "1x", "1.2.3", "Gi", "1 Gi", "--1", "1e"] {
            assert_eq!(Quantity::parse(bad), None, "{bad:?}");
        }
    }
}

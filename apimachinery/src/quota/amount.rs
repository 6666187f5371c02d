//! Quota arithmetic: quantities as exact integers of thousandths (milli-units), and their
//! rendering the way `resource.Quantity.String()` canonicalizes them (`2`, `500m`, `3Gi`,
//! `2k`).

use crate::quantity::Quantity;

/// A quantity in thousandths, remembering whether it was written with a binary suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Amount {
    /// The amount in thousandths.
    pub milli: i128,
    /// Render with binary suffixes (`Mi`, `Gi`).
    pub binary: bool,
}

impl Amount {
    /// A count of `n` objects.
    pub fn count(n: i64) -> Amount {
        Amount {
            milli: i128::from(n) * 1000,
            binary: false,
        }
    }

    /// Parses a quantity string; `None` if it is not one.
    pub fn parse(s: &str) -> Option<Amount> {
        let q = Quantity::parse(s)?;
        Some(Amount {
            milli: i128::from(q.milli_value()),
            binary: s.trim_end().ends_with('i'),
        })
    }

    /// Parses a quantity in JSON (a string or a number).
    pub fn of(v: &serde_json::Value) -> Option<Amount> {
        match v {
            serde_json::Value::String(s) => Amount::parse(s),
            serde_json::Value::Number(n) => Amount::parse(&n.to_string()),
            _ => None,
        }
    }

    /// The sum.
    pub fn plus(self, o: Amount) -> Amount {
        Amount {
            milli: self.milli + o.milli,
            binary: self.binary || o.binary,
        }
    }

    /// The difference.
    pub fn minus(self, o: Amount) -> Amount {
        Amount {
            milli: self.milli - o.milli,
            binary: self.binary || o.binary,
        }
    }

    /// The canonical text: whole numbers with the largest exact suffix (binary when written
    /// in binary), fractions in milli-units.
    pub fn render(self) -> String {
        if self.milli % 1000 != 0 {
            return format!("{}m", self.milli);
        }
        let whole = self.milli / 1000;
        if whole == 0 {
            return "0".into();
        }
        let (base, suffixes): (i128, &[&str]) = if self.binary {
            (1024, &["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])
        } else {
            (1000, &["", "k", "M", "G", "T", "P", "E"])
        };
        let (mut n, mut i) = (whole, 0);
        while i + 1 < suffixes.len() && n % base == 0 {
            n /= base;
            i += 1;
        }
        format!("{n}{}", suffixes[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_quantity_string() {
        let r = |s: &str| Amount::parse(s).unwrap().render();
        assert_eq!(r("2"), "2");
        assert_eq!(r("500m"), "500m");
        assert_eq!(r("1.5"), "1500m");
        assert_eq!(r("2000"), "2k");
        assert_eq!(r("1024Mi"), "1Gi");
        assert_eq!(r("1536Mi"), "1536Mi");
        assert_eq!(r("0"), "0");
        let sum = Amount::parse("500m")
            .unwrap()
            .plus(Amount::parse("500m").unwrap());
        assert_eq!(sum.render(), "1");
        let mem = Amount::parse("512Mi")
            .unwrap()
            .plus(Amount::parse("1Gi").unwrap());
        assert_eq!(mem.render(), "1536Mi");
        assert_eq!(Amount::count(3).render(), "3");
    }
}

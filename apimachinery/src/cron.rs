//! The standard five-field cron syntax a CronJob's `spec.schedule` uses (upstream parses it
//! with robfig/cron's `ParseStandard`): minute, hour, day of month, month, day of week; each a
//! list of `*`/`?`, values, ranges `a-b` and steps `/n`, month and weekday names, and the
//! descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`.
//! Day of week is 0–6 (Sunday is 0; 7 is refused, as robfig/cron's bounds refuse it). Errors
//! carry robfig/cron's messages.
//!
//! Guarantees: when neither day field is `*`, a day matches if either matches (cron's rule);
//! times are whole minutes of the civil time given (the caller converts to the time zone).

use k8s_openapi::jiff::civil::DateTime;
use k8s_openapi::jiff::{ToSpan, Zoned};

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// The day-of-month or day-of-week field was `*` (then both must match).
    day_star: bool,
}

/// Why a schedule does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not five fields (how many, and the fields joined by a space).
    #[error("expected exactly 5 fields, found {0}: [{1}]")]
    Fields(usize, String),
    /// An unknown `@` descriptor.
    #[error("unrecognized descriptor: {0}")]
    Descriptor(String),
    /// A value that is not a number.
    #[error("failed to parse int from {0}")]
    Number(String),
    /// A range whose end is below its start.
    #[error("beginning of range ({0}) beyond end of range ({1}): {2}")]
    Order(u32, u32, String),
    /// A value below the field's minimum.
    #[error("beginning of range ({0}) below minimum ({1}): {2}")]
    Low(u32, u32, String),
    /// A value above the field's maximum.
    #[error("end of range ({0}) above maximum ({1}): {2}")]
    High(u32, u32, String),
    /// A step that is not positive.
    #[error("step of range should be a positive number: {0}")]
    Step(String),
}

const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const WEEKDAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];

impl Schedule {
    /// Parses `spec`.
    pub fn parse(spec: &str) -> Result<Schedule, ParseError> {
        let spec = spec.trim();
        let expanded = match spec {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            s if s.starts_with('@') => return Err(ParseError::Descriptor(s.to_string())),
            s => s,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(ParseError::Fields(fields.len(), fields.join(" ")));
        }
        let star = |f: &str| f.starts_with('*') || f.starts_with('?');
        Ok(Schedule {
            minutes: field(fields[0], 0, 59, &[])?,
            hours: field(fields[1], 0, 23, &[])?,
            days: field(fields[2], 1, 31, &[])?,
            months: field(fields[3], 1, 12, MONTHS)?,
            weekdays: field(fields[4], 0, 6, WEEKDAYS)?,
            day_star: star(fields[2]) || star(fields[4]),
        })
    }

    /// Whether the minute starting at `t` is scheduled.
    pub fn matches(&self, t: DateTime) -> bool {
        let bit = |set: u64, v: i64| set & (1 << v) != 0;
        let dom = bit(self.days, i64::from(t.day()));
        let dow = bit(
            self.weekdays,
            i64::from(t.weekday().to_sunday_zero_offset()),
        );
        let day = if self.day_star {
            dom && dow
        } else {
            dom || dow
        };
        bit(self.minutes, i64::from(t.minute()))
            && bit(self.hours, i64::from(t.hour()))
            && bit(self.months, i64::from(t.month()))
            && day
    }

    /// The latest scheduled minute in `(after, now]`, and how many there were (capped at
    /// `cap`); `None` when there was none. Looks back at most a year.
    pub fn most_recent(&self, after: &Zoned, now: &Zoned, cap: usize) -> Option<(Zoned, usize)> {
        let mut t = floor_minute(now);
        let mut latest = None;
        let mut count = 0;
        for _ in 0..(366 * 24 * 60) {
            if t <= *after {
                break;
            }
            if self.matches(t.datetime()) {
                count += 1;
                if latest.is_none() {
                    latest = Some(t.clone());
                }
                if count >= cap {
                    break;
                }
            }
            t = t.checked_sub(1.minute()).ok()?;
        }
        latest.map(|l| (l, count))
    }

    /// The first scheduled minute after `now`, looking ahead at most four years.
    pub fn next_after(&self, now: &Zoned) -> Option<Zoned> {
        let mut t = floor_minute(now);
        for _ in 0..(4 * 366 * 24 * 60) {
            t = t.checked_add(1.minute()).ok()?;
            if self.matches(t.datetime()) {
                return Some(t);
            }
        }
        None
    }
}

fn floor_minute(t: &Zoned) -> Zoned {
    t.with()
        .second(0)
        .subsec_nanosecond(0)
        .build()
        .unwrap_or_else(|_| t.clone())
}

/// One field as a bit set of the values it allows.
fn field(text: &str, min: u32, max: u32, names: &[&str]) -> Result<u64, ParseError> {
    let mut bits = 0u64;
    for item in text.split(',') {
        let (range, step) = match item.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s.parse().map_err(|_| ParseError::Number(s.to_string()))?;
                if step == 0 {
                    return Err(ParseError::Step(item.to_string()));
                }
                (r, Some(step))
            }
            None => (item, None),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, names, min)?, value(b, names, min)?)
        } else {
            let v = value(range, names, min)?;
            // `a/n` runs from a to the maximum.
            (v, if step.is_some() { max } else { v })
        };
        if lo < min {
            return Err(ParseError::Low(lo, min, item.to_string()));
        }
        if hi > max {
            return Err(ParseError::High(hi, max, item.to_string()));
        }
        if hi < lo {
            return Err(ParseError::Order(lo, hi, item.to_string()));
        }
        let step = step.unwrap_or(1) as usize;
        for v in (lo..=hi).step_by(step) {
            bits |= 1 << v;
        }
    }
    Ok(bits)
}

fn value(text: &str, names: &[&str], min: u32) -> Result<u32, ParseError> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + min);
    }
    text.parse()
        .map_err(|_| ParseError::Number(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Zoned {
        s.parse::<k8s_openapi::jiff::Timestamp>()
            .unwrap()
            .to_zoned(k8s_openapi::jiff::tz::TimeZone::UTC)
    }

    #[test]
    fn fields_lists_ranges_steps_and_names() {
        let s = Schedule::parse("*/15 9-17 * jan,JUL mon-fri").unwrap();
        assert_eq!(s.minutes, 1 | 1 << 15 | 1 << 30 | 1 << 45);
        assert_eq!(s.hours, (9..=17).map(|h| 1u64 << h).sum::<u64>());
        assert_eq!(s.months, 1 << 1 | 1 << 7);
        assert_eq!(s.weekdays, (1..=5).map(|d| 1u64 << d).sum::<u64>());
        assert!(s.day_star);
        assert_eq!(
            Schedule::parse("5/20 * * * *").unwrap().minutes,
            1 << 5 | 1 << 25 | 1 << 45
        );
        assert_eq!(Schedule::parse("@hourly"), Schedule::parse("0 * * * *"));
        assert_eq!(Schedule::parse("@annually"), Schedule::parse("0 0 1 1 *"));
        assert_eq!(
            Schedule::parse("0 0 * * 7"),
            Err(ParseError::High(7, 6, "7".into())),
            "robfig/cron's day-of-week bounds are 0-6"
        );
        assert_eq!(Schedule::parse("0 0 * * *").unwrap().weekdays, 0x7f);
    }

    #[test]
    fn malformed_schedules_are_rejected() {
        assert_eq!(
            Schedule::parse("* * * *"),
            Err(ParseError::Fields(4, "* * * *".into()))
        );
        assert_eq!(
            Schedule::parse("every  minute").unwrap_err().to_string(),
            "expected exactly 5 fields, found 2: [every minute]"
        );
        assert_eq!(
            Schedule::parse("* * * * 8"),
            Err(ParseError::High(8, 6, "8".into()))
        );
        assert_eq!(
            Schedule::parse("60 * * * *"),
            Err(ParseError::High(60, 59, "60".into()))
        );
        assert_eq!(
            Schedule::parse("* * 0 * *"),
            Err(ParseError::Low(0, 1, "0".into()))
        );
        assert_eq!(
            Schedule::parse("5-1 * * * *"),
            Err(ParseError::Order(5, 1, "5-1".into()))
        );
        assert_eq!(
            Schedule::parse("*/0 * * * *"),
            Err(ParseError::Step("*/0".into()))
        );
        assert_eq!(
            Schedule::parse("@every 5m"),
            Err(ParseError::Descriptor("@every 5m".into()))
        );
        assert_eq!(
            Schedule::parse("x * * * *"),
            Err(ParseError::Number("x".into()))
        );
    }

    #[test]
    fn both_day_fields_restricted_match_either() {
        // The 13th, or any Friday. 2026-11-13 is a Friday, 2026-11-20 a Friday, 2026-12-13 a Sunday.
        let s = Schedule::parse("0 0 13 * 5").unwrap();
        assert!(s.matches(at("2026-11-20T00:00:00Z").datetime()));
        assert!(s.matches(at("2026-12-13T00:00:00Z").datetime()));
        assert!(!s.matches(at("2026-12-14T00:00:00Z").datetime()));
        // With `*` in one of them, both must match: Fridays only.
        let s = Schedule::parse("0 0 * * 5").unwrap();
        assert!(!s.matches(at("2026-12-13T00:00:00Z").datetime()));
    }

    #[test]
    fn most_recent_and_next_times() {
        let s = Schedule::parse("*/10 * * * *").unwrap();
        let now = at("2026-11-21T20:35:42Z");
        assert_eq!(s.next_after(&now), Some(at("2026-11-21T20:40:00Z")));
        let (t, n) = s
            .most_recent(&at("2026-11-21T20:00:00Z"), &now, 100)
            .unwrap();
        assert_eq!((t, n), (at("2026-11-21T20:30:00Z"), 3));
        // `after` itself is excluded.
        assert_eq!(s.most_recent(&at("2026-11-21T20:30:00Z"), &now, 100), None);
        let s = Schedule::parse("0 0 30 2 *").unwrap();
        assert_eq!(s.next_after(&now), None);
    }
}

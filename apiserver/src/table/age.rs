//! Times as `kubectl get` shows them: kube's `HumanDuration` of the time since a timestamp.

pub use k3rs_apimachinery::meta::parse_time;
use serde_json::Value;

/// kube's `translateTimestampSince`: `<unknown>` without a timestamp, else the age.
pub fn since(v: &Value, now: i64) -> String {
    match parse_time(v) {
        Some(t) => human_duration(now - t),
        None => "<unknown>".to_string(),
    }
}

/// kube's `duration.HumanDuration`: two significant units at most, coarser as it grows
/// (`59s`, `3m2s`, `15m`, `4h20m`, `30h`, `3d4h`, `45d`, `2y10d`, `9y`).
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return pair(minutes, "m", seconds % 60, "s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return pair(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    let days = hours / 24;
    if hours < 24 * 8 {
        return pair(days, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{days}d");
    }
    let years = days / 365;
    if hours < 24 * 365 * 8 {
        return pair(years, "y", days % 365, "d");
    }
    format!("{years}y")
}

/// `3m2s`, or `3m` when the minor unit is zero.
fn pair(major: i64, major_unit: &str, minor: i64, minor_unit: &str) -> String {
    if minor == 0 {
        format!("{major}{major_unit}")
    } else {
        format!("{major}{major_unit}{minor}{minor_unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_as_kube_prints_them() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (182, "3m2s"),
            (600, "10m"),
            (179 * 60 + 59, "179m"),
            (3 * 3600, "3h"),
            (4 * 3600 + 20 * 60, "4h20m"),
            (30 * 3600, "30h"),
            (2 * 86400, "2d"),
            (3 * 86400 + 4 * 3600, "3d4h"),
            (45 * 86400, "45d"),
            (2 * 365 * 86400 + 10 * 86400, "2y10d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn ages_from_timestamps() {
        let t = json!("2024-01-01T00:00:00Z");
        let at = parse_time(&t).unwrap();
        assert_eq!(since(&t, at + 65), "65s");
        assert_eq!(since(&Value::Null, at), "<unknown>");
        assert_eq!(
            parse_time(&json!("2024-01-01T00:00:01.123456Z")),
            Some(at + 1)
        );
    }
}

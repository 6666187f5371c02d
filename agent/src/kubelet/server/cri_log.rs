//! The CRI container log format (what containerd writes to `/var/log/pods/…/<n>.log`) and the
//! kubelet's `/containerLogs` options over it, without I/O.
//!
//! A file line is `<RFC3339Nano time> <stdout|stderr> <P|F> <content>`: `F` ends a line the
//! container wrote, `P` is a fragment of a longer one (its content has no newline of its own).
//!
//! # Guarantees
//! - [`LogWriter::write`] emits what upstream's kubelet emits for each entry: the optional
//!   `<time> ` prefix (the file's own timestamp), the content, a newline only for `F` entries;
//!   entries before `since` are skipped; output stops exactly at `limitBytes`.
//! - [`LineBuffer`] hands out whole file lines only; a line still being written waits.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Which stream an entry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One parsed file line.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry<'a> {
    /// The timestamp as written.
    pub timestamp: &'a str,
    pub time: Timestamp,
    pub stream: Stream,
    /// `P`: a fragment; the entry that ends the line follows.
    pub partial: bool,
    pub content: &'a [u8],
}

/// Why a file line is not a CRI log entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("log line without {0}")]
    Missing(&'static str),
    #[error("log line with a bad timestamp {0:?}")]
    Timestamp(String),
    #[error("log line with an unknown stream {0:?}")]
    Stream(String),
}

fn field<'a>(rest: &mut &'a [u8], what: &'static str) -> Result<&'a [u8], ParseError> {
    let at = rest
        .iter()
        .position(|b| *b == b' ')
        .ok_or(ParseError::Missing(what))?;
    let (f, r) = rest.split_at(at);
    *rest = &r[1..];
    Ok(f)
}

/// Parses one file line (without its trailing newline).
pub fn parse_line(line: &[u8]) -> Result<Entry<'_>, ParseError> {
    let mut rest = line;
    let ts = field(&mut rest, "a timestamp")?;
    let timestamp = std::str::from_utf8(ts)
        .map_err(|_| ParseError::Timestamp(String::from_utf8_lossy(ts).into_owned()))?;
    let time: Timestamp = timestamp
        .parse()
        .map_err(|_| ParseError::Timestamp(timestamp.to_string()))?;
    let stream = match field(&mut rest, "a stream")? {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        s => return Err(ParseError::Stream(String::from_utf8_lossy(s).into_owned())),
    };
    // The tag may carry more (`F:…` in newer formats); the first letter decides.
    let (tag, content) = match rest.iter().position(|b| *b == b' ') {
        Some(at) => (&rest[..at], &rest[at + 1..]),
        None => (rest, &rest[rest.len()..]),
    };
    let partial = match tag.first() {
        Some(b'P') => true,
        Some(b'F') => false,
        _ => return Err(ParseError::Missing("a P or F tag")),
    };
    Ok(Entry {
        timestamp,
        time,
        stream,
        partial,
        content,
    })
}

/// The `/containerLogs` query (upstream's `PodLogOptions`, with `since` resolved).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LogOptions {
    pub follow: bool,
    pub previous: bool,
    pub timestamps: bool,
    pub tail_lines: Option<u64>,
    pub limit_bytes: Option<u64>,
    /// Entries before this instant are left out (`sinceSeconds` or `sinceTime`).
    pub since: Option<Timestamp>,
}

/// A log query refused (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionsError {
    /// A flag that is not a boolean.
    #[error("invalid boolean {0:?}")]
    Boolean(String),
    /// A count that is not an integer.
    #[error("{key}: invalid value {value:?}")]
    Integer {
        /// The parameter.
        key: String,
        /// The value given.
        value: String,
    },
    /// A count below its minimum.
    #[error("{key}: Invalid value: {value}: must be greater than or equal to {min}")]
    TooSmall {
        /// The parameter.
        key: String,
        /// The value given.
        value: i64,
        /// The least allowed.
        min: i64,
    },
    /// `sinceTime` is not an RFC 3339 time.
    #[error("sinceTime: invalid time {0:?}")]
    Time(String),
    /// Both `sinceTime` and `sinceSeconds`.
    #[error("at most one of sinceTime or sinceSeconds may be specified")]
    BothSince,
}

fn flag(v: &str) -> Result<bool, OptionsError> {
    match v {
        "" | "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(OptionsError::Boolean(v.to_string())),
    }
}

fn count(key: &str, v: &str, min: i64) -> Result<u64, OptionsError> {
    let n: i64 = v.parse().map_err(|_| OptionsError::Integer {
        key: key.to_string(),
        value: v.to_string(),
    })?;
    if n < min {
        return Err(OptionsError::TooSmall {
            key: key.to_string(),
            value: n,
            min,
        });
    }
    Ok(n as u64)
}

/// Reads the query pairs; `now` resolves `sinceSeconds`.
pub fn parse_options(
    pairs: &[(String, String)],
    now: Timestamp,
) -> Result<LogOptions, OptionsError> {
    let mut o = LogOptions::default();
    let mut since_seconds = None;
    let mut since_time = None;
    for (k, v) in pairs {
        match k.as_str() {
            "follow" => o.follow = flag(v)?,
            "previous" => o.previous = flag(v)?,
            "timestamps" => o.timestamps = flag(v)?,
            "tailLines" => o.tail_lines = Some(count(k, v, 0)?),
            "limitBytes" => o.limit_bytes = Some(count(k, v, 1)?),
            "sinceSeconds" => since_seconds = Some(count(k, v, 1)?),
            "sinceTime" => {
                since_time = Some(
                    v.parse::<Timestamp>()
                        .map_err(|_| OptionsError::Time(v.to_string()))?,
                )
            }
            _ => {}
        }
    }
    if since_seconds.is_some() && since_time.is_some() {
        return Err(OptionsError::BothSince);
    }
    o.since = since_time.or_else(|| {
        since_seconds.and_then(|s| now.checked_sub(SignedDuration::from_secs(s as i64)).ok())
    });
    Ok(o)
}

/// Splits what is read from a log file into file lines (without their newline), keeping an
/// unfinished last line until the rest of it is read.
#[derive(Debug, Clone, Default)]
pub struct LineBuffer {
    pending: Vec<u8>,
}

impl LineBuffer {
    /// Appends `data` and hands each line it completes to `line`, until that says
    /// [`Flow::Done`].
    pub fn push(&mut self, data: &[u8], mut line: impl FnMut(&[u8]) -> Flow) -> Flow {
        self.pending.extend_from_slice(data);
        let mut consumed = 0;
        let mut flow = Flow::More;
        while let Some(nl) = self.pending[consumed..].iter().position(|b| *b == b'\n') {
            let end = consumed + nl;
            flow = line(&self.pending[consumed..end]);
            consumed = end + 1;
            if flow == Flow::Done {
                break;
            }
        }
        self.pending.drain(..consumed);
        flow
    }

    /// The unfinished line (the file ended without its newline), taken.
    pub fn take_rest(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }
}

/// What the writer says after an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    More,
    /// `limitBytes` reached: nothing more is written.
    Done,
}

/// Renders entries as the kubelet's log response body.
#[derive(Debug, Clone)]
pub struct LogWriter {
    opts: LogOptions,
    written: u64,
}

impl LogWriter {
    pub fn new(opts: LogOptions) -> LogWriter {
        LogWriter { opts, written: 0 }
    }

    /// Appends what `line` (one file line, no newline) contributes to `out`. Lines that are
    /// not CRI entries are skipped (upstream logs and skips them too).
    pub fn write(&mut self, line: &[u8], out: &mut Vec<u8>) -> Flow {
        if self.limit_reached() {
            return Flow::Done;
        }
        let Ok(e) = parse_line(line) else {
            return Flow::More;
        };
        if self.opts.since.is_some_and(|s| e.time < s) {
            return Flow::More;
        }
        let start = out.len();
        if self.opts.timestamps {
            out.extend_from_slice(e.timestamp.as_bytes());
            out.push(b' ');
        }
        out.extend_from_slice(e.content);
        if !e.partial {
            out.push(b'\n');
        }
        let mut added = (out.len() - start) as u64;
        if let Some(limit) = self.opts.limit_bytes {
            let room = limit - self.written;
            if added >= room {
                out.truncate(start + room as usize);
                added = room;
            }
        }
        self.written += added;
        if self.limit_reached() {
            Flow::Done
        } else {
            Flow::More
        }
    }

    fn limit_reached(&self) -> bool {
        self.opts.limit_bytes.is_some_and(|l| self.written >= l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &[u8] = b"2026-11-22T04:00:00.123456789Z stdout F hello";
    const B: &[u8] = b"2026-11-22T04:00:01.5Z stderr P par";
    const C: &[u8] = b"2026-11-22T04:00:02Z stderr F tial";

    fn opts(pairs: &[(&str, &str)]) -> LogOptions {
        let p: Vec<_> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse_options(&p, "2026-11-22T04:00:10Z".parse().unwrap()).unwrap()
    }

    fn render(o: LogOptions, lines: &[&[u8]]) -> (String, Flow) {
        let mut w = LogWriter::new(o);
        let mut out = Vec::new();
        let mut flow = Flow::More;
        for l in lines {
            flow = w.write(l, &mut out);
        }
        (String::from_utf8(out).unwrap(), flow)
    }

    #[test]
    fn lines_parse_into_their_fields() {
        let e = parse_line(A).unwrap();
        assert_eq!(e.timestamp, "2026-11-22T04:00:00.123456789Z");
        assert_eq!(e.stream, Stream::Stdout);
        assert!(!e.partial);
        assert_eq!(e.content, b"hello");
        let e = parse_line(B).unwrap();
        assert_eq!(
            (e.stream, e.partial, e.content),
            (Stream::Stderr, true, &b"par"[..])
        );
        assert_eq!(
            parse_line(b"2026-11-22T04:00:00Z stdout F")
                .unwrap()
                .content,
            b""
        );
        assert_eq!(
            parse_line(b"2026-11-22T04:00:00Z stdout F  two spaces")
                .unwrap()
                .content,
            b" two spaces"
        );
        assert_eq!(
            parse_line(b"yesterday stdout F x"),
            Err(ParseError::Timestamp("yesterday".into()))
        );
        assert_eq!(
            parse_line(b"2026-11-22T04:00:00Z stdin F x"),
            Err(ParseError::Stream("stdin".into()))
        );
        assert_eq!(
            parse_line(b"garbage"),
            Err(ParseError::Missing("a timestamp"))
        );
        assert_eq!(
            parse_line(b"2026-11-22T04:00:00Z stdout X x"),
            Err(ParseError::Missing("a P or F tag"))
        );
    }

    #[test]
    fn partial_entries_join_and_timestamps_prefix_each_entry() {
        assert_eq!(render(opts(&[]), &[A, B, C]).0, "hello\npartial\n");
        assert_eq!(
            render(opts(&[("timestamps", "true")]), &[A, C]).0,
            "2026-11-22T04:00:00.123456789Z hello\n2026-11-22T04:00:02Z tial\n"
        );
        assert_eq!(render(opts(&[]), &[b"not a log line", A]).0, "hello\n");
    }

    #[test]
    fn since_skips_older_entries() {
        let o = opts(&[("sinceTime", "2026-11-22T04:00:01Z")]);
        assert_eq!(render(o, &[A, B, C]).0, "partial\n");
        // now is 04:00:10; 9 s back is 04:00:01.
        let o = opts(&[("sinceSeconds", "9")]);
        assert_eq!(o.since, Some("2026-11-22T04:00:01Z".parse().unwrap()));
    }

    #[test]
    fn limit_bytes_cuts_exactly() {
        let (out, flow) = render(opts(&[("limitBytes", "8")]), &[A, C]);
        assert_eq!((out.as_str(), flow), ("hello\nti", Flow::Done));
        let (out, flow) = render(opts(&[("limitBytes", "6")]), &[A]);
        assert_eq!((out.as_str(), flow), ("hello\n", Flow::Done));
        let (out, flow) = render(opts(&[("limitBytes", "100")]), &[A]);
        assert_eq!((out.as_str(), flow), ("hello\n", Flow::More));
    }

    #[test]
    fn options_are_validated() {
        let o = opts(&[
            ("follow", "true"),
            ("previous", "false"),
            ("tailLines", "3"),
        ]);
        assert_eq!(
            o,
            LogOptions {
                follow: true,
                tail_lines: Some(3),
                ..LogOptions::default()
            }
        );
        let p = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
        let now = Timestamp::UNIX_EPOCH;
        assert_eq!(
            parse_options(&p("tailLines", "-1"), now).map_err(|e| e.to_string()),
            Err("tailLines: Invalid value: -1: must be greater than or equal to 0".into())
        );
        assert!(parse_options(&p("limitBytes", "0"), now).is_err());
        assert!(parse_options(&p("follow", "maybe"), now).is_err());
        let both = vec![
            ("sinceSeconds".to_string(), "1".to_string()),
            ("sinceTime".to_string(), "2026-11-22T04:00:01Z".to_string()),
        ];
        assert!(parse_options(&both, now).is_err());
    }

    #[test]
    fn lines_are_split_at_newlines_and_an_unfinished_one_waits() {
        let mut b = LineBuffer::default();
        let mut seen: Vec<Vec<u8>> = Vec::new();
        let mut take = |l: &[u8]| {
            seen.push(l.to_vec());
            Flow::More
        };
        assert_eq!(b.push(b"a\nb", &mut take), Flow::More);
        assert_eq!(b.push(b"c\n\nd", &mut take), Flow::More);
        assert_eq!(seen, vec![b"a".to_vec(), b"bc".to_vec(), b"".to_vec()]);
        assert_eq!(b.take_rest(), b"d");
        assert_eq!(b.take_rest(), b"");
        // Done stops at that line.
        let mut n = 0;
        let flow = b.push(b"x\ny\nz\n", |_| {
            n += 1;
            if n == 2 {
                Flow::Done
            } else {
                Flow::More
            }
        });
        assert_eq!((flow, n), (Flow::Done, 2));
    }
}

//! Record framing: `[payload length: u32 LE][crc32 of payload: u32 LE][payload]`.
//!
//! A record is the unit of atomicity of the WAL: after a crash, the tail of the last segment may
//! hold a partial record (torn write) or garbage; [`decode`] tells those apart from a complete
//! record so that recovery can cut the log at the first record that is not whole.

/// Bytes of the header in front of every payload.
pub const HEADER_LEN: usize = 8;

/// Largest payload a record may carry. A length field above it is garbage, not a record
/// (etcd requests are at most 1.5 MiB; an entry adds a few bytes of framing).
pub const MAX_PAYLOAD: usize = 64 << 20;

/// Appends one framed record holding `payload` to `buf`.
pub fn encode_into(buf: &mut Vec<u8>, payload: &[u8]) {
    assert!(
        payload.len() <= MAX_PAYLOAD,
        "WAL record too large: {}",
        payload.len()
    );
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    buf.extend_from_slice(payload);
}

/// What the bytes at the start of a buffer hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A whole record: its payload and the number of bytes it occupies (header included).
    Complete { payload: &'a [u8], len: usize },
    /// Nothing left: the buffer is empty.
    End,
    /// Not a whole record: cut short, zero-filled, an impossible length, or a CRC mismatch.
    /// At the tail of the log this is a torn write; anywhere else it is corruption.
    Bad { reason: &'static str },
}

/// Decodes the record at the start of `buf`.
pub fn decode(buf: &[u8]) -> Frame<'_> {
    if buf.is_empty() {
        return Frame::End;
    }
    if buf.len() < HEADER_LEN {
        return Frame::Bad {
            reason: "short header",
        };
    }
    let len = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    if len == 0 {
        // Payloads are never empty (an rmp-encoded entry has at least its log id), so a zero
        // length is a zero-filled tail (e.g. a file extended before its data reached the disk).
        return Frame::Bad {
            reason: "zero length",
        };
    }
    if len > MAX_PAYLOAD {
        return Frame::Bad {
            reason: "impossible length",
        };
    }
    let Some(payload) = buf.get(HEADER_LEN..HEADER_LEN + len) else {
        return Frame::Bad {
            reason: "short payload",
        };
    };
    if crc32fast::hash(payload) != crc {
        return Frame::Bad {
            reason: "crc mismatch",
        };
    }
    Frame::Complete {
        payload,
        len: HEADER_LEN + len,
    }
}

/// Checks the CRC of a record read back at a known position (`buf` = header + payload) and
/// returns its payload.
pub fn verify(buf: &[u8]) -> Result<&[u8], &'static str> {
    match decode(buf) {
        Frame::Complete { payload, len } if len == buf.len() => Ok(payload),
        Frame::Complete { .. } => Err("length mismatch"),
        Frame::End => Err("empty record"),
        Frame::Bad { reason } => Err(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(payloads: &[&[u8]]) -> Vec<u8> {
        let mut buf = Vec::new();
        for p in payloads {
            encode_into(&mut buf, p);
        }
        buf
    }

    #[test]
    fn roundtrip() {
        let buf = framed(&[b"one", b"three"]);
        let Frame::Complete { payload, len } = decode(&buf) else {
            panic!("first")
        };
        assert_eq!((payload, len), (&b"one"[..], HEADER_LEN + 3));
        let Frame::Complete { payload, len: len2 } = decode(&buf[len..]) else {
            panic!("2nd")
        };
        assert_eq!(payload, b"three");
        assert_eq!(decode(&buf[len + len2..]), Frame::End);
        assert_eq!(verify(&buf[..len]), Ok(&b"one"[..]));
    }

    #[test]
    fn every_cut_of_a_record_is_bad() {
        let buf = framed(&[b"payload"]);
        for cut in 1..buf.len() {
            assert!(
                matches!(decode(&buf[..cut]), Frame::Bad { .. }),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn flipped_bit_and_zeroes_are_bad() {
        let mut buf = framed(&[b"payload"]);
        buf[HEADER_LEN + 2] ^= 1;
        assert_eq!(
            decode(&buf),
            Frame::Bad {
                reason: "crc mismatch"
            }
        );
        assert_eq!(
            decode(&[0u8; 32]),
            Frame::Bad {
                reason: "zero length"
            }
        );
        let huge = [0xffu8; 16];
        assert_eq!(
            decode(&huge),
            Frame::Bad {
                reason: "impossible length"
            }
        );
    }
}

//! Record framing: `[payload length: u32 LE][crc32 of payload: u32 LE][payload]`.
//!
//! A record is the unit of atomicity of the WAL. After a crash the tail of the last segment
//! may hold a record that never fully reached the disk; [`decode`] tells such a *torn* record
//! from a *corrupt* one, with etcd's rule: a record is torn if the file ends inside it, or if
//! any of its disk sectors reads as all zeros (a sector that was never written: the file was
//! extended but the data did not make it). A record whose bytes are all present and non-zero
//! per sector but whose CRC does not match is corruption (a flipped bit, a bad disk), which
//! recovery must refuse rather than silently cut acknowledged entries.

/// Bytes of the header in front of every payload.
pub const HEADER_LEN: usize = 8;

/// Largest payload a record may carry. A length field above it is garbage, not a record.
pub const MAX_PAYLOAD: usize = 64 << 20;

/// The unit in which a disk persists writes (the smallest sector size; etcd uses 512 too).
const SECTOR: u64 = 512;

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
    /// A record that was being written when the machine stopped (see the module docs).
    Torn { reason: &'static str },
    /// Bytes that were written whole but are not a valid record.
    Corrupt { reason: &'static str },
}

/// Whether some sector-aligned piece of `bytes` (which start at file offset `offset`) is all
/// zeros.
fn has_zero_sector(bytes: &[u8], offset: u64) -> bool {
    let mut start = 0usize;
    while start < bytes.len() {
        let abs = offset + start as u64;
        let to_boundary = (SECTOR - abs % SECTOR) as usize;
        let end = (start + to_boundary).min(bytes.len());
        if bytes[start..end].iter().all(|b| *b == 0) {
            return true;
        }
        start = end;
    }
    false
}

/// Decodes the record at the start of `buf`, which starts at file offset `offset`.
pub fn decode(buf: &[u8], offset: u64) -> Frame<'_> {
    if buf.is_empty() {
        return Frame::End;
    }
    if buf.len() < HEADER_LEN {
        return Frame::Torn {
            reason: "short header",
        };
    }
    let len = u32::from_le_bytes(buf[0..4].try_into().expect("4 bytes")) as usize;
    let crc = u32::from_le_bytes(buf[4..8].try_into().expect("4 bytes"));
    if len == 0 {
        // Payloads are never empty (an rmp-encoded entry has at least its log id): this is a
        // zero-filled, never written header.
        return Frame::Torn {
            reason: "zero length",
        };
    }
    if len > MAX_PAYLOAD {
        return if has_zero_sector(&buf[..HEADER_LEN], offset) {
            Frame::Torn {
                reason: "partly written header",
            }
        } else {
            Frame::Corrupt {
                reason: "impossible length",
            }
        };
    }
    let Some(payload) = buf.get(HEADER_LEN..HEADER_LEN + len) else {
        return Frame::Torn {
            reason: "short payload",
        };
    };
    if crc32fast::hash(payload) != crc {
        return if has_zero_sector(&buf[..HEADER_LEN + len], offset) {
            Frame::Torn {
                reason: "zeroed sector",
            }
        } else {
            Frame::Corrupt {
                reason: "crc mismatch",
            }
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
    match decode(buf, 0) {
        Frame::Complete { payload, len } if len == buf.len() => Ok(payload),
        Frame::Complete { .. } => Err("length mismatch"),
        Frame::End => Err("empty record"),
        Frame::Torn { reason } | Frame::Corrupt { reason } => Err(reason),
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
        let Frame::Complete { payload, len } = decode(&buf, 0) else {
            panic!("first")
        };
        assert_eq!((payload, len), (&b"one"[..], HEADER_LEN + 3));
        let Frame::Complete { payload, len: len2 } = decode(&buf[len..], len as u64) else {
            panic!("second")
        };
        assert_eq!(payload, b"three");
        assert_eq!(decode(&buf[len + len2..], 0), Frame::End);
        assert_eq!(verify(&buf[..len]), Ok(&b"one"[..]));
    }

    #[test]
    fn every_cut_of_a_record_is_torn() {
        let buf = framed(&[b"payload"]);
        for cut in 1..buf.len() {
            assert!(
                matches!(decode(&buf[..cut], 0), Frame::Torn { .. }),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn zeroed_sector_is_torn_but_a_flipped_bit_is_corrupt() {
        let payload = vec![7u8; 2000];
        let buf = framed(&[&payload]);
        let mut zeroed = buf.clone();
        zeroed[1024..1536].fill(0);
        assert_eq!(
            decode(&zeroed, 0),
            Frame::Torn {
                reason: "zeroed sector"
            }
        );
        // The same zeroes not aligned to a sector of the file are not a missing sector.
        assert_eq!(
            decode(&zeroed, 100),
            Frame::Corrupt {
                reason: "crc mismatch"
            }
        );
        let mut flipped = buf.clone();
        flipped[HEADER_LEN + 2] ^= 1;
        assert_eq!(
            decode(&flipped, 0),
            Frame::Corrupt {
                reason: "crc mismatch"
            }
        );
        assert_eq!(
            decode(&[0u8; 32], 0),
            Frame::Torn {
                reason: "zero length"
            }
        );
        assert_eq!(
            decode(&[0xffu8; 16], 0),
            Frame::Corrupt {
                reason: "impossible length"
            }
        );
    }
}

//! The protobuf wire format, just as far as Kubernetes objects use it: varints, 64-bit
//! doubles and length-delimited fields (groups and 32-bit values never occur).

use super::Error;

/// One field as read off the wire.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
}

impl Value<'_> {
    pub fn wire_type(&self) -> u64 {
        match self {
            Value::Varint(_) => 0,
            Value::Fixed64(_) => 1,
            Value::Bytes(_) => 2,
        }
    }
}

/// Reads the fields of one message in order.
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    fn varint(&mut self) -> Result<u64, Error> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = self
                .rest
                .split_first()
                .ok_or_else(|| Error::Malformed("truncated varint".into()))?;
            self.rest = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Error::Malformed("varint longer than 10 bytes".into()))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.rest.len() < n {
            return Err(Error::Malformed("truncated field".into()));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    /// The next varint of a packed repeated field, `None` at the end.
    pub fn next_packed_varint(&mut self) -> Result<Option<u64>, Error> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        self.varint().map(Some)
    }

    /// The next `(field number, value)`, `None` at the end.
    pub fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>, Error> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let tag = u32::try_from(key >> 3)
            .ok()
            .filter(|t| *t > 0)
            .ok_or_else(|| Error::Malformed(format!("invalid field number {}", key >> 3)))?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                let bytes = self.take(8)?;
                Value::Fixed64(u64::from_le_bytes(bytes.try_into().unwrap_or_default()))
            }
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| Error::Malformed("length out of range".into()))?;
                Value::Bytes(self.take(len)?)
            }
            other => {
                return Err(Error::Malformed(format!(
                    "unsupported wire type {other} for field {tag}"
                )))
            }
        };
        Ok(Some((tag, value)))
    }
}

/// Appends protobuf fields to a buffer.
#[derive(Debug, Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    fn key(&mut self, tag: u32, wire_type: u64) {
        self.varint((u64::from(tag) << 3) | wire_type);
    }

    pub fn put_varint(&mut self, tag: u32, v: u64) {
        self.key(tag, 0);
        self.varint(v);
    }

    pub fn put_fixed64(&mut self, tag: u32, v: u64) {
        self.key(tag, 1);
        self.buf.extend_from_slice(&v.to_le_bytes());
    }

    pub fn put_bytes(&mut self, tag: u32, bytes: &[u8]) {
        self.put_len(tag, bytes.len());
        self.buf.extend_from_slice(bytes);
    }

    /// The key and length of a length-delimited field whose `len` bytes the caller writes
    /// (or sends) next.
    pub fn put_len(&mut self, tag: u32, len: usize) {
        self.key(tag, 2);
        self.varint(len as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_reads_back() {
        let mut w = Writer::default();
        w.put_varint(1, 300);
        w.put_varint(2, (-1i64) as u64);
        w.put_fixed64(3, 1.5f64.to_bits());
        w.put_bytes(20, b"abc");
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.next_field().unwrap(), Some((1, Value::Varint(300))));
        assert_eq!(r.next_field().unwrap(), Some((2, Value::Varint(u64::MAX))));
        assert_eq!(
            r.next_field().unwrap(),
            Some((3, Value::Fixed64(1.5f64.to_bits())))
        );
        assert_eq!(r.next_field().unwrap(), Some((20, Value::Bytes(b"abc"))));
        assert_eq!(r.next_field().unwrap(), None);
    }

    #[test]
    fn truncated_and_odd_input_is_malformed() {
        for bad in [&[0x0a, 5, b'a'][..], &[0x80], &[0x0b], &[0x00, 1]] {
            let mut r = Reader::new(bad);
            assert!(
                matches!(r.next_field(), Err(Error::Malformed(_))),
                "{bad:?}"
            );
        }
    }
}

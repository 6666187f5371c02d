//! How the byte strings of commands and their outputs (keys, values, range ends) serialize.
//!
//! Up to this release a `Vec<u8>` field went through serde's sequence form: in MessagePack
//! (the Raft log, the WAL and the peer messages) an array with one integer per byte, one
//! marker per element and two bytes for every byte ≥ 0x80. [`BytesForm::Bin`] writes a
//! MessagePack `bin` instead: a length and the raw bytes.
//!
//! # Guarantees
//! - Decoding accepts both forms, whatever is written: a log, WAL or peer message of an
//!   older release still reads (the tests keep entries an older release wrote).
//! - What is written is [`BytesForm::IntArray`] unless the process chose
//!   [`set_write_form`]`(BytesForm::Bin)` or the encoding runs inside [`with_form`]. The
//!   int-array form is byte-for-byte what older releases wrote.
//!
//! # Assumptions
//! A member of an older release cannot read the bin form: a process writes it only once every
//! member of its cluster runs a release with this reader (`--etcd-compact-encoding`, see
//! docs/operations.md). A downgrade after that needs the WAL to hold no bin entry (a fresh
//! snapshot: the snapshot files hold no serialized byte strings of this kind).

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserializer, Serializer};

/// How a byte string is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BytesForm {
    /// A sequence of integers (MessagePack array): what every release reads.
    IntArray,
    /// Raw bytes (MessagePack `bin`): read only by releases with this module.
    Bin,
}

/// The process-wide form (false: `IntArray`).
static WRITE_BIN: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// A form chosen for the encodings running inside [`with_form`] on this thread.
    static OVERRIDE: Cell<Option<BytesForm>> = const { Cell::new(None) };
}

/// Chooses the form this process writes from now on (set once at startup, before the store
/// and Raft start).
pub fn set_write_form(form: BytesForm) {
    WRITE_BIN.store(form == BytesForm::Bin, Ordering::Relaxed);
}

/// The form written now on this thread.
pub fn write_form() -> BytesForm {
    OVERRIDE.with(Cell::get).unwrap_or_else(|| {
        if WRITE_BIN.load(Ordering::Relaxed) {
            BytesForm::Bin
        } else {
            BytesForm::IntArray
        }
    })
}

/// Runs `f` (an encoding) with byte strings written in `form` on this thread, whatever the
/// process-wide form is.
pub fn with_form<R>(form: BytesForm, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<BytesForm>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(OVERRIDE.with(|c| c.replace(Some(form))));
    f()
}

/// `serialize_with` for a `Vec<u8>` field: in the current [`write_form`].
pub(crate) fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    match write_form() {
        // Exactly what `Vec<u8>`'s own `Serialize` does.
        BytesForm::IntArray => s.collect_seq(bytes),
        BytesForm::Bin => s.serialize_bytes(bytes),
    }
}

/// `deserialize_with` for a `Vec<u8>` field: either form.
pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    d.deserialize_byte_buf(EitherForm)
}

/// Accepts a byte string (bin) or a sequence of integers 0–255 (the older form).
struct EitherForm;

/// Largest capacity reserved up front from an untrusted sequence length.
const MAX_PREALLOC: usize = 1 << 20;

impl<'de> Visitor<'de> for EitherForm {
    type Value = Vec<u8>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a byte string or a sequence of bytes")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
        Ok(v.to_vec())
    }

    fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
        Ok(v)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_PREALLOC));
        while let Some(b) = seq.next_element::<u8>()? {
            out.push(b);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;

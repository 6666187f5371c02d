//! The sequential model of an etcd key (put, get, compare-and-swap txn, delete), with the
//! revisions etcd reports.
//!
//! Assumptions: values written are unique per write (the checker cannot tell two writes of
//! the same value apart otherwise, and would then accept more histories, never fewer);
//! revisions are etcd's: a write's response header carries its revision, a read returns the
//! key's `mod_revision`, and every write to a key has a higher revision than the last.

use crate::wgl::Model;

/// What a client asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvInput {
    /// An unconditional write.
    Put {
        /// The key.
        key: String,
        /// The value written.
        value: String,
    },
    /// A linearizable read.
    Get {
        /// The key.
        key: String,
    },
    /// `Txn(If VALUE(key) == expect Then Put(key, value))`; `expect: None` is
    /// `If MOD(key) == 0` (create only if absent).
    Cas {
        /// The key.
        key: String,
        /// The value it must hold (`None`: it must be absent).
        expect: Option<String>,
        /// The value written when it does.
        value: String,
    },
    /// A delete of one key.
    Delete {
        /// The key.
        key: String,
    },
}

impl KvInput {
    /// The key the operation is on (its partition).
    pub fn key(&self) -> &str {
        match self {
            KvInput::Put { key, .. }
            | KvInput::Get { key }
            | KvInput::Cas { key, .. }
            | KvInput::Delete { key } => key,
        }
    }
}

/// What the store answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvOutput {
    /// The revision in the response header.
    Put {
        /// The header revision.
        rev: i64,
    },
    /// The value and its `mod_revision`, or `None` when absent.
    Get {
        /// The value and its `mod_revision`.
        value: Option<(String, i64)>,
    },
    /// `rev` is the header revision; it is checked only when the txn succeeded.
    Cas {
        /// Whether the comparison held.
        succeeded: bool,
        /// The header revision.
        rev: i64,
    },
    /// `rev` is the header revision; checked only when something was deleted.
    Delete {
        /// How many keys were deleted (0 or 1).
        deleted: i64,
        /// The header revision.
        rev: i64,
    },
}

/// One key: its value, and the revision of its last change when known (an operation with an
/// unknown outcome changes it to an unknown revision).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct KvState {
    /// The value, `None` when absent.
    pub value: Option<String>,
    /// The revision of the last change, when known.
    pub rev: Option<i64>,
}

/// The etcd key-value model, partitioned per key.
#[derive(Debug, Clone, Copy, Default)]
pub struct KvModel;

impl KvState {
    /// Whether `rev` may be the revision of the next change.
    fn later(&self, rev: i64) -> bool {
        self.rev.is_none_or(|r| rev > r)
    }

    fn written(value: Option<String>, rev: Option<i64>) -> KvState {
        KvState { value, rev }
    }
}

impl Model for KvModel {
    type State = KvState;
    type Input = KvInput;
    type Output = KvOutput;

    fn init(&self) -> KvState {
        KvState::default()
    }

    fn partition(&self, input: &KvInput) -> String {
        input.key().to_string()
    }

    fn step(&self, s: &KvState, input: &KvInput, output: Option<&KvOutput>) -> Option<KvState> {
        match (input, output) {
            (KvInput::Put { value, .. }, None) => Some(KvState::written(Some(value.clone()), None)),
            (KvInput::Put { value, .. }, Some(KvOutput::Put { rev })) => s
                .later(*rev)
                .then(|| KvState::written(Some(value.clone()), Some(*rev))),
            (KvInput::Get { .. }, None) => Some(s.clone()),
            (KvInput::Get { .. }, Some(KvOutput::Get { value })) => match (&s.value, value) {
                (None, None) => Some(s.clone()),
                (Some(have), Some((got, rev)))
                    if have == got && s.rev.is_none_or(|r| r == *rev) =>
                {
                    Some(KvState::written(Some(got.clone()), Some(*rev)))
                }
                _ => None,
            },
            (KvInput::Cas { expect, value, .. }, out) => {
                let holds = s.value == *expect;
                match out {
                    None if holds => Some(KvState::written(Some(value.clone()), None)),
                    None => Some(s.clone()),
                    Some(KvOutput::Cas { succeeded, rev }) => match (holds, *succeeded) {
                        (true, true) if s.later(*rev) => {
                            Some(KvState::written(Some(value.clone()), Some(*rev)))
                        }
                        (false, false) => Some(s.clone()),
                        _ => None,
                    },
                    Some(_) => None,
                }
            }
            (KvInput::Delete { .. }, out) => {
                let holds = s.value.is_some();
                match out {
                    None if holds => Some(KvState::written(None, None)),
                    None => Some(s.clone()),
                    Some(KvOutput::Delete { deleted, rev }) => match (holds, *deleted) {
                        (true, 1) if s.later(*rev) => Some(KvState::written(None, Some(*rev))),
                        (false, 0) => Some(s.clone()),
                        _ => None,
                    },
                    Some(_) => None,
                }
            }
            (_, Some(_)) => None,
        }
    }
}

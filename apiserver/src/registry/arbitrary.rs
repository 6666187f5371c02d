//! Arbitrary JSON objects for the property tests of the stored form's readers and writer
//! ([`super::projection`], [`super::transcode`], [`super::stored_form`]): nested maps and
//! arrays whose keys are drawn mostly from the few that a reader treats specially, so that
//! those are often present, at every depth.

use proptest::prelude::*;
use serde_json::Value;

/// A scalar: null, a boolean, an integer of either sign, a float (NaN and the infinities
/// become null, as in a `Value`) or any string.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        any::<String>().prop_map(Value::String),
    ]
}

/// Values up to four levels deep whose map keys are mostly `keys`, else one to three
/// arbitrary characters.
pub fn object(keys: &'static [&'static str]) -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        3 => prop::sample::select(keys).prop_map(str::to_string),
        1 => ".{1,3}",
    ];
    leaf().prop_recursive(4, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key.clone(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

//! Label and field selectors, parsed once per request and matched per object.

pub mod field;
pub mod label;

pub use field::FieldSelector;
pub use label::LabelSelector;

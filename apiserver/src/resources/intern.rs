//! Interning of the strings and rows of custom resources, so that rows derived from
//! CustomResourceDefinitions can be served as `&'static Resource` like the built-in ones.
//!
//! # Guarantees
//! - Each distinct string, string list, subresource list and row is allocated once for the
//!   life of the process; interning an equal value again returns the same reference and
//!   allocates nothing. Memory therefore grows with the number of *distinct* names ever
//!   defined (a handful of bytes per CRD name), never with the number of CRD updates: status
//!   writes, schema, default and printer-column changes do not touch rows at all (they live
//!   in the reference-counted snapshot of `custom`).

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use k3rs_apimachinery::catalog::Resource;

use k3rs_apimachinery::catalog::Subresource;

#[derive(Default)]
struct Interned {
    strs: HashSet<&'static str>,
    lists: HashSet<&'static [&'static str]>,
    subs: HashSet<&'static [Subresource]>,
    rows: HashSet<&'static Resource>,
}

fn table() -> std::sync::MutexGuard<'static, Interned> {
    static T: OnceLock<Mutex<Interned>> = OnceLock::new();
    T.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The interned copy of `s`.
pub fn str(s: &str) -> &'static str {
    let mut t = table();
    if let Some(x) = t.strs.get(s) {
        return x;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    t.strs.insert(leaked);
    leaked
}

/// The interned copy of a list of (interned) strings.
pub fn list(v: &[&'static str]) -> &'static [&'static str] {
    let mut t = table();
    if let Some(x) = t.lists.get(v) {
        return x;
    }
    let leaked: &'static [&'static str] = Box::leak(v.to_vec().into_boxed_slice());
    t.lists.insert(leaked);
    leaked
}

/// The interned copy of a list of subresources (of interned strings).
pub fn subresources(v: &[Subresource]) -> &'static [Subresource] {
    let mut t = table();
    if let Some(x) = t.subs.get(v) {
        return x;
    }
    let leaked: &'static [Subresource] = Box::leak(v.to_vec().into_boxed_slice());
    t.subs.insert(leaked);
    leaked
}

/// The interned copy of a row (whose references are interned or static).
pub fn row(r: Resource) -> &'static Resource {
    let mut t = table();
    if let Some(x) = t.rows.get(&r) {
        return x;
    }
    let leaked: &'static Resource = Box::leak(Box::new(r));
    t.rows.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_one_allocation() {
        let a = str(&String::from("widgets.example.com"));
        let b = str(&String::from("widgets.example.com"));
        assert!(std::ptr::eq(a, b));
        let l1 = list(&[a, "x"]);
        let l2 = list(&[b, "x"]);
        assert!(std::ptr::eq(l1, l2));
        assert!(!std::ptr::eq(list(&[a]), l1));
    }
}

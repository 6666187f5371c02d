//! Reinvocation (kube-apiserver's `admission.ReinvocationContext`): when a mutating webhook
//! changes the object, the mutating plugins run a second time, so that the built-in ones
//! see what the webhook added and webhooks with `reinvocationPolicy: IfNeeded` that ran
//! before the change see it as well.
//!
//! # Guarantees
//! - There are at most two passes; changes made during the second one start no third.
//! - In the second pass a webhook is called only when it asked for `IfNeeded`, was called
//!   in the first pass, and the object changed after that call (by a later webhook, or by
//!   a built-in plugin between the two passes).
//! - A webhook's own change never makes it be called again.

use std::collections::BTreeSet;

use serde_json::Value;

/// The reinvocation state of one request, carried in its attributes.
#[derive(Debug, Clone, Default)]
pub struct Reinvocation {
    /// The second pass is running.
    pub is_reinvoke: bool,
    /// A plugin changed the object in a way that needs the second pass.
    pub should_reinvoke: bool,
    webhooks: Webhooks,
}

/// What the webhook plugin remembers between passes.
#[derive(Debug, Clone, Default)]
struct Webhooks {
    /// The object as the webhook plugin last left it.
    last_output: Option<Value>,
    /// `IfNeeded` webhooks called since the object last changed.
    previously_invoked: BTreeSet<String>,
    /// The webhooks the second pass calls.
    to_reinvoke: BTreeSet<String>,
}

impl Reinvocation {
    /// The webhook plugin starts a pass over `object`: in the second pass, a change made
    /// since the plugin's first pass (by a built-in plugin) means every `IfNeeded` webhook
    /// called so far is called again.
    pub fn webhooks_start(&mut self, object: Option<&Value>) {
        if self.is_reinvoke && self.webhooks.last_output.as_ref() != object {
            self.require_reinvoking_previously_invoked();
        }
    }

    /// The webhook plugin ends a pass, leaving `object`. Kept only while an `IfNeeded`
    /// webhook was called: otherwise a change before the second pass calls no one again, and
    /// a copy of every object written would be made for nothing.
    pub fn webhooks_end(&mut self, object: Option<&Value>) {
        self.webhooks.last_output = if self.webhooks.previously_invoked.is_empty() {
            None
        } else {
            object.cloned()
        };
    }

    /// Whether the webhook `key` is called in this pass (all are in the first).
    pub fn should_call(&self, key: &str) -> bool {
        !self.is_reinvoke || self.webhooks.to_reinvoke.contains(key)
    }

    /// The webhook `key` was called and changed the object (`changed`) or not; `if_needed`
    /// is its `reinvocationPolicy: IfNeeded`.
    pub fn webhook_called(&mut self, key: &str, changed: bool, if_needed: bool) {
        if changed {
            self.require_reinvoking_previously_invoked();
            self.should_reinvoke = true;
        }
        if if_needed {
            self.webhooks.previously_invoked.insert(key.to_string());
        }
    }

    fn require_reinvoking_previously_invoked(&mut self) {
        let invoked = std::mem::take(&mut self.webhooks.previously_invoked);
        self.webhooks.to_reinvoke.extend(invoked);
    }

    /// The round of the current pass as audit annotations number it (0, then 1).
    pub fn round(&self) -> u8 {
        u8::from(self.is_reinvoke)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn second_pass(r: &mut Reinvocation) {
        assert!(r.should_reinvoke);
        r.is_reinvoke = true;
    }

    #[test]
    fn a_later_change_reinvokes_earlier_if_needed_webhooks_only() {
        let mut r = Reinvocation::default();
        let obj = json!({"a": 1});
        r.webhooks_start(Some(&obj));
        assert!(r.should_call("a") && r.should_call("b") && r.should_call("c"));
        r.webhook_called("a", false, true);
        r.webhook_called("n", false, false);
        r.webhook_called("b", true, true);
        r.webhook_called("c", false, true);
        r.webhooks_end(Some(&obj));
        second_pass(&mut r);
        r.webhooks_start(Some(&obj));
        assert!(r.should_call("a"), "called before b's change");
        assert!(!r.should_call("n"), "Never");
        assert!(!r.should_call("b"), "its own change");
        assert!(!r.should_call("c"), "called after the last change");
        assert_eq!(r.round(), 1);
    }

    #[test]
    fn the_object_is_kept_only_for_if_needed_webhooks() {
        let mut r = Reinvocation::default();
        let obj = json!({"a": 1});
        r.webhooks_start(Some(&obj));
        r.webhook_called("n", true, false);
        r.webhooks_end(Some(&obj));
        assert!(
            r.webhooks.last_output.is_none(),
            "no IfNeeded webhook: no copy"
        );
        second_pass(&mut r);
        r.webhooks_start(Some(&json!({"a": 2})));
        assert!(!r.should_call("n"), "Never, though the object changed");

        let mut r = Reinvocation::default();
        r.webhooks_start(Some(&obj));
        r.webhook_called("a", false, true);
        r.webhooks_end(Some(&obj));
        assert_eq!(r.webhooks.last_output.as_ref(), Some(&obj));
    }

    #[test]
    fn no_change_no_second_pass() {
        let mut r = Reinvocation::default();
        r.webhooks_start(None);
        r.webhook_called("a", false, true);
        r.webhooks_end(None);
        assert!(!r.should_reinvoke);
        assert_eq!(r.round(), 0);
    }

    #[test]
    fn a_built_in_change_between_passes_reinvokes_the_if_needed_ones() {
        let mut r = Reinvocation::default();
        r.webhooks_start(Some(&json!(1)));
        r.webhook_called("a", false, true);
        r.webhook_called("b", true, false);
        r.webhook_called("c", false, true);
        r.webhooks_end(Some(&json!(2)));
        second_pass(&mut r);
        // A built-in plugin changed the object during the second pass, before the webhooks.
        r.webhooks_start(Some(&json!(3)));
        assert!(r.should_call("a") && r.should_call("c"));
        assert!(!r.should_call("b"));
    }
}

//! The items of `--kube-apiserver-arg`, `--kube-scheduler-arg`, `--kube-controller-manager-arg`
//! and `--kube-proxy-arg` (k3s's way to pass a component's flags): `KEY=VALUE`, with a leading
//! `--` on the key allowed, as k3s allows.
//!
//! A component parses its items with [`Component::items`] and a `match` on the key; the
//! errors (no `=`, a key it does not take, a value the key does not take) read the same for
//! every component.

/// A component whose flags come as `--<name>-arg KEY=VALUE` items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Component {
    /// The component as the flag names it: `kube-scheduler` for `--kube-scheduler-arg`.
    pub name: &'static str,
    /// The keys it takes, listed when another one is given.
    pub supported: &'static [&'static str],
}

/// A `--<component>-arg` item that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// The item has no `=`.
    #[error("--{}-arg {item:?}: expected KEY=VALUE", component.name)]
    NotKeyValue {
        /// Whose flag.
        component: Component,
        /// The item given.
        item: String,
    },
    /// The key is not one the component takes.
    #[error(
        "--{0}-arg: unsupported {0} flag {key:?} (supported: {1})",
        component.name,
        component.supported.join(", ")
    )]
    Unsupported {
        /// Whose flag.
        component: Component,
        /// The key given (without its `--`).
        key: String,
    },
    /// The value is not one the key takes.
    #[error("--{}-arg {key}: {value:?} is not a valid {what}", component.name)]
    Invalid {
        /// Whose flag.
        component: Component,
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What the key takes (`duration`, `CIDR`, …).
        what: &'static str,
    },
}

impl Component {
    /// `(key, value)` of each item in order (later ones override earlier ones in every
    /// component), or [`ArgError::NotKeyValue`] for an item without `=`.
    pub fn items(
        self,
        items: &[String],
    ) -> impl Iterator<Item = Result<(&str, &str), ArgError>> + '_ {
        items.iter().map(move |item| {
            key_value(item).ok_or_else(|| ArgError::NotKeyValue {
                component: self,
                item: item.clone(),
            })
        })
    }

    /// The error for a key the component does not take.
    pub fn unsupported(self, key: &str) -> ArgError {
        ArgError::Unsupported {
            component: self,
            key: key.to_string(),
        }
    }

    /// The error for a `value` that `key` does not take; `what` says what it takes.
    pub fn invalid(self, key: &str, value: &str, what: &'static str) -> ArgError {
        ArgError::Invalid {
            component: self,
            key: key.to_string(),
            value: value.to_string(),
            what,
        }
    }
}

/// `(key, value)` of one item, or `None` when it has no `=`.
pub fn key_value(item: &str) -> Option<(&str, &str)> {
    let (key, value) = item.split_once('=')?;
    Some((key.trim_start_matches("--"), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOY: Component = Component {
        name: "kube-toy",
        supported: &["a", "b"],
    };

    #[test]
    fn splits_at_the_first_equals_sign_and_drops_dashes() {
        assert_eq!(key_value("--a=b=c"), Some(("a", "b=c")));
        assert_eq!(key_value("a="), Some(("a", "")));
        assert_eq!(key_value("a"), None);
    }

    #[test]
    fn an_item_without_equals_sign_is_refused() {
        let items = ["--a=1".to_string(), "b".to_string(), "c=3".to_string()];
        let mut it = TOY.items(&items);
        assert_eq!(it.next(), Some(Ok(("a", "1"))));
        let err = it.next().unwrap().unwrap_err();
        assert_eq!(err.to_string(), "--kube-toy-arg \"b\": expected KEY=VALUE");
    }

    #[test]
    fn errors_name_the_component_its_flag_and_what_it_takes() {
        assert_eq!(
            TOY.unsupported("v").to_string(),
            "--kube-toy-arg: unsupported kube-toy flag \"v\" (supported: a, b)"
        );
        assert_eq!(
            TOY.invalid("a", "x", "duration").to_string(),
            "--kube-toy-arg a: \"x\" is not a valid duration"
        );
    }
}

//! The items of `--kube-apiserver-arg` and `--kube-controller-manager-arg` (k3s's way to pass
//! a component's flags): `KEY=VALUE`, with a leading `--` on the key allowed, as k3s allows.

/// `(key, value)` of one item, or `None` when it has no `=`.
pub fn key_value(item: &str) -> Option<(&str, &str)> {
    let (key, value) = item.split_once('=')?;
    Some((key.trim_start_matches("--"), value))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_the_first_equals_sign_and_drops_dashes() {
        assert_eq!(key_value("--a=b=c"), Some(("a", "b=c")));
        assert_eq!(key_value("a="), Some(("a", "")));
        assert_eq!(key_value("a"), None);
    }
}

//! How a switch (a flag that takes no value, like `--disable-agent`) reads its environment
//! variable: as k3s's flags do, with Go's boolean literals, and an empty variable counts as
//! unset, so `K3RS_DISABLE_AGENT=` in a unit file or a shell leaves the switch off instead of
//! stopping the start.

/// Parses a switch's value (from its environment variable, or clap's own `true`/`false`):
/// `1`, `t`, `T`, `TRUE`, `true`, `True` are on; `0`, `f`, `F`, `FALSE`, `false`, `False` and
/// the empty string are off; anything else is an error naming the accepted values.
pub fn parse(value: &str) -> Result<bool, String> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "" | "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        other => Err(format!(
            "{other:?} is not a boolean: use true or false (or 1/0, t/f), or leave it empty"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn go_boolean_literals_and_empty_are_read() {
        for on in ["1", "t", "T", "TRUE", "true", "True"] {
            assert_eq!(parse(on), Ok(true), "{on}");
        }
        for off in ["", "0", "f", "F", "FALSE", "false", "False"] {
            assert_eq!(parse(off), Ok(false), "{off:?}");
        }
    }

    #[test]
    fn other_words_are_refused_with_the_accepted_values() {
        for bad in ["yes", "on", "tRUE", " true", "true\n", "2", "-1", "enabled"] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains("use true or false"), "{bad:?}: {err}");
        }
    }
}

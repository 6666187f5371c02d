//! `$(VAR)` references in env values, command and args, expanded by upstream's rules
//! (`third_party/forked/golang/expansion`): `$(NAME)` becomes the variable's value when it is
//! defined and stays as written when not; `$$` is an escaped `$`; a `$` before anything else,
//! or an unclosed `$(`, stays as written.

/// Expands `input`, looking names up with `lookup`.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let Some(next) = after.chars().next() else {
            // A trailing `$` is kept.
            out.push('$');
            rest = after;
            break;
        };
        match next {
            '$' => {
                out.push('$');
                rest = &after[1..];
            }
            '(' => match after.find(')') {
                Some(close) => {
                    let name = &after[1..close];
                    match lookup(name) {
                        Some(v) => out.push_str(&v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &after[close + 1..];
                }
                None => {
                    out.push_str("$(");
                    rest = &after[1..];
                }
            },
            c => {
                out.push('$');
                out.push(c);
                rest = &after[c.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn vars() -> BTreeMap<&'static str, &'static str> {
        [
            ("VAR_A", "A"),
            ("VAR_B", "B"),
            ("EMPTY", ""),
            ("ref", "$(VAR_A)"),
        ]
        .into()
    }

    fn x(input: &str) -> String {
        let v = vars();
        expand(input, |n| v.get(n).map(|s| s.to_string()))
    }

    #[test]
    fn upstream_cases() {
        let table = [
            ("$(VAR_A)", "A"),
            ("___$(VAR_A)___", "___A___"),
            ("$(VAR_A)-$(VAR_B)", "A-B"),
            ("$(VAR_A)$(VAR_B)", "AB"),
            ("$(EMPTY)", ""),
            ("x$(EMPTY)y", "xy"),
            // Undefined references stay.
            ("$(UNDEFINED)", "$(UNDEFINED)"),
            ("foo$(UNDEFINED)bar", "foo$(UNDEFINED)bar"),
            // Escapes.
            ("$$(VAR_A)", "$(VAR_A)"),
            ("$$$(VAR_A)", "$A"),
            ("$$$$(VAR_A)", "$$(VAR_A)"),
            ("f000-$$VAR_A", "f000-$VAR_A"),
            // Not a reference.
            ("$VAR_A", "$VAR_A"),
            ("$", "$"),
            ("foo$", "foo$"),
            ("$(VAR_A", "$(VAR_A"),
            ("$(", "$("),
            ("$()", "$()"),
            ("$)", "$)"),
            ("$(VAR_A)$", "A$"),
            // Values are not expanded again.
            ("$(ref)", "$(VAR_A)"),
            // Nested openers: the name runs to the first closer.
            ("$(VAR_$(VAR_A))", "$(VAR_$(VAR_A))"),
            ("héllo $(VAR_A) wörld $ü", "héllo A wörld $ü"),
        ];
        for (input, want) in table {
            assert_eq!(x(input), want, "{input:?}");
        }
    }
}

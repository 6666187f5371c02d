//! `--kube-controller-manager-arg KEY=VALUE` (k3s's way to pass kube-controller-manager
//! flags): the flags the in-process controller manager understands.

use super::selection::{Selection, UnknownController};

/// The controller manager's settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Args {
    /// `controllers`: which controllers run (default `*`).
    pub controllers: Selection,
}

/// A `--kube-controller-manager-arg` that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgError {
    #[error("--kube-controller-manager-arg {0:?}: expected KEY=VALUE")]
    NotKeyValue(String),
    #[error("--kube-controller-manager-arg: unsupported kube-controller-manager flag {0:?} (supported: controllers)")]
    Unsupported(String),
    #[error(transparent)]
    Controllers(#[from] UnknownController),
}

impl Args {
    /// Parses `KEY=VALUE` items (a leading `--` on the key is allowed, as k3s allows); later
    /// items override earlier ones.
    pub fn parse(items: &[String]) -> Result<Args, ArgError> {
        let mut args = Args::default();
        for item in items {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| ArgError::NotKeyValue(item.clone()))?;
            match key.trim_start_matches("--") {
                "controllers" => {
                    args.controllers = Selection::parse(value, &super::known())?;
                }
                other => return Err(ArgError::Unsupported(other.to_string())),
            }
        }
        Ok(args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<Args, ArgError> {
        Args::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn controllers_selects() {
        let a = parse(&["controllers=*,-resourcequota"]).unwrap();
        assert!(!a.controllers.enables("resourcequota"));
        assert!(a.controllers.enables("serviceaccount"));
        assert_eq!(parse(&[]).unwrap(), Args::default());
        assert!(parse(&["--controllers=serviceaccount"]).is_ok());
    }

    #[test]
    fn bad_items_are_refused_with_their_text() {
        assert_eq!(
            parse(&["controllers"]).unwrap_err(),
            ArgError::NotKeyValue("controllers".into())
        );
        assert_eq!(
            parse(&["bind-address=0.0.0.0"]).unwrap_err(),
            ArgError::Unsupported("bind-address".into())
        );
        assert!(matches!(
            parse(&["controllers=*,-nope"]).unwrap_err(),
            ArgError::Controllers(_)
        ));
    }
}

//! The config file: `/etc/k3rs/config.yaml` (or `--config FILE` / `K3RS_CONFIG_FILE`), then
//! every `config.yaml.d/*.yaml` beside it in name order. Keys are the long flag names of the
//! subcommand being run, values are what the flag takes (a list for a repeatable flag, `true`
//! for a switch). A later file replaces a key of an earlier one, except that `key+:` appends to
//! it. The keys become flags placed right after the subcommand name, before the command line's
//! own, so a flag given on the command line wins over the file and the values of a repeatable
//! flag add up — as k3s does. Keys that are flags of another subcommand are skipped (one file
//! serves `server` and `agent`); keys that are flags of none are refused.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde_norway::Value;

/// Where the config file is looked for when nothing else says.
pub const DEFAULT_PATH: &str = "/etc/k3rs/config.yaml";
/// The environment variable naming the config file.
pub const ENV: &str = "K3RS_CONFIG_FILE";

/// Where a setting was written: the file and the line of its key (1-based; 0 when the key
/// could not be found in the text, e.g. written in YAML's flow style).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    pub path: PathBuf,
    pub line: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            0 => write!(f, "{}", self.path.display()),
            line => write!(f, "{}:{line}", self.path.display()),
        }
    }
}

/// Why the config files cannot be used; every message names the file, and where it can, the
/// line and the key.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("reading config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not YAML: where the parser stopped (`file:line:column`).
    #[error("config file {path}:{line}:{column}: invalid YAML: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("config file {at}: {key:?} is not a flag of any k3rs command")]
    UnknownKey { at: Origin, key: String },
    #[error("config file {at}: {key:?} must be a string, number, boolean or a list of them")]
    BadValue { at: Origin, key: String },
    /// A value the flag does not take (clap's reason).
    #[error("config file {at}: {key:?}: {message}")]
    InvalidValue {
        at: Origin,
        key: String,
        message: String,
    },
}

/// One file's settings in order; `append` marks `key+:` entries.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    key: String,
    /// Where the key was written (the last file that set it).
    at: Origin,
    /// The values, each with where it was written (`key+:` gathers them from several files).
    values: Vec<(String, Origin)>,
    /// A switch set to `false`: the flag is left out.
    off: bool,
    append: bool,
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The line (1-based) where the top-level key `raw` is written in `text`, plain or quoted;
/// 0 when it is not found.
fn key_line(text: &str, raw: &str) -> usize {
    let forms = [
        format!("{raw}:"),
        format!("\"{raw}\":"),
        format!("'{raw}':"),
    ];
    text.lines()
        .position(|l| forms.iter().any(|f| l.starts_with(f.as_str())))
        .map_or(0, |i| i + 1)
}

/// The entries of one file's text.
fn entries(path: &Path, text: &str) -> Result<Vec<Entry>, Error> {
    let doc: Value = serde_norway::from_str(text).map_err(|e| match e.location() {
        Some(at) => Error::Syntax {
            path: path.to_path_buf(),
            line: at.line(),
            column: at.column(),
            message: e.to_string(),
        },
        None => Error::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        },
    })?;
    let map = match doc {
        Value::Null => return Ok(Vec::new()),
        Value::Mapping(m) => m,
        _ => {
            return Err(Error::Parse {
                path: path.to_path_buf(),
                message: "expected a mapping of flag names to values".into(),
            })
        }
    };
    let mut out = Vec::new();
    for (k, v) in map {
        let raw = scalar(&k).ok_or_else(|| Error::Parse {
            path: path.to_path_buf(),
            message: format!("key {k:?} is not a string"),
        })?;
        let at = Origin {
            path: path.to_path_buf(),
            line: key_line(text, &raw),
        };
        let (key, append) = match raw.strip_suffix('+') {
            Some(k) => (k.to_string(), true),
            None => (raw, false),
        };
        let bad = || Error::BadValue {
            at: at.clone(),
            key: key.clone(),
        };
        let (values, off) = match &v {
            Value::Sequence(items) => (
                items
                    .iter()
                    .map(scalar)
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(bad)?,
                false,
            ),
            Value::Bool(false) => (Vec::new(), true),
            Value::Bool(true) => (Vec::new(), false),
            other => (vec![scalar(other).ok_or_else(bad)?], false),
        };
        out.push(Entry {
            values: values.into_iter().map(|v| (v, at.clone())).collect(),
            key,
            at,
            off,
            append,
        });
    }
    Ok(out)
}

/// Later files' entries over earlier ones (`+` appends).
fn merge(files: Vec<Vec<Entry>>) -> Vec<Entry> {
    let mut merged: Vec<Entry> = Vec::new();
    for e in files.into_iter().flatten() {
        match merged.iter_mut().find(|m| m.key == e.key) {
            Some(m) if e.append => {
                m.values.extend(e.values);
                m.at = e.at;
                m.off = false;
            }
            Some(m) => *m = Entry { append: false, ..e },
            None => merged.push(Entry { append: false, ..e }),
        }
    }
    merged
}

/// The argument of `cmd` whose long name is `name`.
fn argument<'a>(cmd: &'a clap::Command, name: &str) -> Option<&'a clap::Arg> {
    cmd.get_arguments().find(|a| a.get_long() == Some(name))
}

/// Whether `name` is a flag of any subcommand (or of the top level).
fn known_anywhere(root: &clap::Command, name: &str) -> bool {
    argument(root, name).is_some() || root.get_subcommands().any(|s| known_anywhere(s, name))
}

/// Whether `arg` takes `value` (its own value parser, delimiter and possible values), as
/// clap would say it on the command line; checked here so that the message can name the
/// file and line instead of a flag the user never typed.
fn check_value(arg: &clap::Arg, key: &str, value: &str) -> Result<(), String> {
    let mut probe = clap::Arg::new(key.to_string())
        .long(key.to_string())
        .value_parser(arg.get_value_parser().clone())
        .action(clap::ArgAction::Append);
    if let Some(names) = arg.get_value_names() {
        probe = probe.value_names(names.to_vec());
    }
    if let Some(d) = arg.get_value_delimiter() {
        probe = probe.value_delimiter(d);
    }
    clap::Command::new("k3rs")
        .color(clap::ColorChoice::Never)
        .no_binary_name(true)
        .arg(probe)
        .try_get_matches_from([format!("--{key}={value}")])
        .map(drop)
        .map_err(|e| {
            let text = e.to_string();
            let first = text.lines().next().unwrap_or_default();
            first.strip_prefix("error: ").unwrap_or(first).to_string()
        })
}

/// The flags that `entries` give the subcommand `sub`.
fn flags_for(
    root: &clap::Command,
    sub: &clap::Command,
    entries: &[Entry],
) -> Result<Vec<OsString>, Error> {
    let mut out = Vec::new();
    for e in entries {
        let Some(arg) = argument(sub, &e.key) else {
            if known_anywhere(root, &e.key) {
                continue;
            }
            return Err(Error::UnknownKey {
                at: e.at.clone(),
                key: e.key.clone(),
            });
        };
        if e.off {
            continue;
        }
        if !arg.get_action().takes_values() {
            // A switch: `key: true` (or `"true"`); anything else is a mistake to name.
            if let Some((v, at)) = e.values.iter().find(|(v, _)| v != "true") {
                return Err(Error::InvalidValue {
                    at: at.clone(),
                    key: e.key.clone(),
                    message: format!("{v:?}: a switch takes true or false"),
                });
            }
            out.push(format!("--{}", e.key).into());
            continue;
        }
        for (v, at) in &e.values {
            check_value(arg, &e.key, v).map_err(|message| Error::InvalidValue {
                at: at.clone(),
                key: e.key.clone(),
                message,
            })?;
            out.push(OsString::from(format!("--{}={v}", e.key)));
        }
    }
    Ok(out)
}

/// The config file the command line or environment names (`explicit` = must exist).
fn chosen_path(args: &[OsString], env: Option<OsString>) -> (PathBuf, bool) {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let s = a.to_string_lossy();
        if s == "--config" || s == "-c" {
            if let Some(p) = it.next() {
                return (PathBuf::from(p), true);
            }
        } else if let Some(p) = s.strip_prefix("--config=") {
            return (PathBuf::from(p), true);
        }
    }
    match env.filter(|e| !e.is_empty()) {
        Some(p) => (PathBuf::from(p), true),
        None => (PathBuf::from(DEFAULT_PATH), false),
    }
}

/// The files to read: the config file, then its `.d` directory's `*.yaml` in name order.
fn files(path: &Path, explicit: bool) -> Result<Vec<(PathBuf, String)>, Error> {
    let read = |p: &Path| {
        std::fs::read_to_string(p).map_err(|source| Error::Read {
            path: p.to_path_buf(),
            source,
        })
    };
    let mut out = Vec::new();
    match read(path) {
        Ok(text) => out.push((path.to_path_buf(), text)),
        Err(Error::Read { source, .. })
            if !explicit && source.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let dir = PathBuf::from(format!("{}.d", path.display()));
    if let Ok(listing) = std::fs::read_dir(&dir) {
        let mut extra: Vec<PathBuf> = listing
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
            .collect();
        extra.sort();
        for p in extra {
            let text = read(&p)?;
            out.push((p, text));
        }
    }
    Ok(out)
}

/// `argv` with the config file's flags inserted after the subcommand name (unchanged when
/// there is no subcommand or no config file).
pub fn expand(argv: Vec<OsString>, root: &clap::Command) -> Result<Vec<OsString>, Error> {
    let Some(at) = argv
        .iter()
        .skip(1)
        .position(|a| root.find_subcommand(a).is_some())
        .map(|i| i + 1)
    else {
        return Ok(argv);
    };
    let Some(sub) = root.find_subcommand(&argv[at]) else {
        return Ok(argv);
    };
    if sub.get_name() == "kubectl" {
        // Everything after it is kubectl's.
        return Ok(argv);
    }
    let (path, explicit) = chosen_path(&argv[at + 1..], std::env::var_os(ENV));
    let texts = files(&path, explicit)?;
    let mut parsed = Vec::new();
    for (p, text) in &texts {
        parsed.push(entries(p, text)?);
    }
    let flags = flags_for(root, sub, &merge(parsed))?;
    let mut out = argv[..=at].to_vec();
    out.extend(flags);
    out.extend_from_slice(&argv[at + 1..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<Entry> {
        entries(Path::new("c.yaml"), text).unwrap()
    }

    fn root() -> clap::Command {
        clap::Command::new("k3rs")
            .arg(
                clap::Arg::new("debug")
                    .long("debug")
                    .action(clap::ArgAction::SetTrue),
            )
            .subcommand(
                clap::Command::new("server")
                    .arg(clap::Arg::new("config").long("config"))
                    .arg(clap::Arg::new("port").long("https-listen-port"))
                    .arg(
                        clap::Arg::new("san")
                            .long("tls-san")
                            .action(clap::ArgAction::Append),
                    )
                    .arg(
                        clap::Arg::new("ds")
                            .long("disable-scheduler")
                            .action(clap::ArgAction::SetTrue),
                    ),
            )
            .subcommand(
                clap::Command::new("agent")
                    .arg(clap::Arg::new("config").long("config"))
                    .arg(
                        clap::Arg::new("nl")
                            .long("node-label")
                            .action(clap::ArgAction::Append),
                    ),
            )
    }

    fn strings(v: &[OsString]) -> Vec<String> {
        v.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    fn server_flags(e: &[Entry]) -> Result<Vec<String>, Error> {
        let root = root();
        flags_for(&root, root.find_subcommand("server").unwrap(), e).map(|f| strings(&f))
    }

    #[test]
    fn values_switches_and_lists() {
        let e = parse("https-listen-port: 7443\ndisable-scheduler: true\ntls-san: [a, b]\n");
        assert_eq!(
            server_flags(&e).unwrap(),
            [
                "--https-listen-port=7443",
                "--disable-scheduler",
                "--tls-san=a",
                "--tls-san=b"
            ]
        );
        assert!(server_flags(&parse("disable-scheduler: false\n"))
            .unwrap()
            .is_empty());
    }

    #[test]
    fn later_files_replace_and_plus_appends() {
        let merged = merge(vec![
            parse("tls-san: [a]\nhttps-listen-port: 1\nnode-label: [x=1]\n"),
            parse("tls-san+: [b]\nhttps-listen-port: 2\n"),
            parse("node-label: [y=2]\n"),
        ]);
        let get = |k: &str| {
            let e = merged.iter().find(|e| e.key == k).unwrap();
            e.values.iter().map(|(v, _)| v.clone()).collect::<Vec<_>>()
        };
        assert_eq!(get("tls-san"), ["a", "b"]);
        assert_eq!(get("https-listen-port"), ["2"]);
        assert_eq!(get("node-label"), ["y=2"]);
    }

    #[test]
    fn other_commands_keys_are_skipped_and_unknown_keys_refused() {
        let e = parse("node-label: [a=b]\nhttps-listen-port: 1\n");
        assert_eq!(server_flags(&e).unwrap(), ["--https-listen-port=1"]);
        let typo = parse("# settings\ntls-san: [a]\nhtps-listen-port: 1\n");
        assert_eq!(
            server_flags(&typo).unwrap_err().to_string(),
            "config file c.yaml:3: \"htps-listen-port\" is not a flag of any k3rs command"
        );
    }

    #[test]
    fn bad_documents_are_refused_naming_file_line_and_key() {
        let p = Path::new("c.yaml");
        assert!(entries(p, "- a\n- b\n").is_err());
        assert_eq!(
            entries(p, "https-listen-port: 1\ntls-san: {a: b}\n")
                .unwrap_err()
                .to_string(),
            "config file c.yaml:2: \"tls-san\" must be a string, number, boolean or a list of them"
        );
        assert_eq!(entries(p, "").unwrap(), Vec::new());
        // Not YAML: file, line and column of where the parser stopped.
        let err = entries(p, "tls-san: [a\nhttps-listen-port: 1\n  x: : y\n").unwrap_err();
        let Error::Syntax { line, column, .. } = &err else {
            panic!("{err:?}");
        };
        assert!(*line >= 2 && *column >= 1, "{err}");
        assert!(
            err.to_string().starts_with(&format!(
                "config file c.yaml:{line}:{column}: invalid YAML: "
            )),
            "{err}"
        );
    }

    #[test]
    fn a_value_the_flag_does_not_take_names_its_key_and_line() {
        let root = clap::Command::new("k3rs").subcommand(
            clap::Command::new("server")
                .arg(
                    clap::Arg::new("port")
                        .long("https-listen-port")
                        .value_parser(clap::value_parser!(u16)),
                )
                .arg(
                    clap::Arg::new("backend")
                        .long("flannel-backend")
                        .value_parser(["host-gw", "none"]),
                )
                .arg(
                    clap::Arg::new("ip")
                        .long("node-ip")
                        .value_delimiter(',')
                        .action(clap::ArgAction::Append)
                        .value_parser(clap::value_parser!(std::net::IpAddr)),
                )
                .arg(
                    clap::Arg::new("ds")
                        .long("disable-scheduler")
                        .action(clap::ArgAction::SetTrue),
                ),
        );
        let server = root.find_subcommand("server").unwrap();
        let err = |text: &str| {
            flags_for(&root, server, &parse(text))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("flannel-backend: none\nhttps-listen-port: many\n"),
            "config file c.yaml:2: \"https-listen-port\": invalid value 'many' for \
             '--https-listen-port <https-listen-port>': invalid digit found in string"
        );
        assert!(
            err("flannel-backend: vxlan\n").starts_with(
                "config file c.yaml:1: \"flannel-backend\": invalid value 'vxlan' for \
                 '--flannel-backend <flannel-backend>'"
            ),
            "{}",
            err("flannel-backend: vxlan\n")
        );
        assert!(
            err("node-ip: [10.0.0.1, \"10.0.0.2,ten\"]\n")
                .starts_with("config file c.yaml:1: \"node-ip\": invalid value 'ten'"),
            "{}",
            err("node-ip: [10.0.0.1, \"10.0.0.2,ten\"]\n")
        );
        assert_eq!(
            err("disable-scheduler: [a]\n"),
            "config file c.yaml:1: \"disable-scheduler\": \"a\": a switch takes true or false"
        );
        let ok = flags_for(
            &root,
            server,
            &parse("https-listen-port: 7443\nnode-ip: 10.0.0.1,10.0.0.2\n"),
        )
        .unwrap();
        assert_eq!(
            strings(&ok),
            ["--https-listen-port=7443", "--node-ip=10.0.0.1,10.0.0.2"]
        );
    }

    #[test]
    fn the_command_line_names_the_file_or_the_environment_does() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(
            chosen_path(&args(&["--config", "/x.yaml"]), None),
            (PathBuf::from("/x.yaml"), true)
        );
        assert_eq!(
            chosen_path(&args(&["--config=/y.yaml"]), Some("/z".into())),
            (PathBuf::from("/y.yaml"), true)
        );
        assert_eq!(
            chosen_path(&[], Some("/z".into())),
            (PathBuf::from("/z"), true)
        );
        assert_eq!(chosen_path(&[], None), (PathBuf::from(DEFAULT_PATH), false));
    }

    #[test]
    fn flags_go_after_the_subcommand_before_the_command_lines_own() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, "https-listen-port: 1\ntls-san: [a]\n").unwrap();
        std::fs::create_dir(dir.path().join("config.yaml.d")).unwrap();
        std::fs::write(
            dir.path().join("config.yaml.d/20-b.yaml"),
            "tls-san+: [c]\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("config.yaml.d/10-a.yaml"),
            "tls-san+: [b]\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("config.yaml.d/notes.txt"), "ignored: x\n").unwrap();
        let argv: Vec<OsString> = ["k3rs", "--debug", "server", "--config"]
            .into_iter()
            .map(OsString::from)
            .chain([
                path.clone().into_os_string(),
                "--https-listen-port=2".into(),
            ])
            .collect();
        let out = strings(&expand(argv, &root()).unwrap());
        assert_eq!(
            out[..7],
            [
                "k3rs",
                "--debug",
                "server",
                "--https-listen-port=1",
                "--tls-san=a",
                "--tls-san=b",
                "--tls-san=c"
            ]
        );
        assert_eq!(out.last().unwrap(), "--https-listen-port=2");
        // A named file that does not exist is an error.
        let missing: Vec<OsString> = ["k3rs", "server", "--config", "/nonexistent/k3rs.yaml"]
            .into_iter()
            .map(OsString::from)
            .collect();
        assert!(matches!(expand(missing, &root()), Err(Error::Read { .. })));
    }
}

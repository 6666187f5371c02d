//! Runs an etcdctl script against one endpoint and records a normalized transcript.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use super::normalize::Normalizer;
use crate::common::etcdctl::{etcdctl_background, etcdctl_with_timeout};
use crate::common::process::Background;
use crate::common::Endpoint;

/// One step of a script. Arguments may contain `${VAR}`, filled from earlier captures.
#[derive(Debug, Clone)]
pub enum Step {
    /// `etcdctl ARGS` (with stdin); `capture` stores the JSON `header.revision` of its output.
    Ctl {
        args: Vec<String>,
        stdin: Option<String>,
        capture: Option<&'static str>,
    },
    /// Repeats `etcdctl ARGS` until its stdout is `want` (or `timeout`); records the last run.
    PollUntil {
        args: Vec<String>,
        want: String,
        timeout: Duration,
    },
    /// Starts `etcdctl ARGS` (a watch) in the background under `name`.
    Start {
        name: &'static str,
        args: Vec<String>,
    },
    /// Stops the background process `name` and records what it printed.
    Stop {
        name: &'static str,
    },
    /// `etcdctl put <prefix><n>` of `value_bytes` bytes (from stdin) for n = 0, 1, … until a
    /// put fails (at most `max`); records only that failure, not how many puts it took (two
    /// stores fill differently).
    FillUntilRefused {
        prefix: &'static str,
        value_bytes: usize,
        max: usize,
    },
    /// `etcdctl ARGS` whose output differs legitimately between stores (counts and revisions
    /// after a fill): records only the exit status; `capture` as in [`Step::Ctl`].
    ExitOnly {
        args: Vec<String>,
        capture: Option<&'static str>,
    },
    /// A call etcdctl cannot make (e.g. an alarm ACTIVATE over gRPC): records what `call`
    /// answers, normalized like etcdctl's output.
    Call {
        name: &'static str,
        call: fn(&Endpoint) -> String,
    },
    Sleep(Duration),
    /// Kills the server with SIGKILL and starts it again on the same data dir and port.
    Restart,
}

fn split(cmd: &str) -> Vec<String> {
    cmd.split_whitespace().map(str::to_string).collect()
}

/// `etcdctl` with whitespace-separated arguments.
pub fn ctl(cmd: &str) -> Step {
    Step::Ctl {
        args: split(cmd),
        stdin: None,
        capture: None,
    }
}

/// `etcdctl` with explicit arguments (for arguments containing spaces or empty strings).
pub fn ctl_args(args: &[&str]) -> Step {
    Step::Ctl {
        args: args.iter().map(|s| s.to_string()).collect(),
        stdin: None,
        capture: None,
    }
}

/// `etcdctl` reading `stdin` (e.g. a txn).
pub fn ctl_stdin(cmd: &str, stdin: &str) -> Step {
    Step::Ctl {
        args: split(cmd),
        stdin: Some(stdin.to_string()),
        capture: None,
    }
}

/// `etcdctl ... -w json`, storing the response's header revision as `${var}`.
pub fn ctl_capture(cmd: &str, var: &'static str) -> Step {
    Step::Ctl {
        args: split(cmd),
        stdin: None,
        capture: Some(var),
    }
}

/// See [`Step::FillUntilRefused`].
pub fn fill_until_refused(prefix: &'static str, value_bytes: usize, max: usize) -> Step {
    Step::FillUntilRefused {
        prefix,
        value_bytes,
        max,
    }
}

/// See [`Step::ExitOnly`].
pub fn exit_only(cmd: &str, capture: Option<&'static str>) -> Step {
    Step::ExitOnly {
        args: split(cmd),
        capture,
    }
}

pub fn poll_until(cmd: &str, want: &str, timeout_secs: u64) -> Step {
    Step::PollUntil {
        args: split(cmd),
        want: want.to_string(),
        timeout: Duration::from_secs(timeout_secs),
    }
}

pub fn start(name: &'static str, cmd: &str) -> Step {
    Step::Start {
        name,
        args: split(cmd),
    }
}

pub fn stop(name: &'static str) -> Step {
    Step::Stop { name }
}

pub fn sleep_ms(ms: u64) -> Step {
    Step::Sleep(Duration::from_millis(ms))
}

/// One recorded step: the command as written in the script, and its normalized output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub command: String,
    pub output: String,
}

/// How long one etcdctl may run before we kill it (a hang shows up as `[killed]`).
const CTL_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs `steps` against `ep` and returns one record per step that produces output.
pub fn run_script(ep: &Endpoint, steps: &[Step], restart: &mut dyn FnMut()) -> Vec<Record> {
    let scratch = tempfile::Builder::new()
        .prefix("etcdctl-compat-")
        .tempdir()
        .expect("tempdir");
    let snap = scratch.path().join("snapshot.db");
    let mut vars: BTreeMap<String, String> = BTreeMap::new();
    vars.insert("SNAP".into(), snap.display().to_string());
    let mut norm = Normalizer::new(ep, &snap);
    let mut background: HashMap<&'static str, (String, Background)> = HashMap::new();
    let mut records = Vec::new();

    for step in steps {
        match step {
            Step::Ctl {
                args,
                stdin,
                capture,
            } => {
                let real = substitute(args, &vars);
                let out = run(ep, &real, stdin.as_deref());
                norm.learn_leases(&out.1);
                for (i, hex) in norm.leases().iter().enumerate() {
                    vars.insert(format!("LEASE{}", i + 1), hex.clone());
                }
                if let Some(var) = capture {
                    let rev = header_revision(&out.1).unwrap_or_else(|| {
                        panic!("capture {var}: no header.revision in output of {real:?}: {out:?}")
                    });
                    vars.insert(var.to_string(), rev.to_string());
                    for ahead in 1..=5 {
                        vars.insert(format!("{var}+{ahead}"), (rev + ahead).to_string());
                    }
                }
                records.push(record(args, stdin.as_deref(), &norm, out));
            }
            Step::PollUntil {
                args,
                want,
                timeout,
            } => {
                let real = substitute(args, &vars);
                let deadline = Instant::now() + *timeout;
                let out = loop {
                    let out = run(ep, &real, None);
                    if out.1.trim() == want.trim() || Instant::now() > deadline {
                        break out;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                };
                records.push(record(args, None, &norm, out));
            }
            Step::Start { name, args } => {
                let real = substitute(args, &vars);
                let refs: Vec<&str> = real.iter().map(String::as_str).collect();
                let bg = etcdctl_background(ep, &refs);
                background.insert(name, (args.join(" "), bg));
            }
            Step::Stop { name } => {
                let (cmd, bg) = background
                    .remove(name)
                    .expect("stop of a process never started");
                let (code, stdout, stderr) = bg.stop();
                let output = norm.output(&cmd, code, &stdout, &stderr, true);
                records.push(Record {
                    command: format!("{cmd}   (background, stopped)"),
                    output,
                });
            }
            Step::FillUntilRefused {
                prefix,
                value_bytes,
                max,
            } => {
                // Text, varied: neither store compresses values, both grow by about its size.
                let value: String = (0..*value_bytes)
                    .map(|i| char::from(b'a' + ((i * 7919 + i / 26) % 26) as u8))
                    .collect();
                let refused = (0..*max)
                    .map(|n| {
                        run(
                            ep,
                            &[String::from("put"), format!("{prefix}{n}")],
                            Some(&value),
                        )
                    })
                    .find(|out| out.0 != Some(0));
                let command = format!("put {prefix}<n> <{value_bytes} bytes> until refused");
                let out = refused.unwrap_or_else(|| panic!("{command}: {max} puts all succeeded"));
                records.push(record(&[command], None, &norm, out));
            }
            Step::ExitOnly { args, capture } => {
                let real = substitute(args, &vars);
                let out = run(ep, &real, None);
                if let Some(var) = capture {
                    let rev = header_revision(&out.1)
                        .unwrap_or_else(|| panic!("capture {var}: no header.revision: {out:?}"));
                    vars.insert(var.to_string(), rev.to_string());
                }
                let output = match out.0 {
                    Some(c) => format!("[exit {c}]\n"),
                    None => "[killed: no exit within the timeout]\n".to_string(),
                };
                records.push(Record {
                    command: format!("{}   (exit status only)", args.join(" ")),
                    output,
                });
            }
            Step::Call { name, call } => {
                let answer = call(ep);
                records.push(record(
                    &[name.to_string()],
                    None,
                    &norm,
                    (Some(0), answer, String::new()),
                ));
            }
            Step::Sleep(d) => std::thread::sleep(*d),
            Step::Restart => {
                assert!(
                    background.is_empty(),
                    "restart with background watches running"
                );
                restart();
            }
        }
    }
    assert!(background.is_empty(), "background processes never stopped");
    records
}

fn run(ep: &Endpoint, args: &[String], stdin: Option<&str>) -> (Option<i32>, String, String) {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = etcdctl_with_timeout(ep, &refs, stdin, CTL_TIMEOUT);
    (out.code, out.stdout, out.stderr)
}

fn record(
    args: &[String],
    stdin: Option<&str>,
    norm: &Normalizer,
    (code, stdout, stderr): (Option<i32>, String, String),
) -> Record {
    let mut command = args.join(" ");
    if let Some(input) = stdin {
        command.push_str(&format!("   <<< {input:?}"));
    }
    let output = norm.output(&command, code, &stdout, &stderr, false);
    Record { command, output }
}

fn substitute(args: &[String], vars: &BTreeMap<String, String>) -> Vec<String> {
    args.iter()
        .map(|a| {
            let mut a = a.clone();
            for (k, v) in vars {
                a = a.replace(&format!("${{{k}}}"), v);
            }
            a
        })
        .collect()
}

fn header_revision(stdout: &str) -> Option<i64> {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).ok()?;
    v.get("header")?.get("revision")?.as_i64()
}

//! Memory at rest (issue 23 item 7, docs/scale.md "# Memory at rest"): a fresh `k3rs server`
//! (API server, datastore, controllers, scheduler; no embedded agent) that has answered the
//! API holds little anonymous memory. A guard against a regression of the size of sled's
//! metric histograms (21 MB kept resident before), not a benchmark: the bound has room for
//! the debug binary's relocated data and ordinary growth.

use std::time::Duration;

use crate::common::kubectl::Kubectl;
use crate::common::stats::proc_status_kib;

/// The bound on the server's `RssAnon`: the debug build measured 44 MiB before the
/// histograms were left untouched, 23 MiB after.
const MAX_IDLE_ANON_KIB: u64 = 36 * 1024;

#[test]
fn a_fresh_server_keeps_its_anonymous_memory_small() {
    let (server, k) = Kubectl::start_server(&[]);
    k.ok(&["get", "namespaces"]);
    // The controllers' first lists and the start-up writes settle.
    std::thread::sleep(Duration::from_secs(5));
    let pid = server.pid().expect("server running");
    let anon = proc_status_kib(pid, "RssAnon")
        .unwrap_or_else(|| panic!("no RssAnon in /proc/{pid}/status"));
    println!("server RssAnon at rest: {anon} KiB");
    assert!(
        anon < MAX_IDLE_ANON_KIB,
        "a fresh server holds {anon} KiB of anonymous memory, more than {MAX_IDLE_ANON_KIB} KiB"
    );
}

use super::*;
use ProbeResult::{Failure, Success};

fn at(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

fn settings(success: u32, failure: u32, delay: i64) -> Settings {
    Settings {
        initial_delay_secs: delay,
        period_secs: 1,
        timeout_secs: 1,
        success_threshold: success,
        failure_threshold: failure,
    }
}

fn running(id: &str, since: i64, started: bool) -> ContainerView {
    ContainerView {
        id: id.into(),
        running_since: Some(at(since)),
        terminated: false,
        started,
    }
}

#[test]
fn defaults_follow_the_api() {
    let s = Settings::of(&Probe::default(), ProbeKind::Readiness);
    assert_eq!(s, settings(1, 3, 0).with_period(10));
    let p = Probe {
        success_threshold: Some(3),
        failure_threshold: Some(0),
        period_seconds: Some(2),
        timeout_seconds: Some(5),
        initial_delay_seconds: Some(7),
        ..Probe::default()
    };
    let liveness = Settings::of(&p, ProbeKind::Liveness);
    assert_eq!(
        liveness,
        Settings {
            initial_delay_secs: 7,
            period_secs: 2,
            timeout_secs: 5,
            success_threshold: 1,
            failure_threshold: 1,
        }
    );
    assert_eq!(Settings::of(&p, ProbeKind::Readiness).success_threshold, 3);
}

impl Settings {
    fn with_period(mut self, p: u64) -> Settings {
        self.period_secs = p;
        self
    }
}

#[test]
fn nothing_is_probed_before_the_initial_delay() {
    let mut w = Worker::default();
    let s = settings(1, 3, 5);
    let c = running("a", 0, true);
    let pod = PodFacts::default();
    let before = w.before_probe(ProbeKind::Readiness, &s, pod, Some(&c), at(4));
    assert_eq!(before, (Next::Wait, vec![]));
    let before = w.before_probe(ProbeKind::Readiness, &s, pod, Some(&c), at(5));
    assert_eq!(before, (Next::Probe, vec![]));
}

#[test]
fn startup_gates_liveness_and_readiness_and_stops_once_passed() {
    let s = settings(1, 3, 0);
    let pod = PodFacts::default();
    let not_started = running("a", 0, false);
    let started = running("a", 0, true);
    for kind in [ProbeKind::Liveness, ProbeKind::Readiness] {
        let mut w = Worker::default();
        let d = w.before_probe(kind, &s, pod, Some(&not_started), at(9));
        assert_eq!(d, (Next::Wait, vec![]), "{kind:?}");
        let d = w.before_probe(kind, &s, pod, Some(&started), at(9));
        assert_eq!(d, (Next::Probe, vec![]), "{kind:?}");
    }
    let mut w = Worker::default();
    let d = w.before_probe(ProbeKind::Startup, &s, pod, Some(&not_started), at(9));
    assert_eq!(d, (Next::Probe, vec![]));
    let d = w.before_probe(ProbeKind::Startup, &s, pod, Some(&started), at(9));
    assert_eq!(d, (Next::Wait, vec![]));
}

#[test]
fn thresholds_count_equal_outcomes_in_a_row() {
    let mut w = Worker::default();
    let k = ProbeKind::Readiness;
    let s = settings(2, 3, 0);
    let c = running("a", 0, true);
    w.before_probe(k, &s, PodFacts::default(), Some(&c), at(1));
    assert_eq!(w.after_probe(k, &s, Some(Success)), None);
    assert_eq!(
        w.after_probe(k, &s, Some(Success)),
        Some(Update::Set("a".into(), Success))
    );
    // Every further success is stored again (the store ignores repeats).
    assert_eq!(
        w.after_probe(k, &s, Some(Success)),
        Some(Update::Set("a".into(), Success))
    );
    assert_eq!(w.after_probe(k, &s, Some(Failure)), None);
    assert_eq!(w.after_probe(k, &s, None), None, "an error changes nothing");
    assert_eq!(w.after_probe(k, &s, Some(Failure)), None);
    assert_eq!(
        w.after_probe(k, &s, Some(Success)),
        None,
        "the run restarts"
    );
    assert_eq!(w.after_probe(k, &s, Some(Failure)), None);
    assert_eq!(w.after_probe(k, &s, Some(Failure)), None);
    assert_eq!(
        w.after_probe(k, &s, Some(Failure)),
        Some(Update::Set("a".into(), Failure))
    );
    // Readiness keeps probing after a failure.
    let d = w.before_probe(k, &s, PodFacts::default(), Some(&c), at(2));
    assert_eq!(d, (Next::Probe, vec![]));
}

#[test]
fn a_liveness_failure_holds_until_the_container_is_replaced() {
    let mut w = Worker::default();
    let k = ProbeKind::Liveness;
    let s = settings(1, 2, 0);
    let pod = PodFacts::default();
    let old = running("a", 0, true);
    w.before_probe(k, &s, pod, Some(&old), at(1));
    assert_eq!(w.after_probe(k, &s, Some(Failure)), None);
    assert_eq!(
        w.after_probe(k, &s, Some(Failure)),
        Some(Update::Set("a".into(), Failure))
    );
    assert_eq!(
        w.before_probe(k, &s, pod, Some(&old), at(2)),
        (Next::Wait, vec![])
    );
    let new = running("b", 3, true);
    assert_eq!(
        w.before_probe(k, &s, pod, Some(&new), at(4)),
        (Next::Probe, vec![Update::Remove("a".into())])
    );
    assert_eq!(w.container_id.as_deref(), Some("b"));
    assert_eq!(
        w.after_probe(k, &s, Some(Failure)),
        None,
        "counting starts over"
    );
}

#[test]
fn a_container_that_does_not_run_is_not_ready() {
    let s = settings(1, 3, 0);
    let exited = ContainerView {
        id: "a".into(),
        running_since: None,
        terminated: true,
        started: false,
    };
    let mut w = Worker::default();
    let pod = PodFacts::default();
    assert_eq!(
        w.before_probe(ProbeKind::Readiness, &s, pod, Some(&exited), at(1)),
        (Next::Wait, vec![Update::Set("a".into(), Failure)])
    );
    let never = PodFacts {
        restart_never: true,
        ..PodFacts::default()
    };
    assert_eq!(
        w.before_probe(ProbeKind::Readiness, &s, never, Some(&exited), at(1)),
        (Next::Stop, vec![Update::Set("a".into(), Failure)])
    );
    assert_eq!(
        w.before_probe(ProbeKind::Readiness, &s, pod, None, at(1)),
        (Next::Wait, vec![]),
        "no status yet"
    );
}

#[test]
fn deletion_makes_liveness_succeed_and_terminal_pods_stop() {
    let s = settings(1, 3, 0);
    let c = running("a", 0, true);
    let deleting = PodFacts {
        deleting: true,
        ..PodFacts::default()
    };
    let mut w = Worker::default();
    assert_eq!(
        w.before_probe(ProbeKind::Liveness, &s, deleting, Some(&c), at(1)),
        (Next::Stop, vec![Update::Set("a".into(), Success)])
    );
    let mut w = Worker::default();
    assert_eq!(
        w.before_probe(ProbeKind::Readiness, &s, deleting, Some(&c), at(1)),
        (Next::Probe, vec![])
    );
    let terminal = PodFacts {
        terminal: true,
        ..PodFacts::default()
    };
    assert_eq!(
        w.before_probe(ProbeKind::Readiness, &s, terminal, Some(&c), at(1)),
        (Next::Stop, vec![])
    );
}

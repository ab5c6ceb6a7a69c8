//! Full runs over the in-memory fake echo server.
//!
//! Nothing here asserts on speed: the timeouts are generous so that only
//! deliberately dropped requests can be lost, even on a loaded machine.

use loadgen::fake::{check_echo, payload_for, FakeEchoServer, FakeTransport, FaultPlan};
use loadgen::{
    run, summarize, sweep, Bound, ClientTransport, Response, RunConfig, RunError, Schedule,
    ScheduleConfig, SweepConfig,
};
use std::io;
use std::time::Duration;

fn schedule(count: u64, threads: usize) -> Schedule {
    Schedule::poisson(&ScheduleConfig {
        rate_rps: 100_000.0,
        bound: Bound::Count(count),
        threads,
        seed: 9,
    })
    .unwrap()
}

fn cfg() -> RunConfig {
    RunConfig {
        warmup: Duration::ZERO,
        timeout: Duration::from_secs(2),
        busy_poll: false,
        progress: false,
    }
}

#[test]
fn clean_run_verifies_every_request() {
    let server = FakeEchoServer::start(FaultPlan::default());
    let s = schedule(2_000, 2);
    let r = run(&s, &cfg(), |_| server.connect(), &check_echo).unwrap();
    let c = r.counters;
    assert_eq!(c.sent, 2_000);
    assert_eq!(c.verified, 2_000);
    assert_eq!(c.errors(), 0, "{c}");
    assert_eq!(r.latency.len(), 2_000);
    assert_eq!(r.measured_requests, 2_000);
    assert_eq!(r.threads, 2);
    assert!(r.achieved_rps > 0.0);
    assert_eq!(r.offered_rps, 100_000.0);
    drop(r);
    assert_eq!(server.stop(), 2_000);
}

#[test]
fn corrupted_are_mismatches_and_dropped_are_losses() {
    let plan = FaultPlan {
        drop_every: 7,
        corrupt_every: 5,
    };
    let server = FakeEchoServer::start(plan);
    let n = 3_000;
    let s = schedule(n, 3);
    let r = run(&s, &cfg(), |_| server.connect(), &check_echo).unwrap();
    let (dropped, corrupted) = plan.expected_faults(n);
    assert_eq!((dropped, corrupted), (428, 515));
    let c = r.counters;
    assert_eq!(c.sent, n);
    assert_eq!(c.lost, dropped, "{c}");
    assert_eq!(c.mismatched, corrupted, "{c}");
    assert_eq!(c.verified, n - dropped - corrupted, "{c}");
    assert_eq!(c.unexpected, 0);
    assert_eq!(c.sent, c.verified + c.mismatched + c.lost);
    // Only verified responses carry a latency sample.
    assert_eq!(r.latency.len(), c.verified);
}

#[test]
fn warmup_requests_are_verified_but_not_measured() {
    let server = FakeEchoServer::start(FaultPlan::default());
    let s = schedule(2_000, 1);
    let offsets = s.threads()[0].offsets_ns();
    let warmup = Duration::from_nanos(offsets[999] + 1);
    let r = run(
        &s,
        &RunConfig { warmup, ..cfg() },
        |_| server.connect(),
        &check_echo,
    )
    .unwrap();
    assert_eq!(r.counters.verified, 2_000);
    assert_eq!(r.measured_requests, 1_000);
    assert_eq!(r.latency.len(), 1_000);
    assert!(r.measured_window > Duration::ZERO);
}

#[test]
fn a_checker_that_rejects_everything_sees_only_mismatches() {
    let server = FakeEchoServer::start(FaultPlan::default());
    let s = schedule(500, 2);
    let r = run(&s, &cfg(), |_| server.connect(), &|_: u64, _: &[u8]| false).unwrap();
    assert_eq!(r.counters.mismatched, 500);
    assert_eq!(r.counters.verified, 0);
    assert!(r.latency.is_empty());
    assert_eq!(r.achieved_rps, 0.0);
}

/// Reports every response twice, plus one response with an unreadable id.
struct Stuttering {
    inner: FakeTransport,
    reported_garbage: bool,
}

impl ClientTransport for Stuttering {
    fn send_request(&mut self, id: u64) -> io::Result<()> {
        self.inner.send_request(id)
    }

    fn poll_responses(&mut self, on_response: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        let mut n = 0;
        if !self.reported_garbage {
            self.reported_garbage = true;
            on_response(Response {
                id: None,
                payload: b"garbage",
            });
            n += 1;
        }
        let mut seen = Vec::new();
        self.inner.poll_responses(&mut |r| {
            seen.push(r.id);
            on_response(r);
        })?;
        for id in seen {
            let payload = payload_for(id.unwrap_or(0));
            on_response(Response {
                id,
                payload: &payload,
            });
            n += 2;
        }
        Ok(n)
    }
}

#[test]
fn duplicates_are_unexpected_and_unreadable_ids_are_malformed() {
    let server = FakeEchoServer::start(FaultPlan::default());
    let s = schedule(400, 1);
    let r = run(
        &s,
        &cfg(),
        |_| {
            Ok(Stuttering {
                inner: server.connect()?,
                reported_garbage: false,
            })
        },
        &check_echo,
    )
    .unwrap();
    let c = r.counters;
    assert_eq!(c.verified, 400, "{c}");
    assert_eq!(c.unexpected, 400, "{c}");
    assert_eq!(c.malformed, 1, "{c}");
    assert_eq!(c.mismatched, 0, "{c}");
    assert_eq!(c.lost, 0, "{c}");
}

#[test]
fn transport_creation_failure_is_reported_with_the_thread() {
    let server = FakeEchoServer::start(FaultPlan::default());
    let s = schedule(100, 2);
    let err = run(
        &s,
        &cfg(),
        |t| {
            if t == 1 {
                Err(io::Error::new(io::ErrorKind::AddrInUse, "port busy"))
            } else {
                server.connect()
            }
        },
        &check_echo,
    )
    .unwrap_err();
    match err {
        RunError::Transport { thread, ref source } => {
            assert_eq!(thread, 1);
            assert_eq!(source.kind(), io::ErrorKind::AddrInUse);
        }
        other => panic!("unexpected error {other}"),
    }
    assert!(err.to_string().contains("client thread 1"));
}

/// A transport whose sends always fail: every request is a send error.
struct Broken;

impl ClientTransport for Broken {
    fn send_request(&mut self, _id: u64) -> io::Result<()> {
        Err(io::Error::new(io::ErrorKind::BrokenPipe, "down"))
    }

    fn poll_responses(&mut self, _: &mut dyn FnMut(Response<'_>)) -> io::Result<usize> {
        Err(io::Error::other("down"))
    }
}

#[test]
fn send_and_poll_errors_are_counted() {
    let s = schedule(50, 1);
    let r = run(&s, &cfg(), |_| Ok(Broken), &check_echo).unwrap();
    assert_eq!(r.counters.send_errors, 50);
    assert_eq!(r.counters.sent, 0);
    assert!(r.counters.poll_errors > 0);
}

#[test]
fn sweep_over_the_fake_server_produces_one_record_per_point() {
    let server = FakeEchoServer::start(FaultPlan {
        drop_every: 0,
        corrupt_every: 50,
    });
    let sw = SweepConfig {
        mode: "fake".into(),
        shape: "32B".into(),
        loads_rps: vec![10_000.0, 20_000.0, 40_000.0],
        keep_up: 0.95,
        stop_after_misses: 0,
        progress: true,
    };
    let records = sweep(&sw, |rate| {
        let s = Schedule::poisson(&ScheduleConfig {
            rate_rps: rate,
            bound: Bound::Count(500),
            threads: 2,
            seed: 5,
        })
        .map_err(|e| e.to_string())?;
        run(&s, &cfg(), |_| server.connect(), &check_echo).map_err(|e| e.to_string())
    })
    .unwrap();
    assert_eq!(records.len(), 3);
    for (rec, load) in records.iter().zip([10_000.0, 20_000.0, 40_000.0]) {
        assert_eq!(rec.mode, "fake");
        assert_eq!(rec.offered_rps, load);
        assert_eq!(rec.sent, 500);
        assert_eq!(rec.mismatched, 10);
        assert_eq!(rec.verified, 490);
        assert!(rec.p99_us.is_some());
    }
    let summary = summarize(&records, 0.95);
    assert_eq!(summary.len(), 1);
    assert_eq!(summary[0].points.len(), 3);
}

#[test]
fn an_empty_schedule_finishes_with_an_empty_report() {
    let server = FakeEchoServer::start(FaultPlan::default());
    let s = schedule(0, 2);
    let r = run(&s, &cfg(), |_| server.connect(), &check_echo).unwrap();
    assert_eq!(r.counters, loadgen::Counters::default());
    assert!(r.latency.is_empty());
    assert_eq!(r.achieved_rps, 0.0);
}

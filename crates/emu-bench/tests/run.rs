//! End-to-end runs: an echo server on the driver side of the threaded emulated ConnectX, the
//! clients on the device thread. No test asserts a speed.

use std::sync::Mutex;
use std::time::Duration;

/// One run at a time: each spins two threads, and the machine running the tests may have two
/// cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

// Only the byte-for-byte reply check is shared with the multi-core tests.
#[allow(dead_code)]
mod common;

use common::check_echo;
use cornflakes::datapath::{Completions, Receive, Transmit};
use cornflakes::PinnedMemory;
use emu_bench::{run, Bottleneck, EmuRunConfig, Request, ServerPort};

fn requests(n: usize) -> Vec<Request> {
    (0..n)
        .map(|i| Request::new(3, (0..(64 + i * 97)).map(|b| (b * 31 + i) as u8).collect()))
        .collect()
}

/// Echoes every message (zero-copy, the received buffer goes back); `corrupt_every`-th replies
/// get one byte changed (copied first). Returns (echoed, live items after the datapath is gone).
fn echo_server(port: ServerPort, corrupt_every: u64) -> (u64, usize) {
    echo_corrupting(port, corrupt_every, |_| 0)
}

/// [`echo_server`], changing byte `at(len)` of the corrupted replies.
fn echo_corrupting(port: ServerPort, corrupt_every: u64, at: fn(usize) -> usize) -> (u64, usize) {
    echo_changing(port, move |n, len| {
        (corrupt_every > 0 && n.is_multiple_of(corrupt_every)).then(|| at(len))
    })
}

/// Echoes every message (zero-copy) but for the `n`-th (from 1) of length `len` when
/// `change(n, len)` names a byte: that reply is copied with the byte changed. Returns
/// (echoed, live items after the datapath is gone).
fn echo_changing(port: ServerPort, change: impl Fn(u64, usize) -> Option<usize>) -> (u64, usize) {
    let mem = PinnedMemory::new(port.memory_config()).expect("memory");
    let mut dp = port.datapath(mem.clone()).expect("datapath");
    let mut rx = Vec::new();
    let mut n = 0u64;
    while !port.stopped() {
        rx.clear();
        dp.recv_burst(&mut rx).expect("recv");
        for m in &rx {
            n += 1;
            let r = if let Some(i) = change(n, m.data.len()) {
                let mut v = m.data.to_vec();
                v[i] ^= 0x55;
                dp.send_copy(m.conn, m.msg, &v)
            } else {
                dp.send_sga(m.conn, m.msg, std::slice::from_ref(&m.data))
            };
            r.expect("send");
        }
        dp.flush().expect("flush");
        dp.poll_completions();
    }
    drop(rx);
    drop(dp);
    (n, mem.stats().live_items)
}

fn cfg(rate: f64) -> EmuRunConfig {
    EmuRunConfig {
        rate_rps: rate,
        duration: Duration::from_millis(150),
        warmup: Duration::from_millis(20),
        // Generous: the test machine is shared and the threads are not pinned.
        timeout: Duration::from_millis(500),
        sample_every: 1,
        // Every reply's payload checked unless a test samples.
        check_every: 1,
        pin: false,
        ..EmuRunConfig::default()
    }
}

#[test]
fn every_reply_is_matched_verified_and_every_buffer_returns() {
    let _g = serial();
    let reqs = requests(16);
    let expected: Vec<Vec<u8>> = reqs.iter().map(|r| r.payload.clone()).collect();
    let (report, (echoed, live)) = run(
        &cfg(20_000.0),
        &reqs,
        move |i: usize, reply: &[u8]| {
            if reply == expected[i] {
                Ok(())
            } else {
                Err(format!("request {i}: reply differs"))
            }
        },
        |port| echo_server(port, 0),
    )
    .expect("run");
    let c = report.run.counters;
    assert!(c.sent > 1000, "{c}");
    // A request the device dropped for want of a posted receive buffer (an unpinned server
    // on a busy machine can fall that far behind) never reaches the server; every other one
    // must come back right.
    let delivered = c.sent - report.not_delivered;
    assert_eq!(c.verified, delivered, "{c} {:?}", report.failures);
    assert_eq!(c.mismatched + c.unexpected + c.malformed, 0, "{c}");
    assert_eq!(c.lost, report.not_delivered, "{c}");
    assert!(delivered > c.sent / 2, "{c}");
    assert_eq!(
        report.sampled, delivered,
        "sample_every 1 reads every reply"
    );
    // check_every 1 is the behaviour before sampling: no reply's payload skipped.
    assert_eq!((report.unchecked, report.check_every), (0, 1));
    assert!(report.coverage_complete(), "{}", report.coverage_note());
    assert_eq!(echoed, delivered);
    assert_eq!(live, 0, "every pinned buffer back in its pool");
    assert!(!report.run.latency.is_empty());
    assert!(report.failures.is_empty());
}

#[test]
fn wrong_replies_are_counted_and_described() {
    let _g = serial();
    let reqs = requests(4);
    let expected: Vec<Vec<u8>> = reqs.iter().map(|r| r.payload.clone()).collect();
    let (report, (echoed, _)) = run(
        &cfg(10_000.0),
        &reqs,
        move |i: usize, reply: &[u8]| {
            if reply == expected[i] {
                Ok(())
            } else {
                Err(format!("request {i}: reply differs"))
            }
        },
        |port| echo_server(port, 10),
    )
    .expect("run");
    let c = report.run.counters;
    assert_eq!(c.mismatched, echoed / 10, "{c}");
    assert_eq!(c.verified + c.mismatched, echoed, "{c}");
    assert_eq!(c.lost, report.not_delivered, "{c}");
    assert!(report.failures[0].contains("reply differs"));
}

/// A reply with one wrong byte anywhere, of the right length, to a request whose earlier
/// replies verified, is caught: every reply's gathered bytes are compared (by hash) with the
/// last reply the checker accepted, not only a sample. With the sample all but off, the old
/// device (header checks plus a 1-in-N sample) let these through.
#[test]
fn a_corrupted_byte_in_any_reply_is_caught_without_the_sample() {
    let _g = serial();
    let reqs = requests(8);
    let expected: Vec<Vec<u8>> = reqs.iter().map(|r| r.payload.clone()).collect();
    let check = move |i: usize, reply: &[u8]| {
        if reply == expected[i] {
            Ok(())
        } else {
            Err(format!("request {i}: reply differs"))
        }
    };
    let c = EmuRunConfig {
        sample_every: 1 << 40,
        ..cfg(10_000.0)
    };
    let ats: [fn(usize) -> usize; 2] = [|n| n - 1, |n| n / 2];
    for at in ats {
        let (report, (echoed, _)) = run(&c, &reqs, check.clone(), |port| {
            echo_corrupting(port, 7, at)
        })
        .expect("run");
        let k = report.run.counters;
        assert_eq!(k.mismatched, echoed / 7, "{k}");
        assert_eq!(k.verified + k.mismatched, echoed, "{k}");
        // The good replies were checked by hash (few went to the checker), and every
        // distinct request and core was covered.
        assert_eq!(
            report.sampled + report.hash_matched,
            k.verified + k.mismatched
        );
        assert!(report.hash_matched > k.verified / 2, "{report:?}");
        assert_eq!((report.distinct_verified, report.distinct), (8, 8));
        assert_eq!((report.cores_verified, report.cores), (1, 1));
    }
}

/// The bench's verdict: one trial with a corrupted reply, anywhere in the search, makes
/// [`emu_bench::replies_verified`] (what `echo bench` and `kv bench` return) an error.
#[test]
fn a_corrupted_reply_in_any_trial_fails_the_bench() {
    use emu_bench::{replies_verified, EmuSummary, EmuTrial};
    use loadgen::search::{search, SearchConfig};
    let _g = serial();
    let reqs = requests(4);
    let expected: Vec<Vec<u8>> = reqs.iter().map(|r| r.payload.clone()).collect();
    // Every grid load runs (whatever the shared machine keeps up), one trial each.
    let scfg = SearchConfig {
        trials: 1,
        whole_grid: true,
        ..SearchConfig::new(vec![2_000.0, 4_000.0])
    };
    let mut n = 0;
    let searches = search(&scfg, 1, |p| {
        n += 1;
        // The first trial is clean; the later ones corrupt one reply in 50.
        let every = if n >= 2 { 50 } else { 0 };
        let exp = expected.clone();
        let check = move |i: usize, reply: &[u8]| {
            if reply == exp[i] {
                Ok(())
            } else {
                Err(format!("request {i}: reply differs"))
            }
        };
        let c = EmuRunConfig {
            rate_rps: p.offered_rps,
            sample_every: 64,
            ..cfg(p.offered_rps)
        };
        let (report, _) = run(&c, &reqs, check, |port| {
            echo_corrupting(port, every, |n| n - 1)
        })?;
        Ok::<_, String>(EmuTrial::new(p, "echo", "s", report, None, ()))
    })
    .expect("search");
    assert!(n >= 2, "the search ran {n} trials");
    let summary = EmuSummary::of("echo", &searches[0]);
    assert!(summary.mismatched > 0, "{summary:?}");
    let e = replies_verified(&[summary]).expect_err("a wrong reply must fail the bench");
    assert!(e.contains("echo:") && e.contains("mismatched"), "{e}");
}

/// Echoes every message, with one byte appended to every third reply.
fn growing_echo_server(port: ServerPort) -> u64 {
    let mem = PinnedMemory::new(port.memory_config()).expect("memory");
    let mut dp = port.datapath(mem).expect("datapath");
    let mut rx = Vec::new();
    let mut n = 0u64;
    while !port.stopped() {
        rx.clear();
        dp.recv_burst(&mut rx).expect("recv");
        for m in &rx {
            n += 1;
            let mut v = m.data.to_vec();
            if n.is_multiple_of(3) {
                v.push(0xaa);
            }
            dp.send_copy(m.conn, m.msg, &v).expect("send");
        }
        dp.flush().expect("flush");
        dp.poll_completions();
    }
    n
}

#[test]
fn replies_that_change_length_fail_unless_they_may_vary_and_then_are_read_whole() {
    let _g = serial();
    let reqs = requests(4);
    let expected: Vec<Vec<u8>> = reqs.iter().map(|r| r.payload.clone()).collect();
    let check = move |i: usize, reply: &[u8]| {
        let e = &expected[i];
        if reply == &e[..] || (reply.len() == e.len() + 1 && reply[..e.len()] == e[..]) {
            Ok(())
        } else {
            Err(format!("request {i}: reply differs"))
        }
    };
    // Few samples: a length change, not the sampling, is what reads these replies.
    let mut c = EmuRunConfig {
        sample_every: 1 << 20,
        ..cfg(10_000.0)
    };
    let (report, echoed) = run(&c, &reqs, check.clone(), growing_echo_server).expect("run");
    let k = report.run.counters;
    assert!(k.mismatched > 0, "{k}");
    assert!(
        report.failures[0].contains("earlier ones"),
        "{:?}",
        report.failures
    );
    assert!(echoed > 0);

    c.replies_vary = true;
    let (report, echoed) = run(&c, &reqs, check, growing_echo_server).expect("run");
    let k = report.run.counters;
    assert_eq!(k.mismatched, 0, "{k} {:?}", report.failures);
    assert_eq!(k.verified + k.lost, k.sent, "{k}");
    // Every reply whose length changed was read whole: far more than the 4 first replies.
    assert!(
        report.sampled > 4 + echoed / 6,
        "{} of {echoed}",
        report.sampled
    );
}

#[test]
fn the_device_reports_its_own_saturation() {
    let _g = serial();
    // 50 µs per gather entry: the device cannot pass more than 20 000 frames per second, so at
    // 40 000 req/s offered it is the bottleneck, whatever the server does.
    let mut c = cfg(40_000.0);
    c.delay_per_segment = Duration::from_micros(50);
    c.sample_every = 64;
    let reqs = requests(2);
    let (report, _) = run(
        &c,
        &reqs,
        |_: usize, _: &[u8]| Ok(()),
        |p| echo_server(p, 0),
    )
    .expect("run");
    assert!(
        report.device_busy >= emu_bench::DEVICE_SATURATED,
        "device busy {:.2}",
        report.device_busy
    );
    assert_eq!(report.bottleneck(), Bottleneck::Device);
    // And without the delay, at a load far below what either side can do, nothing saturates.
    let (report, _) = run(
        &cfg(5_000.0),
        &reqs,
        |_: usize, _: &[u8]| Ok(()),
        |p| echo_server(p, 0),
    )
    .expect("run");
    assert!(
        report.device_busy < emu_bench::DEVICE_SATURATED,
        "{}",
        report.device_busy
    );
}

#[test]
fn requests_larger_than_a_frame_are_refused_clearly() {
    let mut c = cfg(1000.0);
    c.mtu = 1500;
    let big = vec![Request::new(1, vec![0; 3000])];
    let err =
        run(&c, &big, |_: usize, _: &[u8]| Ok(()), |p| echo_server(p, 0)).expect_err("refused");
    assert!(err.contains("single-frame"), "{err}");
}

/// A "counter" server: a request whose payload starts with 0 is a write (reply `ok`, the
/// counter goes up), with 1 a read (reply: the counter, or with `stale` the counter as it
/// was at the last multiple of 3 writes), any other a read of a constant.
fn counter_server(port: ServerPort, stale: bool) -> u64 {
    let mem = PinnedMemory::new(port.memory_config()).expect("memory");
    let mut dp = port.datapath(mem).expect("datapath");
    let mut rx = Vec::new();
    let mut writes = 0u64;
    while !port.stopped() {
        rx.clear();
        dp.recv_burst(&mut rx).expect("recv");
        for m in &rx {
            if m.data[0] == 0 {
                writes += 1;
                dp.send_copy(m.conn, m.msg, b"ok").expect("send");
            } else if m.data[0] == 2 {
                dp.send_copy(m.conn, m.msg, b"constant").expect("send");
            } else {
                let seen = if stale { writes / 3 * 3 } else { writes };
                dp.send_copy(m.conn, m.msg, &seen.to_le_bytes())
                    .expect("send");
            }
        }
        dp.flush().expect("flush");
        dp.poll_completions();
    }
    writes
}

/// Applies writes in order and checks reads against the current count.
struct CounterCheck {
    applied: u64,
}

impl emu_bench::ReplyCheck for CounterCheck {
    fn check(&mut self, request: usize, reply: &[u8]) -> Result<(), String> {
        if request == 0 {
            self.applied += 1;
            return (reply == b"ok")
                .then_some(())
                .ok_or("write not ok".to_owned());
        }
        if request >= 4 {
            return (reply == b"constant")
                .then_some(())
                .ok_or("not the constant".to_owned());
        }
        let got = u64::from_le_bytes(reply.try_into().map_err(|_| "8 bytes")?);
        (got == self.applied)
            .then_some(())
            .ok_or(format!("read {got}, the store holds {}", self.applied))
    }
    fn version(&mut self, request: usize) -> u64 {
        if request >= 4 {
            0
        } else {
            self.applied
        }
    }
    fn sees_every(&self, request: usize) -> bool {
        request == 0
    }
    fn late(&mut self, request: usize, _reply: &[u8]) {
        if request == 0 {
            self.applied += 1;
        }
    }
}

/// Writes go to the checker in order and reads are checked against the current state: a
/// stale read (bytes identical to an earlier accepted reply) is caught because the version
/// changed, while reads between writes are still accepted by hash.
#[test]
fn a_stale_reply_equal_to_an_earlier_right_one_is_caught_when_the_state_moved() {
    let _g = serial();
    // A write, three reads of the counter, four reads of a constant, over and over.
    let reqs: Vec<Request> = [0u8, 1, 1, 1, 2, 2, 2, 2]
        .iter()
        .map(|&b| Request::new(3, vec![b; 16]))
        .collect();
    let c = EmuRunConfig {
        sample_every: 1 << 40,
        ..cfg(10_000.0)
    };
    let (report, _) = run(&c, &reqs, CounterCheck { applied: 0 }, |p| {
        counter_server(p, false)
    })
    .expect("run");
    let k = report.run.counters;
    assert_eq!(k.mismatched, 0, "{k} {:?}", report.failures);
    assert!(report.hash_matched > 0, "{report:?}");
    let (report, _) = run(&c, &reqs, CounterCheck { applied: 0 }, |p| {
        counter_server(p, true)
    })
    .expect("run");
    let k = report.run.counters;
    assert!(k.mismatched > 0, "{k}");
    assert!(
        report
            .failures
            .iter()
            .any(|f| f.contains("the store holds")),
        "{:?}",
        report.failures
    );

    // Sampled: every write still goes to the checker in order (the model stays right, so
    // right reads pass), and a stale read is caught whenever the sample picks one (about
    // 2 in 9 replies are stale reads; 1 in 4 checked).
    let c = EmuRunConfig {
        check_every: 4,
        ..c
    };
    let (report, writes) = run(&c, &reqs, CounterCheck { applied: 0 }, |p| {
        counter_server(p, false)
    })
    .expect("run");
    let k = report.run.counters;
    assert_eq!(k.mismatched, 0, "{k} {:?}", report.failures);
    assert!(report.unchecked > 0, "{}", report.coverage_note());
    assert!(
        report.sampled >= writes.saturating_sub(k.lost),
        "{writes} writes: {report:?}"
    );
    let (report, _) = run(&c, &reqs, CounterCheck { applied: 0 }, |p| {
        counter_server(p, true)
    })
    .expect("run");
    let k = report.run.counters;
    assert!(k.mismatched > 0, "{k}");
    assert!(
        report
            .failures
            .iter()
            .all(|f| f.contains("the store holds")),
        "{:?}",
        report.failures
    );
}

/// Echoes every message; every reply to the request whose payload is `len` bytes long gets
/// its byte `len / 2` changed. Returns the messages echoed.
fn echo_corrupting_one(port: ServerPort, len: usize) -> u64 {
    echo_changing(port, move |_, l| (l == len).then_some(len / 2)).0
}

/// Sampled checking (a payload check for hardly any reply beyond those that must be): every
/// distinct request answered in the measured window still has a checked reply there, the
/// rest are counted as read but not checked, and the counts add up.
#[test]
fn sampled_checking_covers_every_distinct_request() {
    let _g = serial();
    let reqs = requests(24);
    let c = EmuRunConfig {
        check_every: 1 << 40,
        sample_every: 1 << 40,
        ..cfg(10_000.0)
    };
    let (report, _) = run(&c, &reqs, check_echo(&reqs), |p| echo_server(p, 0)).expect("run");
    let k = report.run.counters;
    assert_eq!(k.mismatched + k.malformed, 0, "{k} {:?}", report.failures);
    assert_eq!(
        report.checked() + report.unchecked,
        k.verified,
        "{report:?}"
    );
    assert_eq!(report.distinct, 24);
    assert_eq!(report.distinct_answered, 24, "{}", report.coverage_note());
    assert_eq!(report.distinct_verified, 24, "{}", report.coverage_note());
    assert_eq!((report.cores_verified, report.cores), (1, 1));
    assert!(report.coverage_complete());
    // First replies (warm-up and measured window): at most two per distinct request went
    // to the checker or the hash; everything else was read but not checked.
    assert!(report.checked() <= 48, "{}", report.coverage_note());
    assert!(
        report.unchecked > k.verified / 2,
        "{}",
        report.coverage_note()
    );
    assert_eq!(report.check_every, 1 << 40);
    assert!(report
        .coverage_note()
        .contains("distinct requests 24/24 answered (of 24), cores 1/1"));
}

/// A request whose every reply is corrupted fails the run under sampling, whatever the
/// random sample picks: its first reply, and its first in the measured window, must be
/// checked.
#[test]
fn a_request_with_corrupted_replies_fails_under_sampling() {
    let _g = serial();
    let reqs = requests(16);
    let bad = reqs[5].payload.len();
    let c = EmuRunConfig {
        check_every: 1 << 40,
        ..cfg(10_000.0)
    };
    let (report, _) = run(&c, &reqs, check_echo(&reqs), move |p| {
        echo_corrupting_one(p, bad)
    })
    .expect("run");
    let k = report.run.counters;
    assert!(k.mismatched >= 2, "{k}");
    assert!(
        report.failures.iter().all(|f| f.contains("request 5:")),
        "{:?}",
        report.failures
    );
    // Request 5 has no right reply: it counts as mismatched, not as answered, so the other
    // 15 are what the coverage is of.
    assert_eq!(
        (report.distinct_verified, report.distinct_answered),
        (15, 15),
        "{}",
        report.coverage_note()
    );
}

/// The random sample is seeded: the same seed picks the same replies, so a run's sample is
/// reproducible; a corrupted byte in a reply the sample picks is caught.
#[test]
fn the_sample_catches_corrupted_replies_it_picks() {
    let _g = serial();
    let reqs = requests(4);
    let c = EmuRunConfig {
        check_every: 4,
        ..cfg(10_000.0)
    };
    // One reply in 5 corrupted, at byte 0: about 1 in 4 of those checked, so with ~300
    // corrupted replies some are (missing all has probability (3/4)^300).
    let (report, (echoed, _)) = run(&c, &reqs, check_echo(&reqs), |p| {
        echo_corrupting(p, 5, |_| 0)
    })
    .expect("run");
    let k = report.run.counters;
    assert!(echoed > 1000, "{echoed}");
    assert!(k.mismatched > 0 && k.mismatched < echoed / 5, "{k}");
    assert!(report.unchecked > 0, "{}", report.coverage_note());
}

/// A pinned run times the speed canary on each of its CPUs (server, then device), and the pair
/// reading between them, before it starts; the process's first canary is the reference of the next run's. The only pinned
/// test of this binary, so its first run is the process's first canary. A smoke run: no
/// speed is asserted.
#[test]
fn a_pinned_run_times_the_speed_canary_on_its_cpus() {
    let _g = serial();
    let (servers, device) = match emu_bench::cores_for(1) {
        Ok(c) => c,
        Err(e) => {
            test_skip::skip(
                "a_pinned_run_times_the_speed_canary_on_its_cpus",
                &format!("a pinned run needs 2 CPUs: {e}"),
            );
            return;
        }
    };
    let reqs = requests(4);
    let pinned = EmuRunConfig {
        pin: true,
        duration: Duration::from_millis(30),
        warmup: Duration::from_millis(5),
        ..cfg(5_000.0)
    };
    let once = || {
        run(&pinned, &reqs, check_echo(&reqs), |port| {
            echo_server(port, 0)
        })
        .expect("pinned run")
        .0
    };
    let first = once().canary.expect("a pinned run has a canary");
    let cpus: Vec<usize> = servers.iter().copied().chain([device]).collect();
    assert_eq!(first.cpus, cpus);
    assert!(first.times.iter().all(|t| !t.is_zero()), "{first:?}");
    assert_eq!(
        first.reference, first.times,
        "the first canary is the reference"
    );
    // The pair reading: the server's CPU and the device's bouncing a cache line.
    let pair = first
        .pair
        .as_ref()
        .expect("a pinned run has a pair reading");
    assert_eq!(pair.cpus, [servers[0], device]);
    assert!(
        !pair.time.is_zero() && pair.reference == pair.time,
        "{pair:?}"
    );
    let second = once().canary.expect("canary");
    assert_eq!(second.reference, first.times);
    assert_eq!(second.pair.as_ref().expect("pair").reference, pair.time);
    assert!(second.ratio() > 0.0);
    // An unpinned run's CPUs are not its own: no canary.
    let unpinned = run(&cfg(5_000.0), &reqs, check_echo(&reqs), |port| {
        echo_server(port, 0)
    });
    assert!(unpinned.expect("run").0.canary.is_none());
}

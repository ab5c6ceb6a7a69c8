//! Running one open-loop schedule against a transport, one thread per part.
//!
//! Each client thread walks its [`ThreadSchedule`]: it sends every request
//! whose scheduled time has come (catching up in a burst if it fell behind,
//! as an open-loop client must), polls for responses, settles each request
//! exactly once and expires requests older than the timeout.
//!
//! Latency is measured from a request's *scheduled* send time, not the time
//! the thread got around to sending it, so a client that falls behind shows
//! up as latency instead of silently lowering the load (no coordinated
//! omission).

use crate::schedule::{split_request_id, Schedule, ThreadSchedule};
use crate::stats::Counters;
use crate::transport::{ClientTransport, Response, ResponseChecker};
use latency::LatencyHistogram;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// How a run treats time.
#[derive(Debug, Clone, PartialEq)]
pub struct RunConfig {
    /// Requests scheduled before this offset are sent and verified, but are
    /// left out of latency percentiles and achieved throughput.
    pub warmup: Duration,
    /// A request with no response this long after its scheduled send time is
    /// counted as lost; a response arriving later counts as unexpected.
    pub timeout: Duration,
    /// Spin (`true`) or yield the CPU (`false`) when there is nothing to do.
    pub busy_poll: bool,
    /// Print one progress line per second on stderr while running.
    pub progress: bool,
}

impl RunConfig {
    /// A run without progress lines: what every benchmark point uses.
    pub fn quiet(warmup: Duration, timeout: Duration, busy_poll: bool) -> RunConfig {
        RunConfig {
            warmup,
            timeout,
            busy_poll,
            progress: false,
        }
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            warmup: Duration::ZERO,
            timeout: Duration::from_millis(500),
            busy_poll: true,
            progress: false,
        }
    }
}

/// Why a run could not produce a report.
#[derive(Debug)]
pub enum RunError {
    /// Creating the transport of a client thread failed.
    Transport {
        /// The client thread.
        thread: usize,
        /// The error returned by the transport factory.
        source: io::Error,
    },
    /// A client thread panicked (a transport or checker bug).
    ThreadPanicked {
        /// The client thread.
        thread: usize,
    },
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Transport { thread, source } => {
                write!(
                    f,
                    "client thread {thread}: creating transport failed: {source}"
                )
            }
            RunError::ThreadPanicked { thread } => write!(f, "client thread {thread} panicked"),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Transport { source, .. } => Some(source),
            RunError::ThreadPanicked { .. } => None,
        }
    }
}

/// Result of one run, merged over all client threads.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// Offered load of the schedule, requests per second.
    pub offered_rps: f64,
    /// Verified responses to measured requests per second of the measured
    /// window (from the end of warm-up to the later of the last scheduled
    /// send and the last measured response).
    pub achieved_rps: f64,
    /// Length of the measured window.
    pub measured_window: Duration,
    /// Requests scheduled after warm-up.
    pub measured_requests: u64,
    /// Outcome counters over *all* requests, warm-up included: a wrong answer
    /// is never excused by warm-up.
    pub counters: Counters,
    /// Latency of verified responses to measured requests.
    pub latency: LatencyHistogram,
    /// Number of client threads.
    pub threads: usize,
}

/// Per-thread progress, published with relaxed stores for the progress line.
#[derive(Default)]
pub(crate) struct Progress {
    sent: AtomicU64,
    verified: AtomicU64,
}

pub(crate) struct ThreadResult {
    counters: Counters,
    latency: LatencyHistogram,
    measured_requests: u64,
    measured_verified: u64,
    window_end_ns: u64,
}

const UNSENT: u8 = 0;
const OUTSTANDING: u8 = 1;
const SETTLED: u8 = 2;

/// Runs `schedule` with one client thread per [`ThreadSchedule`].
///
/// `make_transport(thread)` is called *on* each client thread, so a transport
/// need not be `Send` (e.g. one holding `Rc` buffers). All threads start their
/// clocks together after every transport has been created. Responses are
/// judged by `checker`; the call returns once every request is settled
/// (verified, mismatched or timed out).
pub fn run<T, F, C>(
    schedule: &Schedule,
    cfg: &RunConfig,
    make_transport: F,
    checker: &C,
) -> Result<RunReport, RunError>
where
    T: ClientTransport,
    F: Fn(usize) -> io::Result<T> + Sync,
    C: ResponseChecker + ?Sized,
{
    let parts = schedule.threads();
    let barrier = Barrier::new(parts.len());
    let progress: Vec<Progress> = parts.iter().map(|_| Progress::default()).collect();
    let total = schedule.total_requests();
    let results: Vec<Result<ThreadResult, RunError>> = std::thread::scope(|s| {
        let handles: Vec<_> = parts
            .iter()
            .map(|part| {
                let (barrier, progress, make_transport) = (&barrier, &progress, &make_transport);
                s.spawn(move || {
                    let transport = make_transport(part.thread());
                    // Wait even on failure so the other threads are released.
                    barrier.wait();
                    let transport = transport.map_err(|source| RunError::Transport {
                        thread: part.thread(),
                        source,
                    })?;
                    let report = (cfg.progress && part.thread() == 0)
                        .then_some((progress.as_slice(), total));
                    Ok(run_thread(
                        part,
                        cfg,
                        transport,
                        checker,
                        &progress[part.thread()],
                        report,
                    ))
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(thread, h)| h.join().unwrap_or(Err(RunError::ThreadPanicked { thread })))
            .collect()
    });

    merge(schedule, cfg, results)
}

/// The report of a run of `schedule` from each client thread's result, in thread order (the
/// first error, if any).
pub(crate) fn merge(
    schedule: &Schedule,
    cfg: &RunConfig,
    results: impl IntoIterator<Item = Result<ThreadResult, RunError>>,
) -> Result<RunReport, RunError> {
    let warmup_ns = cfg.warmup.as_nanos() as u64;
    let mut counters = Counters::default();
    let mut latency = LatencyHistogram::new();
    let (mut measured_requests, mut measured_verified, mut window_end_ns) = (0, 0, 0);
    for r in results {
        let r = r?;
        counters.merge(&r.counters);
        latency.merge(&r.latency);
        measured_requests += r.measured_requests;
        measured_verified += r.measured_verified;
        window_end_ns = window_end_ns.max(r.window_end_ns);
    }
    let window_ns = window_end_ns.saturating_sub(warmup_ns);
    let achieved_rps = if window_ns == 0 {
        0.0
    } else {
        measured_verified as f64 * 1e9 / window_ns as f64
    };
    Ok(RunReport {
        offered_rps: schedule.rate_rps(),
        achieved_rps,
        measured_window: Duration::from_nanos(window_ns),
        measured_requests,
        counters,
        latency,
        threads: schedule.threads().len(),
    })
}

pub(crate) fn run_thread<T: ClientTransport, C: ResponseChecker + ?Sized>(
    part: &ThreadSchedule,
    cfg: &RunConfig,
    mut transport: T,
    checker: &C,
    progress: &Progress,
    report: Option<(&[Progress], u64)>,
) -> ThreadResult {
    let offsets = part.offsets_ns();
    let n = offsets.len();
    let me = part.thread();
    let warmup_ns = cfg.warmup.as_nanos() as u64;
    let timeout_ns = u64::try_from(cfg.timeout.as_nanos()).unwrap_or(u64::MAX);
    let mut state = vec![UNSENT; n];
    let mut c = Counters::default();
    let mut latency = LatencyHistogram::new();
    let mut measured_verified = 0u64;
    let mut last_measured_recv_ns = 0u64;
    let (mut next, mut expire, mut outstanding) = (0usize, 0usize, 0usize);
    let start = Instant::now();
    let mut next_report_ns = 1_000_000_000u64;

    loop {
        let mut now = start.elapsed().as_nanos() as u64;
        let mut busy = false;

        while next < n && offsets[next] <= now {
            match transport.send_request(part.id(next)) {
                Ok(()) => {
                    state[next] = OUTSTANDING;
                    outstanding += 1;
                    c.sent += 1;
                }
                Err(_) => {
                    state[next] = SETTLED;
                    c.send_errors += 1;
                }
            }
            next += 1;
            busy = true;
        }

        let mut recv_ns: Option<u64> = None;
        let polled = transport.poll_responses(&mut |r: Response<'_>| {
            let t = *recv_ns.get_or_insert_with(|| start.elapsed().as_nanos() as u64);
            let Some(id) = r.id else {
                c.malformed += 1;
                return;
            };
            let (thread, seq) = split_request_id(id);
            let seq = seq as usize;
            if thread != me || seq >= next || state[seq] != OUTSTANDING {
                c.unexpected += 1;
                return;
            }
            state[seq] = SETTLED;
            outstanding -= 1;
            let lat_ns = t.saturating_sub(offsets[seq]);
            if lat_ns > timeout_ns {
                c.lost += 1;
            } else if !checker.check(id, r.payload) {
                c.mismatched += 1;
            } else {
                c.verified += 1;
                if offsets[seq] >= warmup_ns {
                    measured_verified += 1;
                    last_measured_recv_ns = last_measured_recv_ns.max(t);
                    latency.record(Duration::from_nanos(lat_ns));
                }
            }
        });
        match polled {
            Ok(k) => busy |= k > 0,
            Err(_) => c.poll_errors += 1,
        }
        if let Some(t) = recv_ns {
            now = now.max(t);
        }

        // Expire in scheduled order; offsets are sorted, so this is amortized O(1).
        while expire < next
            && (state[expire] != OUTSTANDING || offsets[expire].saturating_add(timeout_ns) < now)
        {
            if state[expire] == OUTSTANDING {
                state[expire] = SETTLED;
                outstanding -= 1;
                c.lost += 1;
            }
            expire += 1;
        }

        progress.sent.store(c.sent, Ordering::Relaxed);
        progress.verified.store(c.verified, Ordering::Relaxed);
        if let Some((all, total)) = report {
            if now >= next_report_ns {
                next_report_ns += 1_000_000_000;
                let sent: u64 = all.iter().map(|p| p.sent.load(Ordering::Relaxed)).sum();
                let ok: u64 = all.iter().map(|p| p.verified.load(Ordering::Relaxed)).sum();
                eprintln!(
                    "[loadgen] t={:.0}s sent={sent}/{total} verified={ok}",
                    now as f64 / 1e9
                );
            }
        }

        if next == n && outstanding == 0 {
            break;
        }
        if !busy {
            if cfg.busy_poll {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    let measured_requests = offsets.iter().filter(|&&o| o >= warmup_ns).count() as u64;
    let last_offset = offsets.last().copied().unwrap_or(0);
    ThreadResult {
        counters: c,
        latency,
        measured_requests,
        measured_verified,
        window_end_ns: last_offset.max(last_measured_recv_ns),
    }
}

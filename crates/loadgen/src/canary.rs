//! A speed canary: a fixed piece of CPU and memory work timed on each benchmark CPU just
//! before a trial, so a bench sees a machine that slows down by itself.
//!
//! [`interference`](crate::interference) sees other processes on the bench's CPUs. It cannot
//! see a machine whose CPUs get slower with nothing else running on them — a VM whose host
//! moves it, throttles it or shares its cores without reporting steal time. One such VM ran
//! the same server work per request about 3 × slower in some trials than in others, with no
//! other process and no steal (docs/performance.md "Method"), and a comparison of two
//! runs then measured the VM, not the code.
//!
//! The canary ([`workload`]) is deterministic work — [`ROUNDS`] passes of a multiply-rotate
//! hash that reads and rewrites a [`BUFFER_BYTES`] buffer (bigger than an L1 data cache), and
//! a small copy loop through it — whose result is returned, so it cannot be optimised away.
//! [`Canary::check`] runs it on each of the trial's CPUs, on a thread pinned there (as the
//! trial's threads are), one CPU after another, before the trial starts; a reading takes
//! about 1.5 ms per CPU in a release build. The first reading of each CPU is its
//! **reference** in [`Canary`]'s judgment (see [`Readings`] and [`rebase`] for the run's
//! readings as a whole); every later trial gets the ratio of its reading to the reference
//! ([`Speed::ratio`], the largest of the CPUs' and the pair reading's, below), and a trial
//! whose canary took more than [`SLOWED_RATIO`] times its reference is **slowed**
//! ([`Speed::slowed`]), which the benches treat as they treat a disturbed trial.
//!
//! A reading is the faster of two back-to-back runs on the pinned thread, so one preemption
//! or a cold start does not make a reading (or worse, the reference) slow. The canary measures
//! how fast a CPU runs fixed work when it gets the CPU; it does **not** see a neighbour
//! sharing the CPU — that is what [`interference`](crate::interference) measures, over the
//! whole trial. (Measured on this project's 2-vCPU VM, Linux 6.18, debug build, one run per
//! reading: with a thread spinning, pinned on the canary's CPU, 40 readings took 0.96-1.02 ×
//! as long as without it, in three attempts; a freshly started thread is run ahead of the
//! spinning one for longer than a reading.)
//!
//! **The pair reading.** Besides each CPU alone, the canary times the trial's first two CPUs
//! *talking to each other* ([`pair_on`]): two threads, pinned on the two CPUs, bounce one
//! cache line (an [`AtomicU64`] alone on its 64-byte line, release stores and acquire loads)
//! [`ROUND_TRIPS`] times; the reading is the faster of [`RUNS_PER_READING`] runs, its
//! reference the run's first, as for a single CPU, and the trial's ratio is the largest of the
//! per-CPU ratios and the pair's. For the emulated bench the pair is the (first) server CPU and
//! the device CPU, which share descriptor rings and packet buffers, so every request moves
//! cache lines between them. Why: in a quiet run (2026-11-27 03:41-03:58, `kv bench`, protobuf,
//! "Second run" of docs/results/2026-11-27 at 3223525; its trials were read from that run's
//! `kv-after-google-1/emu-points.json`, not in the repository) three trials at the same offered
//! 1.2 M req/s achieved 718 k, 1143 k and 1187 k req/s; in the slow one the server's work per
//! request (p50 1062 vs 530 ns: 2.0 ×) *and* the device's busy time per request (device_busy
//! 0.486 at 718 k vs 0.364 at 1143 k and 0.351 at 1187 k: 2.1-2.3 ×) were higher, while the
//! single-CPU canary read 1.000-1.005 × on both CPUs in every protobuf trial of that run. Both
//! cores slower per request, each alone at normal speed: the common factor is the traffic
//! between them. The hypothesis is that the host sometimes places the two vCPUs far apart
//! (another CCX, CCD or socket), which makes every cross-core cache-line transfer dearer; an
//! idle ping-pong on this VM reads about 55-79 ns per round trip. **The pair reading does see that state** (third run of
//! docs/results/2026-11-27 at 3223525, 04:54-04:58): its round trip was either about 62 ns or
//! about 330 ns, never in between, and the trial's server work followed it (protobuf p50 461 vs
//! 1021 ns, cornflakes 356 vs 701). **Judging it against the run's first reading does not
//! work** for a state that flips both ways: a run whose first reading was unusually fast (30 ns)
//! marked every trial slowed, and runs whose first reading was in the slow state marked none
//! (their fast trials read "faster than the reference"). So once a run is over, [`rebase`]
//! judges every trial again against the whole run's readings (each CPU's and pair's
//! [`REFERENCE_PERCENTILE`] reading): the tables and JSON of every bench that times the
//! canary use that judgment (`emu_bench::rebase_canaries` for the emulated NIC,
//! [`rebase_records`] for the echo and KV socket and TCP sweeps and the KV AF_XDP one). While
//! the run goes on, the emulated benches judge each trial against the readings so far
//! ([`Readings`]: the same percentile over the run's readings up to it) and rerun a trial
//! that reads slowed (`emu_bench::search_rerunning_slowed`); the sweeps' progress lines use
//! the run's first reading ([`Canary`]).
//!
//! [`Canary::process`] is the one reference of a bench process (one process, one run); a
//! [`Canary::new`] has its own (tests).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use crate::Record;

/// A trial whose canary ran this many times slower than its reference on the same CPU (or
/// pair) is slowed. Why 1.3: a quiet CPU repeats the canary within several percent (release
/// build, this project's VM: 0.99-1.08 × the first reading over six readings), and the slow
/// state this was built for is about 3 × — 1.3 sits well above the noise and far below the
/// effect, so a 30 % slower machine, enough to move a comparison between modes that differ by
/// 10-50 %, is flagged.
pub const SLOWED_RATIO: f64 = 1.3;

/// Size of the buffer the canary hashes: 256 KiB, bigger than any L1 data cache (32-48 KiB),
/// so each pass reads and writes through L2 and not only registers and L1.
pub const BUFFER_BYTES: usize = 256 * 1024;

/// Passes of the hash over the buffer per run. With the copy loop, about 0.75 ms in a release
/// build on this project's AMD EPYC VM (3.5 ms in a debug build): two runs on each of two CPUs
/// are about 3 ms, 0.3 % of a ~1 s trial.
pub const ROUNDS: usize = 16;

/// Runs of the canary per reading; the reading is the fastest.
pub const RUNS_PER_READING: usize = 2;

/// Round trips of the cache line per run of the pair reading ([`pair_on`]): about 1.1-1.6 ms
/// at this VM's idle 55-79 ns per round trip (measured: ten readings in a row, debug build,
/// other builds running, 1.284-1.290 ms, 64-66 ns a round trip).
pub const ROUND_TRIPS: u64 = 20_000;

/// Untimed round trips before the pair's timed runs: both threads are running, pinned, and
/// the line is in the caches.
pub const WARMUP_ROUND_TRIPS: u64 = 1_000;

/// How long one side of the pair waits for the other's next move before it gives up (the
/// other thread descheduled that long: no reading, an error).
const PAIR_WAIT_LIMIT: Duration = Duration::from_secs(10);

/// Bytes moved by each step of the copy loop (a small memcpy, as a server copies a field).
const COPY_BYTES: usize = 2048;

/// The seed [`Canary::check`] runs [`workload`] with.
pub const SEED: u64 = 0x00c0_ffee_cafe_f00d;

/// The canary's work: [`ROUNDS`] passes of a hash that reads and rewrites every word of a
/// [`BUFFER_BYTES`] buffer filled from `seed`, each pass followed by four 2 KiB copies from one
/// place in the buffer to another chosen by the hash so far. Returns the final hash: the same
/// for the same seed, on every machine and build.
pub fn workload(seed: u64) -> u64 {
    let mut buf = vec![0u64; BUFFER_BYTES / 8];
    fill(&mut buf, seed);
    rounds(&mut buf, seed)
}

/// The timed part of [`workload`]: the hash passes and copies over a filled buffer.
fn rounds(buf: &mut [u64], seed: u64) -> u64 {
    let copy_words = COPY_BYTES / 8;
    let mut h = seed;
    for _ in 0..ROUNDS {
        for w in buf.iter_mut() {
            h = (h ^ *w).wrapping_mul(0x0100_0000_01b3).rotate_left(29);
            *w ^= h;
        }
        // A few copies between places the hash picks (as a server copies a field).
        for _ in 0..4 {
            let span = buf.len() - copy_words;
            let from = (h as usize) % span;
            let to = ((h >> 32) as usize) % span;
            buf.copy_within(from..from + copy_words, to);
            h = h.rotate_left(17) ^ buf[to];
        }
    }
    std::hint::black_box(h)
}

/// Runs the canary once on the calling thread and returns its result and the time its timed
/// part took (the buffer is filled first, untimed, so the passes start with it in cache as far
/// as it fits).
fn time_here() -> (u64, Duration) {
    let mut buf = vec![0u64; BUFFER_BYTES / 8];
    fill(&mut buf, SEED);
    let t = Instant::now();
    let h = rounds(std::hint::black_box(&mut buf), SEED);
    (h, t.elapsed())
}

/// A reading on the calling thread: the faster of [`RUNS_PER_READING`] runs of the canary.
fn reading_here() -> Duration {
    (0..RUNS_PER_READING)
        .map(|_| {
            let (h, took) = time_here();
            // Consumed, so the work cannot be dropped.
            std::hint::black_box(h);
            took
        })
        .min()
        .unwrap_or_default()
}

/// Fills `buf` from `seed` (splitmix64: a full-period, well-mixed sequence).
fn fill(buf: &mut [u64], seed: u64) {
    let mut x = seed;
    for w in buf.iter_mut() {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        *w = z ^ (z >> 31);
    }
}

/// Takes a reading on a thread pinned to `cpu` (the faster of [`RUNS_PER_READING`] runs); an
/// error when the thread cannot be pinned there (or be spawned).
pub fn time_on(cpu: usize) -> Result<Duration, String> {
    std::thread::Builder::new()
        .name(format!("canary-{cpu}"))
        .spawn(move || {
            percore::pin_current_thread(cpu).map_err(|e| format!("speed canary: {e}"))?;
            Ok(reading_here())
        })
        .map_err(|e| format!("speed canary: spawning its thread for CPU {cpu}: {e}"))?
        .join()
        .map_err(|_| format!("speed canary: its thread on CPU {cpu} panicked"))?
}

/// The cache line the pair bounces: an [`AtomicU64`] alone on its 64 bytes, so nothing else
/// the threads touch shares it.
#[repr(align(64))]
struct Line(AtomicU64);

/// Waits until `line` holds `want`, spinning; an error after [`PAIR_WAIT_LIMIT`].
fn wait_for(line: &Line, want: u64) -> Result<(), String> {
    let mut spins = 0u32;
    let mut since: Option<Instant> = None;
    while line.0.load(Ordering::Acquire) != want {
        std::hint::spin_loop();
        spins = spins.wrapping_add(1);
        // The clock only now and then, so it does not slow the hand-over it waits for.
        if spins.is_multiple_of(4096) {
            let start = *since.get_or_insert_with(Instant::now);
            if start.elapsed() > PAIR_WAIT_LIMIT {
                return Err(format!(
                    "speed canary: the pair's other thread did not answer within {PAIR_WAIT_LIMIT:?}"
                ));
            }
        }
    }
    Ok(())
}

/// The pair reading: a thread pinned on CPU `a` and one on CPU `b` bounce one cache line
/// (`a` stores an odd count with release, `b` waits for it with acquire and stores the next
/// even one, which `a` waits for) [`ROUND_TRIPS`] times; returns the faster of
/// [`RUNS_PER_READING`] timed runs, after [`WARMUP_ROUND_TRIPS`] untimed ones. An error when
/// `a == b`, when either thread cannot be pinned (or spawned), or when one side waits longer
/// than 10 s for the other.
pub fn pair_on(a: usize, b: usize) -> Result<Duration, String> {
    if a == b {
        return Err(format!(
            "speed canary: the pair reading needs two different CPUs, got CPU {a} twice"
        ));
    }
    let line = Line(AtomicU64::new(0));
    let failed = AtomicBool::new(false);
    let both_pinned = Barrier::new(2);
    let total = WARMUP_ROUND_TRIPS + RUNS_PER_READING as u64 * ROUND_TRIPS;
    // Pins the calling thread; both threads then meet, and both stop when either failed.
    let pin = |cpu: usize| -> Result<(), String> {
        let pinned = percore::pin_current_thread(cpu).map_err(|e| format!("speed canary: {e}"));
        if pinned.is_err() {
            failed.store(true, Ordering::Release);
        }
        both_pinned.wait();
        match pinned {
            Err(e) => Err(e),
            Ok(()) if failed.load(Ordering::Acquire) => Err(String::new()),
            Ok(()) => Ok(()),
        }
    };
    std::thread::scope(|s| {
        let answer = std::thread::Builder::new()
            .name(format!("canary-pair-{b}"))
            .spawn_scoped(s, || -> Result<(), String> {
                pin(b)?;
                for k in 0..total {
                    wait_for(&line, 2 * k + 1)?;
                    line.0.store(2 * k + 2, Ordering::Release);
                }
                Ok(())
            })
            .map_err(|e| format!("speed canary: spawning its pair thread for CPU {b}: {e}"))?;
        let ask = std::thread::Builder::new()
            .name(format!("canary-pair-{a}"))
            .spawn_scoped(s, || -> Result<Duration, String> {
                pin(a)?;
                let mut k = 0u64;
                let mut round_trips = |n: u64| -> Result<(), String> {
                    for _ in 0..n {
                        line.0.store(2 * k + 1, Ordering::Release);
                        wait_for(&line, 2 * k + 2)?;
                        k += 1;
                    }
                    Ok(())
                };
                round_trips(WARMUP_ROUND_TRIPS)?;
                let mut best = Duration::MAX;
                for _ in 0..RUNS_PER_READING {
                    let t = Instant::now();
                    round_trips(ROUND_TRIPS)?;
                    best = best.min(t.elapsed());
                }
                Ok(best)
            });
        let ask = match ask {
            Ok(h) => h,
            Err(e) => {
                // The answering thread is waiting to meet it: let it go.
                failed.store(true, Ordering::Release);
                both_pinned.wait();
                let _ = answer.join();
                return Err(format!(
                    "speed canary: spawning its pair thread for CPU {a}: {e}"
                ));
            }
        };
        let asked = ask
            .join()
            .map_err(|_| format!("speed canary: its pair thread on CPU {a} panicked"))?;
        let answered = answer
            .join()
            .map_err(|_| format!("speed canary: its pair thread on CPU {b} panicked"))?;
        // The error that says why (a thread stopped because the other failed says nothing).
        match (asked, answered) {
            (Ok(t), Ok(())) => Ok(t),
            (Err(e), Ok(())) | (Ok(_), Err(e)) => Err(e),
            (Err(e), Err(f)) => Err(if e.is_empty() { f } else { e }),
        }
    })
}

/// The pair of a trial's CPUs the canary times by default: its first two, when they differ.
pub fn first_pair(cpus: &[usize]) -> Option<[usize; 2]> {
    match cpus {
        [a, b, ..] if a != b => Some([*a, *b]),
        _ => None,
    }
}

/// A trial's pair reading ([`pair_on`]) and its reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Pair {
    /// The two CPUs: the first thread's, then the answering one's.
    pub cpus: [usize; 2],
    /// The reading: [`ROUND_TRIPS`] round trips of the cache line between them.
    pub time: Duration,
    /// The reading it is judged against: the run's first on the same two CPUs (on the run's
    /// first trial, its own) when [`Canary`] judged it; a low percentile of the run's readings
    /// when [`Readings`] or [`rebase`] did.
    pub reference: Duration,
}

impl Pair {
    /// The reading over its reference.
    pub fn ratio(&self) -> f64 {
        ratio(self.time, self.reference)
    }

    /// The reading per round trip, nanoseconds.
    pub fn round_trip_ns(&self) -> f64 {
        self.time.as_secs_f64() * 1e9 / ROUND_TRIPS as f64
    }
}

/// `t` over `reference` (1 when there is no reference).
fn ratio(t: Duration, reference: Duration) -> f64 {
    if reference.is_zero() {
        1.0
    } else {
        t.as_secs_f64() / reference.as_secs_f64()
    }
}

/// A trial's canary: its time on each CPU and each CPU's reference (the run's first reading
/// there, or a low percentile of the run's readings once [`Readings`] or [`rebase`] judged
/// it), and the pair reading between two of the CPUs ([`Pair`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Speed {
    /// The CPUs, in the order the trial gave them.
    pub cpus: Vec<usize>,
    /// The canary's time on each CPU of `cpus`.
    pub times: Vec<Duration>,
    /// Each CPU's reference time (the run's first canary on it, on the run's first trial its
    /// own reading; after [`Readings::judge`] or [`rebase`], a low percentile of the run's).
    pub reference: Vec<Duration>,
    /// The pair reading ([`pair_on`]): `None` when the trial has fewer than two CPUs.
    pub pair: Option<Pair>,
}

impl Speed {
    /// Each CPU's time over its reference.
    pub fn ratios(&self) -> Vec<f64> {
        self.times
            .iter()
            .zip(&self.reference)
            .map(|(&t, &r)| ratio(t, r))
            .collect()
    }

    /// The pair reading over its reference, when there is one.
    pub fn pair_ratio(&self) -> Option<f64> {
        self.pair.as_ref().map(Pair::ratio)
    }

    /// Every ratio of the trial: each CPU's, then the pair's.
    fn all_ratios(&self) -> Vec<f64> {
        let mut all = self.ratios();
        all.extend(self.pair_ratio());
        all
    }

    /// The trial's ratio: the largest of its CPUs' and its pair's (1 on the run's first
    /// trial; 3 when some reading took three times as long as its reference).
    pub fn ratio(&self) -> f64 {
        self.all_ratios().into_iter().fold(0.0, f64::max)
    }

    /// Whether the machine was slower than its reference says it can be: some CPU's canary,
    /// or the pair reading, took more than [`SLOWED_RATIO`] times its reference.
    pub fn slowed(&self) -> bool {
        self.ratio() > SLOWED_RATIO
    }

    /// Whether this reading is faster than the reference by more than [`SLOWED_RATIO`]: the
    /// reference itself was taken slowed, so the trials near ratio 1 are the slowed ones.
    pub fn reference_slowed(&self) -> bool {
        self.all_ratios()
            .into_iter()
            .any(|r| r > 0.0 && r * SLOWED_RATIO < 1.0)
    }

    /// What a trial's progress line says: the ratio alone when every reading is at 1.00 of
    /// its reference; each CPU's ratio and the pair's when some is not (`speed canary 1.04x
    /// (CPU 0 1.04, CPU 1 1.00, CPU 0<->1 1.02)`); [`describe`](Self::describe) (the times,
    /// and SLOWED or that the run started slowed) when the trial is slowed or the run started
    /// slowed.
    pub fn progress_note(&self) -> String {
        if self.slowed() || self.reference_slowed() {
            return self.describe();
        }
        let mut s = format!("speed canary {:.2}x", self.ratio());
        let at_one = |r: f64| format!("{r:.2}") == "1.00";
        if !self.all_ratios().into_iter().all(at_one) {
            let mut parts: Vec<String> = self
                .cpus
                .iter()
                .zip(self.ratios())
                .map(|(c, r)| format!("CPU {c} {r:.2}"))
                .collect();
            if let Some(p) = &self.pair {
                parts.push(format!(
                    "CPU {}<->{} {:.2}",
                    p.cpus[0],
                    p.cpus[1],
                    p.ratio()
                ));
            }
            let _ = write!(s, " ({})", parts.join(", "));
        }
        s
    }

    /// The canary as JSON (a trial's `canary` in `emu-points.json`): the ratio, whether
    /// slowed, each CPU's time and reference (`cpus`, `time_us`, `reference_us`), and the pair
    /// reading next to them (`pair_cpus`, `pair_us`, `pair_reference_us`, `pair_ratio`,
    /// `pair_round_trip_ns`; `null` without one).
    pub fn to_json(&self) -> serde_json::Value {
        let us = |t: &Duration| t.as_secs_f64() * 1e6;
        let p = self.pair.as_ref();
        serde_json::json!({
            "ratio": self.ratio(),
            "slowed": self.slowed(),
            "reference_slowed": self.reference_slowed(),
            "cpus": self.cpus,
            "time_us": self.times.iter().map(us).collect::<Vec<_>>(),
            "reference_us": self.reference.iter().map(us).collect::<Vec<_>>(),
            "pair_cpus": p.map(|p| p.cpus),
            "pair_ratio": self.pair_ratio(),
            "pair_us": p.map(|p| us(&p.time)),
            "pair_reference_us": p.map(|p| us(&p.reference)),
            "pair_round_trip_ns": p.map(Pair::round_trip_ns),
        })
    }

    /// One phrase for a progress line or a table note.
    pub fn describe(&self) -> String {
        let mut s = format!("speed canary {:.2}x its reference", self.ratio());
        let _ = write!(s, " (");
        for (i, ((c, t), r)) in self
            .cpus
            .iter()
            .zip(&self.times)
            .zip(&self.reference)
            .enumerate()
        {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(
                s,
                "CPU {c} {:.0}/{:.0} µs",
                t.as_secs_f64() * 1e6,
                r.as_secs_f64() * 1e6
            );
        }
        if let Some(p) = &self.pair {
            let _ = write!(
                s,
                ", CPU {}<->{} {:.0}/{:.0} µs ({:.0} ns a round trip)",
                p.cpus[0],
                p.cpus[1],
                p.time.as_secs_f64() * 1e6,
                p.reference.as_secs_f64() * 1e6,
                p.round_trip_ns()
            );
        }
        s.push(')');
        if self.slowed() {
            s.push_str(": SLOWED");
        } else if self.reference_slowed() {
            s.push_str(": faster than the reference (the run started slowed)");
        }
        s
    }
}

/// Which of a run's readings [`rebase`] takes as each CPU's (and pair's) reference: the
/// reading at this fraction of the run's readings, fastest first. Low, so that the machine's
/// fast state sets the reference when the run saw it at all (one run of 2026-11-27 had it in
/// 15 % of its trials, the rest ≈ 5 × slower on the pair reading); not the fastest, so that
/// one odd reading does not (another run's first pair reading was 30 ns against ≈ 62 ns for
/// every other fast one, which marked all its trials slowed against the first reading).
pub const REFERENCE_PERCENTILE: f64 = 0.1;

/// A run's canary readings so far: each CPU's and each pair's, kept sorted, so that a reading
/// can be judged against the run's fast state *as seen so far* ([`judge`](Self::judge)): its
/// reference is the [`REFERENCE_PERCENTILE`] reading of its CPU (or pair) among them. While a
/// CPU has five readings or fewer that is the fastest of them; from six on, an odd fast one
/// no longer sets it.
///
/// [`rebase`] is this over a whole finished run; the emulated benches' search also judges
/// each trial by it while the run goes on, to rerun a trial whose canary read the slow state
/// (`emu_bench::search_rerunning_slowed`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Readings {
    cpu: BTreeMap<usize, Vec<Duration>>,
    pair: BTreeMap<[usize; 2], Vec<Duration>>,
}

/// Inserts `t` into the sorted `v`.
fn insert_sorted(v: &mut Vec<Duration>, t: Duration) {
    let at = v.partition_point(|&x| x <= t);
    v.insert(at, t);
}

/// The [`REFERENCE_PERCENTILE`] reading of the sorted, non-empty `v`.
fn low(v: &[Duration]) -> Duration {
    let i = ((v.len() - 1) as f64 * REFERENCE_PERCENTILE).round() as usize;
    v[i]
}

impl Readings {
    /// No readings yet.
    pub fn new() -> Readings {
        Readings::default()
    }

    /// Adds `s`'s readings: each CPU's time and the pair's (its references are not read).
    pub fn add(&mut self, s: &Speed) {
        for (c, t) in s.cpus.iter().zip(&s.times) {
            insert_sorted(self.cpu.entry(*c).or_default(), *t);
        }
        if let Some(p) = &s.pair {
            insert_sorted(self.pair.entry(p.cpus).or_default(), p.time);
        }
    }

    /// Readings added, over every CPU and pair.
    pub fn len(&self) -> usize {
        self.cpu
            .values()
            .chain(self.pair.values())
            .map(Vec::len)
            .sum()
    }

    /// Whether none has been added.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sets `s`'s references (each CPU's and its pair's) to the [`REFERENCE_PERCENTILE`]
    /// reading of that CPU (pair) so far; a CPU or pair without readings keeps its reference.
    /// Add `s` first to judge it among the readings it belongs to.
    pub fn judge(&self, s: &mut Speed) {
        for (r, c) in s.reference.iter_mut().zip(&s.cpus) {
            if let Some(v) = self.cpu.get(c).filter(|v| !v.is_empty()) {
                *r = low(v);
            }
        }
        if let Some(p) = &mut s.pair {
            if let Some(v) = self.pair.get(&p.cpus).filter(|v| !v.is_empty()) {
                p.reference = low(v);
            }
        }
    }
}

/// Re-judges a whole run's canaries against references taken from the run's readings as a
/// whole, once the run is over: each CPU's reference becomes its [`REFERENCE_PERCENTILE`]
/// reading over `speeds`, and each pair's likewise ([`Readings`] over the whole run). A
/// trial's progress line was judged against the readings before it (all it had then); a
/// machine whose state flips both ways during a run (docs/performance.md "Method") is
/// judged right only by this.
pub fn rebase(speeds: &mut [&mut Speed]) {
    let mut all = Readings::new();
    for s in speeds.iter() {
        all.add(s);
    }
    for s in speeds.iter_mut() {
        all.judge(s);
    }
}

/// [`rebase`] for a run whose points are records (the socket, TCP and AF_XDP sweeps): each
/// record with the canary read before it, `None` when it had none. Once the run is over the
/// canaries are re-judged together and each record's canary fields
/// ([`Record::set_canary`]) set from its re-judged canary; records without one are left as
/// they are.
pub fn rebase_records(points: &mut [(Record, Option<Speed>)]) {
    let mut speeds: Vec<&mut Speed> = points.iter_mut().filter_map(|(_, s)| s.as_mut()).collect();
    rebase(&mut speeds);
    for (rec, speed) in points.iter_mut() {
        if let Some(s) = speed {
            rec.set_canary(s);
        }
    }
}

/// The note under a table of `records` when some were slowed ([`Record::slowed`]): how many,
/// and what it means; `None` when none were.
pub fn slowed_note(records: &[Record]) -> Option<String> {
    let n = records.iter().filter(|r| r.slowed()).count();
    (n > 0).then(|| {
        format!(
            "{n} point(s) ran on a machine slower than its fast state (speed canary over \
             {SLOWED_RATIO}x the run's reference, each CPU's and pair's 10th-percentile reading \
             over the run: `canary_ratio` in the JSON); numbers resting on them compare the \
             machine's states, not the modes: rerun on a quiet machine."
        )
    })
}

/// A pair reading (one cache-line round trip between the bench's two CPUs) above this many
/// nanoseconds means the two CPUs are far apart: on another socket, or placed apart by a
/// virtual machine's host. Cores of one socket bounce a line in well under 150 ns (this
/// project's VM: 55-79 ns in its fast state); its slow state read 190-340 ns a round trip
/// (median per run), and server work per request doubled with it (docs/performance.md
/// "Method"). A run wholly in that state is judged against itself by [`rebase`] and shows no
/// slowed trial; only an absolute reading sees it ([`far_pair_note`]). (200 ns missed the
/// runs of that state that read 190.)
pub const FAR_PAIR_NS: f64 = 150.0;

/// The note under a run's tables when the median pair reading of its `records` (those that
/// have one: `canary_pair_ns`) is above [`FAR_PAIR_NS`]: the whole run ran with its two CPUs
/// far apart, which the per-trial `slowed` marks (relative to the run) cannot show. `None`
/// when the median is below, or no record has a pair reading.
pub fn far_pair_note(records: &[Record]) -> Option<String> {
    let mut ns: Vec<f64> = records.iter().filter_map(|r| r.canary_pair_ns).collect();
    if ns.is_empty() {
        return None;
    }
    ns.sort_by(f64::total_cmp);
    let median = ns[ns.len() / 2];
    let far = ns.iter().filter(|&&v| v > FAR_PAIR_NS).count();
    (median > FAR_PAIR_NS).then(|| {
        format!(
            "The speed canary's pair reading (a cache line bounced between the bench's two \
             CPUs) was {median:.0} ns a round trip at the median point ({far} of {} points \
             above {FAR_PAIR_NS:.0} ns; `canary_pair_ns` in the JSON): the two CPUs were far \
             apart (another socket, or a host placing the virtual CPUs apart) for most of the \
             run. The slowed marks are relative to the run and cannot show it; work that \
             crosses the two CPUs (the device's rings) is slower throughout: rerun before \
             comparing this run's numbers with another's.",
            ns.len()
        )
    })
}

/// The canary's notes under a run's tables, each as `"\n{note}\n"`: [`slowed_note`] and
/// [`far_pair_note`] of `records`; empty when neither applies. Every bench that prints a
/// table of records ends it with these.
pub fn notes(records: &[Record]) -> String {
    [slowed_note(records), far_pair_note(records)]
        .into_iter()
        .flatten()
        .map(|note| format!("\n{note}\n"))
        .collect()
}

/// The reference readings of a run: each CPU's first canary time, and each pair's first pair
/// reading.
#[derive(Debug, Default)]
pub struct Canary {
    reference: Mutex<BTreeMap<usize, Duration>>,
    pair_reference: Mutex<BTreeMap<[usize; 2], Duration>>,
}

static PROCESS: Canary = Canary::new();

impl Canary {
    /// A canary with no reference yet: its first reading on each CPU becomes that CPU's.
    pub const fn new() -> Canary {
        Canary {
            reference: Mutex::new(BTreeMap::new()),
            pair_reference: Mutex::new(BTreeMap::new()),
        }
    }

    /// The process's canary: a bench process is one run, and its first trial's canary is the
    /// reference of all its trials (`emu_bench` and the socket benches use it).
    pub fn process() -> &'static Canary {
        &PROCESS
    }

    /// Times the canary on each of `cpus` (a thread pinned to each, one after another), then
    /// the pair reading between the first two ([`first_pair`]; none with fewer than two), and
    /// judges the readings against the references; an error naming the CPU when one cannot be
    /// pinned to (nothing is judged then).
    pub fn check(&self, cpus: &[usize]) -> Result<Speed, String> {
        self.check_with_pair(cpus, first_pair(cpus))
    }

    /// [`check`](Self::check) with the pair reading between the two CPUs of `pair` (none when
    /// `None`): the emulated bench's is its server CPU and its device CPU.
    pub fn check_with_pair(
        &self,
        cpus: &[usize],
        pair: Option<[usize; 2]>,
    ) -> Result<Speed, String> {
        let readings = cpus
            .iter()
            .map(|&c| time_on(c).map(|t| (c, t)))
            .collect::<Result<Vec<_>, _>>()?;
        let pair = pair
            .map(|[a, b]| pair_on(a, b).map(|t| ([a, b], t)))
            .transpose()?;
        Ok(self.judge_with_pair(&readings, pair))
    }

    /// [`check`](Self::check) on every CPU this process may run on: what a trial whose threads
    /// are not pinned (they float over those CPUs) calls before it starts. `None`, with the
    /// reason on stderr, when the canary cannot run.
    pub fn check_allowed(&self) -> Option<Speed> {
        let checked = percore::allowed_cores()
            .map_err(|e| format!("speed canary: reading this process's CPUs: {e}"))
            .and_then(|cpus| self.check(&cpus));
        match checked {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("[bench] {e}; trials are not checked for a slowed machine");
                None
            }
        }
    }

    /// Judges `(cpu, time)` readings without a pair reading: a CPU without a reference takes
    /// its reading as one.
    pub fn judge(&self, readings: &[(usize, Duration)]) -> Speed {
        self.judge_with_pair(readings, None)
    }

    /// Judges `(cpu, time)` readings and a `(cpus, time)` pair reading: a CPU or a pair
    /// without a reference takes its reading as one.
    pub fn judge_with_pair(
        &self,
        readings: &[(usize, Duration)],
        pair: Option<([usize; 2], Duration)>,
    ) -> Speed {
        let pair = pair.map(|(cpus, time)| {
            let mut refs = self
                .pair_reference
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Pair {
                cpus,
                time,
                reference: *refs.entry(cpus).or_insert(time),
            }
        });
        let mut refs = self
            .reference
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let reference = readings
            .iter()
            .map(|&(c, t)| *refs.entry(c).or_insert(t))
            .collect();
        Speed {
            cpus: readings.iter().map(|&(c, _)| c).collect(),
            times: readings.iter().map(|&(_, t)| t).collect(),
            reference,
            pair,
        }
    }
}

#[cfg(test)]
mod tests {

    /// After a run, each CPU and pair is judged against a low percentile of the whole run's
    /// readings: a run whose first pair reading was an odd fast one, or in the slow state,
    /// still marks exactly its slow-state trials (the two failures of 2026-11-27's third run).
    #[test]
    fn rebase_judges_a_run_against_its_own_fast_state_whatever_its_first_reading() {
        let us = Duration::from_micros;
        // References: each CPU its own reading, the pair the run's first, an odd fast one.
        let speed = |pair_us: u64| two_cpus(pair_us, None, 600);
        // 1 odd fast reading, 12 fast (1240 us = 62 ns per round trip), 7 slow (6600 us).
        let mut run: Vec<Speed> = std::iter::once(speed(600))
            .chain((0..12).map(|_| speed(1240)))
            .chain((0..7).map(|_| speed(6600)))
            .collect();
        assert!(
            run[1..13].iter().all(|s| s.slowed()),
            "judged against the odd first reading"
        );
        rebase(&mut run.iter_mut().collect::<Vec<_>>());
        assert!(run[1..13]
            .iter()
            .all(|s| !s.slowed() && (s.ratio() - 1.0).abs() < 1e-9));
        assert!(run[13..]
            .iter()
            .all(|s| s.slowed() && s.pair_ratio().unwrap() > 5.0));
        assert_eq!(run[0].pair.as_ref().unwrap().reference, us(1240));
        // A run that starts slow and is mostly slow: 17 slow readings first, 3 fast ones.
        let mut run: Vec<Speed> = (0..17)
            .map(|_| speed(6600))
            .chain((0..3).map(|_| speed(1240)))
            .collect();
        for s in &mut run {
            s.pair.as_mut().unwrap().reference = us(6600);
        }
        assert!(
            run.iter().all(|s| !s.slowed()),
            "judged against a slow first reading"
        );
        rebase(&mut run.iter_mut().collect::<Vec<_>>());
        assert_eq!(run.iter().filter(|s| s.slowed()).count(), 17);
        // The per-CPU references are the CPUs' own low readings.
        assert_eq!(run[0].reference, vec![us(700), us(705)]);
    }

    use super::*;

    /// A canary on CPUs 0 and 1 (700 and 705 us) and their pair (`pair_us`), with each CPU's
    /// reference `cpu_ref_us` (`None`: its own reading) and the pair's `pair_ref_us`.
    fn two_cpus(pair_us: u64, cpu_ref_us: Option<u64>, pair_ref_us: u64) -> Speed {
        let us = Duration::from_micros;
        let times = vec![us(700), us(705)];
        Speed {
            cpus: vec![0, 1],
            reference: cpu_ref_us.map_or(times.clone(), |r| vec![us(r), us(r)]),
            times,
            pair: Some(Pair {
                cpus: [0, 1],
                time: us(pair_us),
                reference: us(pair_ref_us),
            }),
        }
    }

    /// While a run goes on, a reading is judged against the readings so far: the fastest
    /// while there are five or fewer, the 10th percentile from then on (so an odd fast one
    /// stops setting the reference), and a CPU or pair not seen keeps its reference.
    #[test]
    fn readings_so_far_judge_against_the_fast_state_seen_so_far() {
        let us = Duration::from_micros;
        // References of 1 us: not yet judged.
        let speed = |pair_us: u64| two_cpus(pair_us, Some(1), 1);
        let mut r = Readings::new();
        assert!(r.is_empty());
        // Nothing seen: references stay as they were.
        let mut s = speed(6600);
        r.judge(&mut s);
        assert_eq!(s.pair.as_ref().unwrap().reference, us(1));
        // A run starting slow: its slow readings are the reference, nothing is slowed.
        let mut first = speed(6600);
        r.add(&first);
        r.judge(&mut first);
        assert!(!first.slowed() && (first.ratio() - 1.0).abs() < 1e-12);
        // The fast state arrives: the fast reading is faster than the reference so far...
        let mut fast = speed(1240);
        let mut before = fast.clone();
        r.judge(&mut before);
        assert!(before.reference_slowed());
        // ...and, added, becomes it: the next slow reading is slowed.
        r.add(&fast);
        r.judge(&mut fast);
        assert!(!fast.slowed());
        let mut slow = speed(6600);
        r.add(&slow);
        r.judge(&mut slow);
        assert!(slow.slowed() && slow.pair_ratio().unwrap() > 5.0);
        assert_eq!(r.len(), 9);
        // An odd fast first reading sets the reference for five readings, not six.
        let mut r = Readings::new();
        r.add(&speed(600));
        for n in 2..=6 {
            let mut s = speed(1240);
            r.add(&s);
            r.judge(&mut s);
            assert_eq!(s.slowed(), n <= 5, "reading {n}: {}", s.describe());
        }
        // Another pair (or CPU) is judged against its own readings only.
        let mut other = speed(6600);
        other.pair.as_mut().unwrap().cpus = [1, 0];
        other.cpus = vec![2, 3];
        r.judge(&mut other);
        assert_eq!(other.reference, vec![us(1), us(1)]);
        assert_eq!(other.pair.unwrap().reference, us(1));
    }

    /// A socket or TCP sweep's records, each with the canary before it, are re-judged
    /// together once the run is over: the slow-state points of a run whose first reading was
    /// slow are marked, the fast ones unmarked, a record without a canary left alone.
    #[test]
    fn rebase_records_marks_a_sweeps_slow_points_against_the_whole_run() {
        let c = Canary::new();
        let us = Duration::from_micros;
        let cpus = [(0, us(700)), (1, us(705))];
        // First reading slow (the run's reference while it ran), then 7 fast, 2 slow.
        let pairs = [6600, 1240, 1240, 6600, 1240, 1240, 1240, 6600, 1240, 1240];
        let mut points: Vec<(Record, Option<Speed>)> = pairs
            .iter()
            .enumerate()
            .map(|(i, &p)| {
                let speed = c.judge_with_pair(&cpus, Some(([0, 1], us(p))));
                let mut rec = Record {
                    mode: format!("m{}", i % 2),
                    offered_rps: 100.0 * (1 + i / 2) as f64,
                    ..Record::default()
                };
                rec.set_canary(&speed);
                (rec, Some(speed))
            })
            .collect();
        points.push((Record::default(), None));
        // Judged against the slow first reading: nothing slowed.
        assert!(points.iter().all(|(r, _)| !r.slowed()));
        rebase_records(&mut points);
        let slowed: Vec<usize> = points
            .iter()
            .enumerate()
            .filter(|(_, (r, _))| r.slowed())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(slowed, vec![0, 3, 7]);
        for (r, s) in &points[..10] {
            let s = s.as_ref().unwrap();
            assert_eq!(r.canary_ratio, Some(s.ratio()));
            assert_eq!(r.canary_pair_ratio, s.pair_ratio());
            assert_eq!(s.pair.as_ref().unwrap().reference, us(1240));
        }
        assert_eq!(points[10].0, Record::default());
        assert!(
            slowed_note(&points.iter().map(|p| p.0.clone()).collect::<Vec<_>>())
                .unwrap()
                .starts_with("3 point(s) ran on a machine slower than its fast state")
        );
    }

    #[test]
    fn the_workload_is_deterministic_and_depends_on_its_seed() {
        let a = workload(SEED);
        assert_eq!(a, workload(SEED));
        // The timed path computes the same thing as `workload` (fill, then rounds).
        assert_eq!(time_here().0, a);
        // On another thread too.
        assert_eq!(std::thread::spawn(|| workload(SEED)).join().unwrap(), a);
        assert_ne!(workload(SEED + 1), a);
        assert_ne!(a, 0);
    }

    #[test]
    fn the_first_reading_is_the_reference_and_a_slower_one_is_slowed() {
        let c = Canary::new();
        let ms = Duration::from_micros;
        let first = c.judge(&[(0, ms(500)), (1, ms(400))]);
        assert_eq!(first.reference, first.times);
        assert!((first.ratio() - 1.0).abs() < 1e-12);
        assert!(!first.slowed() && !first.describe().contains("SLOWED"));
        // Normal jitter: not slowed.
        let normal = c.judge(&[(0, ms(550)), (1, ms(380))]);
        assert_eq!(normal.reference, vec![ms(500), ms(400)]);
        assert!((normal.ratio() - 1.1).abs() < 1e-9, "{}", normal.ratio());
        assert!(!normal.slowed(), "{}", normal.describe());
        // One CPU three times slower: the trial is slowed, by its slowest CPU.
        let slow = c.judge(&[(0, ms(500)), (1, ms(1200))]);
        assert!((slow.ratio() - 3.0).abs() < 1e-9);
        assert!(slow.slowed());
        assert!(
            slow.describe().ends_with(": SLOWED") && slow.describe().contains("3.00x"),
            "{}",
            slow.describe()
        );
        assert!(
            slow.describe().contains("CPU 1 1200/400 µs"),
            "{}",
            slow.describe()
        );
        // Just at the threshold is not; just above is.
        let at = c.judge(&[(0, ms(650))]);
        assert!(!at.slowed(), "{}", at.ratio());
        assert!(c.judge(&[(0, ms(660))]).slowed());
        // A new CPU gets its own reference.
        let new = c.judge(&[(2, ms(900))]);
        assert!(!new.slowed() && new.reference == vec![ms(900)]);
        // A run that started slowed says so when the machine speeds up.
        let fast = c.judge(&[(0, ms(150))]);
        assert!(!fast.slowed() && fast.reference_slowed());
        assert!(
            fast.describe().contains("the run started slowed"),
            "{}",
            fast.describe()
        );
    }

    #[test]
    fn a_real_reading_on_a_pinned_thread_becomes_the_reference() {
        let cpu = match percore::allowed_cores() {
            Ok(c) if !c.is_empty() => c[0],
            _ => {
                test_skip::skip(
                    "a_real_reading_on_a_pinned_thread_becomes_the_reference",
                    "this process's CPU affinity cannot be read",
                );
                return;
            }
        };
        let c = Canary::new();
        let first = c.check(&[cpu]).expect("canary on an allowed CPU");
        assert_eq!(first.cpus, vec![cpu]);
        assert!(!first.times[0].is_zero());
        assert_eq!(first.reference, first.times);
        let second = c.check(&[cpu]).expect("canary");
        assert_eq!(second.reference, first.times);
        // A CPU this process may not run on is a clear error, not a reading.
        let err = c.check(&[libc_cpu_setsize()]).unwrap_err();
        assert!(err.contains("speed canary"), "{err}");
    }

    #[test]
    fn a_records_canary_ratio_is_in_its_json_and_slowed_ones_get_a_note() {
        let plain = Record {
            mode: "m".into(),
            ..Record::default()
        };
        // Without a canary the JSON is as before.
        let j = serde_json::to_value(&plain).unwrap();
        assert!(j.get("canary_ratio").is_none(), "{j}");
        assert!(!plain.slowed());
        let normal = Record {
            canary_ratio: Some(1.1),
            ..plain.clone()
        };
        let slow = Record {
            canary_ratio: Some(2.5),
            ..plain.clone()
        };
        assert!(!normal.slowed() && slow.slowed());
        let j = serde_json::to_value(&slow).unwrap();
        assert_eq!(j["canary_ratio"], 2.5);
        let back: Record = serde_json::from_value(j).unwrap();
        assert_eq!(back, slow);
        // Records written before the field read back without it.
        let old: Record = serde_json::from_value(serde_json::to_value(&plain).unwrap()).unwrap();
        assert_eq!(old.canary_ratio, None);
        assert_eq!(slowed_note(&[plain.clone(), normal.clone()]), None);
        let note = slowed_note(&[plain, slow.clone(), normal, slow]).unwrap();
        assert!(
            note.starts_with("2 point(s) ran on a machine slower") && note.contains("1.3x"),
            "{note}"
        );
    }

    /// The pair reading really runs on two CPUs: positive, the first is its reference, a later
    /// one keeps it, and a CPU it cannot pin to (or the same CPU twice) is a clear error, not a
    /// hang.
    #[test]
    fn a_real_pair_reading_runs_on_two_cpus_and_becomes_the_reference() {
        let name = "a_real_pair_reading_runs_on_two_cpus_and_becomes_the_reference";
        let cpus = match percore::allowed_cores() {
            Ok(c) if c.len() >= 2 => c,
            Ok(c) => {
                test_skip::skip(
                    name,
                    &format!("needs 2 CPUs, this process may use {}", c.len()),
                );
                return;
            }
            Err(e) => {
                test_skip::skip(name, &format!("this process's CPU affinity: {e}"));
                return;
            }
        };
        let t = pair_on(cpus[0], cpus[1]).expect("pair reading on two allowed CPUs");
        assert!(!t.is_zero());
        // 20 000 round trips cannot take less than 20 000 ns... nor (on any machine that
        // runs this) a minute.
        assert!(
            t > Duration::from_micros(20) && t < Duration::from_secs(60),
            "{t:?}"
        );
        let c = Canary::new();
        let first = c.check(&cpus[..2]).expect("canary on two allowed CPUs");
        let pair = first.pair.clone().expect("two CPUs: a pair reading");
        assert_eq!(pair.cpus, [cpus[0], cpus[1]]);
        assert!(!pair.time.is_zero() && pair.reference == pair.time);
        assert!(pair.round_trip_ns() > 0.0);
        let second = c.check(&cpus[..2]).expect("canary");
        assert_eq!(second.pair.expect("pair").reference, pair.time);
        // One CPU: no pair.
        assert_eq!(c.check(&cpus[..1]).expect("canary").pair, None);
        let err = pair_on(cpus[0], cpus[0]).unwrap_err();
        assert!(err.contains("two different CPUs"), "{err}");
        for (a, b) in [(cpus[0], libc_cpu_setsize()), (libc_cpu_setsize(), cpus[0])] {
            let err = pair_on(a, b).unwrap_err();
            assert!(err.contains("speed canary") && err.len() > 20, "{err}");
        }
    }

    /// A pair reading slower than its reference makes the trial slowed even when every CPU
    /// alone is at its reference (the slow state the pair is for); a normal one does not.
    #[test]
    fn a_slower_pair_reading_is_slowed_and_a_normal_one_is_not() {
        let c = Canary::new();
        let us = Duration::from_micros;
        let cpus = [(0, us(700)), (1, us(710))];
        let first = c.judge_with_pair(&cpus, Some(([0, 1], us(1400))));
        let p = first.pair.clone().unwrap();
        assert_eq!((p.cpus, p.time, p.reference), ([0, 1], us(1400), us(1400)));
        assert!((p.round_trip_ns() - 70.0).abs() < 1e-9);
        assert!(!first.slowed() && first.progress_note() == "speed canary 1.00x");
        // Normal jitter on the pair: not slowed; the note shows each ratio.
        let normal = c.judge_with_pair(&[(0, us(700)), (1, us(710))], Some(([0, 1], us(1470))));
        assert!(!normal.slowed() && !normal.reference_slowed());
        assert!((normal.ratio() - 1.05).abs() < 1e-9, "{}", normal.ratio());
        assert_eq!(
            normal.progress_note(),
            "speed canary 1.05x (CPU 0 1.00, CPU 1 1.00, CPU 0<->1 1.05)"
        );
        // The pair 2.1x slower, each CPU alone at 1.00: slowed, by the pair.
        let slow = c.judge_with_pair(&[(0, us(700)), (1, us(710))], Some(([0, 1], us(2940))));
        assert_eq!(slow.ratios(), vec![1.0, 1.0]);
        assert!((slow.pair_ratio().unwrap() - 2.1).abs() < 1e-9);
        assert!((slow.ratio() - 2.1).abs() < 1e-9 && slow.slowed());
        let note = slow.progress_note();
        assert!(
            note.starts_with("speed canary 2.10x its reference")
                && note.contains("CPU 0<->1 2940/1400 µs (147 ns a round trip)")
                && note.ends_with(": SLOWED"),
            "{note}"
        );
        // Its record carries both ratios, and is slowed.
        let mut rec = Record::default();
        rec.set_canary(&slow);
        assert_eq!(rec.canary_ratio, Some(slow.ratio()));
        assert_eq!(rec.canary_pair_ratio, slow.pair_ratio());
        assert!(rec.slowed());
        // Another pair of CPUs has its own reference; the same pair reversed is another pair.
        let other = c.judge_with_pair(&cpus, Some(([1, 0], us(3000))));
        assert!(!other.slowed() && other.pair.unwrap().reference == us(3000));
        // A pair faster than its reference by more than 1.3x: the run started slowed.
        let fast = c.judge_with_pair(&cpus, Some(([0, 1], us(1000))));
        assert!(!fast.slowed() && fast.reference_slowed());
        assert!(fast.describe().contains("the run started slowed"));
        // No pair reading (one CPU, or `judge`): as before.
        assert_eq!(c.judge(&cpus).pair_ratio(), None);
    }

    /// The pair's ratio is in the record's JSON; records written before it read back.
    #[test]
    fn a_records_pair_ratio_is_in_its_json_and_old_records_read() {
        let rec = Record {
            mode: "m".into(),
            canary_ratio: Some(2.1),
            canary_pair_ratio: Some(2.1),
            ..Record::default()
        };
        let j = serde_json::to_value(&rec).unwrap();
        assert_eq!(j["canary_pair_ratio"], 2.1);
        assert_eq!(serde_json::from_value::<Record>(j).unwrap(), rec);
        // A record as written before the pair existed (canary_ratio, no pair ratio).
        let mut old = serde_json::to_value(&rec).unwrap();
        old.as_object_mut().unwrap().remove("canary_pair_ratio");
        let back: Record = serde_json::from_value(old).unwrap();
        assert_eq!(
            (back.canary_ratio, back.canary_pair_ratio),
            (Some(2.1), None)
        );
        assert!(back.slowed());
        // Without a pair the field is not written.
        let none = Record {
            canary_pair_ratio: None,
            ..rec
        };
        assert!(serde_json::to_value(&none)
            .unwrap()
            .get("canary_pair_ratio")
            .is_none());
    }

    #[test]
    fn a_run_far_apart_throughout_gets_a_note_that_a_fast_one_does_not() {
        let at = |ns: Option<f64>| Record {
            canary_pair_ns: ns,
            ..Record::default()
        };
        // Fast throughout (this VM's fast state), or no pair reading: no note.
        let fast: Vec<Record> = [62.0, 64.0, 361.0].map(|v| at(Some(v))).to_vec();
        assert_eq!(far_pair_note(&fast), None);
        assert_eq!(far_pair_note(&[at(None), at(None)]), None);
        assert_eq!(far_pair_note(&[]), None);
        // Slow throughout: relative marks see nothing, the note says so.
        let slow: Vec<Record> = [317.0, 308.0, 328.0, 61.0, 320.0]
            .map(|v| at(Some(v)))
            .to_vec();
        let note = far_pair_note(&slow).expect("a note");
        assert!(
            note.contains(
                "was 317 ns a round trip at the median point (4 of 5 points above 150 ns"
            ),
            "{note}"
        );
        // The slow state's lowest runs (a median of about 190 ns) are caught too; a run at
        // a socket's speed (just under 150) is not.
        let low: Vec<Record> = [191.0, 188.0, 65.0].map(|v| at(Some(v))).to_vec();
        let note = far_pair_note(&low).expect("a note");
        assert!(note.contains("was 188 ns a round trip"), "{note}");
        let near: Vec<Record> = [149.0, 140.0, 120.0].map(|v| at(Some(v))).to_vec();
        assert_eq!(far_pair_note(&near), None);
        // The record carries the reading into its JSON.
        let c = Canary::new();
        let speed = c.judge_with_pair(
            &[(0, Duration::from_micros(700))],
            Some(([0, 1], Duration::from_micros(6_000))),
        );
        let mut r = Record::default();
        r.set_canary(&speed);
        assert_eq!(r.canary_pair_ns, Some(300.0));
        assert_eq!(serde_json::to_value(&r).unwrap()["canary_pair_ns"], 300.0);
    }

    fn libc_cpu_setsize() -> usize {
        // Out of range for any cpu_set_t: pinning there fails.
        1 << 20
    }
}

//! A speed canary: a fixed piece of CPU and memory work timed on each benchmark CPU just
//! before a trial, so a bench sees a machine that slows down by itself.
//!
//! [`interference`](crate::interference) sees other processes on the bench's CPUs. It cannot
//! see a machine whose CPUs get slower with nothing else running on them — a VM whose host
//! moves it, throttles it or shares its cores without reporting steal time. One such VM ran
//! the same server work per request about 3 × slower in some trials than in others, with no
//! other process and no steal (docs/results/2026-11-27/README.md), and a comparison of two
//! runs then measured the VM, not the code.
//!
//! The canary ([`workload`]) is deterministic work — [`ROUNDS`] passes of a multiply-rotate
//! hash that reads and rewrites a [`BUFFER_BYTES`] buffer (bigger than an L1 data cache), and
//! a small copy loop through it — whose result is returned, so it cannot be optimised away.
//! [`Canary::check`] runs it on each of the trial's CPUs, on a thread pinned there (as the
//! trial's threads are), one CPU after another, before the trial starts; a reading takes
//! about 1.5 ms per CPU in a release build. The first reading of each CPU is its
//! **reference**; every later trial gets the ratio of its reading to the reference
//! ([`Speed::ratio`], the slowest CPU's), and a trial whose canary took more than
//! [`SLOWED_RATIO`] times its reference is **slowed** ([`Speed::slowed`]), which the benches
//! treat as they treat a disturbed trial.
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
//! [`Canary::process`] is the one reference of a bench process (one process, one run); a
//! [`Canary::new`] has its own (tests).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::Record;

/// A trial whose canary ran this many times slower than the run's first canary on the same
/// CPU is slowed. Why 1.3: a quiet CPU repeats the canary within several percent (release
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

/// A trial's canary: its time on each CPU and each CPU's reference (the run's first reading
/// there).
#[derive(Clone, Debug, PartialEq)]
pub struct Speed {
    /// The CPUs, in the order the trial gave them.
    pub cpus: Vec<usize>,
    /// The canary's time on each CPU of `cpus`.
    pub times: Vec<Duration>,
    /// Each CPU's reference time (the run's first canary on it; on the run's first trial, its
    /// own reading).
    pub reference: Vec<Duration>,
}

impl Speed {
    /// Each CPU's time over its reference.
    pub fn ratios(&self) -> Vec<f64> {
        self.times
            .iter()
            .zip(&self.reference)
            .map(|(t, r)| {
                if r.is_zero() {
                    1.0
                } else {
                    t.as_secs_f64() / r.as_secs_f64()
                }
            })
            .collect()
    }

    /// The trial's ratio: its slowest CPU's (1 on the run's first trial; 3 when the canary
    /// took three times as long as at the start).
    pub fn ratio(&self) -> f64 {
        self.ratios().into_iter().fold(0.0, f64::max)
    }

    /// Whether the machine was slower than at the run's start: some CPU's canary took more than
    /// [`SLOWED_RATIO`] times its reference.
    pub fn slowed(&self) -> bool {
        self.ratio() > SLOWED_RATIO
    }

    /// Whether this reading is faster than the reference by more than [`SLOWED_RATIO`]: the
    /// reference itself was taken slowed, so the trials near ratio 1 are the slowed ones.
    pub fn reference_slowed(&self) -> bool {
        self.ratios()
            .into_iter()
            .any(|r| r > 0.0 && r * SLOWED_RATIO < 1.0)
    }

    /// What a trial's progress line says: the ratio alone when nothing is wrong, else
    /// [`describe`](Self::describe) (per CPU, and SLOWED or that the run started slowed).
    pub fn progress_note(&self) -> String {
        if self.slowed() || self.reference_slowed() {
            self.describe()
        } else {
            format!("speed canary {:.2}x", self.ratio())
        }
    }

    /// One phrase for a progress line or a table note.
    pub fn describe(&self) -> String {
        let mut s = format!("speed canary {:.2}x the run's first", self.ratio());
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
        s.push(')');
        if self.slowed() {
            s.push_str(": SLOWED");
        } else if self.reference_slowed() {
            s.push_str(": faster than the reference (the run started slowed)");
        }
        s
    }
}

/// The note under a table of `records` when some were slowed ([`Record::slowed`]): how many,
/// and what it means; `None` when none were.
pub fn slowed_note(records: &[Record]) -> Option<String> {
    let n = records.iter().filter(|r| r.slowed()).count();
    (n > 0).then(|| {
        format!(
            "{n} point(s) ran on a machine slower than at the run's start (speed canary over \
             {SLOWED_RATIO}x the run's first: `canary_ratio` in the JSON); numbers resting on \
             them compare the machine's states, not the modes: rerun on a quiet machine."
        )
    })
}

/// The reference readings of a run: each CPU's first canary time.
#[derive(Debug, Default)]
pub struct Canary {
    reference: Mutex<BTreeMap<usize, Duration>>,
}

static PROCESS: Canary = Canary::new();

impl Canary {
    /// A canary with no reference yet: its first reading on each CPU becomes that CPU's.
    pub const fn new() -> Canary {
        Canary {
            reference: Mutex::new(BTreeMap::new()),
        }
    }

    /// The process's canary: a bench process is one run, and its first trial's canary is the
    /// reference of all its trials (`emu_bench` and the socket benches use it).
    pub fn process() -> &'static Canary {
        &PROCESS
    }

    /// Times the canary on each of `cpus` (a thread pinned to each, one after another) and
    /// judges the readings against the references; an error naming the CPU when one cannot be
    /// pinned to (nothing is judged then).
    pub fn check(&self, cpus: &[usize]) -> Result<Speed, String> {
        let readings = cpus
            .iter()
            .map(|&c| time_on(c).map(|t| (c, t)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.judge(&readings))
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

    /// Judges `(cpu, time)` readings: a CPU without a reference takes its reading as one.
    pub fn judge(&self, readings: &[(usize, Duration)]) -> Speed {
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn libc_cpu_setsize() -> usize {
        // Out of range for any cpu_set_t: pinning there fails.
        1 << 20
    }
}

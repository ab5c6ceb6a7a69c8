//! Open-loop Poisson arrival schedules, generated before a run starts.
//!
//! A schedule is a list of send times (nanosecond offsets from the start of
//! the run) per client thread. Generating it up front keeps random number
//! generation and floating point out of the send loop, and makes a run
//! reproducible: the same [`ScheduleConfig`] always yields the same schedule.
//!
//! Each of the `threads` client threads gets an independent Poisson process at
//! `rate_rps / threads`; the superposition of independent Poisson processes is
//! a Poisson process at the sum of the rates, so the server sees exponential
//! inter-arrival gaps at `rate_rps` overall.

use std::fmt;
use std::time::Duration;

/// Largest number of requests one schedule may hold (8 bytes each in memory).
pub const MAX_REQUESTS: u64 = 100_000_000;

/// Number of low bits of a request id that hold the per-thread sequence number.
pub const ID_SEQ_BITS: u32 = 40;

/// Builds the request id for sequence number `seq` of client thread `thread`.
///
/// Ids are unique across the threads of one run, so a transport shared by
/// several threads (or a server log) can still tell requests apart.
pub fn request_id(thread: usize, seq: u64) -> u64 {
    ((thread as u64) << ID_SEQ_BITS) | (seq & ((1 << ID_SEQ_BITS) - 1))
}

/// Splits a request id built by [`request_id`] into `(thread, seq)`.
pub fn split_request_id(id: u64) -> (usize, u64) {
    ((id >> ID_SEQ_BITS) as usize, id & ((1 << ID_SEQ_BITS) - 1))
}

/// Small, fast, seedable PRNG (xoshiro256** seeded through SplitMix64).
///
/// It is implemented here rather than taken from a crate so that a seed means
/// the same schedule forever, independent of dependency upgrades.
#[derive(Debug, Clone)]
pub struct SeededRng {
    s: [u64; 4],
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SeededRng {
    /// Creates a generator whose whole output is determined by `seed`.
    pub fn new(seed: u64) -> Self {
        let mut st = seed;
        let s = [
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
            splitmix64(&mut st),
        ];
        SeededRng { s }
    }

    /// Next 64 uniformly distributed bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform sample in `[0, 1)` with 53 bits of precision.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponentially distributed sample with mean `mean` (inverse transform).
    pub fn exponential(&mut self, mean: f64) -> f64 {
        // 1 - U lies in (0, 1], so the logarithm is finite.
        -(1.0 - self.next_f64()).ln() * mean
    }
}

/// What ends a schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// Arrivals until this much time has been scheduled (the count is random).
    Duration(Duration),
    /// Exactly this many requests in total, split across the threads.
    Count(u64),
}

/// Parameters of an open-loop Poisson schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleConfig {
    /// Offered load over all threads, in requests per second.
    pub rate_rps: f64,
    /// When the schedule stops.
    pub bound: Bound,
    /// Number of client threads the schedule is split across (at least 1).
    pub threads: usize,
    /// Seed of the random gaps; equal seeds give equal schedules.
    pub seed: u64,
}

/// Why a schedule could not be generated.
#[derive(Debug, Clone, PartialEq)]
pub enum ScheduleError {
    /// The rate is not a finite number greater than zero.
    InvalidRate(f64),
    /// `threads` was zero.
    NoThreads,
    /// The schedule would hold more than [`MAX_REQUESTS`] requests.
    TooManyRequests {
        /// Requests asked for (or expected, for a duration bound).
        requested: u64,
    },
}

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleError::InvalidRate(r) => write!(f, "invalid offered rate {r} req/s"),
            ScheduleError::NoThreads => write!(f, "a schedule needs at least one thread"),
            ScheduleError::TooManyRequests { requested } => write!(
                f,
                "schedule of {requested} requests exceeds the limit of {MAX_REQUESTS}"
            ),
        }
    }
}

impl std::error::Error for ScheduleError {}

/// The send times of one client thread.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSchedule {
    thread: usize,
    offsets_ns: Vec<u64>,
}

impl ThreadSchedule {
    /// Index of the client thread this schedule belongs to.
    pub fn thread(&self) -> usize {
        self.thread
    }

    /// Send times in nanoseconds from the start of the run, non-decreasing.
    pub fn offsets_ns(&self) -> &[u64] {
        &self.offsets_ns
    }

    /// Number of requests this thread sends.
    pub fn len(&self) -> usize {
        self.offsets_ns.len()
    }

    /// True when this thread sends nothing.
    pub fn is_empty(&self) -> bool {
        self.offsets_ns.is_empty()
    }

    /// Id of the `seq`-th request of this thread (see [`request_id`]).
    pub fn id(&self, seq: usize) -> u64 {
        request_id(self.thread, seq as u64)
    }
}

/// A complete open-loop schedule, one [`ThreadSchedule`] per client thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    rate_rps: f64,
    threads: Vec<ThreadSchedule>,
}

impl Schedule {
    /// One load point of a benchmark sweep: Poisson arrivals at `rate` req/s for `warmup +
    /// duration`, split over `threads` (at least 1), seeded with `seed`. The error names the
    /// rate (`schedule at R req/s: …`).
    pub fn poisson_point(
        rate: f64,
        warmup: Duration,
        duration: Duration,
        threads: usize,
        seed: u64,
    ) -> Result<Schedule, String> {
        Schedule::poisson(&ScheduleConfig {
            rate_rps: rate,
            bound: Bound::Duration(warmup + duration),
            threads: threads.max(1),
            seed,
        })
        .map_err(|e| format!("schedule at {rate} req/s: {e}"))
    }

    /// Generates a Poisson schedule.
    ///
    /// Thread `t` uses its own generator seeded from `(seed, t)` and rate
    /// `rate_rps / threads`. With [`Bound::Count`] the count is split as evenly
    /// as possible (the first `count % threads` threads send one more).
    pub fn poisson(cfg: &ScheduleConfig) -> Result<Schedule, ScheduleError> {
        if !(cfg.rate_rps.is_finite() && cfg.rate_rps > 0.0) {
            return Err(ScheduleError::InvalidRate(cfg.rate_rps));
        }
        if cfg.threads == 0 {
            return Err(ScheduleError::NoThreads);
        }
        let requested = match cfg.bound {
            Bound::Count(n) => n,
            Bound::Duration(d) => (cfg.rate_rps * d.as_secs_f64()).ceil() as u64,
        };
        if requested > MAX_REQUESTS {
            return Err(ScheduleError::TooManyRequests { requested });
        }
        let n = cfg.threads as u64;
        let mean_gap_ns = 1e9 * n as f64 / cfg.rate_rps;
        let threads = (0..cfg.threads)
            .map(|t| {
                let mut rng = SeededRng::new(cfg.seed ^ splitmix64(&mut (t as u64)));
                let mut at_ns = 0.0f64;
                let mut offsets_ns = Vec::new();
                match cfg.bound {
                    Bound::Count(total) => {
                        let count = total / n + u64::from((t as u64) < total % n);
                        offsets_ns.reserve_exact(count as usize);
                        for _ in 0..count {
                            at_ns += rng.exponential(mean_gap_ns);
                            offsets_ns.push(at_ns.round() as u64);
                        }
                    }
                    Bound::Duration(d) => {
                        let end_ns = d.as_nanos() as f64;
                        offsets_ns.reserve((requested / n) as usize + 16);
                        loop {
                            at_ns += rng.exponential(mean_gap_ns);
                            if at_ns >= end_ns {
                                break;
                            }
                            offsets_ns.push(at_ns.round() as u64);
                        }
                    }
                }
                ThreadSchedule {
                    thread: t,
                    offsets_ns,
                }
            })
            .collect();
        Ok(Schedule {
            rate_rps: cfg.rate_rps,
            threads,
        })
    }

    /// The offered rate the schedule was generated for.
    pub fn rate_rps(&self) -> f64 {
        self.rate_rps
    }

    /// Per-thread schedules, indexed by thread.
    pub fn threads(&self) -> &[ThreadSchedule] {
        &self.threads
    }

    /// Consumes the schedule, returning the per-thread parts.
    pub fn into_threads(self) -> Vec<ThreadSchedule> {
        self.threads
    }

    /// Total number of requests over all threads.
    pub fn total_requests(&self) -> u64 {
        self.threads.iter().map(|t| t.len() as u64).sum()
    }

    /// Time of the last scheduled send over all threads.
    pub fn span(&self) -> Duration {
        let last = self
            .threads
            .iter()
            .filter_map(|t| t.offsets_ns.last().copied())
            .max()
            .unwrap_or(0);
        Duration::from_nanos(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_point_is_the_poisson_schedule_of_warmup_and_duration() {
        let (w, d) = (Duration::from_millis(100), Duration::from_millis(400));
        let p = Schedule::poisson_point(5000.0, w, d, 2, 7).unwrap();
        let want = Schedule::poisson(&cfg(5000.0, Bound::Duration(w + d), 2, 7)).unwrap();
        assert_eq!(p, want);
        // Threads 0 reads as one.
        let one = Schedule::poisson_point(5000.0, w, d, 0, 7).unwrap();
        assert_eq!(one.threads().len(), 1);
        let e = Schedule::poisson_point(-1.0, w, d, 1, 7).unwrap_err();
        assert!(e.starts_with("schedule at -1 req/s: "), "{e}");
    }

    fn cfg(rate: f64, bound: Bound, threads: usize, seed: u64) -> ScheduleConfig {
        ScheduleConfig {
            rate_rps: rate,
            bound,
            threads,
            seed,
        }
    }

    fn gaps(offsets: &[u64]) -> Vec<f64> {
        let mut prev = 0u64;
        offsets
            .iter()
            .map(|&o| {
                let g = (o - prev) as f64;
                prev = o;
                g
            })
            .collect()
    }

    #[test]
    fn single_thread_gaps_are_exponential_at_the_rate() {
        // 100k req/s -> mean gap 10 us. 400k samples: standard error of the
        // mean is 0.16 %, so 1 % is a wide, deterministic margin.
        let s = Schedule::poisson(&cfg(100_000.0, Bound::Count(400_000), 1, 7)).unwrap();
        let g = gaps(s.threads()[0].offsets_ns());
        let n = g.len() as f64;
        let mean = g.iter().sum::<f64>() / n;
        assert!((mean - 10_000.0).abs() < 100.0, "mean gap {mean} ns");
        // Exponential: standard deviation equals the mean ...
        let var = g.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
        let cv = var.sqrt() / mean;
        assert!((cv - 1.0).abs() < 0.02, "coefficient of variation {cv}");
        // ... and P(gap < mean) = 1 - 1/e.
        let below = g.iter().filter(|&&x| x < mean).count() as f64 / n;
        assert!(
            (below - 0.632_12).abs() < 0.005,
            "fraction below mean {below}"
        );
        // Offsets never go backwards.
        assert!(s.threads()[0].offsets_ns().windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn threads_split_the_rate_and_the_count() {
        let s = Schedule::poisson(&cfg(300_000.0, Bound::Count(300_001), 3, 11)).unwrap();
        let lens: Vec<usize> = s.threads().iter().map(|t| t.len()).collect();
        assert_eq!(lens, vec![100_001, 100_000, 100_000]);
        assert_eq!(s.total_requests(), 300_001);
        for t in s.threads() {
            // Each thread runs at a third of the rate: mean gap 10 us.
            let g = gaps(t.offsets_ns());
            let mean = g.iter().sum::<f64>() / g.len() as f64;
            assert!(
                (mean - 10_000.0).abs() < 200.0,
                "thread {} mean {mean}",
                t.thread()
            );
        }
        // Threads are independent streams, not copies of each other.
        assert_ne!(
            s.threads()[0].offsets_ns()[..100],
            s.threads()[1].offsets_ns()[..100]
        );
        // Overall achieved rate of the merged stream.
        let span = s.span().as_secs_f64();
        let rate = s.total_requests() as f64 / span;
        assert!((rate - 300_000.0).abs() / 300_000.0 < 0.01, "rate {rate}");
    }

    #[test]
    fn duration_bound_stops_at_the_duration() {
        let d = Duration::from_millis(500);
        let s = Schedule::poisson(&cfg(200_000.0, Bound::Duration(d), 2, 3)).unwrap();
        assert!(s.span() < d);
        // Expected 100k arrivals, sd ~316.
        let n = s.total_requests() as f64;
        assert!((n - 100_000.0).abs() < 2_000.0, "count {n}");
    }

    #[test]
    fn same_seed_same_schedule_other_seed_differs() {
        let a = Schedule::poisson(&cfg(1e5, Bound::Count(1000), 2, 42)).unwrap();
        let b = Schedule::poisson(&cfg(1e5, Bound::Count(1000), 2, 42)).unwrap();
        let c = Schedule::poisson(&cfg(1e5, Bound::Count(1000), 2, 43)).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn invalid_configs_are_errors() {
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                Schedule::poisson(&cfg(rate, Bound::Count(1), 1, 0)),
                Err(ScheduleError::InvalidRate(_))
            ));
        }
        assert_eq!(
            Schedule::poisson(&cfg(1.0, Bound::Count(1), 0, 0)),
            Err(ScheduleError::NoThreads)
        );
        assert_eq!(
            Schedule::poisson(&cfg(1e9, Bound::Duration(Duration::from_secs(1)), 1, 0)),
            Err(ScheduleError::TooManyRequests {
                requested: 1_000_000_000
            })
        );
    }

    #[test]
    fn request_ids_round_trip_and_are_unique_across_threads() {
        assert_eq!(split_request_id(request_id(3, 12345)), (3, 12345));
        assert_ne!(request_id(0, 1), request_id(1, 1));
        let s = Schedule::poisson(&cfg(1e5, Bound::Count(10), 2, 1)).unwrap();
        assert_eq!(s.threads()[1].id(4), request_id(1, 4));
    }
}

//! # latency: an HDR histogram of latencies whose recording is one increment
//!
//! [`LatencyHistogram`] holds latencies from 1 ns to [`MAX_TRACKED_LATENCY`] with three
//! significant digits, laid out as `hdrhistogram`'s buckets; recording a sample increments one
//! counter (it runs once per reply in load generators and once per timed request in servers),
//! and percentiles are exactly what `hdrhistogram` would give for the same samples. Histograms
//! of several threads or cores merge.
//!
//! ```
//! use std::time::Duration;
//! use latency::LatencyHistogram;
//!
//! let mut h = LatencyHistogram::new();
//! for us in 1..=100 {
//!     h.record(Duration::from_micros(us));
//! }
//! let p99 = h.p99_us().unwrap();
//! assert!((p99 - 99.0).abs() < 0.1, "{p99}");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use hdrhistogram::Histogram;
use std::fmt;
use std::time::Duration;

/// Highest latency a histogram can hold; larger samples are clamped to it.
pub const MAX_TRACKED_LATENCY: Duration = Duration::from_secs(60);

/// Significant decimal digits kept by the histogram (0.1 % resolution).
const SIGFIG: u8 = 3;

/// Highest tracked latency in nanoseconds.
const MAX_NS: u64 = MAX_TRACKED_LATENCY.as_nanos() as u64;

// The bucketing of an HDR histogram from 1 ns to `MAX_NS` with `SIGFIG` significant digits,
// as `hdrhistogram` lays it out (the test `bucketing_is_hdrhistogram_s` checks every constant
// against it): 2048 sub-buckets of 1 ns in bucket 0, then buckets of 1024 sub-buckets, each
// twice as wide as the last.
const SUB_BUCKET_HALF_MAGNITUDE: u32 = 10;
const SUB_BUCKET_MASK: u64 = (1 << (SUB_BUCKET_HALF_MAGNITUDE + 1)) - 1;
const LEADING_ZERO_BASE: u32 = 64 - (SUB_BUCKET_HALF_MAGNITUDE + 1);

/// The counter index of `ns` (1 ..= `MAX_NS`).
#[inline]
fn index_for(ns: u64) -> usize {
    let bucket = LEADING_ZERO_BASE - (ns | SUB_BUCKET_MASK).leading_zeros();
    ((bucket as usize) << SUB_BUCKET_HALF_MAGNITUDE) + (ns >> bucket) as usize
}

/// The lowest value counted at `index`.
fn value_for(index: usize) -> u64 {
    let half = 1usize << SUB_BUCKET_HALF_MAGNITUDE;
    let bucket = (index >> SUB_BUCKET_HALF_MAGNITUDE) as u32;
    if bucket == 0 {
        return index as u64;
    }
    (((index & (half - 1)) + half) as u64) << (bucket - 1)
}

/// An HDR histogram of latencies recorded in nanoseconds (1 ns to [`MAX_TRACKED_LATENCY`],
/// 3 significant digits).
///
/// Recording is on the hot path of load generators and servers (once per reply or request),
/// so it only increments a counter: the counters are laid out as `hdrhistogram`'s, and a
/// `hdrhistogram::Histogram` is built from them when a percentile or the mean is asked for.
/// Queries give exactly what recording every sample into that histogram would.
#[derive(Clone)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    len: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("len", &self.len)
            .field("p50_us", &self.p50_us())
            .field("p99_us", &self.p99_us())
            .finish()
    }
}

impl LatencyHistogram {
    /// An empty histogram covering 1 ns to [`MAX_TRACKED_LATENCY`].
    pub fn new() -> Self {
        LatencyHistogram {
            counts: vec![0; index_for(MAX_NS) + 1],
            len: 0,
        }
    }

    /// Records one latency sample (clamped to the tracked range).
    #[inline]
    pub fn record(&mut self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.record_ns(ns);
    }

    /// Records one latency sample given in nanoseconds (clamped to the tracked range).
    #[inline]
    pub fn record_ns(&mut self, ns: u64) {
        let i = index_for(ns.clamp(1, MAX_NS));
        // In range: the vector has a counter for every index up to `index_for(MAX_NS)`.
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
            self.len += 1;
        }
    }

    /// Adds all samples of `other` to `self`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.len += other.len;
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The samples as a `hdrhistogram` histogram (built on each call).
    fn to_hdr(&self) -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, MAX_NS, SIGFIG)
            .expect("constant histogram bounds are valid");
        for (i, &c) in self.counts.iter().enumerate() {
            if c > 0 {
                h.saturating_record_n(value_for(i), c);
            }
        }
        h
    }

    /// Latency at percentile `p` (0–100) in microseconds, `None` when empty.
    pub fn percentile_us(&self, p: f64) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        Some(self.to_hdr().value_at_percentile(p) as f64 / 1e3)
    }

    /// Median latency in microseconds.
    pub fn p50_us(&self) -> Option<f64> {
        self.percentile_us(50.0)
    }

    /// 99th percentile latency in microseconds.
    pub fn p99_us(&self) -> Option<f64> {
        self.percentile_us(99.0)
    }

    /// 99.9th percentile latency in microseconds.
    pub fn p999_us(&self) -> Option<f64> {
        self.percentile_us(99.9)
    }

    /// Mean latency in microseconds, `None` when empty.
    pub fn mean_us(&self) -> Option<f64> {
        (!self.is_empty()).then(|| self.to_hdr().mean() / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    #[test]
    fn percentiles_of_a_uniform_ramp() {
        let mut h = LatencyHistogram::new();
        assert_eq!(h.p99_us(), None);
        for v in 1..=10_000 {
            h.record(us(v));
        }
        assert_eq!(h.len(), 10_000);
        let close = |got: f64, want: f64| (got - want).abs() <= want * 0.001 + 0.001;
        let (p50, p99, p999) = (
            h.p50_us().unwrap(),
            h.p99_us().unwrap(),
            h.p999_us().unwrap(),
        );
        assert!(close(p50, 5_000.0), "p50 {p50}");
        assert!(close(p99, 9_900.0), "p99 {p99}");
        assert!(close(p999, 9_990.0), "p999 {p999}");
        assert!(close(h.mean_us().unwrap(), 5_000.5), "mean");
    }

    #[test]
    fn tail_is_driven_by_rare_slow_samples() {
        let mut h = LatencyHistogram::new();
        for _ in 0..990 {
            h.record(us(10));
        }
        for _ in 0..10 {
            h.record(us(1_000));
        }
        assert!((h.p50_us().unwrap() - 10.0).abs() < 0.02);
        assert!((h.p99_us().unwrap() - 10.0).abs() < 0.02);
        assert!((h.p999_us().unwrap() - 1_000.0).abs() < 1.0);
    }

    #[test]
    fn merge_equals_recording_into_one() {
        let (mut a, mut b, mut all) = (
            LatencyHistogram::new(),
            LatencyHistogram::new(),
            LatencyHistogram::new(),
        );
        for v in 1..=500 {
            a.record(us(v));
            all.record(us(v));
        }
        for v in 501..=1_000 {
            b.record(us(v * 3));
            all.record(us(v * 3));
        }
        a.merge(&b);
        assert_eq!(a.len(), 1_000);
        for p in [50.0, 90.0, 99.0, 99.9] {
            assert_eq!(a.percentile_us(p), all.percentile_us(p));
        }
    }

    #[test]
    fn out_of_range_samples_are_clamped_not_dropped() {
        let mut h = LatencyHistogram::new();
        h.record(Duration::ZERO);
        h.record(Duration::from_secs(3_600));
        assert_eq!(h.len(), 2);
        assert!(h.p999_us().unwrap() >= 59e6);
    }

    /// Every sample, recorded here and straight into `hdrhistogram`, lands in the same bucket,
    /// so the queries agree exactly.
    #[test]
    fn bucketing_is_hdrhistogram_s() {
        let mut direct = Histogram::<u64>::new_with_bounds(1, MAX_NS, SIGFIG).unwrap();
        // Ours stops at the last bucket index a tracked value can reach.
        assert!(LatencyHistogram::new().counts.len() <= direct.distinct_values());
        let mut ours = LatencyHistogram::new();
        let mut v: u64 = 1;
        let mut samples = vec![1, 2, 2047, 2048, 2049, 4095, 4096, 4097, MAX_NS - 1, MAX_NS];
        // Every power of two and its neighbours, and a pseudo-random spread in between.
        for k in 0..36 {
            samples.extend([(1u64 << k).saturating_sub(1).max(1), 1 << k, (1 << k) + 1]);
        }
        for _ in 0..20_000 {
            v = v
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            samples.push((v >> 30) % MAX_NS + 1);
        }
        for &ns in &samples {
            let ns = ns.min(MAX_NS);
            assert_eq!(
                value_for(index_for(ns)),
                direct.lowest_equivalent(ns),
                "bucket of {ns} ns"
            );
            direct.record(ns).unwrap();
            ours.record_ns(ns);
        }
        let built = ours.to_hdr();
        assert_eq!(built.len(), direct.len());
        for p in [0.0, 1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0] {
            assert_eq!(
                built.value_at_percentile(p),
                direct.value_at_percentile(p),
                "p{p}"
            );
        }
        assert_eq!(built.mean(), direct.mean());
        assert_eq!(built.max(), direct.max());
        assert_eq!(built.min(), direct.min());
    }
}

//! Latency histograms and request counters, mergeable across client threads.

use hdrhistogram::Histogram;
use std::fmt;
use std::time::Duration;

/// Highest latency a histogram can hold; larger samples are clamped to it.
pub const MAX_TRACKED_LATENCY: Duration = Duration::from_secs(60);

/// Significant decimal digits kept by the histogram (0.1 % resolution).
const SIGFIG: u8 = 3;

/// An HDR histogram of latencies recorded in nanoseconds.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram covering 1 ns to [`MAX_TRACKED_LATENCY`].
    pub fn new() -> Self {
        let hist = Histogram::new_with_bounds(1, MAX_TRACKED_LATENCY.as_nanos() as u64, SIGFIG)
            .expect("constant histogram bounds are valid");
        LatencyHistogram { hist }
    }

    /// Records one latency sample (clamped to the tracked range).
    pub fn record(&mut self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.hist.saturating_record(ns.max(1));
    }

    /// Adds all samples of `other` to `self`.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        // Both histograms have the same bounds, so adding cannot fail.
        self.hist
            .add(&other.hist)
            .expect("histograms with equal bounds merge");
    }

    /// Number of samples.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// True when no sample was recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Latency at percentile `p` (0–100) in microseconds, `None` when empty.
    pub fn percentile_us(&self, p: f64) -> Option<f64> {
        if self.hist.is_empty() {
            return None;
        }
        Some(self.hist.value_at_percentile(p) as f64 / 1e3)
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
        (!self.hist.is_empty()).then(|| self.hist.mean() / 1e3)
    }
}

/// Request outcomes. Every sent request ends up in exactly one of
/// `verified`, `mismatched` or `lost` (so `sent == verified + mismatched +
/// lost` once a run is over); `unexpected` and `malformed` count responses
/// that matched no outstanding request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests handed to the transport successfully.
    pub sent: u64,
    /// Requests answered in time with a response the checker accepted.
    pub verified: u64,
    /// Requests answered in time with a response the checker rejected.
    pub mismatched: u64,
    /// Requests with no response within the timeout (lost or too late).
    pub lost: u64,
    /// Responses for ids never sent or already settled (duplicates, late
    /// arrivals after a timeout, ids from another run).
    pub unexpected: u64,
    /// Responses whose request id the transport could not read.
    pub malformed: u64,
    /// `send_request` calls that returned an error.
    pub send_errors: u64,
    /// `poll_responses` calls that returned an error.
    pub poll_errors: u64,
}

impl Counters {
    /// Adds `other` into `self`, field by field.
    pub fn merge(&mut self, other: &Counters) {
        self.sent += other.sent;
        self.verified += other.verified;
        self.mismatched += other.mismatched;
        self.lost += other.lost;
        self.unexpected += other.unexpected;
        self.malformed += other.malformed;
        self.send_errors += other.send_errors;
        self.poll_errors += other.poll_errors;
    }

    /// Total of all error counters.
    pub fn errors(&self) -> u64 {
        self.mismatched
            + self.lost
            + self.unexpected
            + self.malformed
            + self.send_errors
            + self.poll_errors
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sent={} ok={} mismatched={} lost={} unexpected={} malformed={} send_err={} poll_err={}",
            self.sent,
            self.verified,
            self.mismatched,
            self.lost,
            self.unexpected,
            self.malformed,
            self.send_errors,
            self.poll_errors
        )
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

    #[test]
    fn counters_merge_and_total() {
        let mut a = Counters {
            sent: 10,
            verified: 7,
            mismatched: 1,
            lost: 2,
            ..Counters::default()
        };
        let b = Counters {
            sent: 5,
            verified: 5,
            unexpected: 3,
            malformed: 4,
            send_errors: 1,
            poll_errors: 2,
            ..Counters::default()
        };
        a.merge(&b);
        assert_eq!(a.sent, 15);
        assert_eq!(a.verified, 12);
        assert_eq!(a.malformed, 4);
        assert_eq!(a.errors(), 1 + 2 + 3 + 4 + 1 + 2);
    }
}

//! Size distributions: a bucket histogram (uniform within a bucket) and a piecewise
//! truncated-Pareto distribution through published quantiles.

use crate::rng::{range_incl, SeededRng};
use crate::WorkloadError;
use serde::Serialize;

/// One bucket of a [`SizeHistogram`]: sizes `lo..=hi`, drawn with probability `share`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Bucket {
    /// Smallest size in the bucket, bytes.
    pub lo: u64,
    /// Largest size in the bucket, bytes (inclusive).
    pub hi: u64,
    /// Share of draws that fall in this bucket (shares are normalized to sum to 1).
    pub share: f64,
}

/// A histogram of sizes: a bucket is chosen by its share, the size uniformly within it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeHistogram {
    buckets: Vec<Bucket>,
    cumulative: Vec<f64>,
}

impl SizeHistogram {
    /// Builds a histogram; shares are normalized. Buckets must be non-empty ranges with
    /// positive finite shares.
    pub fn new(buckets: &[Bucket]) -> Result<SizeHistogram, WorkloadError> {
        if buckets.is_empty() {
            return Err(WorkloadError::Config(
                "size histogram has no buckets".into(),
            ));
        }
        let mut total = 0.0;
        for (i, b) in buckets.iter().enumerate() {
            if b.lo > b.hi || !(b.share.is_finite() && b.share > 0.0) {
                return Err(WorkloadError::Config(format!(
                    "size histogram bucket {i} ({}..={} share {}) needs lo <= hi and a share > 0",
                    b.lo, b.hi, b.share
                )));
            }
            total += b.share;
        }
        let mut acc = 0.0;
        let cumulative = buckets
            .iter()
            .map(|b| {
                acc += b.share / total;
                acc
            })
            .collect();
        let buckets = buckets
            .iter()
            .map(|b| Bucket {
                share: b.share / total,
                ..*b
            })
            .collect();
        Ok(SizeHistogram {
            buckets,
            cumulative,
        })
    }

    /// The buckets, shares normalized.
    pub fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// One size.
    pub fn sample(&self, rng: &mut SeededRng) -> u64 {
        let u = rng.next_f64();
        let i = self
            .cumulative
            .partition_point(|&c| c <= u)
            .min(self.buckets.len() - 1);
        let b = self.buckets[i];
        range_incl(rng, b.lo, b.hi)
    }

    /// The distribution's mean size.
    pub fn mean(&self) -> f64 {
        self.buckets
            .iter()
            .map(|b| b.share * (b.lo + b.hi) as f64 / 2.0)
            .sum()
    }

    /// The share of draws `>= size` (exact, counting the part of a bucket at or above it).
    pub fn share_at_least(&self, size: u64) -> f64 {
        self.buckets
            .iter()
            .map(|b| {
                if size <= b.lo {
                    b.share
                } else if size > b.hi {
                    0.0
                } else {
                    b.share * (b.hi - size + 1) as f64 / (b.hi - b.lo + 1) as f64
                }
            })
            .sum()
    }
}

/// A continuous size distribution through quantile points `(size, cdf)`: between two
/// consecutive points the density is a truncated power law ∝ x^-(1+α) with that segment's
/// shape α (α = 0: log-uniform; larger α: more mass near the segment's lower end).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PiecewiseSizes {
    points: Vec<(f64, f64)>,
    shapes: Vec<f64>,
}

impl PiecewiseSizes {
    /// `points` are `(size, cdf)` with increasing sizes (first > 0) and cdf from 0 to 1
    /// non-decreasing; `shapes` has one α per segment (`points.len() - 1`).
    pub fn new(points: &[(f64, f64)], shapes: &[f64]) -> Result<PiecewiseSizes, WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Config(format!("size distribution: {m}")));
        if points.len() < 2 || shapes.len() != points.len() - 1 {
            return bad(format!(
                "need >= 2 points and one shape per segment, got {} points and {} shapes",
                points.len(),
                shapes.len()
            ));
        }
        if points[0].0 <= 0.0 || points[0].1 != 0.0 || points[points.len() - 1].1 != 1.0 {
            return bad("the first point must be (size > 0, 0.0) and the last (size, 1.0)".into());
        }
        for w in points.windows(2) {
            if !(w[1].0 > w[0].0 && w[1].1 >= w[0].1) {
                return bad(format!("points must increase: {:?} then {:?}", w[0], w[1]));
            }
        }
        if shapes.iter().any(|a| !a.is_finite()) {
            return bad("shapes must be finite".into());
        }
        Ok(PiecewiseSizes {
            points: points.to_vec(),
            shapes: shapes.to_vec(),
        })
    }

    /// The quantile points.
    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    /// The per-segment shapes α.
    pub fn shapes(&self) -> &[f64] {
        &self.shapes
    }

    /// One size, rounded to whole bytes.
    pub fn sample(&self, rng: &mut SeededRng) -> u64 {
        let u = rng.next_f64();
        let i = self.points[1..]
            .partition_point(|&(_, c)| c <= u)
            .min(self.shapes.len() - 1);
        let (a, ca) = self.points[i];
        let (b, cb) = self.points[i + 1];
        let v = if cb > ca {
            ((u - ca) / (cb - ca)).clamp(0.0, 1.0)
        } else {
            0.5
        };
        segment_quantile(a, b, self.shapes[i], v).round() as u64
    }

    /// The distribution's mean.
    pub fn mean(&self) -> f64 {
        self.points
            .windows(2)
            .zip(&self.shapes)
            .map(|(w, &alpha)| (w[1].1 - w[0].1) * segment_mean(w[0].0, w[1].0, alpha))
            .sum()
    }

    /// Replaces the shape of segment `i`.
    pub(crate) fn set_shape(&mut self, i: usize, alpha: f64) {
        self.shapes[i] = alpha;
    }
}

/// Quantile `v` of the truncated power law ∝ x^-(1+α) on `[a, b]`.
fn segment_quantile(a: f64, b: f64, alpha: f64, v: f64) -> f64 {
    if alpha.abs() < 1e-9 {
        a * (b / a).powf(v)
    } else {
        let (pa, pb) = (a.powf(-alpha), b.powf(-alpha));
        (pa - v * (pa - pb)).powf(-1.0 / alpha).clamp(a, b)
    }
}

/// Mean of the truncated power law ∝ x^-(1+α) on `[a, b]`.
fn segment_mean(a: f64, b: f64, alpha: f64) -> f64 {
    if alpha.abs() < 1e-9 {
        (b - a) / (b / a).ln()
    } else if (alpha - 1.0).abs() < 1e-9 {
        (b / a).ln() / (1.0 / a - 1.0 / b)
    } else {
        alpha / (a.powf(-alpha) - b.powf(-alpha)) * (b.powf(1.0 - alpha) - a.powf(1.0 - alpha))
            / (1.0 - alpha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_samples_match_shares_and_mean() {
        let h = SizeHistogram::new(&[
            Bucket {
                lo: 1,
                hi: 8,
                share: 3.0,
            },
            Bucket {
                lo: 100,
                hi: 199,
                share: 1.0,
            },
        ])
        .unwrap();
        assert!((h.mean() - (0.75 * 4.5 + 0.25 * 149.5)).abs() < 1e-9);
        assert!((h.share_at_least(150) - 0.25 * 0.5).abs() < 1e-9);
        let mut rng = SeededRng::new(1);
        let n = 100_000;
        let small = (0..n).filter(|_| h.sample(&mut rng) <= 8).count();
        assert!((small as f64 / n as f64 - 0.75).abs() < 0.01);
        assert!(SizeHistogram::new(&[Bucket {
            lo: 5,
            hi: 4,
            share: 1.0
        }])
        .is_err());
        assert!(SizeHistogram::new(&[]).is_err());
    }

    #[test]
    fn piecewise_quantiles_and_mean() {
        for alpha in [-0.5, 0.0, 0.7, 1.0, 2.0] {
            let p = PiecewiseSizes::new(&[(10.0, 0.0), (100.0, 0.5), (1000.0, 1.0)], &[alpha, 1.0])
                .unwrap();
            let mut rng = SeededRng::new(9);
            let n = 200_000;
            let mut below = 0;
            let mut sum = 0.0;
            for _ in 0..n {
                let x = p.sample(&mut rng);
                assert!((10..=1000).contains(&x));
                below += usize::from(x < 100);
                sum += x as f64;
            }
            assert!((below as f64 / n as f64 - 0.5).abs() < 0.01);
            let mean = sum / n as f64;
            assert!(
                (mean / p.mean() - 1.0).abs() < 0.02,
                "alpha {alpha}: {mean} vs {}",
                p.mean()
            );
        }
        assert!(PiecewiseSizes::new(&[(10.0, 0.0), (5.0, 1.0)], &[0.0]).is_err());
    }
}

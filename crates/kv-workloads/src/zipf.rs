//! Bounded Zipf sampler by rejection-inversion (W. Hörmann and G. Derflinger, "Rejection-
//! inversion to generate variates from monotone discrete distributions", ACM TOMACS 6(3),
//! 1996): O(1) expected time per sample, no table, any exponent `s > 0` (including 1).
//!
//! `rand_distr` (0.4, the line that matches the workspace's `rand` 0.8) has a `Zipf` that
//! samples by Jason Crease's rejection method and returns floats; this crate needs integer
//! ranks from the project's own seeded generator ([`loadgen::SeededRng`]) so that workloads
//! are reproducible across platforms and crate versions, hence this small implementation.

use crate::rng::SeededRng;
use crate::WorkloadError;

/// Zipf distribution over ranks `1..=n`: P(k) ∝ k^-s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Zipf {
    n: u64,
    s: f64,
    h_x1: f64,
    h_n: f64,
    squeeze: f64,
}

impl Zipf {
    /// A Zipf distribution over `1..=n` with exponent `s`; `n >= 1`, `s` finite and `> 0`.
    pub fn new(n: u64, s: f64) -> Result<Zipf, WorkloadError> {
        if n == 0 {
            return Err(WorkloadError::Config(
                "zipf: need at least one element".into(),
            ));
        }
        if !(s.is_finite() && s > 0.0) {
            return Err(WorkloadError::Config(format!(
                "zipf: exponent must be > 0, got {s}"
            )));
        }
        let h_x1 = h_integral(1.5, s) - 1.0;
        let h_n = h_integral(n as f64 + 0.5, s);
        let squeeze = 2.0 - h_integral_inv(h_integral(2.5, s) - h(2.0, s), s);
        Ok(Zipf {
            n,
            s,
            h_x1,
            h_n,
            squeeze,
        })
    }

    /// Number of ranks.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// The exponent.
    pub fn exponent(&self) -> f64 {
        self.s
    }

    /// One rank in `1..=n` (rank 1 is the most popular).
    pub fn sample(&self, rng: &mut SeededRng) -> u64 {
        loop {
            let u = self.h_n + rng.next_f64() * (self.h_x1 - self.h_n);
            let x = h_integral_inv(u, self.s);
            let k = ((x + 0.5) as u64).clamp(1, self.n);
            let kf = k as f64;
            if kf - x <= self.squeeze || u >= h_integral(kf + 0.5, self.s) - h(kf, self.s) {
                return k;
            }
        }
    }

    /// Probability of rank `k` (computed with the exact harmonic sum; O(n), for tests).
    pub fn pmf_exact(&self, k: u64) -> f64 {
        let norm: f64 = (1..=self.n).map(|i| (i as f64).powf(-self.s)).sum();
        (k as f64).powf(-self.s) / norm
    }
}

/// x^-s
fn h(x: f64, s: f64) -> f64 {
    (-s * x.ln()).exp()
}

/// ∫ x^-s dx = (x^(1-s) - 1) / (1 - s), continuous at s = 1 (ln x).
fn h_integral(x: f64, s: f64) -> f64 {
    let log_x = x.ln();
    helper2((1.0 - s) * log_x) * log_x
}

fn h_integral_inv(x: f64, s: f64) -> f64 {
    let t = (x * (1.0 - s)).max(-1.0);
    (helper1(t) * x).exp()
}

/// ln(1 + x) / x, accurate near 0.
fn helper1(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.ln_1p() / x
    } else {
        1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x))
    }
}

/// (e^x - 1) / x, accurate near 0.
fn helper2(x: f64) -> f64 {
    if x.abs() > 1e-8 {
        x.exp_m1() / x
    } else {
        1.0 + x * 0.5 * (1.0 + x / 3.0 * (1.0 + 0.25 * x))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(n: u64, s: f64) {
        let z = Zipf::new(n, s).unwrap();
        let mut rng = SeededRng::new(42);
        let draws = 200_000;
        let mut counts = vec![0u64; n as usize + 1];
        for _ in 0..draws {
            let k = z.sample(&mut rng);
            assert!((1..=n).contains(&k));
            counts[k as usize] += 1;
        }
        for k in [1u64, 2, 3, 10].into_iter().filter(|&k| k <= n) {
            let p = z.pmf_exact(k);
            let got = counts[k as usize] as f64 / draws as f64;
            let sd = (p * (1.0 - p) / draws as f64).sqrt();
            assert!(
                (got - p).abs() < 5.0 * sd + 1e-4,
                "n={n} s={s} k={k}: {got} vs {p}"
            );
        }
    }

    #[test]
    fn matches_exact_pmf() {
        check(1000, 0.99);
        check(1000, 1.0);
        check(500, 1.1);
        check(100, 0.5);
        check(1, 1.2);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(Zipf::new(0, 1.0).is_err());
        assert!(Zipf::new(10, 0.0).is_err());
        assert!(Zipf::new(10, f64::NAN).is_err());
    }
}

//! CDN images: object sizes of the Tragen/Jedi "tc-1" (image) traffic class, each object
//! stored as a list of frame-sized pieces and fetched as the sequence of its pieces.

use crate::rng::{below, derive, SeededRng};
use crate::sizes::PiecewiseSizes;
use crate::stats::{compute, Stats};
use crate::{value_bytes, Request, Workload, WorkloadError};
use serde::Serialize;
use std::collections::HashSet;

/// Configuration of [`Cdn`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdnConfig {
    /// Total bytes of all objects (the paper's trace was about 10 000 MB; 64 MiB by default so
    /// the store, the client's checks and a peer fit this machine).
    pub total_bytes: u64,
    /// Smallest object, bytes (tc-1: 1 KB).
    pub min_object: u64,
    /// Largest object, bytes (116 MB in the paper's trace).
    pub max_object: u64,
    /// Target mean object size, bytes (tc-1: ≈ 20.8 KB); the tail's shape is solved for it.
    pub mean_object: f64,
    /// Quantile points `(size, share of objects at or below)` between the minimum and the
    /// tail: tc-1's 36% < 5 KB, 91% ≤ 55 KB, 99% ≤ 155 KB.
    pub quantiles: Vec<(f64, f64)>,
    /// Shape α of each body segment (density ∝ x^-(1+α)); one per segment between
    /// `min_object` and the last quantile point. Our fit: log-uniform below 5 KB, α = 1 above.
    pub body_shapes: Vec<f64>,
    /// Bytes per piece (one frame-sized sub-object).
    pub piece_size: usize,
    /// Mean requests per object over one pass (tc-1: ≈ 2.5, most objects requested once).
    pub requests_per_object: f64,
    /// Largest number of requests of one object in a pass.
    pub max_requests_per_object: u64,
    /// Key length, bytes (64 in the paper).
    pub key_size: usize,
    /// Seed of the object population (sizes and request counts).
    pub load_seed: u64,
}

impl Default for CdnConfig {
    fn default() -> Self {
        CdnConfig {
            total_bytes: 64 << 20,
            min_object: 1000,
            max_object: 116_000_000,
            mean_object: 20_800.0,
            quantiles: vec![(5_000.0, 0.36), (55_000.0, 0.91), (155_000.0, 0.99)],
            body_shapes: vec![0.0, 1.0, 1.0],
            piece_size: 8192,
            requests_per_object: 2.5,
            max_requests_per_object: 1000,
            key_size: 64,
            load_seed: 1,
        }
    }
}

/// The CDN workload (see [`CdnConfig`]).
///
/// Object `i`'s key is `"cdn-"` followed by `i` zero-padded to `key_size` bytes; it holds the
/// list of its pieces (`piece_size` bytes each, the last one the remainder). A pass over the
/// population requests object `i` `c_i` times, `c_i` drawn from a discrete power law
/// P(c) ∝ c^-β on `1..=max_requests_per_object` with β solved for the mean
/// `requests_per_object`, in a shuffled order; each request of an object is the sequence of
/// `GetFromList` of its pieces 0, 1, ... (one unit). Passes repeat, reshuffled, until the run
/// is long enough.
#[derive(Debug, Clone)]
pub struct Cdn {
    cfg: CdnConfig,
    dist: PiecewiseSizes,
    sizes: Vec<u64>,
    counts: Vec<u32>,
    beta: f64,
    tail_alpha: f64,
}

const PREFIX: &str = "cdn-";

/// Mean of P(c) ∝ c^-β on 1..=k.
fn power_mean(beta: f64, k: u64) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for c in 1..=k {
        let p = (c as f64).powf(-beta);
        num += c as f64 * p;
        den += p;
    }
    num / den
}

impl Cdn {
    /// Checks the config, fits the size distribution and draws the object population.
    pub fn new(cfg: CdnConfig) -> Result<Cdn, WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Config(format!("cdn: {m}")));
        if cfg.piece_size == 0 {
            return bad("piece size must be >= 1".into());
        }
        if cfg.min_object == 0 || cfg.total_bytes < cfg.min_object {
            return bad(format!(
                "need 1 <= min object ({}) <= total bytes ({})",
                cfg.min_object, cfg.total_bytes
            ));
        }
        let last_q = cfg.quantiles.last().map_or(cfg.min_object as f64, |q| q.0);
        if cfg.max_object as f64 <= last_q {
            return bad(format!(
                "max object {} must exceed the last quantile point {last_q}",
                cfg.max_object
            ));
        }
        if cfg.body_shapes.len() != cfg.quantiles.len() {
            return bad(format!(
                "{} quantile points need {} body shapes, got {}",
                cfg.quantiles.len(),
                cfg.quantiles.len(),
                cfg.body_shapes.len()
            ));
        }
        if !(cfg.requests_per_object >= 1.0 && cfg.max_requests_per_object >= 1) {
            return bad(format!(
                "requests per object must be >= 1, got {}",
                cfg.requests_per_object
            ));
        }
        let digits = cfg.total_bytes.div_ceil(cfg.min_object).to_string().len();
        if cfg.key_size < PREFIX.len() + digits {
            return bad(format!(
                "key size {} cannot hold {PREFIX:?} and {digits} digits",
                cfg.key_size
            ));
        }
        let mut points = vec![(cfg.min_object as f64, 0.0)];
        points.extend_from_slice(&cfg.quantiles);
        points.push((cfg.max_object as f64, 1.0));
        let mut shapes = cfg.body_shapes.clone();
        shapes.push(1.0);
        let mut dist = PiecewiseSizes::new(&points, &shapes)?;
        // The tail's mean decreases with its shape α: bisect for the target mean (clamped to
        // the reachable range when the bounds do not allow it; `describe` reports the mean).
        let tail = shapes.len() - 1;
        let (mut lo, mut hi) = (-5.0f64, 50.0f64);
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            dist.set_shape(tail, mid);
            if dist.mean() > cfg.mean_object {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let tail_alpha = 0.5 * (lo + hi);
        dist.set_shape(tail, tail_alpha);

        // Request counts per object: P(c) ∝ c^-β, β solved for the mean (decreasing in β).
        let k = cfg.max_requests_per_object;
        let beta = if cfg.requests_per_object <= 1.0 || k == 1 {
            f64::INFINITY
        } else {
            if power_mean(0.0, k) < cfg.requests_per_object {
                return bad(format!(
                    "a mean of {} requests per object needs max_requests_per_object > {k}",
                    cfg.requests_per_object
                ));
            }
            let (mut lo, mut hi) = (0.0f64, 20.0f64);
            for _ in 0..100 {
                let mid = 0.5 * (lo + hi);
                if power_mean(mid, k) > cfg.requests_per_object {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            0.5 * (lo + hi)
        };
        let cum: Vec<f64> = if beta.is_finite() {
            let mut acc = 0.0;
            let w: Vec<f64> = (1..=k).map(|c| (c as f64).powf(-beta)).collect();
            let total: f64 = w.iter().sum();
            w.iter()
                .map(|x| {
                    acc += x / total;
                    acc
                })
                .collect()
        } else {
            vec![1.0]
        };

        let mut rng = SeededRng::new(derive(cfg.load_seed, 0x6364_6e00));
        let (mut sizes, mut counts) = (Vec::new(), Vec::new());
        let mut total = 0u64;
        'fill: while total + cfg.min_object <= cfg.total_bytes {
            let room = cfg.total_bytes - total;
            let mut size = dist.sample(&mut rng);
            let mut tries = 0;
            while size > room {
                tries += 1;
                if tries > 64 {
                    break 'fill;
                }
                size = dist.sample(&mut rng);
            }
            total += size;
            sizes.push(size);
            let u = rng.next_f64();
            counts.push((cum.partition_point(|&c| c <= u).min(cum.len() - 1) + 1) as u32);
        }
        Ok(Cdn {
            cfg,
            dist,
            sizes,
            counts,
            beta,
            tail_alpha,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &CdnConfig {
        &self.cfg
    }

    /// The fitted size distribution (body shapes as configured, the tail's solved).
    pub fn size_distribution(&self) -> &PiecewiseSizes {
        &self.dist
    }

    /// Object sizes of the population, bytes, by object index.
    pub fn object_sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// Requests of each object in one pass.
    pub fn requests_per_pass(&self) -> &[u32] {
        &self.counts
    }

    /// The name of object `i`'s key.
    pub fn key(&self, i: u64) -> String {
        let width = self.cfg.key_size - PREFIX.len();
        format!("{PREFIX}{i:0width$}")
    }

    /// Pieces of object `i`.
    pub fn pieces(&self, i: u64) -> u32 {
        self.sizes[i as usize].div_ceil(self.cfg.piece_size as u64) as u32
    }

    fn index_of(&self, key: &str) -> Option<u64> {
        if key.len() != self.cfg.key_size {
            return None;
        }
        let i: u64 = key.strip_prefix(PREFIX)?.parse().ok()?;
        ((i as usize) < self.sizes.len()).then_some(i)
    }

    fn piece_sizes(&self, i: u64) -> Vec<u64> {
        let size = self.sizes[i as usize];
        let p = self.cfg.piece_size as u64;
        (0..self.pieces(i) as u64)
            .map(|j| (size - j * p).min(p))
            .collect()
    }

    fn value_of(&self, key: &str, i: u64) -> Vec<Vec<u8>> {
        self.piece_sizes(i)
            .into_iter()
            .enumerate()
            .map(|(j, s)| value_bytes(key, 0, j as u32, s as usize))
            .collect()
    }
}

impl Workload for Cdn {
    fn name(&self) -> String {
        "cdn".to_owned()
    }

    fn load(&self) -> Box<dyn Iterator<Item = (String, Vec<Vec<u8>>)> + '_> {
        Box::new((0..self.sizes.len() as u64).map(move |i| {
            let key = self.key(i);
            let val = self.value_of(&key, i);
            (key, val)
        }))
    }

    fn requests(&self, count: usize, seed: u64) -> Vec<Request> {
        let mut out = Vec::with_capacity(count + 64);
        if self.sizes.is_empty() {
            return out;
        }
        let mut pass_order: Vec<u32> = Vec::new();
        let mut pass = 0u64;
        while out.len() < count {
            pass_order.clear();
            for (i, &c) in self.counts.iter().enumerate() {
                pass_order.extend(std::iter::repeat_n(i as u32, c as usize));
            }
            let mut rng = SeededRng::new(derive(seed, 0x6364_6e70 ^ (pass << 32)));
            for j in (1..pass_order.len()).rev() {
                let k = below(&mut rng, j as u64 + 1) as usize;
                pass_order.swap(j, k);
            }
            for &i in &pass_order {
                if out.len() >= count {
                    break;
                }
                let key = self.key(u64::from(i));
                for index in 0..self.pieces(u64::from(i)) {
                    out.push(Request::GetFromList {
                        key: key.clone(),
                        index,
                    });
                }
            }
            pass += 1;
        }
        out
    }

    fn unit_boundaries(&self, requests: &[Request]) -> Vec<usize> {
        requests
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Request::GetFromList { index: 0, .. }))
            .map(|(i, _)| i)
            .collect()
    }

    fn describe(&self, requests: &[Request]) -> Stats {
        let units = self.unit_boundaries(requests);
        let n = self.sizes.len().max(1) as f64;
        let share = |pred: &dyn Fn(u64) -> bool| {
            100.0 * self.sizes.iter().filter(|&&s| pred(s)).count() as f64 / n
        };
        let mean = self.sizes.iter().sum::<u64>() as f64 / n;
        let fetched: HashSet<&str> = requests
            .iter()
            .filter_map(|r| match r {
                Request::GetFromList { key, index: 0 } => Some(key.as_str()),
                _ => None,
            })
            .collect();
        let once = self.counts.iter().filter(|&&c| c == 1).count() as f64 / n;
        let pass: u64 = self.counts.iter().map(|&c| u64::from(c)).sum();
        let notes = vec![
            format!(
                "population: {} objects, {} B total, mean {:.0} B (model {:.0} B, target {}), \
                 {:.1}% < 5 KB, {:.1}% <= 55 KB, {:.1}% <= 155 KB, min {} B, max {} B",
                self.sizes.len(),
                self.sizes.iter().sum::<u64>(),
                mean,
                self.dist.mean(),
                self.cfg.mean_object,
                share(&|s| s < 5_000),
                share(&|s| s <= 55_000),
                share(&|s| s <= 155_000),
                self.sizes.iter().min().copied().unwrap_or(0),
                self.sizes.iter().max().copied().unwrap_or(0)
            ),
            format!(
                "fit: tail 155 KB..={} B shape α = {:.3}; requests per object in a pass: mean \
                 {:.3} ({} requests), {:.1}% requested once, power law β = {:.3}",
                self.cfg.max_object,
                self.tail_alpha,
                pass as f64 / n,
                pass,
                100.0 * once,
                self.beta
            ),
            format!(
                "run: {} objects fetched ({} distinct) as {} get_from_list of {} B pieces",
                units.len(),
                fetched.len(),
                requests.len(),
                self.cfg.piece_size
            ),
        ];
        compute(
            self.name(),
            requests,
            units.len(),
            None,
            &|k| self.index_of(k).map(|i| self.piece_sizes(i)),
            notes,
        )
    }

    fn initial_value(&self, key: &str) -> Option<Vec<Vec<u8>>> {
        self.index_of(key).map(|i| self.value_of(key, i))
    }
}

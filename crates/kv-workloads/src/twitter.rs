//! Twitter cache: replay of a trace in the public twitter/cache-trace CSV format, or a
//! synthetic trace fitted to the published statistics of cluster 4.

use crate::rng::{derive, range_incl, SeededRng};
use crate::stats::{compute, Stats};
use crate::trace::{read_trace, TraceOp};
use crate::zipf::Zipf;
use crate::{value_bytes, Request, Workload, WorkloadError};
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;

/// The synthetic size model (ours: no public size histogram of cluster 4 exists).
///
/// Key sizes are uniform in `key_min..=key_max` (mean 67 B by default, cluster 4's mean).
/// Values are of two classes: "small", log-uniform in `small_min..=511`, and "large",
/// log-uniform in `512..=large_max`, where `large_max` is solved so that the model's mean
/// value is `mean_value` (2439 B, cluster 4's mean) given `large_share` (0.32, the paper's
/// "about 32% of requests for values larger than 512"). Sizes are per key (a set rewrites a
/// key with a value of the same size).
///
/// With Zipf α ≈ 1.1 a handful of keys take most requests, so independent draws would make
/// the request-weighted statistics depend on which sizes the top keys happen to get. The
/// generator therefore assigns classes and sizes to keys in popularity order so that the
/// request-weighted statistics track the targets: the class by error diffusion over the keys'
/// Zipf weights, each size as the better of two independent draws for keeping the weighted
/// mean on target (the two-choice pick is the smaller or larger draw about equally often, so
/// each key's size keeps the class's distribution).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TwitterSizeModel {
    /// Smallest key, bytes.
    pub key_min: usize,
    /// Largest key, bytes.
    pub key_max: usize,
    /// Target mean value size, bytes (request-weighted).
    pub mean_value: f64,
    /// Target share of requests whose value is >= 512 B.
    pub large_share: f64,
    /// Smallest value, bytes.
    pub small_min: u64,
}

impl Default for TwitterSizeModel {
    fn default() -> Self {
        TwitterSizeModel {
            key_min: 34,
            key_max: 100,
            mean_value: 2439.0,
            large_share: 0.32,
            small_min: 16,
        }
    }
}

/// Configuration of [`Twitter`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TwitterConfig {
    /// A trace in the public CSV format; `None` for the synthetic model.
    pub trace: Option<PathBuf>,
    /// Records read from the trace (its first ones).
    pub max_trace_records: usize,
    /// Trace only: extend each anonymized key with `~` to its recorded original size, so key
    /// bytes on the wire match the trace (anonymized keys are shorter or longer than the
    /// originals).
    pub pad_keys_to_size: bool,
    /// Synthetic only: keys in the store.
    pub keys: u64,
    /// Synthetic only: Zipf exponent of key popularity (cluster 4: α ≈ 1.10).
    pub zipf: f64,
    /// Synthetic only: share of requests that are sets (cluster 4: 7%; the paper says about 8%
    /// of its requests were puts).
    pub write_share: f64,
    /// Synthetic only: the size model.
    pub sizes: TwitterSizeModel,
    /// Seed of the synthetic load set's sizes.
    pub load_seed: u64,
}

impl Default for TwitterConfig {
    fn default() -> Self {
        TwitterConfig {
            trace: None,
            max_trace_records: 2_000_000,
            pad_keys_to_size: true,
            keys: 100_000,
            zipf: 1.10,
            write_share: 0.07,
            sizes: TwitterSizeModel::default(),
            load_seed: 1,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Get,
    Set,
    Append,
    Delete,
}

/// The Twitter cache workload (see [`TwitterConfig`]).
///
/// Synthetic: key `i` (popularity rank `i + 1`) is `"tw:{i}:"` padded with letters to its
/// size; requests are `Get` or `Put` of a Zipf-drawn key. Trace: the store is loaded with
/// every key of the records read, at the first non-zero value size recorded for it (keys that
/// never have one are not loaded: their gets miss); requests replay the records in order
/// (`get`/`gets` → `Get`; `set`/`add`/`replace`/`cas` → `Put`; `append`/`prepend` → `Append`
/// of the recorded value size; `delete` → `Delete`; `incr`/`decr` are skipped and counted),
/// wrapping around at the end; the seed is not used.
#[derive(Debug, Clone)]
pub struct Twitter {
    cfg: TwitterConfig,
    /// Per key: (key size, value size); value size 0 = not loaded.
    sizes: Vec<(u16, u32)>,
    zipf: Option<Zipf>,
    large_max: u64,
    /// Trace mode: key names, their ids, the replayable records and skipped counts.
    trace_keys: Vec<String>,
    trace_ids: HashMap<String, u32>,
    records: Vec<(u32, Op, u32)>,
    skipped: usize,
}

fn loguniform_mean(a: f64, b: f64) -> f64 {
    if b <= a {
        a
    } else {
        (b - a) / (b / a).ln()
    }
}

fn loguniform(rng: &mut SeededRng, a: u64, b: u64) -> u64 {
    let (a, b) = (a as f64, b as f64);
    (a * (b / a).powf(rng.next_f64())).round().clamp(a, b) as u64
}

impl Twitter {
    /// Builds the workload: reads the trace, or fits and draws the synthetic load set.
    pub fn new(cfg: TwitterConfig) -> Result<Twitter, WorkloadError> {
        match cfg.trace.clone() {
            Some(path) => Self::from_trace(cfg, &path),
            None => Self::synthetic(cfg),
        }
    }

    fn from_trace(cfg: TwitterConfig, path: &std::path::Path) -> Result<Twitter, WorkloadError> {
        let mut trace_keys: Vec<String> = Vec::new();
        let mut trace_ids: HashMap<String, u32> = HashMap::new();
        let mut sizes: Vec<(u16, u32)> = Vec::new();
        let mut records = Vec::new();
        let mut skipped = 0;
        let pad = cfg.pad_keys_to_size;
        read_trace(path, cfg.max_trace_records, |r| {
            let op = match r.op {
                TraceOp::Get | TraceOp::Gets => Op::Get,
                TraceOp::Set | TraceOp::Add | TraceOp::Replace | TraceOp::Cas => Op::Set,
                TraceOp::Append | TraceOp::Prepend => Op::Append,
                TraceOp::Delete => Op::Delete,
                TraceOp::Incr | TraceOp::Decr => {
                    skipped += 1;
                    return;
                }
            };
            let mut key = r.key;
            if pad && key.len() < r.key_size as usize {
                let n = r.key_size as usize - key.len();
                key.extend(std::iter::repeat_n('~', n));
            }
            let id = match trace_ids.get(&key) {
                Some(&id) => id,
                None => {
                    let id = trace_keys.len() as u32;
                    trace_ids.insert(key.clone(), id);
                    sizes.push((key.len().min(u16::MAX as usize) as u16, 0));
                    trace_keys.push(key);
                    id
                }
            };
            if sizes[id as usize].1 == 0 && !matches!(op, Op::Delete | Op::Append) {
                sizes[id as usize].1 = r.value_size;
            }
            records.push((id, op, r.value_size));
        })?;
        if records.is_empty() {
            return Err(WorkloadError::Trace(format!(
                "{}: no replayable records (get/set/add/replace/cas/append/prepend/delete)",
                path.display()
            )));
        }
        Ok(Twitter {
            cfg,
            sizes,
            zipf: None,
            large_max: 0,
            trace_keys,
            trace_ids,
            records,
            skipped,
        })
    }

    fn synthetic(cfg: TwitterConfig) -> Result<Twitter, WorkloadError> {
        let m = &cfg.sizes;
        let bad = |s: String| Err(WorkloadError::Config(format!("twitter: {s}")));
        if !(0.0..=1.0).contains(&cfg.write_share) {
            return bad(format!(
                "write share must be in [0, 1], got {}",
                cfg.write_share
            ));
        }
        if !(m.large_share > 0.0 && m.large_share < 1.0) {
            return bad(format!(
                "large share must be in (0, 1), got {}",
                m.large_share
            ));
        }
        let digits = cfg.keys.to_string().len();
        if m.key_min < 4 + digits || m.key_min > m.key_max || m.key_max > u16::MAX as usize {
            return bad(format!(
                "key sizes {}..={} must hold \"tw:\", {digits} digits and \":\"",
                m.key_min, m.key_max
            ));
        }
        if m.small_min == 0 || m.small_min > 511 {
            return bad(format!(
                "smallest value must be in 1..=511, got {}",
                m.small_min
            ));
        }
        let small_mean = loguniform_mean(m.small_min as f64, 511.0);
        let large_mean = (m.mean_value - (1.0 - m.large_share) * small_mean) / m.large_share;
        if large_mean <= 512.0 {
            return bad(format!(
                "mean value {} B is too small for {:.0}% of values >= 512 B",
                m.mean_value,
                100.0 * m.large_share
            ));
        }
        // Solve loguniform_mean(512, b) = large_mean for b (increasing in b).
        let (mut lo, mut hi) = (512.0f64, 512.0f64);
        while loguniform_mean(512.0, hi) < large_mean {
            hi *= 2.0;
            if hi > 1e12 {
                return bad(format!("mean value {} B cannot be fitted", m.mean_value));
            }
        }
        for _ in 0..100 {
            let mid = 0.5 * (lo + hi);
            if loguniform_mean(512.0, mid) < large_mean {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let large_max = hi.round() as u64;
        let zipf = Zipf::new(cfg.keys, cfg.zipf)?;

        // Keys in popularity order; weights ∝ rank^-α.
        let mut rng = SeededRng::new(derive(cfg.load_seed, 0x7477_6974));
        let mut sizes = Vec::with_capacity(cfg.keys as usize);
        let (mut w_all, mut w_large) = (0.0f64, 0.0f64);
        let (mut w_small_c, mut s_small) = (0.0f64, 0.0f64);
        let (mut w_large_c, mut s_large) = (0.0f64, 0.0f64);
        let (mut w_key, mut s_key) = (0.0f64, 0.0f64);
        let key_mean = (m.key_min + m.key_max) as f64 / 2.0;
        // Better of two draws for keeping a weighted running mean at `target`.
        let pick = |a: u64, b: u64, w: f64, wsum: f64, sum: f64, target: f64| -> u64 {
            let err = |x: u64| ((sum + w * x as f64) / (wsum + w) - target).abs();
            if err(a) <= err(b) {
                a
            } else {
                b
            }
        };
        for r in 1..=cfg.keys {
            let w = (r as f64).powf(-cfg.zipf);
            let large_err = ((w_large + w) / (w_all + w) - m.large_share).abs();
            let small_err = (w_large / (w_all + w) - m.large_share).abs();
            let large = large_err < small_err;
            w_all += w;
            let v = if large {
                w_large += w;
                let (a, b) = (
                    loguniform(&mut rng, 512, large_max),
                    loguniform(&mut rng, 512, large_max),
                );
                let v = pick(a, b, w, w_large_c, s_large, large_mean);
                w_large_c += w;
                s_large += w * v as f64;
                v
            } else {
                let (a, b) = (
                    loguniform(&mut rng, m.small_min, 511),
                    loguniform(&mut rng, m.small_min, 511),
                );
                let v = pick(a, b, w, w_small_c, s_small, small_mean);
                w_small_c += w;
                s_small += w * v as f64;
                v
            };
            let (ka, kb) = (
                range_incl(&mut rng, m.key_min as u64, m.key_max as u64),
                range_incl(&mut rng, m.key_min as u64, m.key_max as u64),
            );
            let k = pick(ka, kb, w, w_key, s_key, key_mean);
            w_key += w;
            s_key += w * k as f64;
            sizes.push((k as u16, v as u32));
        }
        Ok(Twitter {
            cfg,
            sizes,
            zipf: Some(zipf),
            large_max,
            trace_keys: Vec::new(),
            trace_ids: HashMap::new(),
            records: Vec::new(),
            skipped: 0,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &TwitterConfig {
        &self.cfg
    }

    /// Synthetic model: the solved upper end of large values, bytes (0 for a trace).
    pub fn large_max(&self) -> u64 {
        self.large_max
    }

    /// The name of key `i` (synthetic: built from its index and size; trace: as read).
    pub fn key(&self, i: u64) -> String {
        if self.zipf.is_none() {
            return self.trace_keys[i as usize].clone();
        }
        let size = self.sizes[i as usize].0 as usize;
        let mut k = format!("tw:{i}:");
        let mut h = derive(i, 0x6b65_7973);
        while k.len() < size {
            k.push((b'a' + (h % 26) as u8) as char);
            h = h.rotate_right(5) ^ 0x9e37_79b9_7f4a_7c15;
        }
        k
    }

    fn index_of(&self, key: &str) -> Option<u64> {
        if self.zipf.is_none() {
            return self.trace_ids.get(key).map(|&i| u64::from(i));
        }
        let rest = key.strip_prefix("tw:")?;
        let (digits, _) = rest.split_once(':')?;
        let i: u64 = digits.parse().ok()?;
        (i < self.cfg.keys && self.key(i) == key).then_some(i)
    }

    fn loaded_size(&self, i: u64) -> Option<u64> {
        let v = self.sizes[i as usize].1;
        (v > 0).then_some(u64::from(v))
    }
}

impl Workload for Twitter {
    fn name(&self) -> String {
        match &self.cfg.trace {
            Some(p) => format!("twitter trace {}", p.display()),
            None => "twitter synthetic".to_owned(),
        }
    }

    fn load(&self) -> Box<dyn Iterator<Item = (String, Vec<Vec<u8>>)> + '_> {
        Box::new((0..self.sizes.len() as u64).filter_map(move |i| {
            let size = self.loaded_size(i)?;
            let key = self.key(i);
            let val = vec![value_bytes(&key, 0, 0, size as usize)];
            Some((key, val))
        }))
    }

    fn requests(&self, count: usize, seed: u64) -> Vec<Request> {
        let mut versions: HashMap<u64, u32> = HashMap::new();
        let mut put = |key: String, i: u64, size: u32| {
            let v = versions.entry(i).or_insert(0);
            *v += 1;
            let val = value_bytes(&key, *v, 0, size as usize);
            (key, val)
        };
        let Some(zipf) = &self.zipf else {
            return (0..count)
                .map(|n| {
                    let (id, op, size) = self.records[n % self.records.len()];
                    let key = self.trace_keys[id as usize].clone();
                    match op {
                        Op::Get => Request::Get { key },
                        Op::Set => {
                            let (key, val) = put(key, u64::from(id), size);
                            Request::Put { key, val }
                        }
                        Op::Append => {
                            let (key, val) = put(key, u64::from(id), size);
                            Request::Append { key, val }
                        }
                        Op::Delete => Request::Delete { key },
                    }
                })
                .collect();
        };
        let mut rng = SeededRng::new(derive(seed, 0x7477_7271));
        (0..count)
            .map(|_| {
                let i = zipf.sample(&mut rng) - 1;
                let key = self.key(i);
                if rng.next_f64() < self.cfg.write_share {
                    let (key, val) = put(key, i, self.sizes[i as usize].1);
                    Request::Put { key, val }
                } else {
                    Request::Get { key }
                }
            })
            .collect()
    }

    fn unit_boundaries(&self, requests: &[Request]) -> Vec<usize> {
        (0..requests.len()).collect()
    }

    fn describe(&self, requests: &[Request]) -> Stats {
        let notes = if self.zipf.is_some() {
            let m = &self.cfg.sizes;
            vec![format!(
                "synthetic cluster-4 model (our fit): {} keys, zipf {}, write share {}, keys \
                 uniform {}..={} B, values: {:.0}% log-uniform {}..=511 B, {:.0}% log-uniform \
                 512..={} B (solved for a mean of {} B)",
                self.cfg.keys,
                self.cfg.zipf,
                self.cfg.write_share,
                m.key_min,
                m.key_max,
                100.0 * (1.0 - m.large_share),
                m.small_min,
                100.0 * m.large_share,
                self.large_max,
                m.mean_value
            )]
        } else {
            vec![format!(
                "trace: {} replayable records, {} keys ({} loaded), {} incr/decr skipped",
                self.records.len(),
                self.trace_keys.len(),
                self.sizes.iter().filter(|s| s.1 > 0).count(),
                self.skipped
            )]
        };
        compute(
            self.name(),
            requests,
            requests.len(),
            self.zipf.map(|z| z.exponent()),
            &|k| {
                self.index_of(k)
                    .and_then(|i| self.loaded_size(i))
                    .map(|s| vec![s])
            },
            notes,
        )
    }

    fn initial_value(&self, key: &str) -> Option<Vec<Vec<u8>>> {
        let i = self.index_of(key)?;
        let size = self.loaded_size(i)?;
        Some(vec![value_bytes(key, 0, 0, size as usize)])
    }
}

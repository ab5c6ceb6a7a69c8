//! Google protobuf bytes sizes: lists of values whose sizes follow the bytes-field size
//! histogram of Google's fleet-wide protobuf study, as the paper's prototype used it.

use crate::rng::{below, derive, range_incl, SeededRng};
use crate::sizes::{Bucket, SizeHistogram};
use crate::stats::{compute, Stats};
use crate::{value_bytes, Request, Workload, WorkloadError};
use serde::Serialize;

/// The bytes-field size histogram (paper §6.1.4, from Figure 4c of Google's fleet-wide study
/// of protobufs), buckets and shares as used by the paper's prototype; sizes are uniform
/// within a bucket. The open last bucket (> 4096) ends at 8192 here (our choice, the frame
/// budget's default); [`GoogleConfig::histogram`] can change it.
pub const GOOGLE_BYTES_HISTOGRAM: [Bucket; 9] = [
    Bucket {
        lo: 1,
        hi: 8,
        share: 0.338,
    },
    Bucket {
        lo: 9,
        hi: 16,
        share: 0.153,
    },
    Bucket {
        lo: 17,
        hi: 22,
        share: 0.076,
    },
    Bucket {
        lo: 23,
        hi: 32,
        share: 0.135,
    },
    Bucket {
        lo: 33,
        hi: 64,
        share: 0.106,
    },
    Bucket {
        lo: 65,
        hi: 128,
        share: 0.061,
    },
    Bucket {
        lo: 129,
        hi: 512,
        share: 0.080,
    },
    Bucket {
        lo: 513,
        hi: 4096,
        share: 0.037,
    },
    Bucket {
        lo: 4097,
        hi: 8192,
        share: 0.0136,
    },
];

/// Configuration of [`Google`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GoogleConfig {
    /// Keys in the store.
    pub keys: u64,
    /// Shortest list (1 in every configuration of the paper).
    pub min_list_len: usize,
    /// Longest list: 1, 4, 8 or 16 in the paper. Lengths are uniform in
    /// `min_list_len..=max_list_len` (inclusive) unless `prototype_exclusive_max`.
    pub max_list_len: usize,
    /// Draw lengths in `min..max` (exclusive), as the paper's prototype did: its "1–4" lists
    /// had 1–3 values. Off by default: we draw 1–4 for "1–4".
    pub prototype_exclusive_max: bool,
    /// Key length, bytes (64 in the paper).
    pub key_size: usize,
    /// Value size histogram (defaults to [`GOOGLE_BYTES_HISTOGRAM`]).
    pub histogram: Vec<Bucket>,
    /// Redraw a whole list while its values' total exceeds `frame_budget` (the paper redraws
    /// when an object exceeds an MTU). Redrawing the whole list keeps list lengths uniform.
    pub resample_over_frame: bool,
    /// Bytes of values one frame may carry (values only, no headers).
    pub frame_budget: usize,
    /// Seed of the load set (list lengths and value sizes).
    pub load_seed: u64,
}

impl Default for GoogleConfig {
    fn default() -> Self {
        GoogleConfig {
            keys: 20_000,
            min_list_len: 1,
            max_list_len: 1,
            prototype_exclusive_max: false,
            key_size: 64,
            histogram: GOOGLE_BYTES_HISTOGRAM.to_vec(),
            resample_over_frame: true,
            frame_budget: 8192,
            load_seed: 1,
        }
    }
}

impl GoogleConfig {
    /// The default config with lists of `min..=max` values.
    pub fn with_lists(min: usize, max: usize) -> GoogleConfig {
        GoogleConfig {
            min_list_len: min,
            max_list_len: max,
            ..GoogleConfig::default()
        }
    }

    /// The default config with the list lengths of a command-line value: `N` (every list has
    /// N values) or `MIN-MAX` (inclusive), as `kv bench --list-lens` and kv-peers take it.
    pub fn with_list_lens(spec: &str) -> Result<GoogleConfig, String> {
        let (lo, hi) = spec.split_once('-').unwrap_or((spec, spec));
        let p = |s: &str| {
            s.trim()
                .parse::<usize>()
                .map_err(|e| format!("{spec:?}: {e} (expected N or MIN-MAX)"))
        };
        let (lo, hi) = (p(lo)?, p(hi)?);
        if lo == 0 || lo > hi {
            return Err(format!(
                "{spec:?}: need 1 <= MIN <= MAX (expected N or MIN-MAX)"
            ));
        }
        Ok(GoogleConfig::with_lists(lo, hi))
    }
}

/// The Google workload (see [`GoogleConfig`]): every request is a `GetList` of a uniformly
/// chosen key. Key `i` is `"google-"` followed by `i` zero-padded to `key_size` bytes.
#[derive(Debug, Clone)]
pub struct Google {
    cfg: GoogleConfig,
    /// Element sizes of key `i`: `sizes[offsets[i]..offsets[i + 1]]`.
    sizes: Vec<u32>,
    offsets: Vec<usize>,
    redraws: u64,
}

const PREFIX: &str = "google-";
const MAX_REDRAWS: u32 = 10_000;

impl Google {
    /// Checks the config and draws the load set's list lengths and sizes.
    pub fn new(cfg: GoogleConfig) -> Result<Google, WorkloadError> {
        let bad = |m: String| Err(WorkloadError::Config(format!("google: {m}")));
        if cfg.keys == 0 || cfg.keys > u32::MAX as u64 {
            return bad(format!("keys must be in 1..=2^32-1, got {}", cfg.keys));
        }
        let hi = if cfg.prototype_exclusive_max && cfg.max_list_len > cfg.min_list_len {
            cfg.max_list_len - 1
        } else {
            cfg.max_list_len
        };
        if cfg.min_list_len == 0 || cfg.min_list_len > cfg.max_list_len {
            return bad(format!(
                "list lengths need 1 <= min <= max, got {}..={}",
                cfg.min_list_len, cfg.max_list_len
            ));
        }
        let digits = cfg.keys.to_string().len();
        if cfg.key_size < PREFIX.len() + digits {
            return bad(format!(
                "key size {} cannot hold {PREFIX:?} and {digits} digits",
                cfg.key_size
            ));
        }
        let hist = SizeHistogram::new(&cfg.histogram)?;
        let smallest = hist.buckets().iter().map(|b| b.lo).min().unwrap_or(1);
        if cfg.resample_over_frame && (smallest as usize) * hi > cfg.frame_budget {
            return bad(format!(
                "a list of {hi} values of at least {smallest} B never fits the frame budget of {} B",
                cfg.frame_budget
            ));
        }
        let mut rng = SeededRng::new(derive(cfg.load_seed, 0x676f_6f67));
        let mut sizes = Vec::new();
        let mut offsets = Vec::with_capacity(cfg.keys as usize + 1);
        offsets.push(0);
        let mut redraws = 0u64;
        let mut list = Vec::with_capacity(hi);
        for _ in 0..cfg.keys {
            let len = range_incl(&mut rng, cfg.min_list_len as u64, hi as u64) as usize;
            let mut tries = 0;
            loop {
                list.clear();
                list.extend((0..len).map(|_| hist.sample(&mut rng) as u32));
                let total: u64 = list.iter().map(|&s| u64::from(s)).sum();
                if !cfg.resample_over_frame || total <= cfg.frame_budget as u64 {
                    break;
                }
                redraws += 1;
                tries += 1;
                if tries > MAX_REDRAWS {
                    return bad(format!(
                        "lists of {len} values almost never fit the frame budget of {} B",
                        cfg.frame_budget
                    ));
                }
            }
            sizes.extend_from_slice(&list);
            offsets.push(sizes.len());
        }
        Ok(Google {
            cfg,
            sizes,
            offsets,
            redraws,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &GoogleConfig {
        &self.cfg
    }

    /// The name of key `i`.
    pub fn key(&self, i: u64) -> String {
        let width = self.cfg.key_size - PREFIX.len();
        format!("{PREFIX}{i:0width$}")
    }

    fn index_of(&self, key: &str) -> Option<u64> {
        if key.len() != self.cfg.key_size {
            return None;
        }
        let i: u64 = key.strip_prefix(PREFIX)?.parse().ok()?;
        (i < self.cfg.keys).then_some(i)
    }

    fn sizes_of(&self, i: u64) -> &[u32] {
        &self.sizes[self.offsets[i as usize]..self.offsets[i as usize + 1]]
    }

    fn value_of(&self, key: &str, i: u64) -> Vec<Vec<u8>> {
        self.sizes_of(i)
            .iter()
            .enumerate()
            .map(|(j, &s)| value_bytes(key, 0, j as u32, s as usize))
            .collect()
    }
}

impl Workload for Google {
    fn name(&self) -> String {
        let c = &self.cfg;
        if c.min_list_len == c.max_list_len {
            format!("google {}", c.max_list_len)
        } else if c.prototype_exclusive_max {
            format!(
                "google {}-{} (prototype: {}-{})",
                c.min_list_len,
                c.max_list_len,
                c.min_list_len,
                c.max_list_len - 1
            )
        } else {
            format!("google {}-{}", c.min_list_len, c.max_list_len)
        }
    }

    fn load(&self) -> Box<dyn Iterator<Item = (String, Vec<Vec<u8>>)> + '_> {
        Box::new((0..self.cfg.keys).map(move |i| {
            let key = self.key(i);
            let val = self.value_of(&key, i);
            (key, val)
        }))
    }

    fn requests(&self, count: usize, seed: u64) -> Vec<Request> {
        let mut rng = SeededRng::new(derive(seed, 0x676f_7271));
        (0..count)
            .map(|_| Request::GetList {
                key: self.key(below(&mut rng, self.cfg.keys)),
            })
            .collect()
    }

    fn unit_boundaries(&self, requests: &[Request]) -> Vec<usize> {
        (0..requests.len()).collect()
    }

    fn describe(&self, requests: &[Request]) -> Stats {
        let hist = SizeHistogram::new(&self.cfg.histogram).expect("checked in new");
        let notes = vec![
            format!(
                "histogram: mean {:.1} B, {:.2}% of values >= 512 B; load set: {} keys, {} values, \
                 {} lists redrawn over the {} B frame budget (resampling {})",
                hist.mean(),
                100.0 * hist.share_at_least(512),
                self.cfg.keys,
                self.sizes.len(),
                self.redraws,
                self.cfg.frame_budget,
                if self.cfg.resample_over_frame { "on" } else { "off" }
            ),
            "keys uniform; every request is a getlist".to_owned(),
        ];
        compute(
            self.name(),
            requests,
            requests.len(),
            None,
            &|k| {
                self.index_of(k)
                    .map(|i| self.sizes_of(i).iter().map(|&s| u64::from(s)).collect())
            },
            notes,
        )
    }

    fn initial_value(&self, key: &str) -> Option<Vec<Vec<u8>>> {
        self.index_of(key).map(|i| self.value_of(key, i))
    }
}

#[cfg(test)]
mod list_lens_tests {
    use super::GoogleConfig;

    #[test]
    fn list_lens_are_one_length_or_an_inclusive_range() {
        let c = GoogleConfig::with_list_lens("1-16").unwrap();
        assert_eq!((c.min_list_len, c.max_list_len), (1, 16));
        let c = GoogleConfig::with_list_lens("4").unwrap();
        assert_eq!((c.min_list_len, c.max_list_len), (4, 4));
        for bad in ["", "x", "1-x", "0", "8-1", "-3"] {
            let e = GoogleConfig::with_list_lens(bad).unwrap_err();
            assert!(
                e.contains(&format!("{bad:?}")) && e.contains("MIN-MAX"),
                "{e}"
            );
        }
    }
}

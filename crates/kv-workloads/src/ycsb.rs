//! YCSB-C: read-only, Zipf key popularity, 30–31 byte keys, fixed value shape.

use crate::rng::{derive, SeededRng};
use crate::stats::{compute, Stats};
use crate::zipf::Zipf;
use crate::{value_bytes, Request, Workload, WorkloadError};
use serde::Serialize;

/// How a YCSB request reads `values_per_request` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum YcsbAccess {
    /// Each key holds one value; a request is a `GetM` of `values_per_request` distinct keys,
    /// each drawn by Zipf popularity (a plain `Get` when there is one value per request).
    /// This is Redis's `MGET` in the paper.
    GetM,
    /// Each key holds a list of `values_per_request` values; a request is one `GetList` of a
    /// Zipf-drawn key (Redis's `LRANGE` in the paper).
    GetList,
}

/// Configuration of [`Ycsb`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct YcsbConfig {
    /// Keys in the store (1 M in the paper; 10 000 by default so that 1×4096 is 40 MB).
    pub keys: u64,
    /// Values each request reads (1, 2, 4 in the paper: shapes 1×4096, 2×2048, 4×1024).
    pub values_per_request: usize,
    /// Size of each value, bytes.
    pub value_size: usize,
    /// How several values are read; irrelevant for one value per request.
    pub access: YcsbAccess,
    /// Zipf exponent of key popularity (0.99 in YCSB and the paper).
    pub zipf: f64,
}

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            keys: 10_000,
            values_per_request: 1,
            value_size: 4096,
            access: YcsbAccess::GetM,
            zipf: 0.99,
        }
    }
}

impl YcsbConfig {
    /// The config for a shape like `"2x2048"` (values per request × value size), other fields
    /// default.
    pub fn with_shape(shape: &str, access: YcsbAccess) -> Result<YcsbConfig, WorkloadError> {
        let (values_per_request, value_size) = crate::parse_shape(shape)?;
        Ok(YcsbConfig {
            values_per_request,
            value_size,
            access,
            ..YcsbConfig::default()
        })
    }
}

/// The YCSB-C workload (see [`YcsbConfig`]). Key `i` (0-based) is `"user"` followed by `i` in
/// 26 digits when `i` is even and 27 when odd: 30 or 31 bytes, as in the paper. Popularity rank
/// `r` is key `r - 1`.
#[derive(Debug, Clone)]
pub struct Ycsb {
    cfg: YcsbConfig,
    zipf: Zipf,
}

const PREFIX: &str = "user";

impl Ycsb {
    /// Checks the config and builds the workload.
    pub fn new(cfg: YcsbConfig) -> Result<Ycsb, WorkloadError> {
        if cfg.values_per_request == 0 || cfg.value_size == 0 {
            return Err(WorkloadError::Config(
                "ycsb: values per request and value size must be >= 1".into(),
            ));
        }
        if cfg.access == YcsbAccess::GetM && cfg.values_per_request as u64 > cfg.keys {
            return Err(WorkloadError::Config(format!(
                "ycsb: getm of {} distinct keys needs at least that many keys, have {}",
                cfg.values_per_request, cfg.keys
            )));
        }
        let zipf = Zipf::new(cfg.keys, cfg.zipf)?;
        Ok(Ycsb { cfg, zipf })
    }

    /// The configuration.
    pub fn config(&self) -> &YcsbConfig {
        &self.cfg
    }

    /// The name of key `i`.
    pub fn key(i: u64) -> String {
        let width = 26 + (i % 2) as usize;
        format!("{PREFIX}{i:0width$}")
    }

    fn index_of(&self, key: &str) -> Option<u64> {
        let digits = key.strip_prefix(PREFIX)?;
        let i: u64 = digits.parse().ok()?;
        (i < self.cfg.keys && Self::key(i) == key).then_some(i)
    }

    fn elements_per_key(&self) -> usize {
        match self.cfg.access {
            YcsbAccess::GetM => 1,
            YcsbAccess::GetList => self.cfg.values_per_request,
        }
    }

    fn value_of(&self, key: &str) -> Vec<Vec<u8>> {
        (0..self.elements_per_key())
            .map(|j| value_bytes(key, 0, j as u32, self.cfg.value_size))
            .collect()
    }
}

impl Workload for Ycsb {
    fn name(&self) -> String {
        let c = &self.cfg;
        let how = match (c.values_per_request, c.access) {
            (1, _) => "get",
            (_, YcsbAccess::GetM) => "getm",
            (_, YcsbAccess::GetList) => "getlist",
        };
        format!("ycsb-c {}x{} {how}", c.values_per_request, c.value_size)
    }

    fn load(&self) -> Box<dyn Iterator<Item = (String, Vec<Vec<u8>>)> + '_> {
        Box::new((0..self.cfg.keys).map(move |i| {
            let key = Self::key(i);
            let val = self.value_of(&key);
            (key, val)
        }))
    }

    fn requests(&self, count: usize, seed: u64) -> Vec<Request> {
        let mut rng = SeededRng::new(derive(seed, 0x7963_7362));
        let n = self.cfg.values_per_request;
        (0..count)
            .map(|_| {
                if n == 1 || self.cfg.access == YcsbAccess::GetList {
                    let key = Self::key(self.zipf.sample(&mut rng) - 1);
                    if n == 1 {
                        Request::Get { key }
                    } else {
                        Request::GetList { key }
                    }
                } else {
                    let mut ranks: Vec<u64> = Vec::with_capacity(n);
                    while ranks.len() < n {
                        let r = self.zipf.sample(&mut rng);
                        if !ranks.contains(&r) {
                            ranks.push(r);
                        }
                    }
                    Request::GetM {
                        keys: ranks.into_iter().map(|r| Self::key(r - 1)).collect(),
                    }
                }
            })
            .collect()
    }

    fn unit_boundaries(&self, requests: &[Request]) -> Vec<usize> {
        (0..requests.len()).collect()
    }

    fn describe(&self, requests: &[Request]) -> Stats {
        let per_key = self.elements_per_key();
        let size = self.cfg.value_size as u64;
        compute(
            self.name(),
            requests,
            requests.len(),
            Some(self.cfg.zipf),
            &|k| self.index_of(k).map(|_| vec![size; per_key]),
            vec![format!(
                "{} keys of {} x {} B; getm draws distinct keys",
                self.cfg.keys, per_key, self.cfg.value_size
            )],
        )
    }

    fn initial_value(&self, key: &str) -> Option<Vec<Vec<u8>>> {
        self.index_of(key).map(|_| self.value_of(key))
    }
}

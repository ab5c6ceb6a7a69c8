//! Seeded key-value workload generators of the Cornflakes paper (§6.1.4, §6.2).
//!
//! Four workloads, each behind the [`Workload`] trait:
//!
//! | workload | constructor | requests |
//! | --- | --- | --- |
//! | YCSB-C | [`Ycsb::new`] with [`YcsbConfig`] | `Get`, `GetM` or `GetList`, Zipf 0.99 keys |
//! | Google protobuf bytes sizes | [`Google::new`] with [`GoogleConfig`] | `GetList`, uniform keys |
//! | Twitter cache | [`Twitter::new`] with [`TwitterConfig`] | `Get` / `Put` (trace: also `Append`, `Delete`) |
//! | CDN images (Tragen tc-1) | [`Cdn::new`] with [`CdnConfig`] | `GetFromList` of each piece of an object |
//!
//! A workload says what the store holds before the run ([`Workload::load`], streamed) and
//! generates the run's requests ([`Workload::requests`]); both are deterministic for a seed.
//! Every value byte is derived from (key, version, list index) by [`value_bytes`], so a client
//! can recompute the expected reply of any key ([`Workload::initial_value`]) without keeping
//! the load set in memory.
//!
//! ```
//! use kv_workloads::{Request, Workload, Ycsb, YcsbConfig};
//!
//! let w = Ycsb::new(YcsbConfig { keys: 1000, ..YcsbConfig::default() }).unwrap();
//! assert_eq!(w.load().count(), 1000);
//! let reqs = w.requests(500, 7);
//! assert_eq!(reqs, w.requests(500, 7)); // deterministic for a seed
//! let Request::Get { key } = &reqs[0] else { panic!() };
//! assert_eq!(w.initial_value(key).unwrap()[0].len(), 4096);
//! println!("{}", w.describe(&reqs));
//! ```
//!
//! The models, their sources and what is our fit rather than published are documented in the
//! crate's README.md.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod cdn;
mod config;
pub mod expect;
mod google;
mod op;
mod rng;
mod sizes;
mod stats;
mod trace;
mod twitter;
mod ycsb;
mod zipf;

pub use cdn::{Cdn, CdnConfig};
pub use config::{parse_shape, WorkloadConfig};
pub use google::{Google, GoogleConfig, GOOGLE_BYTES_HISTOGRAM};
pub use op::OpKind;
pub use sizes::{Bucket, PiecewiseSizes, SizeHistogram};
pub use stats::{estimate_zipf_skew, Stats};
pub use trace::{parse_trace_line, TraceOp, TraceRecord};
pub use twitter::{Twitter, TwitterConfig, TwitterSizeModel};
pub use ycsb::{Ycsb, YcsbAccess, YcsbConfig};
pub use zipf::Zipf;

use std::fmt;

/// One request of a workload. Keys are strings, values are bytes; a stored value is a list of
/// one or more byte strings (a plain value is a list of one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// Read the value (a list of one) of `key`.
    Get {
        /// The key.
        key: String,
    },
    /// Replace the value of `key` by a list of one, `val`.
    Put {
        /// The key.
        key: String,
        /// The new value.
        val: Vec<u8>,
    },
    /// Read the values of several keys, in order.
    GetM {
        /// The keys.
        keys: Vec<String>,
    },
    /// Replace the values of several keys (`keys[i]` gets `vals[i]`).
    PutM {
        /// The keys.
        keys: Vec<String>,
        /// The new values, one per key.
        vals: Vec<Vec<u8>>,
    },
    /// Read the whole list stored at `key`.
    GetList {
        /// The key.
        key: String,
    },
    /// Read element `index` of the list stored at `key`.
    GetFromList {
        /// The key.
        key: String,
        /// Zero-based index into the list.
        index: u32,
    },
    /// Append `val` to the list stored at `key`.
    Append {
        /// The key.
        key: String,
        /// The element to append.
        val: Vec<u8>,
    },
    /// Remove `key`.
    Delete {
        /// The key.
        key: String,
    },
}

impl Request {
    /// Short name of the request type: `get`, `put`, `getm`, `putm`, `getlist`,
    /// `get_from_list`, `append`, `delete` ([`OpKind::name`]).
    pub fn kind(&self) -> &'static str {
        OpKind::of(self).name()
    }

    /// True for requests that change the store (`put`, `putm`, `append`, `delete`).
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Request::Put { .. }
                | Request::PutM { .. }
                | Request::Append { .. }
                | Request::Delete { .. }
        )
    }

    /// The keys this request names, in order.
    pub fn keys(&self) -> Vec<&str> {
        match self {
            Request::Get { key }
            | Request::Put { key, .. }
            | Request::GetList { key }
            | Request::GetFromList { key, .. }
            | Request::Append { key, .. }
            | Request::Delete { key } => vec![key.as_str()],
            Request::GetM { keys } | Request::PutM { keys, .. } => {
                keys.iter().map(String::as_str).collect()
            }
        }
    }
}

/// A generated workload: what the store holds before the run, and the requests of the run.
/// Deterministic for a seed.
///
/// Implementations are `Send + Sync` so that client threads can share one workload as the
/// oracle of expected replies.
pub trait Workload: Send + Sync {
    /// e.g. "ycsb-c 2x2048", "google 1-8", "twitter synthetic", "cdn".
    fn name(&self) -> String;

    /// The store's initial contents: (key, list of values). Streamed, not collected: values are
    /// generated as the iterator advances, so a load set of hundreds of MB costs no memory here.
    fn load(&self) -> Box<dyn Iterator<Item = (String, Vec<Vec<u8>>)> + '_>;

    /// The requests of a run, deterministic for `seed`. Returns exactly `count` requests, except
    /// for workloads whose unit is longer than one request (CDN: an object is fetched as the
    /// sequence of its pieces), which return whole units: the shortest run of whole units with
    /// at least `count` requests.
    fn requests(&self, count: usize, seed: u64) -> Vec<Request>;

    /// How many consecutive requests make one "unit" for throughput reporting: the index in
    /// `requests` where each unit starts (so `0..requests.len()` for one request per unit; for
    /// the CDN workload, where each object's GetFromList sequence starts).
    fn unit_boundaries(&self, requests: &[Request]) -> Vec<usize>;

    /// The statistics of what was generated (share of values >= 512 B, write share, mean key
    /// and value size, Zipf skew used and estimated, list-length histogram...).
    fn describe(&self, requests: &[Request]) -> Stats;

    /// The value `key` holds after [`load`](Workload::load) (before any write of the run), or
    /// `None` when the key is not part of the load set. Recomputed from the key on each call.
    fn initial_value(&self, key: &str) -> Option<Vec<Vec<u8>>>;
}

/// Why a workload could not be built.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkloadError {
    /// A configuration value is out of range or inconsistent; the string says which and why.
    Config(String),
    /// A trace file could not be read or parsed; the string names the file and line.
    Trace(String),
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkloadError::Config(m) => write!(f, "invalid workload configuration: {m}"),
            WorkloadError::Trace(m) => write!(f, "trace: {m}"),
        }
    }
}

impl std::error::Error for WorkloadError {}

/// The bytes of element `index` of the value of `key` at `version` (0 = as loaded), `len`
/// bytes long. Deterministic and cheap (a 64-bit xorshift stream seeded from the key's FNV-1a
/// hash, eight bytes per step), so loads of hundreds of MB generate at memory speed and any
/// client can recompute what a key must hold.
pub fn value_bytes(key: &str, version: u32, index: u32, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    fill_value(&mut out, key, version, index);
    out
}

/// Fills `out` with the bytes [`value_bytes`] returns for the same arguments and `out.len()`.
pub fn fill_value(out: &mut [u8], key: &str, version: u32, index: u32) {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut s =
        h ^ (u64::from(version) << 32 | u64::from(index)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    if s == 0 {
        s = 0x2545_f491_4f6c_dd1d;
    }
    let mut chunks = out.chunks_exact_mut(8);
    for c in &mut chunks {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        c.copy_from_slice(&s.to_le_bytes());
    }
    let rest = chunks.into_remainder();
    if !rest.is_empty() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let n = rest.len();
        rest.copy_from_slice(&s.to_le_bytes()[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_bytes_depend_on_every_argument_and_prefixes_agree() {
        let a = value_bytes("k", 0, 0, 100);
        assert_eq!(a, value_bytes("k", 0, 0, 100));
        assert_ne!(a, value_bytes("j", 0, 0, 100));
        assert_ne!(a, value_bytes("k", 1, 0, 100));
        assert_ne!(a, value_bytes("k", 0, 1, 100));
        assert_eq!(&a[..37], &value_bytes("k", 0, 0, 37)[..]);
        assert!(value_bytes("k", 0, 0, 0).is_empty());
    }

    #[test]
    fn request_kinds_and_writes() {
        let put = Request::Put {
            key: "a".into(),
            val: vec![1],
        };
        assert!(put.is_write());
        assert_eq!(put.kind(), "put");
        let getm = Request::GetM {
            keys: vec!["a".into(), "b".into()],
        };
        assert!(!getm.is_write());
        assert_eq!(getm.keys(), vec!["a", "b"]);
    }
}

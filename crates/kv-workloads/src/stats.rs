//! What a generated run contains: request mix, sizes, key popularity.

use crate::Request;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// The statistics of a generated run, as [`crate::Workload::describe`] reports them.
///
/// "Value" of a request means the bytes it reads (the stored elements a get returns, as
/// loaded) or writes (the value a put or append carries); deletes and gets of keys outside the
/// load set have none and are left out of the value statistics.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stats {
    /// The workload's name.
    pub workload: String,
    /// Requests in the run.
    pub requests: usize,
    /// Throughput units (objects for CDN, else requests).
    pub units: usize,
    /// Requests per request kind (`get`, `put`, `getm`, ...).
    pub ops: BTreeMap<String, usize>,
    /// Share of requests that write (put, putm, append, delete).
    pub write_share: f64,
    /// Distinct keys the run names.
    pub distinct_keys: usize,
    /// Mean key length over every key named by a request, bytes.
    pub mean_key_bytes: f64,
    /// Mean total value bytes per request that reads or writes a value.
    pub mean_request_value_bytes: f64,
    /// Share of those requests whose total value is >= 512 bytes (the paper's "requests for
    /// objects larger than 512").
    pub share_requests_ge_512: f64,
    /// Mean size of one value element (one list entry), bytes.
    pub mean_element_bytes: f64,
    /// Share of value elements >= 512 bytes.
    pub share_elements_ge_512: f64,
    /// Largest element in the run, bytes.
    pub max_element_bytes: u64,
    /// Elements per request (list length or number of keys) → requests.
    pub elements_per_request: BTreeMap<usize, usize>,
    /// The Zipf exponent the generator used, if its key popularity is Zipf.
    pub zipf_exponent: Option<f64>,
    /// The exponent estimated from the run's rank-frequency curve (least squares of log count
    /// on log rank over the ranks seen at least 10 times, at most the first 1000), if at least
    /// 3 such ranks exist.
    pub zipf_estimated: Option<f64>,
    /// Requests per distinct key (CDN: per object), i.e. `units` over distinct keys.
    pub units_per_key: f64,
    /// Workload-specific lines (the model's knobs, what was produced).
    pub notes: Vec<String>,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "workload {}: {} requests, {} units",
            self.workload, self.requests, self.units
        )?;
        let ops: Vec<String> = self.ops.iter().map(|(k, v)| format!("{k} {v}")).collect();
        writeln!(
            f,
            "  ops: {} (write share {:.2}%)",
            ops.join(", "),
            100.0 * self.write_share
        )?;
        writeln!(
            f,
            "  keys: {} distinct, mean {:.1} B, {:.2} units per key",
            self.distinct_keys, self.mean_key_bytes, self.units_per_key
        )?;
        writeln!(
            f,
            "  values per request: mean {:.1} B, {:.2}% >= 512 B; per element: mean {:.1} B, \
             {:.2}% >= 512 B, max {} B",
            self.mean_request_value_bytes,
            100.0 * self.share_requests_ge_512,
            self.mean_element_bytes,
            100.0 * self.share_elements_ge_512,
            self.max_element_bytes
        )?;
        let lens: Vec<String> = self
            .elements_per_request
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        writeln!(f, "  elements per request: {}", lens.join(" "))?;
        match (self.zipf_exponent, self.zipf_estimated) {
            (Some(s), Some(e)) => writeln!(f, "  zipf: exponent {s}, estimated {e:.3}")?,
            (Some(s), None) => writeln!(f, "  zipf: exponent {s} (too few requests to estimate)")?,
            (None, Some(e)) => writeln!(f, "  popularity: rank-frequency slope {e:.3}")?,
            (None, None) => {}
        }
        for n in &self.notes {
            writeln!(f, "  {n}")?;
        }
        Ok(())
    }
}

/// Estimates a Zipf exponent from per-key request counts: the negated least-squares slope of
/// ln(count) against ln(rank), over the ranks counted at least 10 times (at most the first
/// 1000, where sampling noise is small). `None` when fewer than 3 ranks qualify.
pub fn estimate_zipf_skew(counts: impl IntoIterator<Item = u64>) -> Option<f64> {
    let mut c: Vec<u64> = counts.into_iter().filter(|&x| x > 0).collect();
    c.sort_unstable_by(|a, b| b.cmp(a));
    let pts: Vec<(f64, f64)> = c
        .iter()
        .take(1000)
        .take_while(|&&x| x >= 10)
        .enumerate()
        .map(|(i, &x)| (((i + 1) as f64).ln(), (x as f64).ln()))
        .collect();
    if pts.len() < 3 {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    Some(-sxy / sxx)
}

/// Computes [`Stats`] for a run; `sizes(key)` gives the element sizes a key holds as loaded.
pub(crate) fn compute(
    workload: String,
    requests: &[Request],
    units: usize,
    zipf_exponent: Option<f64>,
    sizes: &dyn Fn(&str) -> Option<Vec<u64>>,
    notes: Vec<String>,
) -> Stats {
    let mut ops: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_key: HashMap<&str, u64> = HashMap::new();
    let (mut writes, mut key_n, mut key_bytes) = (0usize, 0u64, 0u64);
    let (mut vreq, mut vreq_bytes, mut vreq_big) = (0u64, 0u64, 0u64);
    let (mut elems, mut elem_bytes, mut elem_big, mut elem_max) = (0u64, 0u64, 0u64, 0u64);
    let mut per_request: BTreeMap<usize, usize> = BTreeMap::new();
    for r in requests {
        *ops.entry(r.kind().to_owned()).or_default() += 1;
        writes += usize::from(r.is_write());
        for k in r.keys() {
            key_n += 1;
            key_bytes += k.len() as u64;
            *per_key.entry(k).or_default() += 1;
        }
        let el: Option<Vec<u64>> = match r {
            Request::Get { key } | Request::GetList { key } => sizes(key),
            Request::GetM { keys } => keys
                .iter()
                .map(|k| sizes(k))
                .collect::<Option<Vec<_>>>()
                .map(|v| v.concat()),
            Request::GetFromList { key, index } => {
                sizes(key).and_then(|v| v.get(*index as usize).map(|&s| vec![s]))
            }
            Request::Put { val, .. } | Request::Append { val, .. } => Some(vec![val.len() as u64]),
            Request::PutM { vals, .. } => Some(vals.iter().map(|v| v.len() as u64).collect()),
            Request::Delete { .. } => None,
        };
        if let Some(el) = el {
            let total: u64 = el.iter().sum();
            vreq += 1;
            vreq_bytes += total;
            vreq_big += u64::from(total >= 512);
            *per_request.entry(el.len()).or_default() += 1;
            for s in el {
                elems += 1;
                elem_bytes += s;
                elem_big += u64::from(s >= 512);
                elem_max = elem_max.max(s);
            }
        }
    }
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let distinct_keys = per_key.len();
    Stats {
        workload,
        requests: requests.len(),
        units,
        ops,
        write_share: ratio(writes as f64, requests.len() as f64),
        distinct_keys,
        mean_key_bytes: ratio(key_bytes as f64, key_n as f64),
        mean_request_value_bytes: ratio(vreq_bytes as f64, vreq as f64),
        share_requests_ge_512: ratio(vreq_big as f64, vreq as f64),
        mean_element_bytes: ratio(elem_bytes as f64, elems as f64),
        share_elements_ge_512: ratio(elem_big as f64, elems as f64),
        max_element_bytes: elem_max,
        elements_per_request: per_request,
        zipf_exponent,
        zipf_estimated: estimate_zipf_skew(per_key.values().copied()),
        units_per_key: ratio(units as f64, distinct_keys as f64),
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skew_of_an_exact_power_law() {
        let counts = (1..=2000u64).map(|r| (1e6 * (r as f64).powf(-1.1)) as u64);
        let s = estimate_zipf_skew(counts).unwrap();
        assert!((s - 1.1).abs() < 0.01, "{s}");
        assert_eq!(estimate_zipf_skew([5u64, 3, 1]), None);
    }

    #[test]
    fn compute_counts_sizes_and_writes() {
        let reqs = vec![
            Request::Get { key: "a".into() },
            Request::Put {
                key: "bb".into(),
                val: vec![0; 600],
            },
            Request::Delete { key: "a".into() },
            Request::GetFromList {
                key: "a".into(),
                index: 1,
            },
        ];
        let s = compute(
            "t".into(),
            &reqs,
            4,
            None,
            &|k| (k == "a").then(|| vec![10, 1000]),
            vec![],
        );
        assert_eq!(s.ops["get"], 1);
        assert!((s.write_share - 0.5).abs() < 1e-12);
        assert_eq!(s.distinct_keys, 2);
        assert!((s.mean_key_bytes - 5.0 / 4.0).abs() < 1e-12);
        // Values: get (1010 total), put (600), get_from_list (1000).
        assert!((s.mean_request_value_bytes - 2610.0 / 3.0).abs() < 1e-9);
        assert!((s.share_requests_ge_512 - 1.0).abs() < 1e-12);
        assert!((s.share_elements_ge_512 - 0.75).abs() < 1e-12);
        assert_eq!(s.elements_per_request[&2], 1);
        assert!(format!("{s}").contains("write share 50.00%"));
    }
}

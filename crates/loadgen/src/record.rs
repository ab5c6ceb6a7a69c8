//! JSON records: one per (mode, shape, offered load) point.

use crate::run::RunReport;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io;
use std::path::Path;

/// One measured point, as written to JSON.
///
/// Percentiles are `null` when no response was verified in the measured
/// window (e.g. everything was lost).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// What was measured, e.g. `"protobuf"` or `"cornflakes-hybrid"`.
    pub mode: String,
    /// Message shape, e.g. `"list-2x2048"`.
    pub shape: String,
    /// Offered load in requests per second.
    pub offered_rps: f64,
    /// Verified responses per second in the measured window.
    pub achieved_rps: f64,
    /// Median latency, microseconds.
    pub p50_us: Option<f64>,
    /// 99th percentile latency, microseconds.
    pub p99_us: Option<f64>,
    /// 99.9th percentile latency, microseconds.
    pub p999_us: Option<f64>,
    /// Mean latency, microseconds.
    pub mean_us: Option<f64>,
    /// Requests sent (all, including warm-up).
    pub sent: u64,
    /// Responses matched to a request (verified + mismatched).
    pub received: u64,
    /// Responses the checker accepted.
    pub verified: u64,
    /// Responses the checker rejected.
    pub mismatched: u64,
    /// Requests with no response within the timeout.
    pub lost: u64,
    /// Responses matching no outstanding request.
    pub unexpected: u64,
    /// Responses whose request id was unreadable.
    pub malformed: u64,
    /// Sum of all error counters (mismatched, lost, unexpected, malformed,
    /// I/O errors).
    pub errors: u64,
    /// Client threads.
    pub threads: usize,
    /// Length of the measured window, seconds.
    pub measured_s: f64,
    /// The speed canary before this point, over its reference ([`crate::canary`]: the run's
    /// first reading while the run goes on, the run's 10th-percentile reading once it is
    /// over and rebased); absent when the bench did not time it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_ratio: Option<f64>,
    /// The canary's pair reading (two CPUs bouncing a cache line) over its reference
    /// ([`crate::canary::Pair`]); already counted in `canary_ratio`, which is the largest of
    /// the ratios. Absent when the bench did not time it (fewer than two CPUs, or records
    /// written before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_pair_ratio: Option<f64>,
    /// The canary's pair reading per round trip, nanoseconds ([`crate::canary::Pair`]): an
    /// absolute reading, where `canary_pair_ratio` is relative to the run. A whole run far
    /// above [`FAR_PAIR_NS`](crate::canary::FAR_PAIR_NS) ran with its two CPUs far apart
    /// ([`crate::canary::far_pair_note`]). Absent when the bench did not time it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub canary_pair_ns: Option<f64>,
    /// Runs of this point thrown away before it because the speed canary before them read
    /// the machine's slow state (the emulated benches rerun such a trial, up to
    /// `--slowed-retries` times: `emu_bench::search_rerunning_slowed`). Absent from benches
    /// that do not rerun (the socket, TCP and AF_XDP sweeps) and from records written before
    /// it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slowed_reruns: Option<usize>,
    /// Which repeat of the whole search this point belongs to (1 to N) when a bench ran it N
    /// times (`--repeat N`, N > 1); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<usize>,
}

impl Record {
    /// Builds the record of a run.
    pub fn from_report(mode: &str, shape: &str, r: &RunReport) -> Record {
        let c = &r.counters;
        Record {
            mode: mode.to_owned(),
            shape: shape.to_owned(),
            offered_rps: r.offered_rps,
            achieved_rps: r.achieved_rps,
            p50_us: r.latency.p50_us(),
            p99_us: r.latency.p99_us(),
            p999_us: r.latency.p999_us(),
            mean_us: r.latency.mean_us(),
            sent: c.sent,
            received: c.verified + c.mismatched,
            verified: c.verified,
            mismatched: c.mismatched,
            lost: c.lost,
            unexpected: c.unexpected,
            malformed: c.malformed,
            errors: c.errors(),
            threads: r.threads,
            measured_s: r.measured_window.as_secs_f64(),
            canary_ratio: None,
            canary_pair_ratio: None,
            canary_pair_ns: None,
            slowed_reruns: None,
            repeat: None,
        }
    }

    /// Records the speed canary timed before this point: its ratio, its pair's and the pair's
    /// round trip.
    pub fn set_canary(&mut self, speed: &crate::canary::Speed) {
        self.canary_ratio = Some(speed.ratio());
        self.canary_pair_ratio = speed.pair_ratio();
        self.canary_pair_ns = speed.pair.as_ref().map(crate::canary::Pair::round_trip_ns);
    }

    /// Whether the machine was slower at this point than its fast state: its speed canary
    /// over [`SLOWED_RATIO`](crate::canary::SLOWED_RATIO) times its reference.
    pub fn slowed(&self) -> bool {
        self.canary_ratio
            .is_some_and(|r| r > crate::canary::SLOWED_RATIO)
    }

    /// True when the achieved load is at least `fraction` of the offered load.
    pub fn keeps_up(&self, fraction: f64) -> bool {
        self.achieved_rps >= fraction * self.offered_rps
    }
}

/// A latency in microseconds as the tables print it: one decimal, `–` when there is none.
pub fn fmt_us(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"))
}

/// Serializes records as a pretty-printed JSON array.
pub fn to_json(records: &[Record]) -> String {
    // Serializing plain structs of numbers and strings cannot fail.
    serde_json::to_string_pretty(records).expect("records serialize")
}

/// Parses a JSON array of records.
pub fn from_json(text: &str) -> Result<Vec<Record>, serde_json::Error> {
    serde_json::from_str(text)
}

/// Writes records to `path` as a JSON array.
pub fn write_json(path: &Path, records: &[Record]) -> io::Result<()> {
    fs::write(path, to_json(records) + "\n")
}

/// [`write_json`], creating `path`'s directory first; the error says which path failed and
/// how (a bench's `--json PATH` output).
pub fn save_json(path: &Path, records: &[Record]) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    write_json(path, records).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// A bench's first outputs: its output directory `out_dir` created and its records saved to
/// `json` ([`save_json`]), said on stderr.
pub fn save_bench_records(out_dir: &Path, json: &Path, records: &[Record]) -> Result<(), String> {
    fs::create_dir_all(out_dir).map_err(|e| format!("creating {}: {e}", out_dir.display()))?;
    save_json(json, records)?;
    eprintln!("[bench] wrote {}", json.display());
    Ok(())
}

/// Reads records written by [`write_json`].
pub fn read_json(path: &Path) -> io::Result<Vec<Record>> {
    let text = fs::read_to_string(path)?;
    from_json(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Counters;
    use latency::LatencyHistogram;
    use std::time::Duration;

    fn report() -> RunReport {
        let mut latency = LatencyHistogram::new();
        for v in 1..=1000 {
            latency.record(Duration::from_micros(v));
        }
        RunReport {
            offered_rps: 1000.0,
            achieved_rps: 990.0,
            measured_window: Duration::from_secs(1),
            measured_requests: 1000,
            counters: Counters {
                sent: 1000,
                verified: 990,
                mismatched: 4,
                lost: 6,
                ..Counters::default()
            },
            latency,
            threads: 2,
        }
    }

    #[test]
    fn json_has_the_agreed_fields() {
        let rec = Record::from_report("protobuf", "list-2x2048", &report());
        let json = to_json(std::slice::from_ref(&rec));
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let obj = v.as_array().unwrap()[0].as_object().unwrap();
        for key in [
            "mode",
            "shape",
            "offered_rps",
            "achieved_rps",
            "p50_us",
            "p99_us",
            "p999_us",
            "sent",
            "received",
            "errors",
        ] {
            assert!(obj.contains_key(key), "missing {key}");
        }
        assert_eq!(obj["mode"], "protobuf");
        assert_eq!(obj["shape"], "list-2x2048");
        assert_eq!(obj["received"], 994);
        assert_eq!(obj["errors"], 10);
        assert!((obj["p99_us"].as_f64().unwrap() - 990.0).abs() < 1.0);
        assert_eq!(from_json(&json).unwrap(), vec![rec]);
    }

    #[test]
    fn empty_histogram_gives_null_percentiles() {
        let mut r = report();
        r.latency = LatencyHistogram::new();
        let rec = Record::from_report("m", "s", &r);
        let v: serde_json::Value = serde_json::to_value(&rec).unwrap();
        assert!(v["p99_us"].is_null());
    }

    #[test]
    fn keeps_up_uses_the_fraction() {
        let rec = Record::from_report("m", "s", &report());
        assert!(rec.keeps_up(0.95));
        assert!(!rec.keeps_up(0.995));
    }

    #[test]
    fn file_round_trip_and_bad_file_is_an_error() {
        let dir = std::env::temp_dir().join(format!("loadgen-json-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        let recs = vec![Record::from_report("a", "b", &report())];
        write_json(&path, &recs).unwrap();
        assert_eq!(read_json(&path).unwrap(), recs);
        fs::write(&path, "{not json").unwrap();
        assert_eq!(
            read_json(&path).unwrap_err().kind(),
            io::ErrorKind::InvalidData
        );
        // save_json creates the directories on the way.
        let nested = dir.join("a/b/r.json");
        save_json(&nested, &recs).unwrap();
        assert_eq!(read_json(&nested).unwrap(), recs);
        let e = save_json(&path.join("under-a-file.json"), &recs).unwrap_err();
        assert!(
            e.starts_with(&format!("creating {}: ", path.display())),
            "{e}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }
}

/// The records of several client machines that loaded one server at once, merged point by
/// point: records of the same mode, shape and position in their host's list (the same sweep
/// on every host) become one, whose offered and achieved loads and counters are the hosts'
/// sums and whose threads are all the hosts' threads. Latency percentiles cannot be merged
/// exactly from percentiles: each is the largest of the hosts' (an upper bound on the merged
/// one — at least that share of every host's replies came within it), the mean the
/// verified-weighted mean; the measured window is the longest. Every host must have the same
/// points (mode, shape) in the same order; an error says which differs.
pub fn merge_hosts(hosts: &[Vec<Record>]) -> Result<Vec<Record>, String> {
    let Some((first, rest)) = hosts.split_first() else {
        return Err("no records to merge".to_owned());
    };
    let mut out = first.clone();
    for (h, recs) in rest.iter().enumerate() {
        if recs.len() != out.len() {
            return Err(format!(
                "host {} has {} records, host 1 has {}",
                h + 2,
                recs.len(),
                out.len()
            ));
        }
        for (m, r) in out.iter_mut().zip(recs) {
            if (m.mode.as_str(), m.shape.as_str()) != (r.mode.as_str(), r.shape.as_str()) {
                return Err(format!(
                    "host {} has {} {} where host 1 has {} {}",
                    h + 2,
                    r.mode,
                    r.shape,
                    m.mode,
                    m.shape
                ));
            }
            let max = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            m.mean_us = match (m.mean_us, r.mean_us) {
                (Some(a), Some(b)) if m.verified + r.verified > 0 => Some(
                    (a * m.verified as f64 + b * r.verified as f64)
                        / (m.verified + r.verified) as f64,
                ),
                (a, b) => a.or(b),
            };
            m.p50_us = max(m.p50_us, r.p50_us);
            m.p99_us = max(m.p99_us, r.p99_us);
            m.p999_us = max(m.p999_us, r.p999_us);
            m.offered_rps += r.offered_rps;
            m.achieved_rps += r.achieved_rps;
            m.sent += r.sent;
            m.received += r.received;
            m.verified += r.verified;
            m.mismatched += r.mismatched;
            m.lost += r.lost;
            m.unexpected += r.unexpected;
            m.malformed += r.malformed;
            m.errors += r.errors;
            m.threads += r.threads;
            m.measured_s = m.measured_s.max(r.measured_s);
            m.canary_ratio = max(m.canary_ratio, r.canary_ratio);
            m.canary_pair_ratio = max(m.canary_pair_ratio, r.canary_pair_ratio);
            m.canary_pair_ns = max(m.canary_pair_ns, r.canary_pair_ns);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod merge_tests {
    use super::*;

    fn rec(mode: &str, offered: f64, p99: f64, mean: f64, verified: u64) -> Record {
        Record {
            mode: mode.into(),
            shape: "s".into(),
            offered_rps: offered,
            achieved_rps: offered,
            p50_us: Some(p99 / 2.0),
            p99_us: Some(p99),
            mean_us: Some(mean),
            sent: verified,
            verified,
            threads: 2,
            ..Record::default()
        }
    }

    #[test]
    fn hosts_sum_their_loads_and_take_the_worst_percentiles() {
        let a = vec![
            rec("cf", 1000.0, 30.0, 10.0, 100),
            rec("cf", 2000.0, 50.0, 20.0, 200),
        ];
        let b = vec![
            rec("cf", 1000.0, 40.0, 30.0, 300),
            rec("cf", 2000.0, 45.0, 20.0, 200),
        ];
        let m = merge_hosts(&[a.clone(), b]).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(
            (m[0].offered_rps, m[0].verified, m[0].threads),
            (2000.0, 400, 4)
        );
        assert_eq!(m[0].p99_us, Some(40.0));
        assert_eq!(m[1].p99_us, Some(50.0));
        assert_eq!(m[0].mean_us, Some(25.0), "weighted by verified replies");
        // Hosts that ran different sweeps are refused.
        assert!(merge_hosts(&[a.clone(), a[..1].to_vec()]).is_err());
        let other = vec![
            rec("protobuf", 1000.0, 1.0, 1.0, 1),
            rec("cf", 2000.0, 1.0, 1.0, 1),
        ];
        assert!(merge_hosts(&[a, other]).unwrap_err().contains("protobuf"));
        assert!(merge_hosts(&[]).is_err());
    }
}

//! The report of a search that ran in another program: what the C library's emulated device
//! (`cf_dp_emu_new`) writes to `report.json` after a plan's search, and what a bench that
//! drives it (e.g. `redis-cf-bench --datapath emu`) reads back. One type for the writer and
//! the reader, so a field cannot be renamed on one side only, and a missing or mistyped field
//! is an error that names it, not a zero. Format: docs/c-api.md, "The emulated ConnectX".

use loadgen::Record;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::search::EmuSummary;

/// The server thread's scheduling in one trial run, from the kernel's schedstats.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ThreadReading {
    /// The trial's offered load, req/s.
    pub offered_rps: f64,
    /// The trial's number at that load (from 0).
    pub trial: usize,
    /// The thread's time from taking the trial to giving it back, ns.
    pub span_ns: u64,
    /// Of it, on its CPU (`None`: the kernel gave no schedstats).
    pub on_cpu_ns: Option<u64>,
    /// Of it, runnable but waiting for its CPU (`None`: no schedstats).
    pub waited_ns: Option<u64>,
}

impl ThreadReading {
    /// The shares of the span on the CPU and waiting for it, each 0 to 1; `None` without
    /// schedstats or with an empty span.
    pub fn shares(&self) -> Option<(f64, f64)> {
        let span = self.span_ns as f64;
        if span <= 0.0 {
            return None;
        }
        Some((self.on_cpu_ns? as f64 / span, self.waited_ns? as f64 / span))
    }
}

/// One repeat of the search.
#[derive(Clone, Debug, PartialEq)]
pub struct RepeatReport {
    /// The mode's search summarized.
    pub summary: EmuSummary,
    /// Its median record per load.
    pub records: Vec<Record>,
    /// Every trial, in the order they ran ([`crate::EmuRepeat::trials`]).
    pub points: Vec<Value>,
    /// The server thread in each trial run, in the order they ran.
    pub server_thread: Vec<ThreadReading>,
}

/// A plan's search: one mode, each repeat, and each repeat's table as emu-bench prints it.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchReport {
    /// The plan's mode.
    pub mode: String,
    /// The plan's shape.
    pub shape: String,
    /// Each repeat, in order.
    pub repeats: Vec<RepeatReport>,
    /// Each repeat's table ([`crate::table`]).
    pub tables: Vec<String>,
}

fn field<'v>(v: &'v Value, key: &str) -> Result<&'v Value, String> {
    v.get(key).ok_or_else(|| format!("no {key:?}"))
}

fn typed<T: for<'de> Deserialize<'de>>(v: &Value, key: &str) -> Result<T, String> {
    serde_json::from_value(field(v, key)?.clone()).map_err(|e| format!("{key}: {e}"))
}

impl RepeatReport {
    /// The repeat as JSON.
    pub fn to_json(&self) -> Result<Value, String> {
        let value = |x: Result<Value, serde_json::Error>| x.map_err(|e| e.to_string());
        Ok(json!({
            "summary": self.summary.to_json(),
            "records": value(serde_json::to_value(&self.records))?,
            "points": self.points,
            "server_thread": value(serde_json::to_value(&self.server_thread))?,
        }))
    }

    /// The repeat `v` holds, as [`to_json`](Self::to_json) wrote it (an error naming the
    /// first field missing or of the wrong type).
    pub fn from_json(v: &Value) -> Result<RepeatReport, String> {
        Ok(RepeatReport {
            summary: EmuSummary::from_json(field(v, "summary")?)
                .map_err(|e| format!("summary: {e}"))?,
            records: typed(v, "records")?,
            points: typed(v, "points")?,
            server_thread: typed(v, "server_thread")?,
        })
    }

    /// The server thread at `load`: the least share of its trials' spans on its CPU and the
    /// most waiting for it, e.g. `on its CPU 99% of the trial, waiting for it 1%`; `None`
    /// when no trial there has schedstats.
    pub fn thread_share_at(&self, load: f64) -> Option<String> {
        let shares: Vec<(f64, f64)> = self
            .server_thread
            .iter()
            .filter(|t| t.offered_rps == load)
            .filter_map(ThreadReading::shares)
            .collect();
        let on = shares.iter().map(|s| s.0).reduce(f64::min)?;
        let waited = shares.iter().map(|s| s.1).fold(0.0, f64::max);
        Some(format!(
            "on its CPU {:.0}% of the trial, waiting for it {:.0}%",
            on * 100.0,
            waited * 100.0
        ))
    }
}

impl SearchReport {
    /// The report as JSON.
    pub fn to_json(&self) -> Result<Value, String> {
        Ok(json!({
            "mode": self.mode,
            "shape": self.shape,
            "repeats": self
                .repeats
                .iter()
                .map(RepeatReport::to_json)
                .collect::<Result<Vec<_>, _>>()?,
            "tables": self.tables,
        }))
    }

    /// The report `v` holds (an error naming the first field missing or of the wrong type,
    /// and in which repeat).
    pub fn from_json(v: &Value) -> Result<SearchReport, String> {
        let repeats = field(v, "repeats")?
            .as_array()
            .ok_or("\"repeats\" is not an array")?
            .iter()
            .enumerate()
            .map(|(i, r)| RepeatReport::from_json(r).map_err(|e| format!("repeat {}: {e}", i + 1)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(SearchReport {
            mode: typed(v, "mode")?,
            shape: typed(v, "shape")?,
            repeats,
            tables: typed(v, "tables")?,
        })
    }

    /// The median repeat by its highest load kept up (a repeat that kept none up counts as
    /// 0); `None` with no repeat.
    pub fn median_repeat(&self) -> Option<&RepeatReport> {
        let mut by_max: Vec<&RepeatReport> = self.repeats.iter().collect();
        let max = |r: &RepeatReport| r.summary.best.as_ref().map_or(0.0, |b| b.median_rps);
        by_max.sort_by(|a, b| max(a).total_cmp(&max(b)));
        by_max.get(by_max.len() / 2).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::Bound;

    /// The crate's test summary, kept up at `best_rps` or at no load.
    fn summary(best_rps: Option<f64>) -> EmuSummary {
        let mut s = crate::headline::tests::summary(
            "redis cornflakes",
            best_rps.unwrap_or(1.0),
            Bound::Server,
            500.0,
        );
        if best_rps.is_none() {
            s.best = None;
        }
        s
    }

    fn repeat(best_rps: Option<f64>, on_cpu_ns: Option<u64>) -> RepeatReport {
        RepeatReport {
            summary: summary(best_rps),
            records: vec![Record::default()],
            points: vec![json!({"offered_rps": 1000.0})],
            server_thread: vec![
                ThreadReading {
                    offered_rps: 1000.0,
                    trial: 0,
                    span_ns: 1_000,
                    on_cpu_ns,
                    waited_ns: on_cpu_ns.map(|_| 20),
                },
                ThreadReading {
                    offered_rps: 1000.0,
                    trial: 1,
                    span_ns: 1_000,
                    on_cpu_ns: on_cpu_ns.map(|n| n - 100),
                    waited_ns: on_cpu_ns.map(|_| 50),
                },
            ],
        }
    }

    fn report() -> SearchReport {
        SearchReport {
            mode: "redis cornflakes".to_owned(),
            shape: "YCSB GET 1x4096".to_owned(),
            repeats: vec![
                repeat(Some(300.0), Some(990)),
                repeat(None, None),
                repeat(Some(200.0), Some(950)),
            ],
            tables: vec!["| a |".to_owned(), "| b |".to_owned(), "| c |".to_owned()],
        }
    }

    #[test]
    fn a_report_reads_back_as_it_was_written() {
        let r = report();
        let text = r.to_json().unwrap().to_string();
        let back = SearchReport::from_json(&serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn a_missing_or_mistyped_field_is_an_error_that_names_it() {
        let mut v = report().to_json().unwrap();
        v["repeats"][1]["server_thread"][0]
            .as_object_mut()
            .unwrap()
            .remove("span_ns");
        let e = SearchReport::from_json(&v).unwrap_err();
        assert!(
            e.starts_with("repeat 2: server_thread:") && e.contains("span_ns"),
            "{e}"
        );
        let mut v = report().to_json().unwrap();
        v["repeats"][0]["summary"]["mismatched"] = json!("none");
        let e = SearchReport::from_json(&v).unwrap_err();
        assert!(
            e.contains("repeat 1: summary:") && e.contains("mismatched"),
            "{e}"
        );
        let mut v = report().to_json().unwrap();
        v.as_object_mut().unwrap().remove("tables");
        assert_eq!(SearchReport::from_json(&v).unwrap_err(), "no \"tables\"");
    }

    #[test]
    fn the_median_repeat_is_by_the_highest_load_kept_up() {
        let r = report();
        // 0 (none kept up), 200, 300: the median is the one at 200.
        let m = r.median_repeat().unwrap();
        assert_eq!(m.summary.best.as_ref().unwrap().median_rps, 200.0);
        assert!(SearchReport {
            repeats: Vec::new(),
            ..report()
        }
        .median_repeat()
        .is_none());
    }

    #[test]
    fn the_thread_share_is_the_least_on_cpu_and_the_most_waiting() {
        let r = repeat(Some(1.0), Some(990));
        assert_eq!(
            r.thread_share_at(1000.0).as_deref(),
            Some("on its CPU 89% of the trial, waiting for it 5%")
        );
        assert_eq!(r.thread_share_at(2000.0), None);
        assert_eq!(repeat(Some(1.0), None).thread_share_at(1000.0), None);
        let empty = ThreadReading {
            offered_rps: 1.0,
            trial: 0,
            span_ns: 0,
            on_cpu_ns: Some(0),
            waited_ns: Some(0),
        };
        assert_eq!(empty.shares(), None);
    }
}

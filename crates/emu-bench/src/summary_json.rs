//! A mode's summary read back from the JSON [`EmuSummary::to_json`] writes: for a bench whose
//! searches run in other processes (a C program's emulated device, `cf_dp_emu_new`, writes
//! each search's summary into its report), so it can print the same compact table and bar
//! chart ([`crate::compact_table`], [`crate::kept_up_chart`]) as a bench whose searches run in
//! its own process.

use percore::{Part, TimeSplit};
use serde_json::Value;

use crate::run::Bottleneck;
use crate::search::{Bound, EmuSummary, LoadSummary};

fn field<'v>(v: &'v Value, key: &str) -> Result<&'v Value, String> {
    v.get(key).ok_or_else(|| format!("no {key:?}"))
}

fn f64_of(v: &Value, key: &str) -> Result<f64, String> {
    field(v, key)?
        .as_f64()
        .ok_or_else(|| format!("{key:?} is not a number"))
}

fn u64_of(v: &Value, key: &str) -> Result<u64, String> {
    field(v, key)?
        .as_u64()
        .ok_or_else(|| format!("{key:?} is not an unsigned integer"))
}

fn usize_of(v: &Value, key: &str) -> Result<usize, String> {
    u64_of(v, key).map(|n| n as usize)
}

/// A number, or `None` for JSON null.
fn opt_f64(v: &Value, key: &str) -> Result<Option<f64>, String> {
    match field(v, key)? {
        Value::Null => Ok(None),
        x => x
            .as_f64()
            .map(Some)
            .ok_or_else(|| format!("{key:?} is not a number or null")),
    }
}

fn str_of<'v>(v: &'v Value, key: &str) -> Result<&'v str, String> {
    field(v, key)?
        .as_str()
        .ok_or_else(|| format!("{key:?} is not a string"))
}

/// The split [`crate::split_json`] wrote: each part's nanoseconds (the handler's own and its
/// sends' added back together, as they were timed) and the counts.
fn split_of(v: &Value) -> Result<TimeSplit, String> {
    let parts = field(v, "parts")?;
    let ns = |p: Part| -> Result<f64, String> {
        f64_of(field(parts, p.name())?, "ns").map_err(|e| format!("{}: {e}", p.name()))
    };
    let whole = |x: f64| x.round().max(0.0) as u64;
    Ok(TimeSplit {
        receive_ns: whole(ns(Part::Receive)?),
        handler_ns: whole(ns(Part::Handler)? + ns(Part::Send)?),
        flush_reap_ns: whole(ns(Part::FlushReap)?),
        idle_ns: whole(ns(Part::Idle)?),
        bursts: u64_of(v, "bursts")?,
        requests: u64_of(v, "requests")?,
        sampled_ns: u64_of(v, "sampled_ns")?,
        sampled_send_ns: u64_of(v, "sampled_send_ns")?,
    })
}

fn bottleneck_of(s: &str) -> Result<Bottleneck, String> {
    [Bottleneck::None, Bottleneck::Server, Bottleneck::Device]
        .into_iter()
        .find(|b| b.to_string() == s)
        .ok_or_else(|| format!("unknown bottleneck {s:?}"))
}

fn bound_of(s: &str) -> Result<Bound, String> {
    [
        Bound::Server,
        Bound::Device,
        Bound::Grid,
        Bound::NothingKept,
    ]
    .into_iter()
    .find(|b| b.name() == s)
    .ok_or_else(|| format!("unknown bound {s:?}"))
}

impl LoadSummary {
    fn from_json(v: &Value) -> Result<LoadSummary, String> {
        let frames = field(v, "frames")?;
        Ok(LoadSummary {
            offered_rps: f64_of(v, "offered_rps")?,
            median_rps: f64_of(v, "median_rps")?,
            min_rps: f64_of(v, "min_rps")?,
            max_rps: f64_of(v, "max_rps")?,
            trials: usize_of(v, "trials")?,
            p99_us: opt_f64(v, "p99_us")?,
            device_busy: f64_of(v, "device_busy")?,
            work_p50_ns: opt_f64(v, "work_p50_ns")?,
            split: match field(v, "server_time")? {
                Value::Null => None,
                s => Some(split_of(s).map_err(|e| format!("server_time: {e}"))?),
            },
            frames: (f64_of(frames, "request")?, opt_f64(frames, "reply")?),
            bottleneck: bottleneck_of(str_of(v, "bottleneck")?)?,
            line_rate_rps: opt_f64(v, "line_rate_100gbe_rps")?,
            disturbed: usize_of(v, "disturbed_trials")?,
            slowed: usize_of(v, "slowed_trials")?,
            slowed_reruns: usize_of(v, "slowed_reruns")?,
            checked: u64_of(v, "checked_replies")?,
            answered: u64_of(v, "answered_replies")?,
            incomplete: usize_of(v, "incomplete_coverage_trials")?,
        })
    }
}

impl EmuSummary {
    /// The summary `v` holds, as [`to_json`](Self::to_json) wrote it (an error naming the
    /// first field missing or of the wrong type).
    pub fn from_json(v: &Value) -> Result<EmuSummary, String> {
        let load = |key: &str| -> Result<Option<LoadSummary>, String> {
            match field(v, key)? {
                Value::Null => Ok(None),
                l => LoadSummary::from_json(l)
                    .map(Some)
                    .map_err(|e| format!("{key}: {e}")),
            }
        };
        Ok(EmuSummary {
            mode: str_of(v, "mode")?.to_owned(),
            cores: usize_of(v, "cores")?,
            best: load("best")?,
            first_miss: load("first_sustained_miss")?,
            bound: bound_of(str_of(v, "bounded_by")?)?,
            loads: usize_of(v, "loads")?,
            trials: usize_of(v, "trials")?,
            mismatched: u64_of(v, "mismatched")?,
            malformed: u64_of(v, "malformed")?,
            lost: u64_of(v, "lost")?,
            disturbed: usize_of(v, "disturbed_trials")?,
            slowed: usize_of(v, "slowed_trials")?,
            slowed_reruns: usize_of(v, "slowed_reruns")?,
            slowed_retries: usize_of(v, "slowed_retries")?,
            faster_than_reference: usize_of(v, "faster_than_reference_trials")?,
            desc_ns: u64_of(v, "desc_ns")?,
            check_every: u64_of(v, "check_every")?,
            incomplete: usize_of(v, "incomplete_coverage_trials")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(offered: f64, split: Option<TimeSplit>, reply: Option<f64>) -> LoadSummary {
        LoadSummary {
            offered_rps: offered,
            median_rps: offered * 0.99,
            min_rps: offered * 0.97,
            max_rps: offered,
            trials: 3,
            p99_us: Some(41.5),
            device_busy: 0.42,
            work_p50_ns: None,
            split,
            frames: (118.0, reply),
            bottleneck: Bottleneck::Server,
            line_rate_rps: Some(2.4e6),
            disturbed: 1,
            slowed: 0,
            slowed_reruns: 2,
            checked: 1234,
            answered: 9876,
            incomplete: 0,
        }
    }

    #[test]
    fn a_summary_reads_back_as_it_was_written() {
        let split = TimeSplit {
            receive_ns: 1_000,
            handler_ns: 7_777_777,
            flush_reap_ns: 3_000,
            idle_ns: 123_456_789,
            bursts: 40,
            requests: 333,
            sampled_ns: 70_001,
            sampled_send_ns: 9_999,
        };
        let s = EmuSummary {
            mode: "redis cornflakes".to_owned(),
            cores: 1,
            best: Some(load(200_000.0, Some(split), Some(4_200.0))),
            first_miss: Some(load(400_000.0, None, None)),
            bound: Bound::Server,
            loads: 5,
            trials: 15,
            mismatched: 0,
            malformed: 0,
            lost: 7,
            disturbed: 2,
            slowed: 1,
            slowed_reruns: 2,
            slowed_retries: 2,
            faster_than_reference: 0,
            desc_ns: 0,
            check_every: 8,
            incomplete: 0,
        };
        assert_eq!(EmuSummary::from_json(&s.to_json()), Ok(s.clone()));
        let none = EmuSummary {
            best: None,
            first_miss: None,
            bound: Bound::NothingKept,
            ..s
        };
        assert_eq!(EmuSummary::from_json(&none.to_json()), Ok(none));
    }

    #[test]
    fn a_field_missing_or_of_the_wrong_type_is_named() {
        let s = EmuSummary {
            mode: "m".to_owned(),
            cores: 1,
            best: Some(load(1000.0, None, None)),
            first_miss: None,
            bound: Bound::Grid,
            loads: 1,
            trials: 1,
            mismatched: 0,
            malformed: 0,
            lost: 0,
            disturbed: 0,
            slowed: 0,
            slowed_reruns: 0,
            slowed_retries: 0,
            faster_than_reference: 0,
            desc_ns: 0,
            check_every: 1,
            incomplete: 0,
        };
        let mut v = s.to_json();
        v["best"]["frames"] = Value::Null;
        assert!(EmuSummary::from_json(&v).unwrap_err().starts_with("best: "));
        let mut v = s.to_json();
        v["bounded_by"] = "the moon".into();
        assert_eq!(
            EmuSummary::from_json(&v).unwrap_err(),
            "unknown bound \"the moon\""
        );
        let mut v = s.to_json();
        v.as_object_mut().unwrap().remove("lost");
        assert_eq!(EmuSummary::from_json(&v).unwrap_err(), "no \"lost\"");
    }
}

//! Sweeps over offered loads and the "highest load kept up with" summary.

use crate::canary::{Canary, Speed};
use crate::record::{self, Record};
use crate::run::RunReport;
use std::fmt;

/// Fraction of the offered load a point must achieve to count as kept up.
pub const DEFAULT_KEEP_UP: f64 = 0.95;

/// One mode's side of an interleaved sweep, where each offered load runs for every mode in
/// turn (so a burst of background load hits all modes alike): its points so far and how many
/// consecutive loads it missed. The echo and KV benches over kernel sockets, TCP and AF_XDP
/// keep one per mode.
#[derive(Debug, Default)]
pub struct ModePoints {
    /// Consecutive points below [`DEFAULT_KEEP_UP`] of the offered load.
    pub misses: usize,
    /// Each point's record with the speed canary read before it (`None` when it could not
    /// run), to be re-judged together once the run is over
    /// ([`crate::canary::rebase_records`]).
    pub points: Vec<(Record, Option<Speed>)>,
}

impl ModePoints {
    /// Runs load point `li` of `n` (offered `load` req/s) of mode `mode` on shape or workload
    /// `shape` through `run`, unless `stop_after_misses` consecutive misses ended this mode's
    /// sweep (0: never): reads the speed canary on the CPUs the point's threads float over,
    /// runs the point, prints its progress line (and that the mode saturated, when this miss
    /// ends its sweep) and keeps its record.
    pub fn run_point(
        &mut self,
        stop_after_misses: usize,
        (mode, shape): (&str, &str),
        (li, n, load): (usize, usize, f64),
        run: impl FnOnce() -> Result<RunReport, String>,
    ) -> Result<(), String> {
        if stop_after_misses > 0 && self.misses >= stop_after_misses {
            return Ok(());
        }
        let speed = Canary::process().check_allowed();
        let report = run()?;
        let mut rec = Record::from_report(mode, shape, &report);
        if let Some(speed) = &speed {
            rec.set_canary(speed);
        }
        eprintln!(
            "[bench] load {}/{n} {load:>7.0} req/s  {mode:<20} achieved {:>7.0}  p50 {:>8}  p99 {:>8}  ({}){}",
            li + 1,
            rec.achieved_rps,
            record::fmt_us(rec.p50_us),
            record::fmt_us(rec.p99_us),
            report.counters,
            speed
                .as_ref()
                .map_or(String::new(), |s| format!("  {}", s.progress_note()))
        );
        self.misses = if rec.keeps_up(DEFAULT_KEEP_UP) {
            0
        } else {
            self.misses + 1
        };
        if stop_after_misses > 0 && self.misses == stop_after_misses {
            eprintln!("[bench] {mode}: saturated, no higher loads");
        }
        self.points.push((rec, speed));
        Ok(())
    }
}

/// One sweep: a mode and shape measured at increasing offered loads.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepConfig {
    /// Mode label written to every record.
    pub mode: String,
    /// Shape label written to every record.
    pub shape: String,
    /// Offered loads to run, requests per second, in the order given.
    pub loads_rps: Vec<f64>,
    /// A point keeps up when `achieved >= keep_up * offered`.
    pub keep_up: f64,
    /// Stop after this many consecutive points that did not keep up
    /// (0 = run every point). Saves time once the server is saturated.
    pub stop_after_misses: usize,
    /// Print one line per point on stderr.
    pub progress: bool,
}

/// Evenly spaced loads from `start` to `end` inclusive (`steps` >= 2), or
/// just `[start]` when `steps` < 2.
pub fn linear_loads(start: f64, end: f64, steps: usize) -> Vec<f64> {
    if steps < 2 {
        return vec![start];
    }
    let step = (end - start) / (steps - 1) as f64;
    (0..steps).map(|i| start + step * i as f64).collect()
}

/// Runs `run_point(offered_rps)` for each load and turns the reports into
/// records. The first error ends the sweep and is returned.
pub fn sweep<E, F>(cfg: &SweepConfig, mut run_point: F) -> Result<Vec<Record>, E>
where
    F: FnMut(f64) -> Result<RunReport, E>,
{
    let mut records = Vec::with_capacity(cfg.loads_rps.len());
    let mut misses = 0;
    for (i, &load) in cfg.loads_rps.iter().enumerate() {
        let report = run_point(load)?;
        let rec = Record::from_report(&cfg.mode, &cfg.shape, &report);
        if cfg.progress {
            eprintln!(
                "[sweep] {} {} point {}/{}: offered={:.0} achieved={:.0} p99={} errors={} ({})",
                cfg.mode,
                cfg.shape,
                i + 1,
                cfg.loads_rps.len(),
                rec.offered_rps,
                rec.achieved_rps,
                fmt_us(rec.p99_us),
                rec.errors,
                report.counters,
            );
        }
        misses = if rec.keeps_up(cfg.keep_up) {
            0
        } else {
            misses + 1
        };
        records.push(rec);
        if cfg.stop_after_misses > 0 && misses >= cfg.stop_after_misses {
            if cfg.progress {
                eprintln!("[sweep] {} {}: saturated, stopping", cfg.mode, cfg.shape);
            }
            break;
        }
    }
    Ok(records)
}

fn fmt_us(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.1}us"))
}

/// Highest achieved load of one (mode, shape) among points that kept up.
#[derive(Debug, Clone, PartialEq)]
pub struct ModeSummary {
    /// Mode label.
    pub mode: String,
    /// Shape label.
    pub shape: String,
    /// The best point that kept up, if any point did.
    pub best: Option<Record>,
    /// `(offered_rps, achieved_rps, p99_us)` of every point, in sweep order.
    pub points: Vec<(f64, f64, Option<f64>)>,
}

impl fmt::Display for ModeSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.best {
            Some(b) => write!(
                f,
                "{} {}: max {:.0} req/s within keep-up (offered {:.0}, p99 {})",
                self.mode,
                self.shape,
                b.achieved_rps,
                b.offered_rps,
                fmt_us(b.p99_us)
            )?,
            None => write!(f, "{} {}: no point kept up", self.mode, self.shape)?,
        }
        for (offered, achieved, p99) in &self.points {
            write!(
                f,
                "\n  offered={offered:.0} achieved={achieved:.0} p99={}",
                fmt_us(*p99)
            )?;
        }
        Ok(())
    }
}

/// The point with the highest achieved load among those with
/// `achieved >= keep_up * offered`.
pub fn max_kept_up(records: &[Record], keep_up: f64) -> Option<&Record> {
    records
        .iter()
        .filter(|r| r.keeps_up(keep_up))
        .max_by(|a, b| a.achieved_rps.total_cmp(&b.achieved_rps))
}

/// [`max_kept_up`] among the points whose p99 latency is at most `p99_us`: the throughput at a
/// tail-latency bound, the reading of the paper's latency-throughput figures ("at a p99 of
/// about 53 µs, 15.4 % higher throughput"). Points without a p99 do not count. The answer is
/// only as fine as the loads that were run.
pub fn max_kept_up_within_p99(records: &[Record], keep_up: f64, p99_us: f64) -> Option<&Record> {
    records
        .iter()
        .filter(|r| r.keeps_up(keep_up) && r.p99_us.is_some_and(|p| p <= p99_us))
        .max_by(|a, b| a.achieved_rps.total_cmp(&b.achieved_rps))
}

/// Groups records by (mode, shape) in first-seen order and summarizes each.
pub fn summarize(records: &[Record], keep_up: f64) -> Vec<ModeSummary> {
    let mut keys: Vec<(&str, &str)> = Vec::new();
    for r in records {
        let k = (r.mode.as_str(), r.shape.as_str());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    keys.into_iter()
        .map(|(mode, shape)| {
            let group: Vec<Record> = records
                .iter()
                .filter(|r| r.mode == mode && r.shape == shape)
                .cloned()
                .collect();
            ModeSummary {
                mode: mode.to_owned(),
                shape: shape.to_owned(),
                best: max_kept_up(&group, keep_up).cloned(),
                points: group
                    .iter()
                    .map(|r| (r.offered_rps, r.achieved_rps, r.p99_us))
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Counters;
    use latency::LatencyHistogram;
    use std::time::Duration;

    fn rec(mode: &str, offered: f64, achieved: f64) -> Record {
        Record {
            mode: mode.into(),
            shape: "s".into(),
            offered_rps: offered,
            achieved_rps: achieved,
            p50_us: Some(1.0),
            p99_us: Some(offered / 1000.0),
            p999_us: Some(2.0),
            mean_us: Some(1.0),
            threads: 1,
            measured_s: 1.0,
            ..Record::default()
        }
    }

    #[test]
    fn max_kept_up_picks_highest_achieved_within_95_percent() {
        let recs = vec![
            rec("a", 100.0, 100.0),
            rec("a", 200.0, 195.0),
            rec("a", 300.0, 284.0), // 94.7 %: does not count
            rec("a", 400.0, 250.0),
        ];
        assert_eq!(max_kept_up(&recs, 0.95).unwrap().offered_rps, 200.0);
        // Exactly 95 % counts.
        let edge = vec![rec("a", 1000.0, 950.0)];
        assert_eq!(max_kept_up(&edge, 0.95).unwrap().achieved_rps, 950.0);
        assert!(max_kept_up(&[rec("a", 100.0, 10.0)], 0.95).is_none());
        assert!(max_kept_up(&[], 0.95).is_none());
    }

    #[test]
    fn within_a_p99_bound_only_points_at_or_below_it_count() {
        // p99 is offered / 1000 µs in `rec`.
        let recs = vec![
            rec("a", 100.0, 100.0),
            rec("a", 200.0, 195.0),
            rec("a", 300.0, 299.0),
            rec("a", 400.0, 250.0), // missed: never counts
        ];
        let at = |bound| max_kept_up_within_p99(&recs, 0.95, bound).map(|r| r.offered_rps);
        assert_eq!(at(1000.0), Some(300.0));
        assert_eq!(at(0.3), Some(300.0)); // exactly at the bound counts
        assert_eq!(at(0.25), Some(200.0));
        assert_eq!(at(0.05), None);
        let mut no_p99 = rec("a", 500.0, 500.0);
        no_p99.p99_us = None;
        assert_eq!(max_kept_up_within_p99(&[no_p99], 0.95, 1e9), None);
    }

    #[test]
    fn summarize_groups_per_mode() {
        let recs = vec![
            rec("a", 100.0, 99.0),
            rec("b", 100.0, 50.0),
            rec("a", 200.0, 199.0),
            rec("b", 200.0, 60.0),
        ];
        let s = summarize(&recs, 0.95);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].mode, "a");
        assert_eq!(s[0].best.as_ref().unwrap().offered_rps, 200.0);
        assert_eq!(s[0].points.len(), 2);
        assert_eq!(s[1].mode, "b");
        assert!(s[1].best.is_none());
        assert!(s[1].to_string().contains("no point kept up"));
        assert!(s[0].to_string().contains("max 199 req/s"));
    }

    fn fake_report(offered: f64, achieved: f64) -> RunReport {
        let mut latency = LatencyHistogram::new();
        latency.record(Duration::from_micros(10));
        RunReport {
            offered_rps: offered,
            achieved_rps: achieved,
            measured_window: Duration::from_secs(1),
            measured_requests: offered as u64,
            counters: Counters::default(),
            latency,
            threads: 1,
        }
    }

    #[test]
    fn sweep_stops_after_consecutive_misses_and_propagates_errors() {
        let cfg = SweepConfig {
            mode: "m".into(),
            shape: "s".into(),
            loads_rps: linear_loads(100.0, 600.0, 6),
            keep_up: 0.95,
            stop_after_misses: 2,
            progress: false,
        };
        // Server saturates at 250 req/s.
        let mut asked = Vec::new();
        let recs = sweep::<(), _>(&cfg, |load| {
            asked.push(load);
            Ok(fake_report(load, load.min(250.0)))
        })
        .unwrap();
        assert_eq!(asked, vec![100.0, 200.0, 300.0, 400.0]);
        assert_eq!(recs.len(), 4);
        assert_eq!(max_kept_up(&recs, 0.95).unwrap().offered_rps, 200.0);

        let err = sweep(&cfg, |load| {
            if load > 150.0 {
                Err("boom")
            } else {
                Ok(fake_report(load, load))
            }
        });
        assert_eq!(err.unwrap_err(), "boom");
    }

    #[test]
    fn linear_loads_are_inclusive() {
        assert_eq!(
            linear_loads(10.0, 50.0, 5),
            vec![10.0, 20.0, 30.0, 40.0, 50.0]
        );
        assert_eq!(linear_loads(10.0, 50.0, 1), vec![10.0]);
    }
}

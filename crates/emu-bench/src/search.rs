//! The saturation search on the emulated NIC ([`loadgen::search`]), shared by the echo and KV
//! benches: what a trial keeps ([`EmuTrial`]), what a mode's search comes to ([`EmuSummary`]:
//! the highest load kept up by the median of its trials, its spread, p99, device utilisation,
//! the 100 GbE line rate of its frames, server handling time, and what bounded it), and the table and JSON of a run.

use std::fmt::Write as _;

use loadgen::canary::SLOWED_RATIO;
use loadgen::search::{Point, Search, Trial};
use loadgen::Record;
use percore::TimeSplit;
use serde_json::{json, Value};

use crate::explain::{device_note, split_json};
use crate::run::{Bottleneck, EmuReport};
use crate::slowed::SlowedRun;

/// One trial of one mode at one load: the device's report, the record of it, and what the
/// server (of type `S`) reported.
#[derive(Clone, Debug)]
pub struct EmuTrial<S> {
    /// Where the search ran it.
    pub point: Point,
    /// What the device and clients measured.
    pub report: EmuReport,
    /// The same as a load-generator record (mode, shape, latency, counters).
    pub record: Record,
    /// The server's median handling time per request, nanoseconds.
    pub work_p50_ns: Option<f64>,
    /// Where the server cores' time went, summed over them ([`TimeSplit`]; `None` when the
    /// server did not time it).
    pub split: Option<TimeSplit>,
    /// The server's own counters.
    pub server: S,
    /// Runs of this trial thrown away before it because their speed canary read slowed
    /// ([`crate::search_rerunning_slowed`]), in the order run; empty when none was (or the
    /// search did not rerun).
    pub slowed_reruns: Vec<SlowedRun>,
    /// The reruns its search allowed a slowed trial (`--slowed-retries`; 0 when the search
    /// did not rerun).
    pub slowed_retries: usize,
}

impl<S> EmuTrial<S> {
    /// What is kept of this trial when it is thrown away to be rerun ([`SlowedRun`];
    /// `None` without a canary: such a trial is never rerun).
    pub(crate) fn slowed_run(&self) -> Option<SlowedRun> {
        Some(SlowedRun {
            achieved_rps: self.report.run.achieved_rps,
            work_p50_ns: self.work_p50_ns,
            device_busy: self.report.device_busy,
            canary: self.report.canary.clone()?,
            mismatched: self.report.run.counters.mismatched,
            malformed: self.report.run.counters.malformed,
            failures: self.report.failures.clone(),
        })
    }

    /// A trial of `mode` and `shape` at `point`.
    pub fn new(
        point: Point,
        mode: &str,
        shape: &str,
        report: EmuReport,
        work_p50_ns: Option<f64>,
        server: S,
    ) -> EmuTrial<S> {
        let mut record = Record::from_report(mode, shape, &report.run);
        if let Some(c) = &report.canary {
            record.set_canary(c);
        }
        EmuTrial {
            point,
            report,
            record,
            work_p50_ns,
            split: None,
            server,
            slowed_reruns: Vec::new(),
            slowed_retries: 0,
        }
    }

    /// The trial with the server's time split ([`EmuTrial::split`]).
    pub fn with_split(mut self, split: TimeSplit) -> Self {
        self.split = Some(split);
        self
    }

    /// One progress line (for stderr); with several server cores, each core's share.
    pub fn progress(&self) -> String {
        let r = &self.report;
        let per_core = if r.per_core.len() > 1 {
            let v: Vec<String> = r
                .per_core
                .iter()
                .map(|c| format!("{:.0}", c.achieved_rps))
                .collect();
            format!("  per core {} req/s", v.join(" / "))
        } else {
            String::new()
        };
        format!(
            "{:<20} {:>6} offered {:>9.0} trial {}  achieved {:>9.0}  p99 {:>9}  device busy {:>3.0}%  server work p50 {:>6}  {}  ({})",
            self.record.mode,
            self.point.phase,
            self.point.offered_rps,
            self.point.trial + 1,
            r.run.achieved_rps,
            r.run
                .latency
                .p99_us()
                .map_or("–".to_owned(), |v| format!("{v:.1}µs")),
            r.device_busy * 100.0,
            self.work_p50_ns
                .map_or("–".to_owned(), |v| format!("{v:.0}ns")),
            r.bottleneck(),
            r.run.counters
        ) + &per_core
            + &self
                .split
                .map_or(String::new(), |t| format!("  server time: {}", t.describe()))
            + &format!("  {}", r.coverage_note())
            + &r.interference
                .as_ref()
                .filter(|i| i.disturbed())
                .map_or(String::new(), |i| format!("  {}", i.describe()))
            + &r.canary
                .as_ref()
                .map_or(String::new(), |c| format!("  {}", c.progress_note()))
    }

    /// Whether other processes disturbed this trial ([`loadgen::interference`]).
    pub fn disturbed(&self) -> bool {
        self.report
            .interference
            .as_ref()
            .is_some_and(|i| i.disturbed())
    }

    /// Whether the machine was slower in this trial than in its fast state: its speed canary
    /// took more than [`loadgen::canary::SLOWED_RATIO`] times its reference (the run's first
    /// reading as the device run judged it; the run's readings so far in
    /// [`crate::search_rerunning_slowed`]; after [`rebase_canaries`], the whole run's)
    /// ([`loadgen::canary`]). Treated as a disturbed trial is.
    pub fn slowed(&self) -> bool {
        self.report.canary.as_ref().is_some_and(|c| c.slowed())
    }

    /// The trial as JSON (every trial goes to the run's points file).
    pub fn to_json(&self) -> Value {
        let r = &self.report;
        let mut v = json!({
            "mode": self.record.mode,
            "shape": self.record.shape,
            "phase": self.point.phase.to_string(),
            "offered_rps": self.point.offered_rps,
            "trial": self.point.trial,
            "achieved_rps": r.run.achieved_rps,
            "p50_us": self.record.p50_us,
            "p99_us": self.record.p99_us,
            "device_busy": r.device_busy,
            "bottleneck": r.bottleneck().to_string(),
            "work_p50_ns": self.work_p50_ns,
            "sampled": r.sampled,
            "hash_matched": r.hash_matched,
            "unchecked": r.unchecked,
            "check_every": r.check_every,
            "distinct_verified": r.distinct_verified,
            "distinct_answered": r.distinct_answered,
            "distinct": r.distinct,
            "cores_verified": r.cores_verified,
            "coverage_complete": r.coverage_complete(),
            "not_delivered": r.not_delivered,
            "max_inject_lag_ns": r.max_inject_lag_ns,
            "cores": r.cores,
            "per_core": r.per_core.iter().map(|c| json!({
                "achieved_rps": c.achieved_rps,
                "sent": c.counters.sent,
                "verified": c.counters.verified,
                "mismatched": c.counters.mismatched,
                "lost": c.counters.lost,
                "frames_received": c.device.frames_received,
                "frames_sent": c.device.frames_sent,
                "rx_no_wqe": c.device.rx_no_wqe,
            })).collect::<Vec<_>>(),
            "verified": self.record.verified,
            "mismatched": self.record.mismatched,
            "lost": self.record.lost,
            "failures": r.failures,
            "disturbed": self.disturbed(),
            "slowed": self.slowed(),
            "canary": r.canary.as_ref().map(loadgen::canary::Speed::to_json),
            "interference": r.interference.as_ref().map(|i| json!({
                "window_s": i.window.as_secs_f64(),
                "cpus": i.cpus,
                "busy_s": i.busy_s,
                "others_s": i.others_s,
                "others_share": i.others_share(),
                "involuntary_switches": i.involuntary_switches,
            })),
        });
        v["server_time"] = self.split.as_ref().map_or(Value::Null, split_json);
        // Beside the canary: the runs thrown away as slowed before this one (one json!
        // holding every field exceeds the macro's recursion limit).
        v["slowed_reruns"] = json!(self.slowed_reruns.len());
        v["slowed_retries"] = json!(self.slowed_retries);
        v["thrown_slowed_runs"] = self
            .slowed_reruns
            .iter()
            .map(SlowedRun::to_json)
            .collect::<Vec<_>>()
            .into();
        v
    }
}

impl<S> Trial for EmuTrial<S> {
    fn achieved_rps(&self) -> f64 {
        self.report.run.achieved_rps
    }
}

/// One load of a mode's search, summarized by its median trial.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadSummary {
    /// Offered load.
    pub offered_rps: f64,
    /// The median trial's achieved load.
    pub median_rps: f64,
    /// Lowest and highest achieved load of the trials.
    pub min_rps: f64,
    /// See `min_rps`.
    pub max_rps: f64,
    /// Trials run at this load.
    pub trials: usize,
    /// The median trial's p99 latency, microseconds.
    pub p99_us: Option<f64>,
    /// The median trial's device utilisation (0–1).
    pub device_busy: f64,
    /// The median trial's server handling time, nanoseconds.
    pub work_p50_ns: Option<f64>,
    /// Where the median trial's server time went ([`EmuTrial::split`]).
    pub split: Option<TimeSplit>,
    /// The median trial's mean request and reply frames (bytes, without FCS), for what the
    /// device moved per request.
    pub frames: (f64, Option<f64>),
    /// What the median trial says limited it.
    pub bottleneck: Bottleneck,
    /// The most requests per second a 100 Gbit/s Ethernet link could carry with the median
    /// trial's frames ([`EmuReport::line_rate_rps`]): above it a real port would be the limit.
    pub line_rate_rps: Option<f64>,
    /// Trials at this load that other processes disturbed ([`EmuTrial::disturbed`]).
    pub disturbed: usize,
    /// Trials at this load that ran on a slowed machine ([`EmuTrial::slowed`]).
    pub slowed: usize,
    /// Runs thrown away at this load because their speed canary read slowed, each replaced
    /// by a rerun ([`EmuTrial::slowed_reruns`]).
    pub slowed_reruns: usize,
    /// Replies whose payload was checked, and replies answered, over the trials here.
    pub checked: u64,
    /// See `checked`.
    pub answered: u64,
    /// Trials here whose payload checks did not cover every distinct request answered and
    /// every core ([`EmuReport::coverage_complete`]).
    pub incomplete: usize,
}

impl LoadSummary {
    fn of<S>(v: &loadgen::search::Verdict<EmuTrial<S>>) -> LoadSummary {
        let m = v.median();
        let (min_rps, max_rps) = v.spread();
        LoadSummary {
            offered_rps: v.offered_rps,
            median_rps: m.report.run.achieved_rps,
            min_rps,
            max_rps,
            trials: v.trials.len(),
            p99_us: m.record.p99_us,
            device_busy: m.report.device_busy,
            work_p50_ns: m.work_p50_ns,
            split: m.split,
            frames: (m.report.mean_request_frame, m.report.mean_reply_frame),
            bottleneck: m.report.bottleneck(),
            line_rate_rps: m.report.line_rate_rps(crate::run::LINE_RATE_GBPS),
            disturbed: v.trials.iter().filter(|t| t.disturbed()).count(),
            slowed: v.trials.iter().filter(|t| t.slowed()).count(),
            slowed_reruns: v.trials.iter().map(|t| t.slowed_reruns.len()).sum(),
            checked: v.trials.iter().map(|t| t.report.checked()).sum(),
            answered: v
                .trials
                .iter()
                .map(|t| t.report.checked() + t.report.unchecked)
                .sum(),
            incomplete: v
                .trials
                .iter()
                .filter(|t| !t.report.coverage_complete())
                .count(),
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "offered_rps": self.offered_rps,
            "median_rps": self.median_rps,
            "min_rps": self.min_rps,
            "max_rps": self.max_rps,
            "trials": self.trials,
            "p99_us": self.p99_us,
            "device_busy": self.device_busy,
            "work_p50_ns": self.work_p50_ns,
            "server_time": self.split.as_ref().map_or(Value::Null, split_json),
            "bottleneck": self.bottleneck.to_string(),
            "line_rate_100gbe_rps": self.line_rate_rps,
            "frames": { "request": self.frames.0, "reply": self.frames.1 },
            "disturbed_trials": self.disturbed,
            "slowed_trials": self.slowed,
            "slowed_reruns": self.slowed_reruns,
            "checked_replies": self.checked,
            "answered_replies": self.answered,
            "incomplete_coverage_trials": self.incomplete,
        })
    }
}

/// What limited a mode's search.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// The server fell behind (the first sustained miss, with the device thread below
    /// [`crate::DEVICE_SATURATED`]).
    Server,
    /// The device thread was saturated at the best point or the first sustained miss: the
    /// result understates the server.
    Device,
    /// The highest load of the grid was kept up: raise the loads.
    Grid,
    /// No load kept up.
    NothingKept,
}

impl Bound {
    /// Short name, as the table and JSON give it.
    pub fn name(self) -> &'static str {
        match self {
            Bound::Server => "server",
            Bound::Device => "device",
            Bound::Grid => "grid (raise --rates)",
            Bound::NothingKept => "nothing kept up",
        }
    }
}

/// A mode's search, summarized.
#[derive(Clone, Debug, PartialEq)]
pub struct EmuSummary {
    /// Mode (or serialization).
    pub mode: String,
    /// Server cores of its trials ([`crate::EmuRunConfig::cores`]).
    pub cores: usize,
    /// The load kept up (by its median trial) whose median achieved the most.
    pub best: Option<LoadSummary>,
    /// The lowest load above it whose median trial missed.
    pub first_miss: Option<LoadSummary>,
    /// What limited the search.
    pub bound: Bound,
    /// Loads decided and trials run.
    pub loads: usize,
    /// See `loads`.
    pub trials: usize,
    /// Replies that failed verification, over every trial and every run thrown away as
    /// slowed (must be 0).
    pub mismatched: u64,
    /// Replies whose headers or framing were wrong, over every trial and every run thrown
    /// away as slowed (must be 0).
    pub malformed: u64,
    /// Requests lost, over every trial.
    pub lost: u64,
    /// Trials other processes disturbed, over the whole search.
    pub disturbed: usize,
    /// Trials that ran on a slowed machine ([`EmuTrial::slowed`]), over the whole search.
    pub slowed: usize,
    /// Runs thrown away because their speed canary read slowed, each replaced by a rerun
    /// ([`EmuTrial::slowed_reruns`]), over the whole search (not counted in `trials`).
    pub slowed_reruns: usize,
    /// The reruns the search allowed a slowed trial (`--slowed-retries`; 0: none).
    pub slowed_retries: usize,
    /// Trials whose speed canary was faster than its reference by more than
    /// [`loadgen::canary::SLOWED_RATIO`]: the reference was taken slowed, so trials near
    /// ratio 1 ran slowed too.
    pub faster_than_reference: usize,
    /// The device's cost per gather entry of its trials, nanoseconds (`--desc-ns`).
    pub desc_ns: u64,
    /// The payload-check sample of its trials (`--check-every`, largest).
    pub check_every: u64,
    /// Trials, over the whole search, whose payload checks did not cover every distinct
    /// request answered and every core (must be 0).
    pub incomplete: usize,
}

impl EmuSummary {
    /// Summarizes the search of `mode`.
    pub fn of<S>(mode: &str, s: &Search<EmuTrial<S>>) -> EmuSummary {
        // As `loadgen::max_kept_up` over the median records: the highest median kept up.
        let best = s.best_achieved().map(LoadSummary::of);
        let first_miss = s.first_miss().map(LoadSummary::of);
        let device = |l: &Option<LoadSummary>| {
            l.as_ref()
                .is_some_and(|l| l.bottleneck == Bottleneck::Device)
        };
        let bound = if device(&best) || device(&first_miss) {
            Bound::Device
        } else if best.is_none() {
            Bound::NothingKept
        } else if s.above_grid {
            Bound::Grid
        } else {
            Bound::Server
        };
        let all = s.loads.iter().flat_map(|v| v.trials.iter());
        let (mismatched, malformed, lost) = all.fold((0, 0, 0), |(m, f, l), t| {
            let c = &t.report.run.counters;
            // A wrong reply in a run thrown away as slowed is still a wrong reply.
            let (tm, tf) = t
                .slowed_reruns
                .iter()
                .fold((0, 0), |(m, f), r| (m + r.mismatched, f + r.malformed));
            (m + c.mismatched + tm, f + c.malformed + tf, l + c.lost)
        });
        let cores = s
            .loads
            .iter()
            .flat_map(|v| v.trials.iter())
            .map(|t| t.report.cores)
            .max()
            .unwrap_or(1);
        EmuSummary {
            mode: mode.to_owned(),
            cores,
            best,
            first_miss,
            bound,
            loads: s.loads.len(),
            trials: s.trials_run(),
            mismatched,
            malformed,
            lost,
            desc_ns: s
                .loads
                .iter()
                .flat_map(|v| v.trials.iter())
                .map(|t| t.report.desc_ns)
                .max()
                .unwrap_or(0),
            disturbed: s
                .loads
                .iter()
                .flat_map(|v| v.trials.iter())
                .filter(|t| t.disturbed())
                .count(),
            slowed: s
                .loads
                .iter()
                .flat_map(|v| v.trials.iter())
                .filter(|t| t.slowed())
                .count(),
            slowed_reruns: s
                .loads
                .iter()
                .flat_map(|v| v.trials.iter())
                .map(|t| t.slowed_reruns.len())
                .sum(),
            slowed_retries: s
                .loads
                .iter()
                .flat_map(|v| v.trials.iter())
                .map(|t| t.slowed_retries)
                .max()
                .unwrap_or(0),
            faster_than_reference: s
                .loads
                .iter()
                .flat_map(|v| v.trials.iter())
                .filter(|t| {
                    t.report
                        .canary
                        .as_ref()
                        .is_some_and(|c| c.reference_slowed())
                })
                .count(),
            check_every: s
                .loads
                .iter()
                .flat_map(|v| v.trials.iter())
                .map(|t| t.report.check_every)
                .max()
                .unwrap_or(1),
            incomplete: s
                .loads
                .iter()
                .flat_map(|v| v.trials.iter())
                .filter(|t| !t.report.coverage_complete())
                .count(),
        }
    }

    /// Whether the result rests on disturbed trials: some trial of its best load was.
    pub fn rests_on_disturbed(&self) -> bool {
        self.best.as_ref().is_some_and(|b| b.disturbed > 0)
    }

    /// Whether the result rests on slowed trials: some trial of its best load was
    /// ([`EmuTrial::slowed`]).
    pub fn rests_on_slowed(&self) -> bool {
        self.best.as_ref().is_some_and(|b| b.slowed > 0)
    }

    /// Replies of any trial that were wrong: mismatched or malformed.
    pub fn bad_replies(&self) -> u64 {
        self.mismatched + self.malformed
    }

    /// The bracket and what bounded it, in words: for a server-bound mode where its core's
    /// time went at the first sustained miss (or its best load), for a device-bound one what
    /// the device moved per request there.
    pub fn bound_note(&self) -> String {
        let miss = self.first_miss.as_ref().map(|m| {
            format!(
                "first sustained miss {:.0} req/s (median {:.0}, device busy {:.0}%, {})",
                m.offered_rps,
                m.median_rps,
                m.device_busy * 100.0,
                m.bottleneck
            )
        });
        let note = match (self.bound, miss) {
            (Bound::Grid, _) => "the grid: its highest load was kept up (raise --rates)".to_owned(),
            (b, Some(m)) => format!("{}: {m}", b.name()),
            (b, None) => b.name().to_owned(),
        };
        let there = self.first_miss.as_ref().or(self.best.as_ref());
        let why = match (self.bound, there) {
            (Bound::Server, Some(l)) => l
                .split
                .map(|t| format!("; server time there: {}", t.describe())),
            (Bound::Device, _) => {
                // The load where the device was saturated.
                let l = [self.first_miss.as_ref(), self.best.as_ref()]
                    .into_iter()
                    .flatten()
                    .find(|l| l.bottleneck == Bottleneck::Device);
                l.map(|l| {
                    format!(
                        "; the device thread was {:.0}% busy: {}",
                        l.device_busy * 100.0,
                        device_note(l.frames.0, l.frames.1, l.median_rps)
                    )
                })
            }
            _ => None,
        };
        let note = note + &why.unwrap_or_default();
        match &self.best {
            Some(b) if b.line_rate_rps.is_some_and(|l| b.median_rps > l) => format!(
                "{note}; above the 100 GbE line rate for its frames (a 100 Gbit/s port would be \
                 the limit)"
            ),
            _ => note,
        }
    }

    /// The server's busy nanoseconds per request at the best load (its median trial's time
    /// split): what the server core spent on each request, receive to reap, whatever bounded
    /// the mode.
    pub fn server_ns_per_request(&self) -> Option<f64> {
        self.best.as_ref()?.split?.busy_per_request_ns()
    }

    /// The summary as JSON.
    pub fn to_json(&self) -> Value {
        json!({
            "mode": self.mode,
            "cores": self.cores,
            "max_rps_within_95pct": self.best.as_ref().map(|b| b.median_rps),
            "best": self.best.as_ref().map(LoadSummary::to_json),
            "first_sustained_miss": self.first_miss.as_ref().map(LoadSummary::to_json),
            "bounded_by": self.bound.name(),
            "bound_note": self.bound_note(),
            "server_busy_ns_per_request": self.server_ns_per_request(),
            "loads": self.loads,
            "trials": self.trials,
            "mismatched": self.mismatched,
            "malformed": self.malformed,
            "lost": self.lost,
            "disturbed_trials": self.disturbed,
            "rests_on_disturbed_trials": self.rests_on_disturbed(),
            "slowed_trials": self.slowed,
            "rests_on_slowed_trials": self.rests_on_slowed(),
            "slowed_reruns": self.slowed_reruns,
            "slowed_retries": self.slowed_retries,
            "faster_than_reference_trials": self.faster_than_reference,
            "desc_ns": self.desc_ns,
            "check_every": self.check_every,
            "incomplete_coverage_trials": self.incomplete,
        })
    }
}

/// The paper's copy-only Cornflakes ÷ protobuf (§6.2): what the control row should show when
/// the baselines are as careful as Cornflakes' own copying path.
pub const PAPER_CONTROL: (f64, f64) = (0.93, 1.02);

/// The control beside the headline ratio: `copy` (Cornflakes copying every field, as a
/// library does) ÷ the best of `libraries`, and `headline` ÷ the same, with the paper's
/// [`PAPER_CONTROL`] for reference; `None` when a mode is missing or kept nothing up. A
/// control far above the paper's range says the baselines pay for something Cornflakes does
/// not — the harness, not zero-copy; a ratio resting on disturbed trials says so.
pub fn control_line(
    summaries: &[EmuSummary],
    headline: &str,
    copy: &str,
    libraries: &[&str],
) -> Option<String> {
    let find = |name: &str| summaries.iter().find(|m| m.mode == name);
    let rps = |m: &EmuSummary| m.best.as_ref().map(|b| b.median_rps);
    let best = libraries
        .iter()
        .filter_map(|l| find(l))
        .filter_map(|m| rps(m).map(|r| (m, r)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let (h, c) = (find(headline)?, find(copy)?);
    let (hr, cr) = (rps(h)?, rps(c)?);
    let flag = |m: &EmuSummary| {
        flag(
            m.rests_on_disturbed() || best.0.rests_on_disturbed(),
            m.rests_on_slowed() || best.0.rests_on_slowed(),
        )
    };
    let control = cr / best.1;
    let (lo, hi) = PAPER_CONTROL;
    let note = control_note(control, copy);
    Some(format!(
        "Headline: {headline} ÷ best library ({}) = {:.2}{}. Control: {copy} ÷ best library = \
         {control:.2}{} (the paper's copy-only ÷ protobuf: {lo:.2}–{hi:.2}){note}.",
        best.0.mode,
        hr / best.1,
        flag(h),
        flag(c),
    ))
}

/// What a control ratio (`copy` ÷ the best library) says against [`PAPER_CONTROL`]: empty
/// inside the range (with 0.03 of slack), else "; above the paper's range: …" or "; below the
/// paper's range: …" with what that points at.
pub fn control_note(control: f64, copy: &str) -> String {
    let (lo, hi) = PAPER_CONTROL;
    if control > hi + 0.03 {
        format!(
            "; above the paper's range: the baselines pay per request for something {copy} does \
             not (see docs/performance.md, \"The control\")"
        )
    } else if control < lo - 0.03 {
        format!(
            "; below the paper's range: the best library ran faster than {copy}, which copies \
             every field as it does (check the trials' spread and server work: a machine whose \
             speed changed during the run shows here too)"
        )
    } else {
        String::new()
    }
}

/// The mark of a ratio that rests on disturbed or slowed trials (empty when on neither).
fn flag(disturbed: bool, slowed: bool) -> &'static str {
    match (disturbed, slowed) {
        (false, false) => "",
        (true, false) => " (disturbed trials)",
        (false, true) => " (slowed trials)",
        (true, true) => " (disturbed and slowed trials)",
    }
}

/// `Ok` when every reply of every trial of every mode verified; otherwise an error naming
/// each mode with wrong replies. A bench returns it after writing its outputs, so it exits
/// non-zero when any trial — not only the median one — counted a mismatched or malformed
/// reply.
pub fn replies_verified(summaries: &[EmuSummary]) -> Result<(), String> {
    let bad: Vec<String> = summaries
        .iter()
        .filter(|m| m.bad_replies() > 0)
        .map(|m| {
            format!(
                "{}: {} mismatched and {} malformed replies over its {} trials",
                m.mode, m.mismatched, m.malformed, m.trials
            )
        })
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "replies failed verification (the trials' failures are printed above and in \
             emu-points.json): {}",
            bad.join("; ")
        ))
    }
}

/// One record per load of a search, the median trial's (in order of offered load): what a
/// run's JSON and plots take, so that no single lucky trial stands for a load. A load decided
/// twice (a grid miss confirmed in a later round) gives its later decision's.
pub fn median_records<S>(s: &Search<EmuTrial<S>>) -> Vec<Record> {
    let mut v: Vec<Record> = s.loads.iter().map(|v| v.median().record.clone()).collect();
    // Stable: the later decision of a load stays after the earlier, and dedup keeps the first
    // of a run, so reverse first.
    v.reverse();
    v.sort_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps));
    v.dedup_by(|a, b| a.offered_rps == b.offered_rps);
    v
}

/// Re-judges the speed canary of every trial of a run — all modes' searches, and the runs
/// thrown away as slowed ([`EmuTrial::slowed_reruns`]) — against references from the whole
/// run ([`loadgen::canary::rebase`]), and updates each trial's record to match. Benches call
/// it once every search is done, before the summaries, tables and JSON: a trial's progress
/// line could only judge against the readings before it, which misjudges a machine whose
/// state flips both ways (docs/performance.md, "How trials are judged").
pub fn rebase_canaries<S>(searches: &mut [Search<EmuTrial<S>>]) {
    let mut speeds: Vec<&mut loadgen::canary::Speed> = Vec::new();
    for t in searches
        .iter_mut()
        .flat_map(|s| s.loads.iter_mut())
        .flat_map(|v| v.trials.iter_mut())
    {
        speeds.extend(t.report.canary.as_mut());
        speeds.extend(t.slowed_reruns.iter_mut().map(|r| &mut r.canary));
    }
    loadgen::canary::rebase(&mut speeds);
    for t in searches
        .iter_mut()
        .flat_map(|s| s.loads.iter_mut())
        .flat_map(|v| v.trials.iter_mut())
    {
        if let Some(c) = &t.report.canary {
            t.record.set_canary(c);
        }
    }
}

/// Every trial of a search as JSON.
pub fn trials_json<S>(s: &Search<EmuTrial<S>>) -> Vec<Value> {
    s.loads
        .iter()
        .flat_map(|v| v.trials.iter().map(EmuTrial::to_json))
        .collect()
}

/// The "payload checked there" cell: the share of replies checked at the best load, over
/// its trials, and whether coverage was complete in every trial of the search.
fn checked_cell(m: &EmuSummary) -> String {
    let share = m
        .best
        .as_ref()
        .filter(|b| b.answered > 0)
        .map_or("–".to_owned(), |b| {
            format!(
                "{:.1}% ({} of {})",
                100.0 * b.checked as f64 / b.answered as f64,
                b.checked,
                b.answered
            )
        });
    if m.incomplete > 0 {
        format!("{share}; coverage incomplete in {} trial(s)", m.incomplete)
    } else {
        format!("{share}; every distinct request and core covered")
    }
}

fn k(v: f64) -> String {
    format!("{:.0}", v)
}

/// The comparison table of an emulated-NIC run (Markdown): per mode, the highest load whose
/// median trial kept up within 95 % of offered, the spread of its trials, its ratio to
/// `baseline` (e.g. `raw`), p99, device utilisation, the 100 Gbit/s line rate of its frames
/// and server handling time there, what bounded the mode, and the verification counters. `trials` is the search's K.
pub fn table(summaries: &[EmuSummary], baseline: Option<&str>, trials: usize) -> String {
    let base_summary = baseline.and_then(|b| summaries.iter().find(|s| s.mode == b));
    let base = base_summary
        .and_then(|s| s.best.as_ref())
        .map(|b| b.median_rps);
    let base_disturbed = base_summary.is_some_and(EmuSummary::rests_on_disturbed);
    let base_slowed = base_summary.is_some_and(EmuSummary::rests_on_slowed);
    let mut s = String::new();
    let cores = summaries.iter().map(|m| m.cores).max().unwrap_or(1);
    let who = if cores == 1 {
        "Server core's throughput with an emulated ConnectX on a second core".to_owned()
    } else {
        format!(
            "{cores} server cores' throughput (all cores together, requests spread over them) \
             with an emulated ConnectX on one more core"
        )
    };
    let desc = summaries.iter().map(|m| m.desc_ns).max().unwrap_or(0);
    let check_every = summaries.iter().map(|m| m.check_every).max().unwrap_or(1);
    let _ = writeln!(
        s,
        "{who} (not a network measurement). Each load: median of up to {trials} trials{}; \
         saturation bracketed by a grid, then bisection. Device cost per gather entry \
         (--desc-ns): {desc} ns{}. Every reply is read whole and its headers checked; its \
         payload is checked {} (\"payload checked there\": replies checked of those \
         answered at that load, over its trials, and whether every trial of the search had a \
         checked reply in its measured window for every distinct request answered there and \
         every core; a trial without is counted as coverage incomplete).\n",
        match summaries
            .iter()
            .map(|m| m.slowed_retries)
            .max()
            .unwrap_or(0)
        {
            0 => String::new(),
            r => format!(
                ", a trial whose speed canary read the machine's slow state rerun up to {r} \
                 times (--slowed-retries)"
            ),
        },
        if desc == 0 {
            " (the paper's crossover comes from CPU-side costs; its NICs were not the limit, §5.2)"
        } else {
            ""
        },
        if check_every <= 1 {
            "in every reply (--check-every 1)".to_owned()
        } else {
            format!(
                "for a random 1 in {check_every} replies (--check-every) and always for \
                 writes, the first reply to each distinct request and its first in the \
                 measured window"
            )
        }
    );
    let vs = baseline.map_or(String::new(), |b| format!(" vs {b} |"));
    let _ = writeln!(
        s,
        "| mode | max req/s within 95% of offered (median) | trials there: min–max req/s |{vs} p99 there (µs) | device busy there | 100 GbE line rate (req/s) | server work p50 there (ns) | bounded by | mismatched | lost | loads / trials | disturbed trials (there / all) | slowed trials (there / all) | rerun for slowness (there / all) | payload checked there |"
    );
    let _ = writeln!(
        s,
        "|---|---:|---:|{}---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        if baseline.is_some() { "---:|" } else { "" }
    );
    for m in summaries {
        let b = m.best.as_ref();
        let ratio = match (b, base) {
            (Some(b), Some(base)) if base > 0.0 => format!(
                " {:.2}{} |",
                b.median_rps / base,
                flag(
                    b.disturbed > 0 || base_disturbed,
                    b.slowed > 0 || base_slowed
                )
            ),
            _ if baseline.is_some() => " – |".to_owned(),
            _ => String::new(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} |{ratio} {} | {} | {} | {} | {} | {} | {} | {} / {} | {} / {} | {} / {} | {} / {} | {} |",
            m.mode,
            b.map_or("none kept up".to_owned(), |b| format!(
                "{} (offered {})",
                k(b.median_rps),
                k(b.offered_rps)
            )),
            b.map_or("–".to_owned(), |b| format!(
                "{}–{} ({} trials)",
                k(b.min_rps),
                k(b.max_rps),
                b.trials
            )),
            b.and_then(|b| b.p99_us)
                .map_or("–".to_owned(), |v| format!("{v:.1}")),
            b.map_or("–".to_owned(), |b| format!(
                "{:.0}%",
                b.device_busy * 100.0
            )),
            b.and_then(|b| b.line_rate_rps).map_or("–".to_owned(), k),
            b.and_then(|b| b.work_p50_ns)
                .map_or("–".to_owned(), |w| format!("{w:.0}")),
            m.bound_note(),
            m.mismatched,
            m.lost,
            m.loads,
            m.trials,
            b.map_or(0, |b| b.disturbed),
            m.disturbed,
            b.map_or(0, |b| b.slowed),
            m.slowed,
            b.map_or(0, |b| b.slowed_reruns),
            m.slowed_reruns,
            checked_cell(m),
        );
    }
    let incomplete: usize = summaries.iter().map(|m| m.incomplete).sum();
    if incomplete > 0 {
        let _ = writeln!(
            s,
            "\n{incomplete} trial(s) had a distinct request answered or a core without a \
             checked reply in the measured window (`coverage_complete: false` in \
             emu-points.json): their replies were not all covered by the payload check."
        );
    }
    let disturbed: usize = summaries.iter().map(|m| m.disturbed).sum();
    let slowed: usize = summaries.iter().map(|m| m.slowed).sum();
    if disturbed + slowed > 0 {
        let _ = writeln!(
            s,
            "\n{disturbed} trial(s) ran while other processes used the bench's CPUs \
             (`disturbed` in emu-points.json) and {slowed} on a machine slower than its fast \
             state (its speed canary over {SLOWED_RATIO}x the run's reference, each CPU's and \
             pair's 10th-percentile reading over the run: `slowed` and `canary` in \
             emu-points.json); a ratio marked \"(disturbed trials)\" or \
             \"(slowed trials)\" rests on one: rerun on a quiet machine."
        );
    }
    let retries = summaries
        .iter()
        .map(|m| m.slowed_retries)
        .max()
        .unwrap_or(0);
    let reruns: usize = summaries.iter().map(|m| m.slowed_reruns).sum();
    if reruns > 0 {
        let _ = writeln!(
            s,
            "\n{reruns} trial run(s) were thrown away and rerun because the speed canary before \
             them read the machine's slow state (over {SLOWED_RATIO}x the run's readings so \
             far, up to --slowed-retries {retries} reruns per trial: \"rerun for slowness\", \
             `thrown_slowed_runs` in emu-points.json); the medians and verdicts rest on the \
             reruns, and a trial still slowed after them is counted slowed."
        );
    } else if retries == 0 && summaries.iter().any(|m| m.slowed > 0) {
        let _ = writeln!(
            s,
            "\nSlowed trials were not rerun (--slowed-retries 0): the medians include them."
        );
    }
    let faster: usize = summaries.iter().map(|m| m.faster_than_reference).sum();
    if faster > 0 {
        let _ = writeln!(
            s,
            "\n{faster} trial(s) ran their speed canary more than {SLOWED_RATIO}x faster than \
             the run's reference: the machine was faster still in those, so trials not marked \
             slowed may have been (see `canary` in emu-points.json)."
        );
    }
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use latency::LatencyHistogram;
    use loadgen::search::{search, SearchConfig};
    use loadgen::{Counters, RunReport};
    use std::time::Duration;

    /// A one-core trial's report: `achieved` of `offered` req/s, device busy `busy`, no
    /// canary (the rerun tests' trials too).
    pub(crate) fn report(offered: f64, achieved: f64, busy: f64) -> EmuReport {
        let mut latency = LatencyHistogram::new();
        latency.record(Duration::from_micros(7));
        EmuReport {
            run: RunReport {
                offered_rps: offered,
                achieved_rps: achieved,
                measured_window: Duration::from_millis(200),
                measured_requests: 10,
                counters: Counters::default(),
                latency,
                threads: 1,
            },
            cores: 1,
            per_core: Vec::new(),
            device_busy: busy,
            device: Default::default(),
            sampled: 1,
            unchecked: 3,
            check_every: 8,
            hash_matched: 0,
            distinct_verified: 1,
            distinct_answered: 1,
            distinct: 1,
            cores_verified: 1,
            interference: None,
            canary: None,
            desc_ns: 0,
            not_delivered: 0,
            max_inject_lag_ns: 0,
            failures: Vec::new(),
            mean_request_frame: 4154.0,
            mean_reply_frame: Some(4154.0),
            frames_per_request: 1.0,
        }
    }

    #[test]
    fn line_rate_counts_ethernet_overhead_the_busier_direction_and_split_requests() {
        let mut r = report(1.0, 1.0, 0.5);
        // 4154 + 24 bytes per frame each way at 100 Gbit/s.
        let full = r.line_rate_rps(100.0).unwrap();
        assert!((full - 100e9 / 8.0 / 4178.0).abs() < 1.0, "{full}");
        // Small requests, large replies: the reply direction limits.
        r.mean_request_frame = 100.0;
        assert!((r.line_rate_rps(100.0).unwrap() - full).abs() < 1.0);
        // Tiny frames are padded to the 60-byte minimum.
        r.mean_reply_frame = Some(42.0);
        let tiny = r.line_rate_rps(10.0).unwrap();
        assert!((tiny - 10e9 / 8.0 / 124.0).abs() < 1.0, "{tiny}");
        // Two frames per reported request halve it; nothing answered gives none.
        r.frames_per_request = 2.0;
        assert!((r.line_rate_rps(10.0).unwrap() - tiny / 2.0).abs() < 1.0);
        r.mean_reply_frame = None;
        assert_eq!(r.line_rate_rps(10.0), None);
    }

    /// Two modes: `a` server-bound at 300, `b` device-bound at 500 (device busy near it).
    fn run() -> Vec<Search<EmuTrial<u32>>> {
        let cfg = SearchConfig::new(vec![100.0, 200.0, 400.0, 800.0]);
        search::<_, String, _>(&cfg, 2, |p| {
            let (cap, dev) = [(300.0, 0.3), (500.0, 0.95)][p.lane];
            let achieved = p.offered_rps.min(cap);
            let busy = if p.offered_rps >= cap { dev } else { 0.2 };
            let mode = ["a", "b"][p.lane];
            Ok(EmuTrial::new(
                p,
                mode,
                "s",
                report(p.offered_rps, achieved, busy),
                Some(100.0),
                7,
            ))
        })
        .unwrap()
    }

    #[test]
    fn summaries_say_what_bounded_each_mode_and_tables_show_it() {
        let searches = run();
        let a = EmuSummary::of("a", &searches[0]);
        let b = EmuSummary::of("b", &searches[1]);
        assert_eq!(a.bound, Bound::Server);
        assert_eq!(b.bound, Bound::Device);
        let best = a.best.as_ref().unwrap();
        assert!(best.offered_rps > 280.0 && best.offered_rps <= 300.0 / 0.95);
        assert_eq!(
            (best.trials, best.min_rps, best.max_rps),
            (2, best.median_rps, best.median_rps)
        );
        assert!(a.first_miss.as_ref().unwrap().offered_rps > best.offered_rps);
        let t = table(&[a.clone(), b], Some("a"), 3);
        assert!(t.contains("| a | "), "{t}");
        assert!(t.contains(" 1.00 |"), "{t}");
        assert!(t.contains("device: first sustained miss"), "{t}");
        assert!(t.contains("server: first sustained miss"), "{t}");
        let j = a.to_json();
        assert_eq!(j["bounded_by"], "server");
        assert_eq!(j["cores"], 1);
        assert!(t.starts_with("Server core's throughput"), "{t}");
        let mut two = a.clone();
        two.cores = 2;
        let t = table(&[two], None, 3);
        assert!(t.starts_with("2 server cores' throughput"), "{t}");
        assert_eq!(j["best"]["trials"], 2);
        // One record per load (the median trial's), ascending; every trial in the points.
        // The grid load that missed was decided twice (confirmed): one record, the later.
        let recs = median_records(&searches[0]);
        let confirmed = searches[0]
            .loads
            .iter()
            .filter(|v| v.phase == loadgen::search::Phase::Confirm)
            .count();
        assert_eq!(confirmed, 1);
        assert_eq!(recs.len(), searches[0].loads.len() - confirmed);
        assert!(recs.windows(2).all(|w| w[0].offered_rps < w[1].offered_rps));
        assert_eq!(trials_json(&searches[0]).len(), searches[0].trials_run());
        // The line rate of the frames is in the table and the JSON; below it, no remark.
        let line = best.line_rate_rps.unwrap();
        assert!((line - 100e9 / 8.0 / 4178.0).abs() < 1.0, "{line}");
        assert_eq!(j["best"]["line_rate_100gbe_rps"], line);
        assert!(t.contains(&format!("| {line:.0} |")), "{t}");
        assert!(!a.bound_note().contains("line rate"), "{}", a.bound_note());
        // A mode faster than a 100 Gbit/s port could carry its frames says so.
        let mut fast = a.clone();
        fast.best.as_mut().unwrap().line_rate_rps = Some(best.median_rps / 2.0);
        assert!(
            fast.bound_note().contains("above the 100 GbE line rate"),
            "{}",
            fast.bound_note()
        );
    }

    #[test]
    fn the_control_row_divides_copy_by_the_best_library_and_flags_disturbed_trials() {
        let searches = run();
        let a = EmuSummary::of("a", &searches[0]);
        let mode = |name: &str, rps: f64| {
            let mut m = a.clone();
            m.mode = name.to_owned();
            m.best.as_mut().unwrap().median_rps = rps;
            m
        };
        let mut all = vec![
            mode("cornflakes", 300.0),
            mode("cornflakes-copy", 240.0),
            mode("protobuf", 200.0),
            mode("capnp", 150.0),
        ];
        let libs = ["protobuf", "capnp", "flatbuffers"];
        let line = control_line(&all, "cornflakes", "cornflakes-copy", &libs).unwrap();
        assert!(line.contains("best library (protobuf) = 1.50."), "{line}");
        assert!(
            line.contains("cornflakes-copy ÷ best library = 1.20"),
            "{line}"
        );
        assert!(
            line.contains("0.93–1.02") && line.contains("above the paper's range"),
            "{line}"
        );
        assert!(!line.contains("disturbed"), "{line}");
        all[2].best.as_mut().unwrap().disturbed = 1;
        let line = control_line(&all, "cornflakes", "cornflakes-copy", &libs).unwrap();
        assert!(line.contains("1.50 (disturbed trials)"), "{line}");
        all[1].best.as_mut().unwrap().median_rps = 196.0;
        let line = control_line(&all, "cornflakes", "cornflakes-copy", &libs).unwrap();
        assert!(line.contains("= 0.98") && !line.contains("above"), "{line}");
        // Inside the paper's range nothing is said; outside, which side and what it points at.
        assert_eq!(control_note(0.95, "cornflakes-copy"), "");
        assert!(control_note(1.30, "cornflakes-copy").starts_with("; above the paper's range"));
        let below = control_note(0.85, "cornflakes-copy");
        assert!(
            below.starts_with("; below the paper's range") && below.contains("cornflakes-copy"),
            "{below}"
        );
        assert_eq!(
            control_line(&all[2..], "cornflakes", "cornflakes-copy", &libs),
            None
        );
        // The device's per-descriptor cost is in every table.
        let t = table(&all, None, 3);
        assert!(t.contains("(--desc-ns): 0 ns"), "{t}");
    }
    /// Once the run is over, every trial is judged against the whole run's readings: a run
    /// whose first pair reading was in the slow state marks its slow trials after
    /// `rebase_canaries`, and their records agree.
    #[test]
    fn rebase_canaries_judges_every_trial_against_the_whole_run() {
        let canary = loadgen::canary::Canary::new();
        let us = Duration::from_micros;
        let cpus = [(0, us(700)), (1, us(705))];
        // The run's first pair reading is slow (6.6 ms: 330 ns per round trip).
        let first = canary.judge_with_pair(&cpus, Some(([0, 1], us(6600))));
        assert!(!first.slowed());
        let cfg = SearchConfig::new(vec![100.0, 200.0, 400.0, 800.0]);
        // Mode `a` ran slow (like the first reading), mode `b` fast (62 ns per round trip).
        let mut searches = search::<_, String, _>(&cfg, 2, |p| {
            let mut r = report(p.offered_rps, p.offered_rps.min(300.0), 0.2);
            let pair = [us(6600), us(1240)][p.lane];
            r.canary = Some(canary.judge_with_pair(&cpus, Some(([0, 1], pair))));
            Ok(EmuTrial::new(p, ["a", "b"][p.lane], "s", r, None, 0u32))
        })
        .unwrap();
        let slowed = |s: &Search<EmuTrial<u32>>| {
            s.loads
                .iter()
                .flat_map(|v| &v.trials)
                .filter(|t| t.slowed())
                .count()
        };
        assert_eq!((slowed(&searches[0]), slowed(&searches[1])), (0, 0));
        rebase_canaries(&mut searches);
        assert_eq!(slowed(&searches[0]), searches[0].trials_run());
        assert_eq!(slowed(&searches[1]), 0);
        let a = EmuSummary::of("a", &searches[0]);
        assert_eq!(a.slowed, a.trials);
        let t = &searches[0].loads[0].trials[0];
        assert!(t.record.slowed());
        assert!((t.record.canary_pair_ratio.unwrap() - 6600.0 / 1240.0).abs() < 1e-9);
    }

    /// A trial whose speed canary read over 1.3x the run's first is slowed: its line says so,
    /// its JSON has the canary, and the summaries, the table and the control line count and mark
    /// it as they do a disturbed trial.
    #[test]
    fn slowed_trials_are_printed_counted_and_marked_like_disturbed_ones() {
        let canary = loadgen::canary::Canary::new();
        let us = Duration::from_micros;
        let reference =
            canary.judge_with_pair(&[(0, us(700)), (1, us(710))], Some(([0, 1], us(1400))));
        let cfg = SearchConfig::new(vec![100.0, 200.0, 400.0, 800.0]);
        // Mode `a` (lane 0) kept up to 300 with every trial on a machine 2x slower than at the
        // start; `b` normal.
        let searches = search::<_, String, _>(&cfg, 2, |p| {
            let mut r = report(p.offered_rps, p.offered_rps.min(300.0), 0.2);
            r.canary = Some(if p.lane == 0 {
                canary.judge(&[(0, us(1400)), (1, us(720))])
            } else {
                canary.judge_with_pair(&[(0, us(720)), (1, us(700))], Some(([0, 1], us(1430))))
            });
            Ok(EmuTrial::new(p, ["a", "b"][p.lane], "s", r, None, 0u32))
        })
        .unwrap();
        assert!(!reference.slowed());
        let slow = &searches[0].loads[0].trials[0];
        let normal = &searches[1].loads[0].trials[0];
        assert!(slow.slowed() && !slow.disturbed() && !normal.slowed());
        let line = slow.progress();
        assert!(
            line.contains("speed canary 2.00x its reference") && line.ends_with(": SLOWED"),
            "{line}"
        );
        let line = normal.progress();
        assert!(
            line.contains("speed canary 1.03x") && !line.contains("SLOWED"),
            "{line}"
        );
        let j = slow.to_json();
        assert_eq!(j["slowed"], true);
        assert_eq!(j["disturbed"], false);
        assert!(
            (j["canary"]["ratio"].as_f64().unwrap() - 2.0).abs() < 1e-9,
            "{j}"
        );
        assert_eq!(j["canary"]["cpus"], json!([0, 1]));
        assert_eq!(j["canary"]["reference_us"], json!([700.0, 710.0]));
        assert_eq!(j["canary"]["pair_us"], Value::Null);
        let jn = normal.to_json();
        assert_eq!(jn["slowed"], false);
        // The pair reading (server and device CPU) next to the per-CPU fields.
        assert_eq!(jn["canary"]["pair_cpus"], json!([0, 1]));
        assert_eq!(jn["canary"]["pair_us"], json!(1430.0));
        assert_eq!(jn["canary"]["pair_reference_us"], json!(1400.0));
        assert!((jn["canary"]["pair_round_trip_ns"].as_f64().unwrap() - 71.5).abs() < 1e-9);
        assert!((jn["canary"]["pair_ratio"].as_f64().unwrap() - 1430.0 / 1400.0).abs() < 1e-9);
        assert_eq!(
            normal.record.canary_pair_ratio,
            normal.report.canary.as_ref().unwrap().pair_ratio()
        );
        // Its record (the JSON and the socket tables' input) carries the ratio.
        assert_eq!(
            slow.record.canary_ratio,
            Some(slow.report.canary.as_ref().unwrap().ratio())
        );
        assert!(slow.record.slowed() && !normal.record.slowed());

        let a = EmuSummary::of("a", &searches[0]);
        let b = EmuSummary::of("b", &searches[1]);
        assert_eq!((a.slowed, a.disturbed), (a.trials, 0));
        assert_eq!(b.slowed, 0);
        assert!(a.rests_on_slowed() && !a.rests_on_disturbed() && !b.rests_on_slowed());
        let best = a.best.as_ref().unwrap();
        assert_eq!(best.slowed, best.trials);
        let ja = a.to_json();
        assert_eq!(ja["slowed_trials"], a.trials);
        assert_eq!(ja["rests_on_slowed_trials"], true);
        assert_eq!(ja["best"]["slowed_trials"], best.trials);

        // The table: its own column, the ratio marked, the summary line counting them.
        let t = table(&[b.clone(), a.clone()], Some("b"), 3);
        assert!(t.contains("| slowed trials (there / all) |"), "{t}");
        assert!(
            t.contains(&format!("| 0 / 0 | {} / {} |", best.trials, a.trials)),
            "{t}"
        );
        assert!(t.contains(" 1.00 (slowed trials) |"), "{t}");
        assert!(
            t.contains(&format!(
                "0 trial(s) ran while other processes used the bench's CPUs \
                 (`disturbed` in emu-points.json) and {} on a machine slower",
                a.trials
            )),
            "{t}"
        );
        // Neither disturbed nor slowed: no mark, no note.
        let t = table(std::slice::from_ref(&b), Some("b"), 3);
        assert!(
            !t.contains("slowed trials)") && !t.contains("trial(s) ran"),
            "{t}"
        );
        // Disturbed and slowed together.
        let mut both = a.clone();
        both.best.as_mut().unwrap().disturbed = 1;
        both.disturbed = 1;
        let t = table(&[b.clone(), both], Some("b"), 3);
        assert!(t.contains("(disturbed and slowed trials) |"), "{t}");
        assert!(t.contains("1 trial(s) ran while other processes"), "{t}");

        // The control line marks a ratio resting on a slowed mode.
        let mode = |m: &EmuSummary, name: &str| {
            let mut m = m.clone();
            m.mode = name.to_owned();
            m
        };
        let all = [
            mode(&b, "cornflakes"),
            mode(&b, "cornflakes-copy"),
            mode(&a, "protobuf"),
        ];
        let line = control_line(&all, "cornflakes", "cornflakes-copy", &["protobuf"]).unwrap();
        assert!(line.contains("1.00 (slowed trials)"), "{line}");

        // A run whose first canary was the slow one says so.
        let mut started_slow = b.clone();
        started_slow.faster_than_reference = 2;
        let t = table(&[started_slow], None, 3);
        assert!(
            t.contains("2 trial(s) ran their speed canary more than 1.3x faster"),
            "{t}"
        );
    }

    /// Every table, trial line and JSON says how many replies' payloads were checked and
    /// whether each trial covered every distinct request and core; a gap is flagged.
    #[test]
    fn the_checked_share_and_incomplete_coverage_are_in_every_table() {
        let searches = run();
        let a = EmuSummary::of("a", &searches[0]);
        assert_eq!((a.check_every, a.incomplete), (8, 0));
        let best = a.best.as_ref().unwrap();
        // Each trial: 1 checked, 3 not (report()).
        assert_eq!((best.checked, best.answered), (2, 8));
        let t = table(std::slice::from_ref(&a), None, 3);
        assert!(
            t.contains("for a random 1 in 8 replies (--check-every)"),
            "{t}"
        );
        assert!(
            t.contains("| 25.0% (2 of 8); every distinct request and core covered |"),
            "{t}"
        );
        assert!(!t.contains("coverage incomplete in"), "{t}");
        let trial = &searches[0].loads[0].trials[0];
        let line = trial.progress();
        assert!(
            line.contains("payload checked: 1 of 4 replies")
                && line.contains("distinct requests 1/1 answered (of 1), cores 1/1")
                && !line.contains("INCOMPLETE"),
            "{line}"
        );
        assert_eq!(trial.to_json()["coverage_complete"], true);

        // A trial where a distinct request answered had no checked reply is flagged.
        let mut r = trial.report.clone();
        r.distinct_answered = 2;
        r.distinct = 2;
        assert!(!r.coverage_complete());
        assert!(
            r.coverage_note().ends_with("INCOMPLETE"),
            "{}",
            r.coverage_note()
        );
        let mut gap = a.clone();
        gap.incomplete = 1;
        let t = table(&[gap], None, 3);
        assert!(t.contains("; coverage incomplete in 1 trial(s) |"), "{t}");
        assert!(t.contains("1 trial(s) had a distinct request"), "{t}");
        // And a core without one.
        let mut r = trial.report.clone();
        r.cores = 2;
        assert!(!r.coverage_complete());
    }
}

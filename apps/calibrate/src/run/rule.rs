//! The calibration's decision rule, apart from the running: what a trial keeps
//! ([`CalibTrial`]), a policy's search summarized ([`PolicyResult`]: saturation load and trial
//! spread), a cell's winner ([`CellResult::outcome`]) and the recommended threshold
//! ([`recommend`]). Pure functions of the trials: unit-tested on constructed cells and searches.

use emu_bench::{Bottleneck, Bound, EmuSummary};
use loadgen::search::{Point, Search, Trial};
use loadgen::Record;

/// One trial of one policy at one load: its load-generator record (mode `copy`/`sg`, shape
/// `KxS`) and, on the emulated NIC, how busy the device thread was and what limited the trial.
#[derive(Clone, Debug)]
pub struct CalibTrial {
    /// Where the search ran it.
    pub point: Point,
    /// What the clients measured.
    pub record: Record,
    /// Emulated NIC only: the device thread's utilisation (0–1) and the trial's bottleneck.
    pub device: Option<(f64, Bottleneck)>,
}

impl Trial for CalibTrial {
    fn achieved_rps(&self) -> f64 {
        self.record.achieved_rps
    }
}

impl CalibTrial {
    fn device_bound(&self) -> bool {
        self.device.is_some_and(|(_, b)| b == Bottleneck::Device)
    }
}

/// One policy's saturation search in one cell, summarized.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyResult {
    /// The saturation load: among the loads kept up (by their median trial), the highest
    /// median trial's achieved load (verified replies per second). `None`: no load kept up.
    pub median_rps: Option<f64>,
    /// The offered load of that median.
    pub offered_rps: Option<f64>,
    /// The trials' min–max spread around saturation: from the lowest trial at that load to
    /// the highest trial at it or at the first sustained miss above it (past saturation an
    /// open-loop server answers at its capacity, so the saturation load can be up to there).
    pub spread: Option<(f64, f64)>,
    /// Trials run at the saturation load.
    pub trials_at_best: usize,
    /// The lowest offered load above it whose median trial missed (the bracket's upper end).
    pub first_miss_rps: Option<f64>,
    /// p99 latency of the median trial at the saturation load (µs).
    pub p99_us: Option<f64>,
    /// Why the saturation load is only a lower bound, if it is: `grid` (the grid's highest
    /// load was kept up) or `device` (emulated NIC: the device thread, not the server, was
    /// saturated at the best load or the first miss).
    pub capped: Option<&'static str>,
    /// Loads decided and trials run in all.
    pub loads: usize,
    /// See `loads`.
    pub trials: usize,
    /// Emulated NIC only: runs thrown away because their speed canary read the machine's slow
    /// state, each rerun at the same point (not counted in `trials`).
    pub slowed_reruns: usize,
}

impl PolicyResult {
    /// Summarizes one policy's search.
    pub fn from_search(s: &Search<CalibTrial>) -> PolicyResult {
        let best = s.best_achieved();
        let miss = s.first_miss();
        let device = best.is_some_and(|v| v.median().device_bound())
            || miss.is_some_and(|v| v.median().device_bound());
        PolicyResult {
            median_rps: best.map(|b| b.median_rps()),
            offered_rps: best.map(|b| b.offered_rps),
            spread: best.map(|b| {
                let (lo, hi) = b.spread();
                (lo, miss.map_or(hi, |m| hi.max(m.spread().1)))
            }),
            trials_at_best: best.map_or(0, |b| b.trials.len()),
            first_miss_rps: miss.map(|m| m.offered_rps),
            p99_us: best.and_then(|b| b.median().record.p99_us),
            capped: if device {
                Some("device")
            } else if s.above_grid {
                Some("grid")
            } else {
                None
            },
            loads: s.loads.len(),
            trials: s.trials_run(),
            slowed_reruns: 0,
        }
    }

    /// Summarizes one policy's search on the emulated NIC, as the bench skeleton summarized it
    /// ([`emu_bench::EmuBench`]): the same meaning as [`PolicyResult::from_search`], the
    /// spread from the best load's trials up to the first miss's highest, a lower bound when
    /// the device or the grid limited the search.
    pub fn from_summary(s: &EmuSummary) -> PolicyResult {
        let best = s.best.as_ref();
        let miss = s.first_miss.as_ref();
        PolicyResult {
            median_rps: best.map(|b| b.median_rps),
            offered_rps: best.map(|b| b.offered_rps),
            spread: best.map(|b| {
                (
                    b.min_rps,
                    miss.map_or(b.max_rps, |m| b.max_rps.max(m.max_rps)),
                )
            }),
            trials_at_best: best.map_or(0, |b| b.trials),
            first_miss_rps: miss.map(|m| m.offered_rps),
            p99_us: best.and_then(|b| b.p99_us),
            capped: match s.bound {
                Bound::Device => Some("device"),
                Bound::Grid => Some("grid"),
                _ => None,
            },
            loads: s.loads,
            trials: s.trials,
            slowed_reruns: s.slowed_reruns,
        }
    }

    /// A policy that was not measured.
    pub fn none() -> PolicyResult {
        PolicyResult {
            median_rps: None,
            offered_rps: None,
            spread: None,
            trials_at_best: 0,
            first_miss_rps: None,
            p99_us: None,
            capped: None,
            loads: 0,
            trials: 0,
            slowed_reruns: 0,
        }
    }

    pub(crate) fn spread_text(&self) -> String {
        self.spread.map_or_else(
            || "nothing kept up".to_owned(),
            |(lo, hi)| format!("{lo:.0}–{hi:.0}"),
        )
    }
}

/// Which policy a cell's trials show ahead, if they clearly show one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Scatter-gather's spread lies wholly above copy's.
    ScatterGather,
    /// Copy's spread lies wholly above scatter-gather's.
    Copy,
    /// The spreads overlap, or the loser's saturation load is only a lower bound: the reason.
    NoClearWinner(String),
    /// The cell was not measured (the datapath cannot take it).
    Skipped,
}

impl Outcome {
    /// Short name, as the JSON and the table give it.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::ScatterGather => "sg",
            Outcome::Copy => "copy",
            Outcome::NoClearWinner(_) => "no clear winner",
            Outcome::Skipped => "skipped",
        }
    }
}

/// One (S, K) cell's result.
#[derive(Clone, Debug, PartialEq)]
pub struct CellResult {
    /// Segment size.
    pub size: usize,
    /// Segments per request.
    pub count: usize,
    /// Copy policy.
    pub copy: PolicyResult,
    /// Scatter-gather policy.
    pub sg: PolicyResult,
    /// Why the cell was not measured, if it was not.
    pub skipped: Option<String>,
}

impl CellResult {
    /// Scatter-gather's saturation load over copy's, medians (> 1: scatter-gather ahead).
    pub fn ratio(&self) -> Option<f64> {
        match (self.sg.median_rps, self.copy.median_rps) {
            (Some(s), Some(c)) if c > 0.0 => Some(s / c),
            _ => None,
        }
    }

    /// The cell's winner, decided from the trials' spreads, not the medians alone:
    ///
    /// - a policy wins when the lower end of its spread is above the upper end of the other's
    ///   (the difference of the medians is outside both policies' min–max trial spreads);
    /// - a policy that kept up some load wins against one that kept up none (the other missed
    ///   even the lowest grid load, by the median of its trials);
    /// - otherwise there is no clear winner: the spreads overlap, neither kept up anything, or
    ///   the would-be loser's saturation load is only a lower bound ([`PolicyResult::capped`]:
    ///   it kept up the grid's highest load, or the emulated device was the limit).
    pub fn outcome(&self) -> Outcome {
        if self.skipped.is_some() {
            return Outcome::Skipped;
        }
        let (c, s) = (&self.copy, &self.sg);
        let win = |winner: Outcome, loser: &PolicyResult, name: &str| match loser.capped {
            Some(why) => Outcome::NoClearWinner(format!(
                "{name}'s saturation load is only a lower bound ({why})"
            )),
            None => winner,
        };
        match (c.spread, s.spread) {
            (None, None) => {
                Outcome::NoClearWinner("neither policy kept up the lowest load".to_owned())
            }
            (Some(_), None) => Outcome::Copy,
            (None, Some(_)) => Outcome::ScatterGather,
            (Some((c_lo, c_hi)), Some((s_lo, s_hi))) => {
                if s_lo > c_hi {
                    win(Outcome::ScatterGather, c, "copy")
                } else if c_lo > s_hi {
                    win(Outcome::Copy, s, "sg")
                } else {
                    Outcome::NoClearWinner(format!(
                        "spreads overlap: copy {}, sg {} req/s",
                        c.spread_text(),
                        s.spread_text()
                    ))
                }
            }
        }
    }
}

/// The recommended threshold: the smallest measured S such that **every** measured cell (every
/// measured K) at S and at every larger measured S is a clear scatter-gather win
/// ([`CellResult::outcome`]). A cell without a clear winner is never evidence for a threshold:
/// one at or above S blocks S, so the recommendation rests only on cells whose trial spreads
/// separate. Cells below S may be anything (copying there is the threshold's claim; a clear
/// win below a non-win does not move it down). Skipped cells are left out of "every K"; a size
/// with no measured cell cannot be recommended. `None` when no size qualifies.
pub fn recommend(cells: &[CellResult]) -> Option<usize> {
    let mut sizes: Vec<usize> = cells.iter().map(|c| c.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let wins = |s: usize| {
        let outcomes: Vec<Outcome> = cells
            .iter()
            .filter(|c| c.size == s && c.skipped.is_none())
            .map(CellResult::outcome)
            .collect();
        !outcomes.is_empty() && outcomes.iter().all(|o| *o == Outcome::ScatterGather)
    };
    let mut best = None;
    for &s in sizes.iter().rev() {
        if wins(s) {
            best = Some(s);
        } else {
            break;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use emu_bench::LoadSummary;
    use loadgen::search::{search, SearchConfig};

    /// A measured cell from each policy's (lowest, median, highest) trial, req/s.
    fn cell(size: usize, count: usize, copy: (f64, f64, f64), sg: (f64, f64, f64)) -> CellResult {
        let p = |(lo, med, hi): (f64, f64, f64)| PolicyResult {
            median_rps: Some(med),
            offered_rps: Some(med),
            spread: Some((lo, hi)),
            trials_at_best: 3,
            first_miss_rps: Some(hi * 1.1),
            p99_us: Some(10.0),
            capped: None,
            loads: 8,
            trials: 18,
            slowed_reruns: 0,
        };
        CellResult {
            size,
            count,
            copy: p(copy),
            sg: p(sg),
            skipped: None,
        }
    }

    /// Copy at 100 (95–105); sg `ahead`: clearly (120–130), tied (98–110) or behind (70–80).
    fn c(size: usize, count: usize, sg: &str) -> CellResult {
        let sg = match sg {
            "win" => (120.0, 125.0, 130.0),
            "tie" => (98.0, 104.0, 110.0),
            _ => (70.0, 75.0, 80.0),
        };
        cell(size, count, (95.0, 100.0, 105.0), sg)
    }

    #[test]
    fn a_cell_has_a_winner_only_when_the_spreads_separate() {
        assert_eq!(c(64, 1, "win").outcome(), Outcome::ScatterGather);
        assert_eq!(c(64, 1, "lose").outcome(), Outcome::Copy);
        let tie = c(64, 1, "tie");
        // The medians differ (1.04) but lie inside each other's spread.
        assert!(tie.ratio().unwrap() > 1.0);
        match tie.outcome() {
            Outcome::NoClearWinner(why) => assert!(why.contains("overlap"), "{why}"),
            o => panic!("{o:?}"),
        }
        // Touching spreads are not apart.
        let touch = cell(64, 1, (95.0, 100.0, 105.0), (105.0, 110.0, 115.0));
        assert_eq!(touch.outcome().name(), "no clear winner");
        // The loser's saturation load is only a lower bound: no clear winner.
        let mut capped = c(64, 1, "win");
        capped.copy.capped = Some("device");
        match capped.outcome() {
            Outcome::NoClearWinner(why) => assert!(why.contains("copy") && why.contains("device")),
            o => panic!("{o:?}"),
        }
        // The winner's being capped does not weaken its win.
        let mut capped = c(64, 1, "win");
        capped.sg.capped = Some("grid");
        assert_eq!(capped.outcome(), Outcome::ScatterGather);
        // Kept up something against nothing kept up; nothing on either side; skipped.
        let mut none = c(64, 1, "win");
        none.copy = PolicyResult::none();
        assert_eq!(none.outcome(), Outcome::ScatterGather);
        assert_eq!(none.ratio(), None);
        none.sg = PolicyResult::none();
        assert_eq!(none.outcome().name(), "no clear winner");
        none.skipped = Some("too large".into());
        assert_eq!(none.outcome(), Outcome::Skipped);
    }

    #[test]
    fn recommendation_rests_only_on_clear_sg_wins_for_every_k_from_there_up() {
        let grid = |rows: &[(usize, [&str; 2])]| -> Vec<CellResult> {
            rows.iter()
                .flat_map(|&(s, ks)| [c(s, 1, ks[0]), c(s, 2, ks[1])])
                .collect()
        };
        // Copy below 512, sg clearly from 512 up for every K.
        let cells = grid(&[
            (64, ["lose", "lose"]),
            (256, ["lose", "tie"]),
            (512, ["win", "win"]),
            (1024, ["win", "win"]),
        ]);
        assert_eq!(recommend(&cells), Some(512));
        // A tie at 512 for one K: the threshold cannot rest on it, so it moves up to 1024.
        let cells = grid(&[
            (64, ["lose", "lose"]),
            (512, ["win", "tie"]),
            (1024, ["win", "win"]),
        ]);
        assert_eq!(recommend(&cells), Some(1024));
        // A clear win below a tie does not count (the chain from the top is broken).
        let cells = grid(&[
            (64, ["win", "win"]),
            (512, ["tie", "win"]),
            (1024, ["win", "win"]),
        ]);
        assert_eq!(recommend(&cells), Some(1024));
        // A tie at the largest size: no recommendation, even with medians all above 1.
        let cells = grid(&[(512, ["win", "win"]), (1024, ["win", "tie"])]);
        assert!(cells.iter().all(|x| x.ratio().unwrap() > 1.0));
        assert_eq!(recommend(&cells), None);
        // Every cell tied (the noisy machine's usual answer): none.
        let cells = grid(&[(64, ["tie", "tie"]), (4096, ["tie", "tie"])]);
        assert_eq!(recommend(&cells), None);
        // Skipped cells are left out of "every K"; a size with only skipped cells blocks.
        let mut cells = grid(&[(512, ["win", "win"]), (1024, ["win", "tie"])]);
        cells[3].skipped = Some("too large".into());
        assert_eq!(recommend(&cells), Some(512));
        cells[2].skipped = Some("too large".into());
        assert_eq!(recommend(&cells), None);
        assert_eq!(recommend(&[]), None);
    }

    fn rec(offered: f64, achieved: f64) -> Record {
        Record {
            mode: "sg".into(),
            shape: "2x512".into(),
            offered_rps: offered,
            achieved_rps: achieved,
            p50_us: Some(5.0),
            p99_us: Some(offered / 100.0),
            sent: 1,
            received: 1,
            verified: 1,
            threads: 1,
            measured_s: 1.0,
            ..Record::default()
        }
    }

    /// A search against a fake server of capacity `cap` whose first trial at every load achieves
    /// `first` of what the others do; the device is saturated from `device_at` req/s.
    fn fake_search(cap: f64, first: f64, device_at: f64) -> Search<CalibTrial> {
        let cfg = SearchConfig {
            resolution: 0.1,
            ..SearchConfig::new(vec![100.0, 200.0, 400.0, 800.0])
        };
        let mut out = search::<_, String, _>(&cfg, 1, |p| {
            let f = if p.trial == 0 { first } else { 1.0 };
            let achieved = p.offered_rps.min(cap) * f;
            let device = if p.offered_rps >= device_at {
                (0.95, Bottleneck::Device)
            } else {
                (0.3, Bottleneck::None)
            };
            Ok(CalibTrial {
                point: p,
                record: rec(p.offered_rps, achieved),
                device: Some(device),
            })
        })
        .unwrap();
        out.pop().unwrap()
    }

    #[test]
    fn a_policy_is_summarized_by_its_median_and_the_spread_around_saturation() {
        // Capacity 300: the bracket ends within 10 %; every trial agrees.
        let r = PolicyResult::from_search(&fake_search(300.0, 1.0, f64::INFINITY));
        let (med, offered) = (r.median_rps.unwrap(), r.offered_rps.unwrap());
        assert!(offered > 250.0 && offered <= 300.0 / 0.95, "{r:?}");
        assert_eq!(med, offered.min(300.0));
        let miss = r.first_miss_rps.unwrap();
        assert!(
            miss > offered && miss - offered <= 0.1 * offered + 1.0,
            "{r:?}"
        );
        // The spread runs up to the first miss's best trial: the capacity itself.
        assert_eq!(r.spread, Some((med, 300.0)));
        assert_eq!((r.trials_at_best, r.capped), (2, None));
        assert_eq!(r.trials, 2 * r.loads);
        assert_eq!(r.p99_us, Some(offered / 100.0));
        // A descheduled first trial at every load: a third trial decides, and the spread shows it.
        let r = PolicyResult::from_search(&fake_search(300.0, 0.5, f64::INFINITY));
        let (lo, _) = r.spread.unwrap();
        assert_eq!(r.trials_at_best, 3);
        assert!(lo <= 0.5 * r.offered_rps.unwrap(), "{r:?}");
        // Above the grid, or the device saturated: only a lower bound.
        let r = PolicyResult::from_search(&fake_search(1e9, 1.0, f64::INFINITY));
        assert_eq!((r.offered_rps, r.capped), (Some(800.0), Some("grid")));
        assert_eq!(r.first_miss_rps, None);
        let r = PolicyResult::from_search(&fake_search(300.0, 1.0, 250.0));
        assert_eq!(r.capped, Some("device"));
        // Nothing kept up.
        let r = PolicyResult::from_search(&fake_search(10.0, 1.0, f64::INFINITY));
        assert_eq!(
            (r.median_rps, r.spread, r.first_miss_rps),
            (None, None, Some(100.0))
        );
    }

    /// A load of an emulated search, summarized: its offered load, lowest, median and highest
    /// trial, and what its median trial was bound by.
    fn load(offered: f64, (lo, med, hi): (f64, f64, f64), bottleneck: Bottleneck) -> LoadSummary {
        LoadSummary {
            offered_rps: offered,
            median_rps: med,
            min_rps: lo,
            max_rps: hi,
            trials: 3,
            p99_us: Some(12.0),
            device_busy: 0.4,
            work_p50_ns: None,
            split: None,
            frames: (100.0, Some(200.0)),
            bottleneck,
            line_rate_rps: None,
            disturbed: 0,
            slowed: 0,
            slowed_reruns: 0,
            checked: 10,
            answered: 10,
            incomplete: 0,
        }
    }

    fn summary(best: Option<LoadSummary>, miss: Option<LoadSummary>, bound: Bound) -> EmuSummary {
        EmuSummary {
            mode: "sg".into(),
            cores: 1,
            best,
            first_miss: miss,
            bound,
            loads: 6,
            trials: 14,
            mismatched: 0,
            malformed: 0,
            lost: 0,
            disturbed: 0,
            slowed: 1,
            slowed_reruns: 2,
            slowed_retries: 2,
            faster_than_reference: 0,
            desc_ns: 0,
            check_every: 1,
            incomplete: 0,
        }
    }

    #[test]
    fn an_emulated_search_is_summarized_as_a_kernel_one() {
        let none = Bottleneck::None;
        // Kept up 400 (trials 380–400), missed 440 (best trial 430): the spread reaches it.
        let r = PolicyResult::from_summary(&summary(
            Some(load(400.0, (380.0, 395.0, 400.0), none)),
            Some(load(440.0, (410.0, 420.0, 430.0), none)),
            Bound::Server,
        ));
        assert_eq!(
            (r.median_rps, r.offered_rps, r.spread),
            (Some(395.0), Some(400.0), Some((380.0, 430.0)))
        );
        assert_eq!(
            (r.first_miss_rps, r.p99_us, r.capped),
            (Some(440.0), Some(12.0), None)
        );
        assert_eq!(
            (r.trials_at_best, r.loads, r.trials, r.slowed_reruns),
            (3, 6, 14, 2)
        );
        // A miss below the best load's highest trial does not lower the spread.
        let r = PolicyResult::from_summary(&summary(
            Some(load(400.0, (380.0, 395.0, 420.0), none)),
            Some(load(440.0, (300.0, 350.0, 410.0), none)),
            Bound::Server,
        ));
        assert_eq!(r.spread, Some((380.0, 420.0)));
        // The device or the grid bounded it: only a lower bound.
        let device = summary(
            Some(load(400.0, (380.0, 395.0, 400.0), none)),
            Some(load(440.0, (410.0, 420.0, 430.0), Bottleneck::Device)),
            Bound::Device,
        );
        assert_eq!(PolicyResult::from_summary(&device).capped, Some("device"));
        let grid = summary(
            Some(load(800.0, (790.0, 800.0, 800.0), none)),
            None,
            Bound::Grid,
        );
        let r = PolicyResult::from_summary(&grid);
        assert_eq!(
            (r.capped, r.spread, r.first_miss_rps),
            (Some("grid"), Some((790.0, 800.0)), None)
        );
        // Nothing kept up.
        let r = PolicyResult::from_summary(&summary(
            None,
            Some(load(100.0, (10.0, 20.0, 30.0), none)),
            Bound::NothingKept,
        ));
        assert_eq!(
            (
                r.median_rps,
                r.spread,
                r.first_miss_rps,
                r.capped,
                r.trials_at_best
            ),
            (None, None, Some(100.0), None, 0)
        );
    }
}

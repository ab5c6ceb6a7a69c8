//! The saturation search: the highest offered load a server keeps up with, found with repeated
//! trials and bisection, so that one unlucky run does not decide the result.
//!
//! On a small shared machine a load point is noisy in one direction: a thread descheduled for a
//! few milliseconds loses a window of requests, so a point far below saturation can miss 95 %
//! of its offered load, while nothing makes a saturated server look faster. One short point at
//! one load therefore varies 2–3 × from run to run. The search makes every decision from
//! several trials:
//!
//! 1. **Verdicts from the median of K trials.** A load is run up to `trials` (K) times, and it
//!    *keeps up* when the (lower) median trial achieves `keep_up` of offered, i.e. when more
//!    than half of K keep up. Trials stop as soon as the verdict is decided (K = 3: two agreeing
//!    trials, a third only after a split), so a consistent load costs ⌈(K+1)/2⌉ trials.
//! 2. **A coarse grid, then bisection.** The grid (ascending) is walked until a load's verdict
//!    misses — a *sustained* miss, never a single bad trial; the saturation load lies between
//!    the last grid load kept up and that one. Bisection halves the bracket until it is within
//!    `resolution` (relative to its lower end). With [`SearchConfig::whole_grid`] every grid
//!    load is run first (for plots), then the bracket above the highest one kept up is bisected.
//! 3. **Lanes interleaved trial by trial.** Several lanes (modes, serializations) are searched
//!    together: each round runs one trial of every lane still searching, so a burst of
//!    background load hits all lanes alike rather than one.
//! 4. **A grid miss is confirmed in a later round** ([`SearchConfig::confirm_misses`]). The
//!    lanes walk the grid in step, so every lane decides a grid load in the same rounds, a few
//!    seconds apart: a transient that spans those rounds (a machine that slows down for
//!    seconds) fails that load for every lane near its capacity, and without a second look
//!    their searches would all end just below the same grid load however different their
//!    capacities. So when a lane's grid walk misses, the same load is decided once more
//!    ([`Phase::Confirm`]) before the lane bisects below it; if that keeps up, the grid walk
//!    goes on. A real saturation misses twice and costs ⌈(K+1)/2⌉ more trials.
//!
//! The result per lane ([`Search`]) keeps every trial; [`Search::best`] is the highest load
//! kept up, with its median trial and the spread (min/max achieved) of its trials.

use std::fmt;

use crate::run::RunReport;
use crate::sweep::DEFAULT_KEEP_UP;
use cli_args::Args;

/// Default trials per load (the median of 3).
pub const DEFAULT_TRIALS: usize = 3;
/// Default bisection resolution: stop when the bracket is within 5 % of its lower end.
pub const DEFAULT_RESOLUTION: f64 = 0.05;

/// One trial's outcome, as the search needs it.
pub trait Trial {
    /// Verified replies per second in the measured window.
    fn achieved_rps(&self) -> f64;
}

impl Trial for RunReport {
    fn achieved_rps(&self) -> f64 {
        self.achieved_rps
    }
}

/// How a search runs.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchConfig {
    /// The coarse grid of offered loads (requests per second); sorted and deduplicated by
    /// [`validate`](Self::validate).
    pub grid: Vec<f64>,
    /// K: trials per load at most; the verdict is that of the (lower) median trial.
    pub trials: usize,
    /// Bisection stops when `hi - lo <= resolution * lo`.
    pub resolution: f64,
    /// A trial keeps up when `achieved >= keep_up * offered`.
    pub keep_up: f64,
    /// Run every grid load (for plots) before bisecting above the highest one kept up;
    /// otherwise the grid ends at its first sustained miss.
    pub whole_grid: bool,
    /// Decide a grid load that missed once more, in a later round, before bisecting below it
    /// ([`Phase::Confirm`]; not with `whole_grid`, which runs every grid load anyway).
    pub confirm_misses: bool,
}

impl SearchConfig {
    /// A search over `grid` with the defaults: median of 3, 5 % resolution, 95 % keep-up.
    pub fn new(grid: Vec<f64>) -> SearchConfig {
        SearchConfig {
            grid,
            trials: DEFAULT_TRIALS,
            resolution: DEFAULT_RESOLUTION,
            keep_up: DEFAULT_KEEP_UP,
            whole_grid: false,
            confirm_misses: true,
        }
    }

    /// Reads `--trials K` and `--resolution FRACTION` (e.g. 0.05) from `a`.
    pub fn take_flags(&mut self, a: &mut Args) -> Result<(), String> {
        if let Some(k) = a.parse::<usize>("--trials")? {
            self.trials = k;
        }
        if let Some(r) = a.parse::<f64>("--resolution")? {
            self.resolution = r;
        }
        Ok(())
    }

    /// Sorts the grid, drops non-positive and duplicate loads, and checks the rest.
    pub fn validate(&mut self) -> Result<(), String> {
        self.grid.retain(|r| r.is_finite() && *r > 0.0);
        self.grid.sort_by(f64::total_cmp);
        self.grid.dedup();
        if self.grid.is_empty() {
            return Err("the saturation search has no offered load to run".to_owned());
        }
        if self.trials == 0 {
            return Err("--trials must be at least 1".to_owned());
        }
        if !(self.resolution > 0.0 && self.resolution <= 1.0) {
            return Err(format!(
                "--resolution {} must be a fraction in (0, 1], e.g. 0.05",
                self.resolution
            ));
        }
        if !(self.keep_up > 0.0 && self.keep_up <= 1.0) {
            return Err(format!("keep-up fraction {} not in (0, 1]", self.keep_up));
        }
        Ok(())
    }

    /// Trials that keep up needed for a load to keep up: more than half of K.
    fn needed(&self) -> usize {
        self.trials - (self.trials - 1) / 2
    }

    /// The most trials one lane's search can run with K trials per load: every grid load, then
    /// bisection of the widest grid gap to the resolution (for printing a budget).
    pub fn max_trials(&self) -> usize {
        let widest = self
            .grid
            .windows(2)
            .map(|w| (w[1] - w[0]) / w[0])
            .fold(0.0f64, f64::max);
        let steps = if widest > self.resolution {
            (widest / self.resolution).log2().ceil() as usize
        } else {
            0
        };
        (self.grid.len() + steps + usize::from(self.confirms())) * self.trials
    }

    /// Trials one lane's search runs when every load's trials agree: ⌈(K+1)/2⌉ per load,
    /// for a saturation load in the widest grid gap (for printing a budget).
    pub fn typical_trials(&self) -> usize {
        self.max_trials() / self.trials.max(1) * self.needed()
    }

    /// Whether a grid miss is decided again before the lane bisects below it.
    fn confirms(&self) -> bool {
        self.confirm_misses && !self.whole_grid
    }
}

/// Which part of the search a load belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// A load of the coarse grid.
    Grid,
    /// A bisection point between a load kept up and one missed.
    Bisect,
    /// A grid load that missed, decided once more in a later round
    /// ([`SearchConfig::confirm_misses`]).
    Confirm,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Grid => "grid",
            Phase::Bisect => "bisect",
            Phase::Confirm => "confirm",
        })
    }
}

/// The point a trial runs: handed to the trial function.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Index of the lane (mode) in the search.
    pub lane: usize,
    /// Offered load, requests per second.
    pub offered_rps: f64,
    /// Trial number at this load (0-based).
    pub trial: usize,
    /// Grid or bisection.
    pub phase: Phase,
}

/// One load of one lane: its trials and the verdict.
#[derive(Clone, Debug)]
pub struct Verdict<T> {
    /// Offered load, requests per second.
    pub offered_rps: f64,
    /// Grid or bisection.
    pub phase: Phase,
    /// The trials, in the order run.
    pub trials: Vec<T>,
    /// Whether the median trial kept up.
    pub kept_up: bool,
}

impl<T: Trial> Verdict<T> {
    /// The lower median trial by achieved load (the one whose numbers a report quotes).
    pub fn median(&self) -> &T {
        let mut idx: Vec<usize> = (0..self.trials.len()).collect();
        idx.sort_by(|&a, &b| {
            self.trials[a]
                .achieved_rps()
                .total_cmp(&self.trials[b].achieved_rps())
        });
        &self.trials[idx[(idx.len() - 1) / 2]]
    }

    /// The median trial's achieved load.
    pub fn median_rps(&self) -> f64 {
        self.median().achieved_rps()
    }

    /// The lowest and highest achieved load of the trials.
    pub fn spread(&self) -> (f64, f64) {
        self.trials
            .iter()
            .map(Trial::achieved_rps)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
                (lo.min(r), hi.max(r))
            })
    }
}

/// Everything one lane's search ran.
#[derive(Clone, Debug)]
pub struct Search<T> {
    /// Every load, in the order run.
    pub loads: Vec<Verdict<T>>,
    /// The grid's highest load was kept up: the saturation load is above the grid.
    pub above_grid: bool,
}

impl<T: Trial> Search<T> {
    /// The highest load kept up, if any.
    pub fn best(&self) -> Option<&Verdict<T>> {
        self.loads
            .iter()
            .filter(|v| v.kept_up)
            .max_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps))
    }

    /// Among the loads kept up, the one whose median trial achieved the most (usually
    /// [`best`](Self::best); it can be a slightly lower load when the best one's median fell
    /// between 95 % and 100 % of offered). This is what "the highest load within 95 % of
    /// offered" reports, as [`crate::max_kept_up`] does for single points.
    pub fn best_achieved(&self) -> Option<&Verdict<T>> {
        self.loads
            .iter()
            .filter(|v| v.kept_up)
            .max_by(|a, b| a.median_rps().total_cmp(&b.median_rps()))
    }

    /// The lowest load above [`best`](Self::best) (or the lowest of all, when nothing kept up)
    /// whose verdict missed: the upper end of the saturation bracket. Of a load decided
    /// twice ([`Phase::Confirm`]), the later verdict.
    pub fn first_miss(&self) -> Option<&Verdict<T>> {
        let floor = self.best().map_or(f64::NEG_INFINITY, |b| b.offered_rps);
        self.loads
            .iter()
            .rev()
            .filter(|v| !v.kept_up && v.offered_rps > floor)
            .min_by(|a, b| a.offered_rps.total_cmp(&b.offered_rps))
    }

    /// Trials run in all.
    pub fn trials_run(&self) -> usize {
        self.loads.iter().map(|v| v.trials.len()).sum()
    }
}

enum Stage {
    Grid(usize),
    Bisect { lo: f64, hi: f64 },
    Done,
}

struct Lane<T> {
    stage: Stage,
    /// The grid load that missed is being decided once more.
    confirming: bool,
    /// The load being decided and its trials so far.
    current: Option<(f64, Phase, Vec<T>)>,
    search: Search<T>,
}

impl<T: Trial> Lane<T> {
    fn new() -> Lane<T> {
        Lane {
            stage: Stage::Grid(0),
            confirming: false,
            current: None,
            search: Search {
                loads: Vec::new(),
                above_grid: false,
            },
        }
    }

    /// The next trial to run, if the lane is still searching.
    fn next(&mut self, cfg: &SearchConfig, lane: usize) -> Option<Point> {
        if self.current.is_none() {
            let (load, phase) = match self.stage {
                Stage::Grid(i) if self.confirming => (cfg.grid[i], Phase::Confirm),
                Stage::Grid(i) => (cfg.grid[i], Phase::Grid),
                Stage::Bisect { lo, hi } => (((lo + hi) / 2.0).round(), Phase::Bisect),
                Stage::Done => return None,
            };
            self.current = Some((load, phase, Vec::new()));
        }
        let (offered_rps, phase, trials) = self.current.as_ref()?;
        Some(Point {
            lane,
            offered_rps: *offered_rps,
            trial: trials.len(),
            phase: *phase,
        })
    }

    /// Takes a trial of the current load; decides it when the median is settled, then moves on.
    fn push(&mut self, cfg: &SearchConfig, trial: T) {
        let Some((load, phase, mut trials)) = self.current.take() else {
            return;
        };
        trials.push(trial);
        let kept = trials
            .iter()
            .filter(|t| t.achieved_rps() >= cfg.keep_up * load)
            .count();
        let need = cfg.needed();
        let verdict = if kept >= need {
            true
        } else if trials.len() - kept > cfg.trials - need {
            false
        } else {
            self.current = Some((load, phase, trials));
            return;
        };
        self.search.loads.push(Verdict {
            offered_rps: load,
            phase,
            trials,
            kept_up: verdict,
        });
        self.advance(cfg, load, verdict);
    }

    fn advance(&mut self, cfg: &SearchConfig, load: f64, kept: bool) {
        let confirmed = std::mem::take(&mut self.confirming);
        self.stage = match self.stage {
            // A grid miss above a load kept up: decided once more before bisecting.
            Stage::Grid(i)
                if !kept && !confirmed && cfg.confirms() && self.search.best().is_some() =>
            {
                self.confirming = true;
                Stage::Grid(i)
            }
            Stage::Grid(i) if i + 1 < cfg.grid.len() && (kept || cfg.whole_grid) => {
                Stage::Grid(i + 1)
            }
            Stage::Grid(_) => match self.bracket(cfg) {
                Some((lo, hi)) => self.bisect_or_done(cfg, lo, hi),
                None => {
                    self.search.above_grid = self.search.loads.last().is_some_and(|v| v.kept_up);
                    Stage::Done
                }
            },
            Stage::Bisect { lo, hi } => {
                if kept {
                    self.bisect_or_done(cfg, load, hi)
                } else {
                    self.bisect_or_done(cfg, lo, load)
                }
            }
            Stage::Done => Stage::Done,
        };
    }

    /// After the grid: the highest grid load kept up and the next grid load, if it missed.
    fn bracket(&self, cfg: &SearchConfig) -> Option<(f64, f64)> {
        let best = self.search.best()?.offered_rps;
        let i = cfg.grid.iter().position(|&g| g == best)?;
        let next = *cfg.grid.get(i + 1)?;
        let missed = self
            .search
            .loads
            .iter()
            .any(|v| v.offered_rps == next && !v.kept_up);
        missed.then_some((best, next))
    }

    fn bisect_or_done(&self, cfg: &SearchConfig, lo: f64, hi: f64) -> Stage {
        let mid = ((lo + hi) / 2.0).round();
        if hi - lo <= cfg.resolution * lo || mid <= lo || mid >= hi {
            Stage::Done
        } else {
            Stage::Bisect { lo, hi }
        }
    }
}

/// Searches `lanes` lanes at once: `run_trial` runs one trial at a [`Point`] (lane, offered
/// load, trial number, phase) and returns its outcome. Each round runs one trial of every lane
/// still searching, in lane order. The first error ends the search and is returned.
pub fn search<T, E, F>(
    cfg: &SearchConfig,
    lanes: usize,
    mut run_trial: F,
) -> Result<Vec<Search<T>>, E>
where
    T: Trial,
    E: From<String>,
    F: FnMut(Point) -> Result<T, E>,
{
    let mut cfg = cfg.clone();
    cfg.validate()?;
    let mut state: Vec<Lane<T>> = (0..lanes).map(|_| Lane::new()).collect();
    loop {
        let mut ran = false;
        for (i, lane) in state.iter_mut().enumerate() {
            let Some(point) = lane.next(&cfg, i) else {
                continue;
            };
            let t = run_trial(point)?;
            lane.push(&cfg, t);
            ran = true;
        }
        if !ran {
            break;
        }
    }
    Ok(state.into_iter().map(|l| l.search).collect())
}

/// A doubling grid from `start` up to `end` (inclusive when it lands on it; `end` is always the
/// last load).
pub fn doubling_grid(start: f64, end: f64) -> Vec<f64> {
    let mut g = Vec::new();
    let mut r = start;
    while r < end && r > 0.0 {
        g.push(r);
        r *= 2.0;
    }
    g.push(end);
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A trial of the fake server: what it achieved.
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Fake {
        offered: f64,
        achieved: f64,
    }

    impl Trial for Fake {
        fn achieved_rps(&self) -> f64 {
            self.achieved
        }
    }

    /// A server of capacity `cap` req/s that achieves min(offered, cap); trial `t` at a load
    /// is "descheduled" (achieves 60 % of offered) when `noisy(load, t)` says so.
    fn server(cap: f64, noisy: impl Fn(f64, usize) -> bool) -> impl Fn(Point) -> Fake {
        move |p: Point| {
            let achieved = if noisy(p.offered_rps, p.trial) {
                0.6 * p.offered_rps.min(cap)
            } else {
                p.offered_rps.min(cap)
            };
            Fake {
                offered: p.offered_rps,
                achieved,
            }
        }
    }

    fn cfg(grid: Vec<f64>) -> SearchConfig {
        SearchConfig::new(grid)
    }

    fn run_one(c: &SearchConfig, f: impl Fn(Point) -> Fake) -> Search<Fake> {
        search::<_, String, _>(c, 1, |p| Ok(f(p)))
            .unwrap()
            .pop()
            .unwrap()
    }

    #[test]
    fn finds_the_capacity_within_the_resolution() {
        let c = cfg(doubling_grid(125_000.0, 4_000_000.0));
        for cap in [140_000.0, 333_000.0, 1_000_000.0, 1_490_000.0, 3_100_000.0] {
            let s = run_one(&c, server(cap, |_, _| false));
            let best = s.best().unwrap();
            let miss = s.first_miss().unwrap();
            // The bracket holds the capacity (95 % keep-up: up to cap / 0.95) and is tight.
            assert!(
                best.offered_rps <= cap / 0.95,
                "cap {cap}: best {}",
                best.offered_rps
            );
            assert!(
                miss.offered_rps > cap / 0.95,
                "cap {cap}: miss {}",
                miss.offered_rps
            );
            assert!(
                miss.offered_rps - best.offered_rps <= 0.05 * best.offered_rps + 1.0,
                "cap {cap}: bracket {} .. {}",
                best.offered_rps,
                miss.offered_rps
            );
            assert_eq!(best.median_rps(), best.offered_rps.min(cap));
            // The best load's median is also the highest median kept up.
            assert_eq!(s.best_achieved().unwrap().median_rps(), best.median_rps());
            assert!(!s.above_grid);
            // Consistent trials: two per load (the median of 3 is settled by two agreeing).
            assert!(s.loads.iter().all(|v| v.trials.len() == 2));
        }
    }

    #[test]
    fn a_single_bad_trial_does_not_end_the_search() {
        let c = cfg(doubling_grid(125_000.0, 4_000_000.0));
        // The first trial at every load below capacity is descheduled.
        let s = run_one(&c, server(1_000_000.0, |_, t| t == 0));
        let best = s.best().unwrap();
        assert!(best.offered_rps >= 950_000.0, "best {}", best.offered_rps);
        assert!(best.offered_rps <= 1_000_000.0 / 0.95);
        // Such loads took a third trial, and the spread shows the bad one.
        assert_eq!(best.trials.len(), 3);
        let (lo, hi) = best.spread();
        assert!(lo < 0.95 * best.offered_rps && hi >= 0.95 * best.offered_rps);
        assert!(best.median_rps() >= 0.95 * best.offered_rps);
    }

    #[test]
    fn a_sustained_miss_below_capacity_ends_the_grid() {
        let c = cfg(doubling_grid(125_000.0, 4_000_000.0));
        // At 500 k, two of three trials are descheduled: that load misses (sustained), and the
        // search brackets below it rather than ignoring it.
        let s = run_one(&c, server(3_000_000.0, |l, t| l == 500_000.0 && t < 2));
        let best = s.best().unwrap().offered_rps;
        assert!(best > 450_000.0 && best < 500_000.0, "best {best}");
        assert_eq!(s.first_miss().unwrap().offered_rps, 500_000.0);
        assert!(s.loads.iter().all(|v| v.offered_rps <= 500_000.0));
    }

    /// The lanes walk the grid in step, so a transient in the rounds that decide one grid load
    /// fails it for every lane near capacity. The miss is decided once more in a later round,
    /// and each lane then finds its own capacity instead of all stopping below that load.
    #[test]
    fn a_grid_miss_from_a_transient_is_confirmed_before_the_lanes_bisect() {
        let caps = [1_100_000.0, 1_300_000.0, 1_500_000.0];
        // Three lanes; the machine is slow (every trial at 60 %) for the rounds that first
        // decide 800 k.
        let run = |c: &SearchConfig| {
            let mut decided_800k = [0usize; 3];
            search::<_, String, _>(c, 3, |p| {
                let transient = p.offered_rps == 800_000.0 && decided_800k[p.lane] < 2;
                if p.offered_rps == 800_000.0 {
                    decided_800k[p.lane] += 1;
                }
                let slow = if transient { 0.6 } else { 1.0 };
                Ok(Fake {
                    offered: p.offered_rps,
                    achieved: p.offered_rps.min(caps[p.lane]) * slow,
                })
            })
            .unwrap()
        };
        let c = cfg(doubling_grid(100_000.0, 3_200_000.0));
        for (s, cap) in run(&c).iter().zip(caps) {
            // 800 k kept up when decided again; 1.6 M, above capacity, missed twice.
            let confirm: Vec<(f64, bool)> = s
                .loads
                .iter()
                .filter(|v| v.phase == Phase::Confirm)
                .map(|v| (v.offered_rps, v.kept_up))
                .collect();
            assert_eq!(confirm, vec![(800_000.0, true), (1_600_000.0, false)]);
            let best = s.best().unwrap().offered_rps;
            assert!(
                best > 0.95 * cap && best <= cap / 0.95,
                "cap {cap}: best {best}"
            );
        }
        // Without the confirmation every lane stops below 800 k.
        let once = SearchConfig {
            confirm_misses: false,
            ..c
        };
        for s in &run(&once) {
            let best = s.best().unwrap().offered_rps;
            assert!((760_000.0..800_000.0).contains(&best), "best {best}");
        }
    }

    #[test]
    fn nothing_kept_up_and_above_the_grid() {
        let c = cfg(vec![200.0, 100.0, 400.0]);
        let s = run_one(&c, server(50.0, |_, _| false));
        assert!(s.best().is_none());
        assert_eq!(s.first_miss().unwrap().offered_rps, 100.0);
        assert_eq!(s.loads.len(), 1);
        assert!(!s.above_grid);

        let s = run_one(&c, server(1e9, |_, _| false));
        assert_eq!(s.best().unwrap().offered_rps, 400.0);
        assert!(s.first_miss().is_none());
        assert!(s.above_grid);
        assert_eq!(s.loads.len(), 3);
    }

    #[test]
    fn lanes_are_interleaved_trial_by_trial() {
        let c = cfg(vec![100.0, 200.0, 400.0]);
        let caps = [150.0, 1000.0];
        let mut order = Vec::new();
        let out = search::<_, String, _>(&c, 2, |p| {
            order.push((p.lane, p.offered_rps, p.trial));
            Ok(server(caps[p.lane], |_, _| false)(p))
        })
        .unwrap();
        // Lane 0 and lane 1 alternate while both search.
        assert_eq!(
            &order[..6],
            &[
                (0, 100.0, 0),
                (1, 100.0, 0),
                (0, 100.0, 1),
                (1, 100.0, 1),
                (0, 200.0, 0),
                (1, 200.0, 0),
            ]
        );
        assert_eq!(out[1].best().unwrap().offered_rps, 400.0);
        assert!(out[0].best().unwrap().offered_rps <= 150.0 / 0.95);
        // Lane 0 bisects on after lane 1 ran out of grid: the tail is lane 0 alone.
        assert!(order.last().unwrap().0 == 0);
    }

    #[test]
    fn whole_grid_runs_every_load_then_bisects_above_the_best() {
        let mut c = cfg(vec![100.0, 200.0, 400.0, 800.0]);
        c.whole_grid = true;
        let s = run_one(&c, server(300.0, |_, _| false));
        let grid: Vec<f64> = s
            .loads
            .iter()
            .filter(|v| v.phase == Phase::Grid)
            .map(|v| v.offered_rps)
            .collect();
        assert_eq!(grid, vec![100.0, 200.0, 400.0, 800.0]);
        let best = s.best().unwrap().offered_rps;
        assert!(best > 200.0 && best <= 300.0 / 0.95);
        assert!(s.loads.iter().any(|v| v.phase == Phase::Bisect));
    }

    #[test]
    fn one_trial_and_even_trials_use_the_lower_median() {
        let mut c = cfg(vec![100.0]);
        c.trials = 1;
        let s = run_one(&c, server(1000.0, |_, t| t == 0));
        assert!(!s.loads[0].kept_up);
        assert_eq!(s.loads[0].trials.len(), 1);
        // K = 2: one miss decides (the lower median of two would miss).
        c.trials = 2;
        let s = run_one(&c, server(1000.0, |_, t| t == 1));
        assert!(!s.loads[0].kept_up);
        assert_eq!(s.loads[0].trials.len(), 2);
        let v = &s.loads[0];
        assert_eq!(v.median_rps(), 60.0);
        assert_eq!(v.spread(), (60.0, 100.0));
    }

    #[test]
    fn errors_and_bad_configs_are_reported() {
        let c = cfg(vec![100.0, 200.0]);
        let e = search::<Fake, String, _>(&c, 1, |p| {
            if p.offered_rps > 150.0 {
                Err("boom".to_owned())
            } else {
                Ok(server(1e9, |_, _| false)(p))
            }
        });
        assert_eq!(e.unwrap_err(), "boom");
        for bad in [
            SearchConfig {
                trials: 0,
                ..cfg(vec![1.0])
            },
            SearchConfig {
                resolution: 0.0,
                ..cfg(vec![1.0])
            },
            cfg(vec![-1.0, f64::NAN]),
        ] {
            assert!(search::<Fake, String, _>(&bad, 1, |_| unreachable!()).is_err());
        }
        let mut a = Args::new(vec![
            "--trials".into(),
            "5".into(),
            "--resolution".into(),
            "0.1".into(),
        ]);
        let mut c = cfg(vec![1.0]);
        c.take_flags(&mut a).unwrap();
        assert_eq!((c.trials, c.resolution), (5, 0.1));
        a.finish().unwrap();
    }

    #[test]
    fn best_achieved_is_the_highest_median_kept_up() {
        let v = |offered: f64, achieved: &[f64], kept_up: bool| Verdict {
            offered_rps: offered,
            phase: Phase::Bisect,
            trials: achieved
                .iter()
                .map(|&a| Fake {
                    offered,
                    achieved: a,
                })
                .collect(),
            kept_up,
        };
        let s = Search {
            loads: vec![
                v(1000.0, &[990.0, 995.0], true),
                v(1040.0, &[989.0, 999.0, 700.0], true),
                v(1080.0, &[900.0, 950.0], false),
            ],
            above_grid: false,
        };
        assert_eq!(s.best().unwrap().offered_rps, 1040.0);
        assert_eq!(s.best_achieved().unwrap().offered_rps, 1000.0);
        assert_eq!(s.best_achieved().unwrap().median_rps(), 990.0);
        assert_eq!(s.loads[1].median_rps(), 989.0);
        assert_eq!(s.first_miss().unwrap().offered_rps, 1080.0);
        assert_eq!(s.trials_run(), 7);
    }

    #[test]
    fn doubling_grid_ends_at_the_top() {
        assert_eq!(doubling_grid(1.0, 5.0), vec![1.0, 2.0, 4.0, 5.0]);
        assert_eq!(doubling_grid(1.0, 4.0), vec![1.0, 2.0, 4.0]);
        assert_eq!(doubling_grid(3.0, 2.0), vec![2.0]);
    }
}

//! A slowed trial is rerun, not counted: the emulated-NIC saturation search with every trial
//! judged, as it finishes, against the run's fast state seen so far, and rerun when its speed
//! canary read the machine's slow state.
//!
//! Why: this project's VM has a slow state in which a cache line bounced between the server
//! CPU and the device CPU takes ≈ 330 ns instead of ≈ 62 ns and the server's work per request
//! doubles (docs/performance.md, "How trials are judged"). Marking such trials after the run
//! ([`crate::rebase_canaries`]) says a result rests on them, but the search's medians and
//! verdicts were already taken over them: one binary's Google-1 ratio read 0.96, 1.05 and 1.40
//! on one day, and 1.27 in a run wholly in the fast state. [`search_rerunning_slowed`] keeps
//! them out of the medians instead.
//!
//! The rule, and what it does with a run's first trials: [`search_rerunning_slowed`].

use loadgen::canary::Readings;
use loadgen::search::{search, Point, Search, SearchConfig};

use crate::search::EmuTrial;

/// Reruns of a slowed trial before the search takes it as it is: two, so a trial costs at
/// most three runs, and a machine in the slow state half the time leaves a trial slowed one
/// time in eight (each run landing in either state alike).
pub const DEFAULT_SLOWED_RETRIES: usize = 2;

/// The saturation search ([`loadgen::search::search`]) of `lanes` modes over
/// [`EmuTrial`]s, with a slowed trial rerun, not counted. `run_trial` runs one trial at a
/// point; each attempt's progress line (and its failures) goes to stderr, an attempt thrown
/// away followed by `-> slowed: rerun k of retries`. The trial the search takes carries the
/// attempts thrown away before it ([`EmuTrial::slowed_reruns`]), the limit it ran under
/// ([`EmuTrial::slowed_retries`]) and the count in its record (`slowed_reruns`).
/// `retries == 0` takes every trial as it is. The first error ends the search and is
/// returned.
///
/// **The rule.** Before every trial the speed canary times each of its CPUs and the pair
/// (server CPU, device CPU) ([`loadgen::canary`]). When the trial is done its readings join
/// the run's readings so far ([`Readings`](loadgen::canary::Readings)) and it is judged
/// against them: each CPU's and the pair's reference is its 10th-percentile reading so far
/// ([`loadgen::canary::REFERENCE_PERCENTILE`]: the fastest while there are five readings or
/// fewer). A trial whose canary read over [`loadgen::canary::SLOWED_RATIO`] × a reference
/// (the pair's is the one the slow state moves) is thrown away and the same point (lane,
/// offered load, trial number) run again, up to `retries` times (`--slowed-retries`, default
/// [`DEFAULT_SLOWED_RETRIES`]); the first run judged not slowed is what the search takes. A
/// trial still slowed after the retries is taken and stays marked slowed. Every attempt's
/// readings stay in the run's readings, and the attempts thrown away stay in the trial
/// ([`EmuTrial::slowed_reruns`]) and in the points file, counted in every table and summary.
/// Once the run is over [`crate::rebase_canaries`] judges every trial, kept or thrown away,
/// against the whole run's readings, as before.
///
/// **The first trials of a run.** The reference so far is only as good as the readings so
/// far:
/// - A run that *starts in the slow state* has slow references: its slow trials read ≈ 1.0
///   and are taken without a rerun until the machine turns fast; from then on the fast
///   readings set the reference and slow trials are rerun. The early slow trials are not
///   rerun (the search has used them); the rebase after the run marks them slowed when the
///   run saw the fast state in more than about a tenth of its readings, and the table says a
///   result rests on them. A run wholly in the slow state is judged fast throughout, by both.
/// - An *odd fast first reading* (one run's first pair reading was 30 ns against ≈ 62 ns for
///   every later fast one) is the reference while a CPU has five readings or fewer, so the
///   next trials read ≈ 2 × and are rerun; the reruns add readings, and from the sixth the
///   odd one no longer sets the reference. It costs a few trials at the start, and the
///   rebase unmarks a trial taken slowed that way.
pub fn search_rerunning_slowed<S, F>(
    cfg: &SearchConfig,
    lanes: usize,
    retries: usize,
    run_trial: F,
) -> Result<Vec<Search<EmuTrial<S>>>, String>
where
    F: FnMut(Point) -> Result<EmuTrial<S>, String>,
{
    search_rerunning_slowed_saying(cfg, lanes, retries, run_trial, &mut |line| {
        eprintln!("[bench] {line}")
    })
}

/// [`search_rerunning_slowed`], each progress and failure line (without the `[bench] `
/// prefix) given to `say` instead of printed.
pub(crate) fn search_rerunning_slowed_saying<S, F>(
    cfg: &SearchConfig,
    lanes: usize,
    retries: usize,
    mut run_trial: F,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<Search<EmuTrial<S>>>, String>
where
    F: FnMut(Point) -> Result<EmuTrial<S>, String>,
{
    let mut readings = Readings::new();
    search(cfg, lanes, |p| {
        let mut thrown = Vec::new();
        loop {
            let mut t = run_trial(p)?;
            if let Some(c) = t.report.canary.as_mut() {
                readings.add(c);
                readings.judge(c);
                t.record.set_canary(c);
            }
            let rerun = t.slowed() && thrown.len() < retries;
            let note = if rerun {
                format!("  -> slowed: rerun {} of {retries}", thrown.len() + 1)
            } else if t.slowed() && retries > 0 {
                format!("  -> slowed after {retries} rerun(s): kept, marked slowed")
            } else {
                String::new()
            };
            say(&format!("{}{note}", t.progress()));
            for f in &t.report.failures {
                say(&format!("  {}: {f}", t.record.mode));
            }
            match t.slowed_run().filter(|_| rerun) {
                Some(s) => thrown.push(s),
                None => {
                    t.record.slowed_reruns = Some(thrown.len());
                    t.slowed_reruns = thrown;
                    t.slowed_retries = retries;
                    return Ok(t);
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{table, trials_json, EmuSummary};
    use loadgen::canary::Canary;
    use std::time::Duration;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// A fast pair reading (62 ns a round trip) and a slow one (330 ns).
    const FAST: u64 = 1240;
    const SLOW: u64 = 6600;

    /// A trial at `p` that achieved `achieved`, its canary with pair reading `pair_us` (each
    /// CPU alone at its usual speed), judged as the device run judges it (the process's first
    /// reading: here `canary`'s).
    fn trial(canary: &Canary, p: Point, achieved: f64, pair_us: u64) -> EmuTrial<u32> {
        let mut report = crate::search::tests::report(p.offered_rps, achieved, 0.3);
        report.canary = Some(
            canary.judge_with_pair(&[(0, us(700)), (1, us(705))], Some(([0, 1], us(pair_us)))),
        );
        let work = if pair_us == SLOW { 700.0 } else { 350.0 };
        EmuTrial::new(p, "m", "s", report, Some(work), 0)
    }

    /// One lane, one load, K = 1: runs `states` in turn (a fast or slow pair reading per
    /// attempt, the slow ones achieving half), returns the search and the attempts made.
    fn one_point(retries: usize, first: u64, states: &[u64]) -> (Search<EmuTrial<u32>>, usize) {
        let canary = Canary::new();
        // The run's first trial (its first reading is the Canary's reference).
        let mut cfg = SearchConfig::new(vec![100.0, 200.0]);
        cfg.trials = 1;
        // No bisection after a miss at 200, and no second decision of it: two loads, one
        // trial each.
        cfg.resolution = 1.0;
        cfg.confirm_misses = false;
        let mut attempts = 0;
        let mut searches = search_rerunning_slowed(&cfg, 1, retries, |p| {
            let pair = if p.offered_rps == 100.0 {
                first
            } else {
                let s = states[attempts.min(states.len() - 1)];
                attempts += 1;
                s
            };
            // The first load keeps up whatever its state, so the search goes on to 200.
            let slow_at_200 = pair == SLOW && p.offered_rps == 200.0;
            let achieved = if slow_at_200 { 50.0 } else { p.offered_rps };
            Ok(trial(&canary, p, achieved, pair))
        })
        .unwrap();
        (searches.pop().unwrap(), attempts)
    }

    /// A trial whose canary read the slow state (against the fast readings before it) is run
    /// again; the fast rerun is what the search takes, and it carries the one thrown away.
    #[test]
    fn a_slowed_trial_is_rerun_and_the_fast_rerun_is_kept() {
        let (s, attempts) = one_point(2, FAST, &[SLOW, FAST]);
        assert_eq!(attempts, 2);
        let v = &s.loads[1];
        assert_eq!(v.offered_rps, 200.0);
        assert_eq!(v.trials.len(), 1);
        let t = &v.trials[0];
        // The fast run, not the slow one, decided the load: it kept up.
        assert!(v.kept_up && !t.slowed());
        assert_eq!(t.report.run.achieved_rps, 200.0);
        assert_eq!(t.slowed_reruns.len(), 1);
        let thrown = &t.slowed_reruns[0];
        assert_eq!(thrown.achieved_rps, 50.0);
        assert!(thrown.canary.slowed());
        assert!((thrown.canary.pair_ratio().unwrap() - SLOW as f64 / FAST as f64).abs() < 1e-9);
        assert_eq!((t.slowed_retries, t.record.slowed_reruns), (2, Some(1)));
        // The first load's trial was not rerun; its record says 0.
        assert_eq!(s.loads[0].trials[0].record.slowed_reruns, Some(0));
    }

    /// A wrong reply in a run thrown away as slowed still counts: the summary's mismatched
    /// replies include it and `replies_verified` fails the bench, and the points file has it.
    #[test]
    fn a_wrong_reply_in_a_run_thrown_away_still_fails_the_bench() {
        let canary = Canary::new();
        let mut cfg = SearchConfig::new(vec![100.0, 200.0]);
        (cfg.trials, cfg.resolution, cfg.confirm_misses) = (1, 1.0, false);
        let mut n = 0;
        let searches = search_rerunning_slowed(&cfg, 1, 2, |p| {
            n += 1;
            // The second run (the first at 200) is slow and had one wrong reply.
            let slow = n == 2;
            let mut t = trial(&canary, p, p.offered_rps, if slow { SLOW } else { FAST });
            if slow {
                t.report.run.counters.mismatched = 1;
                t.report.failures.push("request 3: wrong value".to_owned());
            }
            Ok(t)
        })
        .unwrap();
        let s = &searches[0];
        let t = &s.loads[1].trials[0];
        assert_eq!(
            (t.slowed_reruns.len(), t.report.run.counters.mismatched),
            (1, 0)
        );
        let summary = EmuSummary::of("m", s);
        assert_eq!(summary.mismatched, 1);
        let err = crate::replies_verified(&[summary]).unwrap_err();
        assert!(err.contains("m: 1 mismatched"), "{err}");
        let j = &trials_json(s)[1]["thrown_slowed_runs"][0];
        assert_eq!(j["mismatched"], 1);
        assert_eq!(j["failures"][0], "request 3: wrong value");
    }

    /// Reruns are bounded: a trial slowed every time is run 1 + retries times, then taken
    /// as it is and marked slowed; with no retries it is taken at once.
    #[test]
    fn reruns_are_bounded_and_a_trial_still_slowed_is_kept_marked() {
        for retries in [0, 1, 3] {
            let (s, attempts) = one_point(retries, FAST, &[SLOW]);
            assert_eq!(attempts, 1 + retries, "retries {retries}");
            let t = &s.loads[1].trials[0];
            assert!(t.slowed() && t.record.slowed());
            assert_eq!(t.slowed_reruns.len(), retries);
            assert_eq!(t.record.slowed_reruns, Some(retries));
            // Slow: it missed, and the search counted it.
            assert!(!s.loads[1].kept_up);
        }
    }

    /// A run that starts in the slow state takes its slow trials (nothing faster has been
    /// seen) until a fast reading arrives; from then on a slow trial is rerun.
    #[test]
    fn a_run_that_starts_slow_reruns_only_once_it_has_seen_the_fast_state() {
        let (s, attempts) = one_point(2, SLOW, &[SLOW, FAST]);
        // The second load's first run was slow, like every reading before it: taken.
        assert_eq!(attempts, 1);
        let t = &s.loads[1].trials[0];
        assert!(!t.slowed() && t.slowed_reruns.is_empty());
        // Fast readings first, then a slow one: rerun.
        let (_, attempts) = one_point(2, FAST, &[SLOW, FAST]);
        assert_eq!(attempts, 2);
    }

    /// The reruns reach every output: the summary and its JSON, each load's summary, the
    /// table's column and note, the trial's JSON (with the runs thrown away), and the rebase
    /// judges the thrown-away runs too.
    #[test]
    fn the_rerun_count_reaches_the_summary_table_and_json() {
        let canary = Canary::new();
        let cfg = SearchConfig::new(vec![100.0, 200.0, 400.0, 800.0]);
        // Lane 0: every third run slow; lane 1 always fast.
        let mut n = 0;
        let mut searches = search_rerunning_slowed(&cfg, 2, 2, |p| {
            n += 1;
            let slow = p.lane == 0 && n > 2 && n % 3 == 0;
            let pair = if slow { SLOW } else { FAST };
            let cap = [300.0, 500.0][p.lane];
            let achieved = p.offered_rps.min(cap) / if slow { 2.0 } else { 1.0 };
            Ok(trial(&canary, p, achieved, pair))
        })
        .unwrap();
        crate::rebase_canaries(&mut searches);
        let reruns = |s: &Search<EmuTrial<u32>>| -> usize {
            s.loads
                .iter()
                .flat_map(|v| &v.trials)
                .map(|t| t.slowed_reruns.len())
                .sum()
        };
        let (r0, r1) = (reruns(&searches[0]), reruns(&searches[1]));
        assert!(r0 > 0 && r1 == 0, "{r0} {r1}");
        // No trial the search took is slowed (each slow run was followed by a fast one).
        assert!(searches
            .iter()
            .flat_map(|s| s.loads.iter().flat_map(|v| &v.trials))
            .all(|t| !t.slowed()));
        // The search is that of a machine always fast: lane 0 bounded near 300.
        let best = searches[0].best().unwrap().offered_rps;
        assert!(best > 280.0 && best <= 300.0 / 0.95, "{best}");
        let a = EmuSummary::of("a", &searches[0]);
        let b = EmuSummary::of("b", &searches[1]);
        assert_eq!((a.slowed_reruns, b.slowed_reruns), (r0, 0));
        assert_eq!((a.slowed_retries, a.slowed), (2, 0));
        let at_best: usize = searches[0]
            .best_achieved()
            .unwrap()
            .trials
            .iter()
            .map(|t| t.slowed_reruns.len())
            .sum();
        assert_eq!(a.best.as_ref().unwrap().slowed_reruns, at_best);
        let j = a.to_json();
        assert_eq!(j["slowed_reruns"], r0);
        assert_eq!(j["slowed_retries"], 2);
        assert_eq!(j["best"]["slowed_reruns"], at_best);
        let t = table(&[a.clone(), b.clone()], None, 3);
        assert!(t.contains("| rerun for slowness (there / all) |"), "{t}");
        // Slowed there / all 0 / 0 (every slow run was rerun), then the reruns.
        assert!(t.contains(&format!("| 0 / 0 | {at_best} / {r0} | ")), "{t}");
        assert!(
            t.contains(&format!("{r0} trial run(s) were thrown away")),
            "{t}"
        );
        assert!(t.contains("--slowed-retries 2"), "{t}");
        // No reruns: the column reads 0 / 0 and there is no note.
        let t = table(std::slice::from_ref(&b), None, 3);
        assert!(
            t.contains("| 0 / 0 | 0 / 0 | ") && !t.contains("thrown away"),
            "{t}"
        );
        assert!(t.contains("rerun up to 2 times (--slowed-retries)"), "{t}");
        // A search that did not rerun says nothing of reruns, and a slowed trial is said to
        // be in the medians.
        let mut never = b.clone();
        (never.slowed_retries, never.slowed) = (0, 1);
        let t = table(&[never], None, 3);
        assert!(
            !t.contains("--slowed-retries)") && t.contains("(--slowed-retries 0)"),
            "{t}"
        );
        // Every trial's JSON has the count; a rerun one lists the runs thrown away, judged
        // by the rebase (slowed against the whole run's fast readings).
        let pts = trials_json(&searches[0]);
        assert!(pts.iter().all(|p| p["slowed_reruns"].is_u64()));
        let total: u64 = pts
            .iter()
            .map(|p| p["slowed_reruns"].as_u64().unwrap())
            .sum();
        assert_eq!(total as usize, r0);
        let with = pts
            .iter()
            .find(|p| p["slowed_reruns"] == 1)
            .expect("a rerun trial");
        assert_eq!(with["slowed_retries"], 2);
        let thrown = &with["thrown_slowed_runs"][0];
        assert_eq!(thrown["slowed"], true);
        assert!(thrown["canary"]["pair_ratio"].as_f64().unwrap() > 5.0);
        // The median records (echo.json / kv.json) carry the count too.
        let recs = crate::median_records(&searches[0]);
        assert!(recs.iter().all(|r| r.slowed_reruns.is_some()));
    }

    /// The judgment is the run's readings so far: an odd fast first reading makes the next
    /// few trials read slowed (they are rerun), until six readings push it below the
    /// reference percentile.
    #[test]
    fn an_odd_fast_first_reading_costs_a_few_reruns_only() {
        let canary = Canary::new();
        let cfg = SearchConfig {
            trials: 1,
            ..SearchConfig::new(vec![100.0, 200.0, 400.0, 800.0])
        };
        let mut n = 0;
        let searches = search_rerunning_slowed(&cfg, 1, 2, |p| {
            n += 1;
            // 600 us: 30 ns a round trip, half the fast state's.
            let pair = if n == 1 { 600 } else { FAST };
            Ok(trial(&canary, p, p.offered_rps, pair))
        })
        .unwrap();
        let s = &searches[0];
        let thrown: usize = s
            .loads
            .iter()
            .flat_map(|v| &v.trials)
            .map(|t| t.slowed_reruns.len())
            .sum();
        // Readings 2-5 are judged against the odd 600 us (2.07x), the sixth on is not.
        assert_eq!(thrown, 3, "{:?}", s.loads.len());
        assert_eq!(n, s.trials_run() + thrown);
        let last = s.loads.last().unwrap().trials.last().unwrap();
        assert!(!last.slowed() && last.slowed_reruns.is_empty());
    }
}

//! The bench skeleton of an emulated-NIC run: an app supplies its workload (its lanes' names
//! and a closure that runs one trial at a [`Point`]: its requests, its reply checker, its
//! server per core); [`EmuBench`] owns the rest: the CPUs and the interference check before
//! anything runs, the budget line, the saturation search repeated `--repeat` times with a
//! slowed trial rerun ([`search_rerunning_slowed`]), the canaries rebased over the whole run,
//! and one [`EmuBenchRun`]: the summaries and trials of every repeat ([`EmuOutcome`]), the
//! median records and each lane's server counters. [`write_emu_outputs`] writes what every
//! such bench writes from it.
//!
//! A program that has its CPUs already and may print nothing (the C library's emulated device,
//! which runs a bench's plan inside the server's process) builds the skeleton with
//! [`EmuBench::on_cpus`] and runs it with [`EmuBench::run_with`]: its lines go where it says,
//! and it sees every repeat as it ends ([`EmuRepeat`]).

use std::path::Path;
use std::time::Duration;

use loadgen::search::{Point, Search, SearchConfig};
use loadgen::Record;
use serde_json::Value;

use crate::headline::{Floor, Headlines, Roles};
use crate::repeats::{detail_tables, summaries_json, summary_text, EmuOutcome};
use crate::rerun::search_rerunning_slowed_saying;
use crate::search::{control_line, median_records, rebase_canaries, trials_json};
use crate::{EmuSettings, EmuSummary, EmuTrial};

/// How long the interference check watches the machine before a run
/// ([`loadgen::interference::idle_warning`]).
const IDLE_WATCH: Duration = Duration::from_millis(300);

/// The warning [`EmuBench::new`] prints before a run when other processes are busy on the
/// machine (watched for a moment before the run), for a program that builds its bench with
/// [`EmuBench::on_cpus`] and prints the warning in its own words.
pub fn interference_warning() -> Option<String> {
    loadgen::interference::idle_warning(IDLE_WATCH)
}

/// What the budget line says of the app's run (the rest it takes from the search).
#[derive(Clone, Debug)]
pub struct About<'a> {
    /// What a lane is, singular and plural (`("mode", "modes")`, `("serialization",
    /// "serializations")`).
    pub lane: (&'a str, &'a str),
    /// What every lane runs (`shape list-2x2048`, `workload twitter`).
    pub what: String,
    /// Measured time of a trial and its warm-up before.
    pub per_trial: (Duration, Duration),
    /// The IP MTU of the run's frames.
    pub mtu: usize,
    /// What each server core holds beyond its server, appended to the description of the
    /// cores (e.g. `", each with its shard of the keys"`; empty: nothing).
    pub per_core: &'a str,
}

/// The skeleton of an emulated-NIC bench: the CPUs it runs on and its search, checked before
/// the app prepares anything ([`EmuBench::new`]); [`EmuBench::run`] then drives the app's
/// trials.
#[derive(Clone, Debug)]
pub struct EmuBench {
    search: SearchConfig,
    server_cpus: Vec<usize>,
    device_cpu: usize,
    repeats: usize,
    slowed_retries: usize,
}

/// One repeat of the whole search, as [`EmuBench::run_with`] gives it to its hook when it
/// ends: untagged (a bench with its own layout per repeat writes them as they are).
#[derive(Clone, Debug)]
pub struct EmuRepeat {
    /// Which repeat, from 1.
    pub repeat: usize,
    /// Of how many.
    pub of: usize,
    /// Each lane's search summarized, in lane order.
    pub summaries: Vec<EmuSummary>,
    /// Each lane's median record per load, lane after lane (no `repeat`).
    pub records: Vec<Record>,
    /// Every trial of the repeat (JSON), lane after lane, in the order each lane ran them (no
    /// `"repeat"`).
    pub trials: Vec<Value>,
    /// Every trial's record, in the order of `trials` (no `repeat`; canaries rebased), for a
    /// bench that keeps each trial, not only each load's median.
    pub trial_records: Vec<Record>,
}

/// What [`EmuBench::run`] found: every repeat's summaries and trials, the records and each
/// lane's server counters.
#[derive(Clone, Debug)]
pub struct EmuBenchRun<S> {
    /// Every repeat's summaries and every trial (tagged `"repeat"` when there are several).
    pub outcome: EmuOutcome,
    /// Each lane's median record per load, repeat after repeat and lane after lane (with
    /// several repeats, each tagged with its repeat).
    pub records: Vec<Record>,
    /// Per lane (in lane order), the server counters of its best load's median trial (with no
    /// load kept up, its first load's) in the last repeat that ran a load; `None` if none did.
    pub servers: Vec<Option<S>>,
}

impl EmuBench {
    /// A bench of `cores` server cores with `settings`, searching `search`'s grid (its
    /// `trials` and `resolution` are taken from `settings`): checks the machine has the N + 1
    /// CPUs ([`crate::cores_for`]; the error names `--cores N`) and the search is valid, and
    /// warns on stderr when other processes are busy on the machine. Call it before preparing
    /// anything, so a run that cannot start fails at once.
    pub fn new(
        cores: usize,
        settings: &EmuSettings,
        search: SearchConfig,
    ) -> Result<EmuBench, String> {
        let (server_cpus, device_cpu) =
            crate::cores_for(cores).map_err(|e| format!("--cores {cores}: {e}"))?;
        let bench = EmuBench::checked(server_cpus, device_cpu, settings, search)?;
        if let Some(w) = interference_warning() {
            eprintln!("[bench] {w}");
        }
        Ok(bench)
    }

    /// A bench of `cores` server cores on CPUs the caller already has (`cpus`: the first
    /// `cores` serve, the next one is the device's, as [`crate::cores_for`] picks them from
    /// the process's CPUs), with `settings`, searching `search`'s grid. It checks `cpus` has
    /// the N + 1 and the search is valid, and prints nothing: no interference check before the
    /// run (each trial still judges the interference of other processes during it). For a
    /// program whose CPUs are chosen and which may not print, e.g. the C library's emulated
    /// device; run it with [`EmuBench::run_with`].
    pub fn on_cpus(
        cpus: &[usize],
        cores: usize,
        settings: &EmuSettings,
        search: SearchConfig,
    ) -> Result<EmuBench, String> {
        if cores == 0 || cpus.len() <= cores {
            return Err(format!(
                "{cores} server core(s) and the device need {} CPUs, not {cpus:?}",
                cores.max(1) + 1
            ));
        }
        EmuBench::checked(cpus[..cores].to_vec(), cpus[cores], settings, search)
    }

    /// The bench on these CPUs: `settings`' trials and resolution over `search`, checked.
    fn checked(
        server_cpus: Vec<usize>,
        device_cpu: usize,
        settings: &EmuSettings,
        mut search: SearchConfig,
    ) -> Result<EmuBench, String> {
        search.trials = settings.trials;
        search.resolution = settings.resolution;
        search.validate()?;
        Ok(EmuBench {
            search,
            server_cpus,
            device_cpu,
            repeats: settings.repeat.max(1),
            slowed_retries: settings.slowed_retries,
        })
    }

    /// The CPUs of the server cores and the device's.
    pub fn cpus(&self) -> (&[usize], usize) {
        (&self.server_cpus, self.device_cpu)
    }

    /// The search every repeat runs.
    pub fn search(&self) -> &SearchConfig {
        &self.search
    }

    /// The budget line printed before the first trial ("[bench] …", without the prefix).
    pub fn budget_line(&self, about: &About<'_>, lanes: usize) -> String {
        let s = &self.search;
        let servers = match self.server_cpus.as_slice() {
            [one] => format!("server on CPU {one}"),
            many => format!("{} server cores on CPUs {many:?}", many.len()),
        };
        format!(
            "{lanes} {}, {}: saturation search over {:?} req/s, median of up to {} trials per \
             load, bisection to {:.0}%; {:?} per trial (+{:?} warm-up), MTU {}: the SERVER \
             CORE's throughput with an emulated ConnectX ({servers}{}, device and clients on \
             CPU {}); not a network measurement. Budget per {}: up to ~{} trials when trials \
             agree, at most {}{}",
            about.lane.1,
            about.what,
            s.grid,
            s.trials,
            s.resolution * 100.0,
            about.per_trial.0,
            about.per_trial.1,
            about.mtu,
            about.per_core,
            self.device_cpu,
            about.lane.0,
            s.typical_trials(),
            s.max_trials(),
            if self.repeats > 1 {
                format!("; the whole search {} times (--repeat)", self.repeats)
            } else {
                String::new()
            },
        )
    }

    /// Runs the search of `lanes` (their names, in order) `--repeat` times, `trial` running
    /// one trial at a point (it owns the app's requests, checker, servers and seeds; the
    /// skeleton calls it in the search's order, a slowed trial's reruns included). Prints the
    /// budget line, each repeat's start, every trial's progress line and each lane's bound per
    /// repeat. The first error of a trial ends the run and is returned.
    pub fn run<S, F>(
        &self,
        about: &About<'_>,
        lanes: &[&str],
        trial: F,
    ) -> Result<EmuBenchRun<S>, String>
    where
        S: Clone,
        F: FnMut(Point) -> Result<EmuTrial<S>, String>,
    {
        self.run_with(
            about,
            lanes,
            trial,
            &mut |line| eprintln!("[bench] {line}"),
            &mut |_| Ok(()),
        )
    }

    /// [`EmuBench::run`], every line it would print given to `say` instead (without the
    /// `[bench] ` prefix; `&mut |_| {}` prints nothing), and each repeat, once its canaries are
    /// rebased, given to `each_repeat` ([`EmuRepeat`]) before the next starts. An error of
    /// `each_repeat` ends the run, as a trial's does.
    pub fn run_with<S, F>(
        &self,
        about: &About<'_>,
        lanes: &[&str],
        mut trial: F,
        say: &mut dyn FnMut(&str),
        each_repeat: &mut dyn FnMut(&EmuRepeat) -> Result<(), String>,
    ) -> Result<EmuBenchRun<S>, String>
    where
        S: Clone,
        F: FnMut(Point) -> Result<EmuTrial<S>, String>,
    {
        say(&self.budget_line(about, lanes.len()));
        let mut run = EmuBenchRun {
            outcome: EmuOutcome {
                k: self.search.trials,
                ..EmuOutcome::default()
            },
            records: Vec::new(),
            servers: vec![None; lanes.len()],
        };
        for repeat in 1..=self.repeats {
            if self.repeats > 1 {
                say(&format!("repeat {repeat} of {}", self.repeats));
            }
            // A trial whose speed canary read the machine's slow state is rerun (each
            // attempt's progress line is said there).
            let mut searches = search_rerunning_slowed_saying(
                &self.search,
                lanes.len(),
                self.slowed_retries,
                &mut trial,
                say,
            )?;
            // The tables and JSON judge every trial's speed canary against the whole run.
            rebase_canaries(&mut searches);
            let done = run.take_servers(lanes, &searches, repeat, self.repeats, say);
            each_repeat(&done)?;
            run.add_repeat(done);
        }
        Ok(run)
    }
}

impl<S: Clone> EmuBenchRun<S> {
    /// Repeat `repeat` of `of`'s searches (one per lane): keeps each lane's server counters
    /// and says its bound; returns its summaries, median records and trials.
    fn take_servers(
        &mut self,
        lanes: &[&str],
        searches: &[Search<EmuTrial<S>>],
        repeat: usize,
        of: usize,
        say: &mut dyn FnMut(&str),
    ) -> EmuRepeat {
        let mut done = EmuRepeat {
            repeat,
            of,
            summaries: Vec::with_capacity(lanes.len()),
            records: Vec::new(),
            trials: Vec::new(),
            trial_records: Vec::new(),
        };
        for (i, (&lane, s)) in lanes.iter().zip(searches).enumerate() {
            let summary = EmuSummary::of(lane, s);
            say(&format!("{lane}: {}", summary.bound_note()));
            // The server counters reported for the lane: its best load's median trial's.
            if let Some(v) = s.best_achieved().or(s.loads.first()) {
                self.servers[i] = Some(v.median().server.clone());
            }
            done.records.extend(median_records(s));
            done.trials.extend(trials_json(s));
            done.trial_records.extend(
                s.loads
                    .iter()
                    .flat_map(|v| v.trials.iter().map(|t| t.record.clone())),
            );
            done.summaries.push(summary);
        }
        done
    }

    /// Adds a repeat's summaries, records and trials, the records and trials tagged with
    /// their repeat when there are several.
    fn add_repeat(&mut self, done: EmuRepeat) {
        let EmuRepeat {
            repeat,
            of,
            summaries,
            mut records,
            mut trials,
            trial_records: _,
        } = done;
        if of > 1 {
            records.iter_mut().for_each(|x| x.repeat = Some(repeat));
            trials.iter_mut().for_each(|t| t["repeat"] = repeat.into());
        }
        self.records.extend(records);
        self.outcome.trials.extend(trials);
        self.outcome.repeats.push(summaries);
    }

    /// The last repeat's summaries, in lane order (empty before any repeat).
    pub fn last_summaries(&self) -> &[EmuSummary] {
        self.outcome.repeats.last().map_or(&[], Vec::as_slice)
    }
}

/// How an app's emulated run is reported ([`write_emu_outputs`]).
#[derive(Clone, Debug)]
pub struct EmuReportSpec<'a> {
    /// Which lane plays which part in the ratios and the control line; its `raw`, when it
    /// has one, is the baseline of the full tables' ratios.
    pub roles: Roles<'a>,
    /// The floors the ratios are judged by.
    pub floors: &'a [Floor],
    /// What is printed before the compact table (a heading and a sentence on the datapath).
    pub heading: String,
    /// The sentence after the ratios saying where the full tables are.
    pub details: String,
}

/// What [`write_emu_outputs`] made for the app's own files and the terminal.
#[derive(Clone, Debug, PartialEq)]
pub struct EmuTexts {
    /// The search's full tables of every repeat, each with its control line (Markdown).
    pub detail_tables: String,
    /// What the bench prints first: the heading, the compact table, the ratios and where the
    /// full tables are.
    pub printed: String,
}

/// Writes an emulated run's files into `dir` — `emu-summary.json` (every repeat's summaries),
/// `emu-points.json` (every trial) and `ratios.json` (the headline ratios over the repeats
/// with their floors) — and returns the full tables and the text to print
/// ([`EmuTexts`]), which the app writes into its own files.
pub fn write_emu_outputs(
    dir: &Path,
    emu: &EmuOutcome,
    spec: &EmuReportSpec<'_>,
) -> Result<EmuTexts, String> {
    let roles = &spec.roles;
    for (name, v) in [
        ("emu-summary.json", summaries_json(&emu.repeats)),
        (
            "emu-points.json",
            serde_json::Value::Array(emu.trials.clone()),
        ),
        (
            "ratios.json",
            Headlines::of(&emu.repeats, roles, spec.floors).to_json(),
        ),
    ] {
        let path = dir.join(name);
        let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let detail_tables = detail_tables(&emu.repeats, roles.raw, emu.k, |s| {
        control_line(s, roles.hybrid, roles.copy, roles.libraries)
    });
    let printed = format!(
        "{}{}",
        spec.heading,
        summary_text(&emu.repeats, roles, spec.floors, &spec.details)
    );
    Ok(EmuTexts {
        detail_tables,
        printed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use loadgen::canary::Canary;

    /// The fake server's counters: its lane, the offered load and which call ran it.
    type Srv = (usize, f64, usize);

    /// The `call`-th trial run (from 0), of `lane` at `p`: it keeps up to `capacity` req/s
    /// (achieving the offered load up to it, `capacity` above), its server counters `(lane,
    /// offered load, call)`, its canary's pair reading `pair_us` (each CPU alone at its usual
    /// speed).
    fn trial(canary: &Canary, p: Point, call: usize, capacity: f64, pair_us: u64) -> EmuTrial<Srv> {
        let achieved = p.offered_rps.min(capacity);
        let mut report = crate::search::tests::report(p.offered_rps, achieved, 0.3);
        let us = Duration::from_micros;
        report.canary = Some(
            canary.judge_with_pair(&[(0, us(700)), (1, us(705))], Some(([0, 1], us(pair_us)))),
        );
        let server = (p.lane, p.offered_rps, call);
        EmuTrial::new(
            p,
            ["fast", "slow"][p.lane],
            "s",
            report,
            Some(100.0),
            server,
        )
    }

    fn bench(repeat: usize, retries: usize) -> EmuBench {
        EmuBench {
            search: SearchConfig {
                trials: 1,
                ..SearchConfig::new(vec![100.0, 200.0, 400.0, 800.0])
            },
            server_cpus: vec![0],
            device_cpu: 1,
            repeats: repeat,
            slowed_retries: retries,
        }
    }

    fn about() -> About<'static> {
        About {
            lane: ("mode", "modes"),
            what: "shape s".to_owned(),
            per_trial: (Duration::from_millis(200), Duration::from_millis(50)),
            mtu: 9000,
            per_core: "",
        }
    }

    /// Lane 0 keeps up to 1000 req/s (beyond the grid), lane 1 to 250; the third trial run
    /// reads the slow state once (its pair reading 5 × the others).
    fn run(repeat: usize, retries: usize) -> (EmuBenchRun<Srv>, Vec<Point>) {
        let canary = Canary::new();
        let mut ran = Vec::new();
        let run = bench(repeat, retries)
            .run(&about(), &["fast", "slow"], |p| {
                ran.push(p);
                let pair = if ran.len() == 3 { 6600 } else { 1240 };
                Ok(trial(
                    &canary,
                    p,
                    ran.len() - 1,
                    [1000.0, 250.0][p.lane],
                    pair,
                ))
            })
            .unwrap();
        (run, ran)
    }

    #[test]
    fn repeats_are_tagged_and_the_last_repeat_gives_the_server_counters() {
        let (one, _) = run(1, 0);
        assert_eq!(one.outcome.repeats.len(), 1);
        assert!(one.records.iter().all(|r| r.repeat.is_none()));
        assert!(one.outcome.trials.iter().all(|t| t.get("repeat").is_none()));
        let (three, ran) = run(3, 0);
        assert_eq!(three.outcome.repeats.len(), 3);
        assert_eq!(three.outcome.k, 1);
        // Every trial of every repeat, each tagged with its repeat, in order.
        assert_eq!(three.outcome.trials.len(), ran.len());
        let tags: Vec<u64> = three
            .outcome
            .trials
            .iter()
            .map(|t| t["repeat"].as_u64().unwrap())
            .collect();
        assert!(tags.windows(2).all(|w| w[0] <= w[1]), "{tags:?}");
        assert_eq!((tags[0], tags[tags.len() - 1]), (1, 3));
        assert_eq!(three.records.len(), 3 * one.records.len());
        assert!(three.records[..one.records.len()]
            .iter()
            .all(|r| r.repeat == Some(1)));
        assert!(three
            .records
            .iter()
            .rev()
            .take(2)
            .all(|r| r.repeat == Some(3)));
        // Lane 0 kept up the whole grid: its best load is the highest; lane 1 kept up 200,
        // bisected to within the resolution between 200 and 400.
        let best = |r: &EmuBenchRun<Srv>, lane: usize| {
            r.last_summaries()[lane].best.as_ref().unwrap().offered_rps
        };
        assert_eq!(best(&three, 0), 800.0);
        // (A load up to 250 / 0.95 keeps up: 95 % of it is achieved.)
        assert!(
            (200.0..=250.0 / 0.95).contains(&best(&three, 1)),
            "{}",
            best(&three, 1)
        );
        let servers = &three.servers;
        assert_eq!(servers[0].map(|s| (s.0, s.1)), Some((0, 800.0)));
        assert_eq!(servers[1].map(|s| (s.0, s.1)), Some((1, best(&three, 1))));
        // The last repeat's: run by calls after every trial of repeats 1 and 2.
        let earlier = tags.iter().filter(|&&t| t < 3).count();
        assert!(
            servers.iter().all(|s| s.unwrap().2 >= earlier),
            "{servers:?}"
        );
        assert_eq!(
            three
                .last_summaries()
                .iter()
                .map(|s| s.mode.as_str())
                .collect::<Vec<_>>(),
            ["fast", "slow"]
        );
    }

    #[test]
    fn a_slowed_trial_is_rerun_at_the_same_point() {
        let (kept, ran) = run(1, 0);
        let (rerun, ran_again) = run(1, 2);
        // Without retries the slowed trial stands; with them its point runs once more.
        assert_eq!(ran_again.len(), ran.len() + 1);
        assert_eq!(ran_again[2], ran_again[3], "the same lane, load and trial");
        let reruns = |r: &EmuBenchRun<Srv>| -> usize {
            r.records.iter().map(|x| x.slowed_reruns.unwrap_or(0)).sum()
        };
        assert_eq!((reruns(&kept), reruns(&rerun)), (0, 1));
        let points: Vec<&serde_json::Value> = rerun
            .outcome
            .trials
            .iter()
            .filter(|t| {
                t["thrown_slowed_runs"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
            })
            .collect();
        assert_eq!(points.len(), 1, "the thrown-away run stays in its trial");
    }

    #[test]
    fn the_budget_line_names_the_lanes_the_grid_and_the_cores() {
        let b = bench(2, 0);
        let line = b.budget_line(&about(), 2);
        assert!(line.starts_with("2 modes, shape s: saturation search over [100.0, 200.0, 400.0, 800.0] req/s, median of up to 1 trials per load"), "{line}");
        assert!(
            line.contains("(server on CPU 0, device and clients on CPU 1)"),
            "{line}"
        );
        assert!(line.contains("Budget per mode:"), "{line}");
        assert!(
            line.ends_with("; the whole search 2 times (--repeat)"),
            "{line}"
        );
        let mut two = bench(1, 0);
        two.server_cpus = vec![0, 1];
        two.device_cpu = 2;
        let about = About {
            per_core: ", each with its shard",
            ..about()
        };
        let line = two.budget_line(&about, 2);
        assert!(
            line.contains(
                "(2 server cores on CPUs [0, 1], each with its shard, device and clients on CPU 2)"
            ),
            "{line}"
        );
        assert!(!line.contains("--repeat"), "{line}");
    }

    #[test]
    fn a_bench_on_given_cpus_uses_them_and_checks_them() {
        let settings = EmuSettings {
            trials: 3,
            repeat: 2,
            ..EmuSettings::default()
        };
        let grid = || SearchConfig::new(vec![400.0, 100.0]);
        let b = EmuBench::on_cpus(&[5, 3, 7], 1, &settings, grid()).unwrap();
        assert_eq!(b.cpus(), (&[5][..], 3));
        assert_eq!(b.search().trials, 3);
        assert_eq!(b.search().grid, [100.0, 400.0], "validated");
        let line = b.budget_line(&about(), 1);
        assert!(
            line.contains("(server on CPU 5, device and clients on CPU 3)"),
            "{line}"
        );
        let two = EmuBench::on_cpus(&[5, 3, 7], 2, &settings, grid()).unwrap();
        assert_eq!(two.cpus(), (&[5, 3][..], 7));
        let e = EmuBench::on_cpus(&[5, 3], 2, &settings, grid()).unwrap_err();
        assert!(e.contains("need 3 CPUs, not [5, 3]"), "{e}");
        assert!(EmuBench::on_cpus(&[5, 3], 0, &settings, grid()).is_err());
        let e = EmuBench::on_cpus(&[5, 3], 1, &settings, SearchConfig::new(vec![])).unwrap_err();
        assert!(e.contains("no offered load"), "{e}");
    }

    /// `run_with` over lanes 0 and 1 as [`run`] does, its lines and repeats kept.
    fn run_with(repeat: usize) -> (EmuBenchRun<Srv>, Vec<String>, Vec<EmuRepeat>) {
        let canary = Canary::new();
        let mut calls = 0;
        let (mut lines, mut repeats) = (Vec::new(), Vec::new());
        let run = bench(repeat, 0)
            .run_with(
                &about(),
                &["fast", "slow"],
                |p| {
                    calls += 1;
                    Ok(trial(&canary, p, calls - 1, [1000.0, 250.0][p.lane], 1240))
                },
                &mut |l| lines.push(l.to_owned()),
                &mut |r| {
                    repeats.push(r.clone());
                    Ok(())
                },
            )
            .unwrap();
        (run, lines, repeats)
    }

    #[test]
    fn run_with_says_every_line_and_hands_over_every_repeat() {
        let (run, lines, repeats) = run_with(3);
        let b = bench(3, 0);
        // What `run` prints, in order: the budget line, then per repeat its start, every
        // trial's progress line and each lane's bound.
        assert_eq!(lines[0], b.budget_line(&about(), 2));
        let starts: Vec<usize> = (0..lines.len())
            .filter(|&i| lines[i].starts_with("repeat "))
            .collect();
        assert_eq!(starts.len(), 3, "{lines:#?}");
        assert_eq!(lines[starts[2]], "repeat 3 of 3");
        let bounds = lines
            .iter()
            .filter(|l| l.starts_with("fast: ") || l.starts_with("slow: "))
            .count();
        assert_eq!(bounds, 6, "{lines:#?}");
        let progress = lines.len() - 1 - 3 - bounds;
        assert_eq!(progress, run.outcome.trials.len(), "{lines:#?}");
        // Every repeat, in order, untagged; what the run keeps is the same, tagged.
        assert_eq!(
            repeats.iter().map(|r| (r.repeat, r.of)).collect::<Vec<_>>(),
            [(1, 3), (2, 3), (3, 3)]
        );
        let mut records = Vec::new();
        let mut trials = Vec::new();
        for r in &repeats {
            assert!(r.records.iter().all(|x| x.repeat.is_none()));
            assert!(r.trials.iter().all(|t| t.get("repeat").is_none()));
            assert_eq!(r.summaries, run.outcome.repeats[r.repeat - 1]);
            // Every trial's record, as its JSON says it, in the same order.
            assert_eq!(r.trial_records.len(), r.trials.len());
            for (x, t) in r.trial_records.iter().zip(&r.trials) {
                assert_eq!(x.offered_rps, t["offered_rps"].as_f64().unwrap());
                assert_eq!(x.mode, t["mode"].as_str().unwrap());
                assert!(x.repeat.is_none());
            }
            records.extend(r.records.iter().map(|x| Record {
                repeat: Some(r.repeat),
                ..x.clone()
            }));
            trials.extend(r.trials.iter().map(|t| {
                let mut t = t.clone();
                t["repeat"] = r.repeat.into();
                t
            }));
        }
        assert_eq!(records, run.records);
        assert_eq!(trials, run.outcome.trials);
        // With one repeat the run's records and trials are the repeat's, as they are.
        let (one, lines, repeats) = run_with(1);
        assert!(!lines.iter().any(|l| l.starts_with("repeat ")));
        assert_eq!(repeats.len(), 1);
        assert_eq!(repeats[0].records, one.records);
        assert_eq!(repeats[0].trials, one.outcome.trials);
    }

    #[test]
    fn an_error_of_the_repeat_hook_ends_the_run() {
        let canary = Canary::new();
        let (mut calls, mut seen) = (0, 0);
        let e = bench(3, 0)
            .run_with(
                &about(),
                &["fast", "slow"],
                |p| {
                    calls += 1;
                    Ok(trial(&canary, p, calls, [1000.0, 250.0][p.lane], 1240))
                },
                &mut |_| {},
                &mut |r| {
                    seen += 1;
                    Err(format!("repeat {} not written", r.repeat))
                },
            )
            .unwrap_err();
        assert_eq!((e.as_str(), seen), ("repeat 1 not written", 1));
        let (_, _, first) = run_with(1);
        assert_eq!(calls, first[0].trials.len(), "no trial of repeat 2 ran");
    }

    #[test]
    fn a_trial_error_ends_the_run() {
        let mut n = 0;
        let e = bench(2, 0)
            .run::<Srv, _>(&about(), &["fast", "slow"], |_| {
                n += 1;
                Err(format!("trial {n} failed"))
            })
            .unwrap_err();
        assert_eq!((e.as_str(), n), ("trial 1 failed", 1));
    }

    #[test]
    fn the_outputs_are_the_three_files_the_tables_and_the_printed_text() {
        let (r, _) = run(2, 0);
        let dir = std::env::temp_dir().join(format!("emu-bench-outputs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let spec = EmuReportSpec {
            roles: Roles::CORNFLAKES,
            floors: &Floor::EVERY_RUN,
            heading: "## heading\n\n".to_owned(),
            details: "Full tables: there.".to_owned(),
        };
        let texts = write_emu_outputs(&dir, &r.outcome, &spec).unwrap();
        let read = |name: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
        };
        assert_eq!(read("emu-summary.json"), summaries_json(&r.outcome.repeats));
        assert_eq!(
            read("emu-points.json"),
            serde_json::Value::Array(r.outcome.trials.clone())
        );
        assert_eq!(
            read("ratios.json"),
            Headlines::of(&r.outcome.repeats, &spec.roles, spec.floors).to_json()
        );
        assert!(
            texts.detail_tables.contains("### Repeat 2 of 2"),
            "{}",
            texts.detail_tables
        );
        assert!(
            texts.printed.starts_with("## heading\n\n| mode |"),
            "{}",
            texts.printed
        );
        assert!(texts.printed.trim_end().ends_with("Full tables: there."));
        // A directory that cannot be written is an error naming the file.
        let e = write_emu_outputs(&dir.join("missing"), &r.outcome, &spec).unwrap_err();
        assert!(e.contains("emu-summary.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

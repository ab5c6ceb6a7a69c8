//! A run of N repeats of the whole interleaved search (`--repeat N`): what the benches write
//! from the repeats' summaries: the JSON of every repeat, the full tables, the chart of the
//! highest loads kept up, and the text printed first (the compact table and the ratios).

use std::fmt::Write as _;
use std::path::Path;

use loadgen::{bars_from_records, plot_bars, plot_latency, Bar, BarChart, Record, DEFAULT_KEEP_UP};
use serde_json::Value;

use crate::compact::{compact_table, per_repeat};
use crate::headline::{median_min_max, Floor, Headlines, Roles};
use crate::search::{table, Bound, EmuSummary};

/// What an emulated-NIC bench found over its repeats: each repeat's summaries (modes in the
/// same order), every trial's JSON and the search's K.
#[derive(Clone, Debug, Default)]
pub struct EmuOutcome {
    /// Per repeat of the whole search (`--repeat`), each mode's search summarized.
    pub repeats: Vec<Vec<EmuSummary>>,
    /// Every trial (JSON), by repeat, then mode, in the order each mode ran them; with
    /// several repeats each has `"repeat"` (1 to N).
    pub trials: Vec<Value>,
    /// The search's K (trials per load at most).
    pub k: usize,
}

impl EmuOutcome {
    /// Every repeat's summaries, one after the other.
    pub fn summaries(&self) -> Vec<EmuSummary> {
        self.repeats.iter().flatten().cloned().collect()
    }
}

/// The repeats of lanes searched apart (one process per lane, each with its own `--repeat`
/// summaries, in repeat order) in [`EmuOutcome::repeats`]' layout: per repeat, each lane's
/// summary in lane order; as many repeats as the lane with the fewest.
pub fn by_repeat(lanes: &[Vec<EmuSummary>]) -> Vec<Vec<EmuSummary>> {
    let n = lanes.iter().map(Vec::len).min().unwrap_or(0);
    (0..n)
        .map(|i| lanes.iter().map(|l| l[i].clone()).collect())
        .collect()
}

/// Every repeat's summaries as one JSON array (`emu-summary.json`): each mode's summary with
/// `"repeat"` (1 to N) beside its fields.
pub fn summaries_json(repeats: &[Vec<EmuSummary>]) -> Value {
    Value::Array(
        repeats
            .iter()
            .enumerate()
            .flat_map(|(r, s)| {
                s.iter().map(move |m| {
                    let mut v = m.to_json();
                    v["repeat"] = (r + 1).into();
                    v
                })
            })
            .collect(),
    )
}

/// The search's full table of every repeat ([`crate::table`], ratios to `baseline`), one after
/// the other under a heading per repeat when there are several, each followed by `after(r)`
/// (e.g. the control line of that repeat).
pub fn detail_tables(
    repeats: &[Vec<EmuSummary>],
    baseline: Option<&str>,
    trials: usize,
    after: impl Fn(&[EmuSummary]) -> Option<String>,
) -> String {
    let mut s = String::new();
    for (r, summaries) in repeats.iter().enumerate() {
        if repeats.len() > 1 {
            let _ = writeln!(s, "### Repeat {} of {}\n", r + 1, repeats.len());
        }
        s.push_str(&table(summaries, baseline, trials));
        if let Some(a) = after(summaries) {
            let _ = writeln!(s, "\n{a}");
        }
        s.push('\n');
    }
    s
}

/// The text a bench prints first: the compact table, then the ratios with their floors
/// ([`Headlines::text`]), then where the full tables are (`details`).
pub fn summary_text(
    repeats: &[Vec<EmuSummary>],
    roles: &Roles<'_>,
    floors: &[Floor],
    details: &str,
) -> String {
    let mut s = compact_table(repeats, roles);
    let _ = writeln!(
        s,
        "\n{}",
        Headlines::of(repeats, roles, floors).text().trim_end()
    );
    let _ = writeln!(s, "\n{details}");
    s
}

/// The chart of the highest load each mode kept up over the repeats: the median bar, the
/// spread (one repeat: its best load's trials; several: the repeats'), coloured by what
/// bounded the mode (several repeats: the bound of most), its 100 GbE line rate, and the
/// `roles`' raw mode as a reference line when it has one.
pub fn kept_up_chart(repeats: &[Vec<EmuSummary>], roles: &Roles<'_>, title: &str) -> BarChart {
    let n = repeats.len();
    let modes: Vec<&str> = repeats
        .first()
        .map(|r| r.iter().map(|m| m.mode.as_str()).collect())
        .unwrap_or_default();
    let mut bars = Vec::new();
    let mut raw = None;
    for mode in modes {
        let (per, kept) = per_repeat(repeats, mode);
        let Some((median, lo, hi)) = median_min_max(&kept) else {
            // Kept nothing up: an empty bar, so every mode has its row.
            bars.push(Bar {
                label: mode.to_owned(),
                rps: 0.0,
                spread: None,
                bound: "nothing kept up".to_owned(),
                line_rate_rps: None,
            });
            continue;
        };
        let spread = match per.as_slice() {
            [one] => one.best.as_ref().map(|b| (b.min_rps, b.max_rps)),
            _ => Some((lo, hi)),
        };
        // The bound most of the repeats that kept something up had (ties: the earlier).
        let mut bounds: Vec<(Bound, usize)> = Vec::new();
        for m in per.iter().filter(|m| m.best.is_some()) {
            match bounds.iter_mut().find(|(b, _)| *b == m.bound) {
                Some((_, c)) => *c += 1,
                None => bounds.push((m.bound, 1)),
            }
        }
        let bound =
            bounds
                .iter()
                .rev()
                .max_by_key(|(_, c)| *c)
                .map_or("server", |(b, _)| match b {
                    Bound::Grid => "grid (raise --rates)",
                    b => b.name(),
                });
        let line_rate = per
            .iter()
            .filter_map(|m| m.best.as_ref().and_then(|b| b.line_rate_rps))
            .fold(None, |a: Option<f64>, l| Some(a.map_or(l, |a| a.min(l))));
        if roles.raw == Some(mode) {
            raw = Some(median);
        }
        bars.push(Bar {
            label: mode.to_owned(),
            rps: median,
            spread,
            bound: bound.to_owned(),
            line_rate_rps: line_rate,
        });
    }
    BarChart {
        title: title.to_owned(),
        bars,
        references: roles
            .raw
            .zip(raw)
            .map(|(r, x)| vec![(r.to_owned(), x)])
            .unwrap_or_default(),
        spread_means: if n > 1 {
            format!("min–max over the {n} repeats")
        } else {
            "min–max of the best load's trials".to_owned()
        },
    }
}

/// Draws a bench's two charts into `dir` and says where on stderr (or why not): `{name}.svg`
/// and `.png`, the highest load each mode kept up (on the emulated NIC `emu`'s repeats,
/// [`kept_up_chart`]; elsewhere each mode's best point of `records`), and `{name}-latency.svg`
/// and `.png`, p50 and p99 against offered load up to saturation
/// ([`loadgen::plot_latency`]). `title` names the bench and its datapath.
pub fn write_charts(
    dir: &Path,
    name: &str,
    title: &str,
    records: &[Record],
    emu: Option<&EmuOutcome>,
    roles: &Roles<'_>,
) {
    let kept = format!("{title}: highest load kept up");
    let chart = match emu {
        Some(emu) => kept_up_chart(&emu.repeats, roles, &kept),
        None => BarChart {
            title: kept,
            bars: bars_from_records(
                records,
                DEFAULT_KEEP_UP,
                "not known: a sweep, one point per load (see the table)",
            ),
            references: Vec::new(),
            spread_means: String::new(),
        },
    };
    let (svg, png) = (
        dir.join(format!("{name}.svg")),
        dir.join(format!("{name}.png")),
    );
    match plot_bars(&chart, &svg, &png) {
        Ok(()) => eprintln!("[bench] wrote {} and {}", svg.display(), png.display()),
        // A run without a record has nothing to draw; the table says so.
        Err(e) => eprintln!("[bench] no chart: {e}"),
    }
    let (svg, png) = (
        dir.join(format!("{name}-latency.svg")),
        dir.join(format!("{name}-latency.png")),
    );
    let latency = format!("{title}: latency up to saturation");
    match plot_latency(records, &latency, DEFAULT_KEEP_UP, &svg, &png) {
        Ok(()) => eprintln!("[bench] wrote {} and {}", svg.display(), png.display()),
        Err(e) => eprintln!("[bench] no latency plot: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headline::tests::repeat;
    use crate::headline::RatioKind;

    #[test]
    fn lanes_searched_apart_are_laid_out_by_repeat() {
        let reps = vec![repeat(2400e3, 1500e3), repeat(2600e3, 1300e3)];
        // Lane by lane, each with its repeats, and back.
        let lanes: Vec<Vec<EmuSummary>> = (0..reps[0].len())
            .map(|m| reps.iter().map(|r| r[m].clone()).collect())
            .collect();
        assert_eq!(by_repeat(&lanes), reps);
        // A lane with one repeat fewer: only the repeats every lane ran.
        let mut short = lanes.clone();
        short[3].pop();
        assert_eq!(by_repeat(&short), reps[..1].to_vec());
        assert!(by_repeat(&[]).is_empty());
    }

    #[test]
    fn repeats_reach_the_json_the_tables_the_chart_and_the_text() {
        let reps = vec![repeat(2400e3, 1500e3), repeat(2600e3, 1300e3)];
        let j = summaries_json(&reps);
        let a = j.as_array().unwrap();
        assert_eq!(a.len(), 14);
        assert_eq!((&a[0]["repeat"], &a[13]["repeat"]), (&1.into(), &2.into()));
        let t = detail_tables(&reps, Some("raw"), 3, |s| {
            Some(format!("{} modes", s.len()))
        });
        assert!(
            t.contains("### Repeat 1 of 2") && t.contains("### Repeat 2 of 2"),
            "{t}"
        );
        assert_eq!(t.matches("7 modes").count(), 2, "{t}");
        let one = detail_tables(&reps[..1], Some("raw"), 3, |_| None);
        assert!(!one.contains("### Repeat"), "{one}");
        let roles = Roles {
            raw: Some("raw"),
            ..Roles::CORNFLAKES
        };
        let mut with_none = reps.clone();
        with_none[0][2].best = None;
        with_none[1][2].best = None;
        let c = kept_up_chart(&with_none, &roles, "t");
        assert_eq!(
            c.bars.len(),
            7,
            "a bar per mode, those that kept nothing up too"
        );
        assert_eq!(
            (c.bars[2].rps, c.bars[2].bound.as_str()),
            (0.0, "nothing kept up")
        );
        let cf = &c.bars[1];
        assert_eq!(cf.label, "cornflakes");
        // The median of two is the lower.
        assert_eq!((cf.rps, cf.spread), (2400e3, Some((2400e3, 2600e3))));
        assert_eq!(cf.bound, "device");
        assert_eq!(c.references, vec![("raw".to_owned(), 2600e3)]);
        assert_eq!(c.spread_means, "min–max over the 2 repeats");
        let floors = [Floor {
            kind: RatioKind::BestLibrary,
            min: 2.5,
        }];
        let text = summary_text(&reps, &roles, &floors, "Full tables: DIR/table.md");
        assert!(text.starts_with("| mode | kept up (k req/s) |"), "{text}");
        assert!(text.contains("floor 2.50: MISSED"), "{text}");
        assert!(
            text.trim_end().ends_with("Full tables: DIR/table.md"),
            "{text}"
        );
    }
}

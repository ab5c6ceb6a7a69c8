//! The compact table an emulated-NIC bench prints first: per mode the highest load kept up,
//! its spread, its ratios, what bounded it and where its server core's time went, over the
//! repeats of the run ([`compact_table`]). The search's full table ([`crate::table`]) goes to
//! the run's table file.

use std::fmt::Write as _;

use percore::TimeSplit;

use crate::explain::split_cell;
use crate::headline::{median_min_max, Roles};
use crate::search::{Bound, EmuSummary};

/// `mode`'s summary in each repeat (where it ran), and the highest loads those kept up.
pub(crate) fn per_repeat<'s>(
    repeats: &'s [Vec<EmuSummary>],
    mode: &str,
) -> (Vec<&'s EmuSummary>, Vec<f64>) {
    let per: Vec<&EmuSummary> = repeats
        .iter()
        .filter_map(|r| r.iter().find(|m| m.mode == mode))
        .collect();
    let kept = per
        .iter()
        .filter_map(|m| m.best.as_ref())
        .map(|b| b.median_rps)
        .collect();
    (per, kept)
}

/// Thousands of requests per second, as the compact table prints them.
fn k(rps: f64) -> String {
    if rps >= 100_000.0 {
        format!("{:.0}", rps / 1e3)
    } else {
        format!("{:.1}", rps / 1e3)
    }
}

fn ratio_cell(v: &[f64], repeats: usize) -> String {
    match median_min_max(v) {
        None => "–".to_owned(),
        Some((m, lo, hi)) if repeats > 1 && hi > lo => format!("{m:.2} ({lo:.2}–{hi:.2})"),
        Some((m, _, _)) => format!("{m:.2}"),
    }
}

/// The best library of one repeat: the library mode with the highest load kept up.
fn best_library<'s>(summaries: &'s [EmuSummary], roles: &Roles<'_>) -> Option<&'s EmuSummary> {
    summaries
        .iter()
        .filter(|m| roles.libraries.contains(&m.mode.as_str()))
        .filter(|m| m.best.is_some())
        .max_by(|a, b| rps(a).total_cmp(&rps(b)))
}

fn rps(m: &EmuSummary) -> f64 {
    m.best.as_ref().map_or(0.0, |b| b.median_rps)
}

/// What bounded a mode over the repeats: one repeat's bound with the device's busy share
/// when it was the device; several, each bound with its count (`device 3/3`).
fn bound_cell(per: &[&EmuSummary]) -> String {
    if let [m] = per {
        return match m.bound {
            Bound::Device => {
                let busy = [m.first_miss.as_ref(), m.best.as_ref()]
                    .into_iter()
                    .flatten()
                    .map(|l| l.device_busy)
                    .fold(0.0f64, f64::max);
                format!("device ({:.0}% busy)", busy * 100.0)
            }
            b => b.name().to_owned(),
        };
    }
    let mut seen: Vec<(&'static str, usize)> = Vec::new();
    for m in per {
        let name = match m.bound {
            Bound::Grid => "grid",
            b => b.name(),
        };
        match seen.iter_mut().find(|(n, _)| *n == name) {
            Some((_, c)) => *c += 1,
            None => seen.push((name, 1)),
        }
    }
    seen.iter()
        .map(|(n, c)| format!("{n} {c}/{}", per.len()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The compact table (Markdown) of a run's `repeats` (each repeat's summaries, modes in the
/// same order): per mode the highest load kept up (the median over the repeats), its spread
/// (one repeat: the min–max of its best load's trials; several: the min–max of the
/// repeats'), ÷ raw when `roles` has one, ÷ the best library, what bounded it, the server's
/// busy nanoseconds per request at its best load with the server-work ratio against the best
/// library's (how many times the library's server work per request this mode's is), and where
/// the server's time went at its best load (the busiest part and idle).
pub fn compact_table(repeats: &[Vec<EmuSummary>], roles: &Roles<'_>) -> String {
    let n = repeats.len();
    let Some(first) = repeats.first() else {
        return String::new();
    };
    let raw_col = roles.raw.is_some();
    let mut s = String::new();
    let spread_head = if n > 1 {
        format!("spread over {n} repeats")
    } else {
        "spread (its trials)".to_owned()
    };
    let _ = writeln!(
        s,
        "| mode | kept up (k req/s) | {spread_head} |{} ÷ best library | bounded by | server ns per request | server work: best library's ÷ this | server time at its best load |",
        if raw_col { " ÷ raw |" } else { "" }
    );
    let _ = writeln!(
        s,
        "|---|---:|---:|{}---:|---|---:|---:|---|",
        if raw_col { "---:|" } else { "" }
    );
    for mode in first.iter().map(|m| m.mode.as_str()) {
        let (per, kept) = per_repeat(repeats, mode);
        let (kept_cell, spread_cell) = match (median_min_max(&kept), per.as_slice()) {
            (None, _) => ("none kept up".to_owned(), "–".to_owned()),
            (Some(_), [one]) => {
                let b = one.best.as_ref().expect("kept up");
                (
                    k(b.median_rps),
                    format!("{}–{} ({} trials)", k(b.min_rps), k(b.max_rps), b.trials),
                )
            }
            (Some((m, lo, hi)), _) => (k(m), format!("{}–{}", k(lo), k(hi))),
        };
        // Per repeat: this mode against that repeat's raw and best library.
        let mut vs_raw = Vec::new();
        let mut vs_lib = Vec::new();
        let mut work = Vec::new();
        let mut ns = Vec::new();
        let mut split = TimeSplit::default();
        for r in repeats {
            let Some(m) = r.iter().find(|m| m.mode == mode && m.best.is_some()) else {
                continue;
            };
            if let Some(raw) = roles
                .raw
                .and_then(|raw| r.iter().find(|x| x.mode == raw))
                .filter(|x| rps(x) > 0.0)
            {
                vs_raw.push(rps(m) / rps(raw));
            }
            let lib = best_library(r, roles);
            if let Some(lib) = lib {
                vs_lib.push(rps(m) / rps(lib));
            }
            if let Some(mine) = m.server_ns_per_request() {
                ns.push(mine);
                if let Some(theirs) = lib.and_then(EmuSummary::server_ns_per_request) {
                    work.push(theirs / mine);
                }
            }
            if let Some(t) = m.best.as_ref().and_then(|b| b.split) {
                split.add(&t);
            }
        }
        let raw_cell = if raw_col {
            format!(" {} |", ratio_cell(&vs_raw, n))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "| {mode} | {kept_cell} | {spread_cell} |{raw_cell} {} | {} | {} | {} | {} |",
            ratio_cell(&vs_lib, n),
            bound_cell(&per),
            median_min_max(&ns).map_or("–".to_owned(), |(m, _, _)| format!("{m:.0}")),
            ratio_cell(&work, n),
            split_cell(Some(&split)),
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headline::tests::repeat;

    #[test]
    fn the_compact_table_has_a_row_per_mode_with_its_ratios_bound_and_time() {
        let roles = Roles {
            raw: Some("raw"),
            ..Roles::CORNFLAKES
        };
        let one = compact_table(&[repeat(2500e3, 1400e3)], &roles);
        let rows: Vec<&str> = one.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(rows.len(), 1 + 7, "{one}");
        assert!(
            rows[0].contains("| spread (its trials) | ÷ raw | ÷ best library |"),
            "{one}"
        );
        let cf = rows
            .iter()
            .find(|r| r.starts_with("| cornflakes |"))
            .unwrap();
        assert_eq!(
            *cf,
            "| cornflakes | 2500 | 2500–2500 (2 trials) | 0.96 | 1.79 | device (97% busy) | 190 | 3.11 | handler 28%, idle 25% |"
        );
        let pb = rows.iter().find(|r| r.starts_with("| protobuf |")).unwrap();
        assert!(pb.contains("| 1.00 | server | 590 | 1.00 |"), "{pb}");
        // Three repeats: the median and the repeats' spread, bounds counted.
        let three = compact_table(
            &[
                repeat(2400e3, 1500e3),
                repeat(2520e3, 1400e3),
                repeat(2600e3, 1300e3),
            ],
            &Roles::CORNFLAKES,
        );
        assert!(
            three.contains("| spread over 3 repeats | ÷ best library |"),
            "{three}"
        );
        assert!(!three.contains("÷ raw"), "{three}");
        let cf = three
            .lines()
            .find(|r| r.starts_with("| cornflakes |"))
            .unwrap();
        assert!(
            cf.starts_with("| cornflakes | 2520 | 2400–2600 | 1.80 (1.60–2.00) | device 3/3 |"),
            "{cf}"
        );
        assert_eq!(compact_table(&[], &roles), "");
    }
}

//! The headline ratios of an emulated-NIC run (cornflakes ÷ the best library, hybrid ÷
//! only-copy, serialize-and-send, …) over N repeats of the whole search: each ratio is the
//! median of the per-repeat ratios with their min–max, and the floors are judged on the
//! median ([`Headlines`]).

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::search::{Bound, EmuSummary};

/// Which mode plays which part in the ratios (the apps name them alike).
#[derive(Clone, Copy, Debug)]
pub struct Roles<'a> {
    /// Cornflakes as shipped (hybrid threshold, serialize-and-send).
    pub hybrid: &'a str,
    /// Every field by scatter-gather.
    pub sg: &'a str,
    /// Every field copied.
    pub copy: &'a str,
    /// The hybrid without serialize-and-send.
    pub no_ssend: &'a str,
    /// The copying libraries; the best of them is the headline's denominator.
    pub libraries: &'a [&'a str],
    /// The hand-written baseline without serialization (echo's `raw`), if the run has one.
    pub raw: Option<&'a str>,
}

impl Roles<'static> {
    /// The names the echo and KV benches use (no raw baseline).
    pub const CORNFLAKES: Roles<'static> = Roles {
        hybrid: "cornflakes",
        sg: "cornflakes-sg",
        copy: "cornflakes-copy",
        no_ssend: "cornflakes-no-ssend",
        libraries: &["protobuf", "capnp", "flatbuffers"],
        raw: None,
    };
}

/// A headline ratio.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RatioKind {
    /// Cornflakes ÷ the best library.
    BestLibrary,
    /// Cornflakes ÷ raw.
    Raw,
    /// The hybrid ÷ every field copied.
    HybridCopy,
    /// The hybrid ÷ every field by scatter-gather.
    HybridSg,
    /// With ÷ without serialize-and-send.
    SerializeAndSend,
    /// The control: Cornflakes copying every field ÷ the best library.
    Control,
}

impl RatioKind {
    /// Every ratio, in the order they are printed.
    pub const ALL: [RatioKind; 6] = [
        RatioKind::BestLibrary,
        RatioKind::Raw,
        RatioKind::HybridCopy,
        RatioKind::HybridSg,
        RatioKind::SerializeAndSend,
        RatioKind::Control,
    ];

    /// Its name in the text.
    pub fn name(self) -> &'static str {
        match self {
            RatioKind::BestLibrary => "cornflakes ÷ best library",
            RatioKind::Raw => "cornflakes ÷ raw",
            RatioKind::HybridCopy => "hybrid ÷ only-copy",
            RatioKind::HybridSg => "hybrid ÷ only-scatter-gather",
            RatioKind::SerializeAndSend => "serialize-and-send (cornflakes ÷ no-ssend)",
            RatioKind::Control => "control: cornflakes-copy ÷ best library",
        }
    }

    /// Its key in the JSON.
    pub fn key(self) -> &'static str {
        match self {
            RatioKind::BestLibrary => "best_library",
            RatioKind::Raw => "raw",
            RatioKind::HybridCopy => "hybrid_copy",
            RatioKind::HybridSg => "hybrid_sg",
            RatioKind::SerializeAndSend => "serialize_and_send",
            RatioKind::Control => "control",
        }
    }
}

/// One ratio of one repeat.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    /// Which ratio.
    pub kind: RatioKind,
    /// Numerator's ÷ denominator's highest load kept up.
    pub value: f64,
    /// The numerator's mode.
    pub num: String,
    /// The denominator's mode (the best library of this repeat, for those ratios).
    pub den: String,
    /// The server-work ratio: the denominator's server busy nanoseconds per request ÷ the
    /// numerator's, each at its best load (what the throughput ratio would be were both
    /// bound by their server core); `None` without a time split.
    pub work: Option<f64>,
    /// Whether either side was bound by the device (the throughput ratio then understates
    /// the faster server: read `work` beside it).
    pub device_bound: bool,
    /// Whether either side's result rests on slowed or disturbed trials.
    pub flagged: bool,
}

/// The ratios of one repeat's summaries: each that both its modes kept up for.
pub fn ratios(summaries: &[EmuSummary], roles: &Roles<'_>) -> Vec<Ratio> {
    let find = |name: &str| {
        summaries
            .iter()
            .find(|m| m.mode == name && m.best.is_some())
    };
    let rps = |m: &EmuSummary| m.best.as_ref().map_or(0.0, |b| b.median_rps);
    let best_lib = roles
        .libraries
        .iter()
        .filter_map(|l| find(l))
        .max_by(|a, b| rps(a).total_cmp(&rps(b)));
    let pairs = [
        (RatioKind::BestLibrary, Some(roles.hybrid), best_lib),
        (RatioKind::Raw, Some(roles.hybrid), roles.raw.and_then(find)),
        (RatioKind::HybridCopy, Some(roles.hybrid), find(roles.copy)),
        (RatioKind::HybridSg, Some(roles.hybrid), find(roles.sg)),
        (
            RatioKind::SerializeAndSend,
            Some(roles.hybrid),
            find(roles.no_ssend),
        ),
        (RatioKind::Control, Some(roles.copy), best_lib),
    ];
    pairs
        .into_iter()
        .filter_map(|(kind, num, den)| {
            let (num, den) = (find(num?)?, den?);
            let (n, d) = (rps(num), rps(den));
            (d > 0.0).then(|| Ratio {
                kind,
                value: n / d,
                num: num.mode.clone(),
                den: den.mode.clone(),
                work: match (num.server_ns_per_request(), den.server_ns_per_request()) {
                    (Some(a), Some(b)) if a > 0.0 => Some(b / a),
                    _ => None,
                },
                device_bound: num.bound == Bound::Device || den.bound == Bound::Device,
                flagged: [num, den]
                    .iter()
                    .any(|m| m.rests_on_slowed() || m.rests_on_disturbed()),
            })
        })
        .collect()
}

/// A floor a ratio must reach, judged on the median of the repeats.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Floor {
    /// Which ratio.
    pub kind: RatioKind,
    /// Its lowest acceptable median.
    pub min: f64,
}

impl Floor {
    /// The floors of every echo shape and KV workload (docs/performance.md, "The targets"):
    /// the hybrid at least only-copy, serialize-and-send at least 1.07 × without.
    pub const EVERY_RUN: [Floor; 2] = [
        Floor {
            kind: RatioKind::HybridCopy,
            min: 1.0,
        },
        Floor {
            kind: RatioKind::SerializeAndSend,
            min: 1.07,
        },
    ];

    /// A floor of `min` on cornflakes ÷ the best library.
    pub fn best_library(min: f64) -> Floor {
        Floor {
            kind: RatioKind::BestLibrary,
            min,
        }
    }
}

/// The median, lowest and highest of `v` (the lower median of an even count; `None` when
/// empty).
pub fn median_min_max(v: &[f64]) -> Option<(f64, f64, f64)> {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return None;
    }
    s.sort_by(f64::total_cmp);
    Some((s[(s.len() - 1) / 2], s[0], s[s.len() - 1]))
}

/// One ratio over the repeats.
#[derive(Clone, Debug, PartialEq)]
pub struct RatioSpread {
    /// Which ratio.
    pub kind: RatioKind,
    /// Per repeat, in order (`None` where a side kept nothing up or was not run).
    pub per_repeat: Vec<Option<Ratio>>,
    /// Its floor, if it has one.
    pub floor: Option<f64>,
}

impl RatioSpread {
    fn values(&self, f: impl Fn(&Ratio) -> Option<f64>) -> Vec<f64> {
        self.per_repeat.iter().flatten().filter_map(f).collect()
    }

    /// Median, min and max of the throughput ratio over the repeats.
    pub fn spread(&self) -> Option<(f64, f64, f64)> {
        median_min_max(&self.values(|r| Some(r.value)))
    }

    /// Median, min and max of the server-work ratio over the repeats.
    pub fn work_spread(&self) -> Option<(f64, f64, f64)> {
        median_min_max(&self.values(|r| r.work))
    }

    /// Whether the median reaches the floor (`None` without a floor or a value).
    pub fn met(&self) -> Option<bool> {
        Some(self.spread()?.0 >= self.floor?)
    }

    /// The denominators over the repeats, e.g. `protobuf` or `protobuf 2, capnp 1`.
    fn denominators(&self) -> String {
        let mut seen: Vec<(String, usize)> = Vec::new();
        for r in self.per_repeat.iter().flatten() {
            match seen.iter_mut().find(|(d, _)| *d == r.den) {
                Some((_, n)) => *n += 1,
                None => seen.push((r.den.clone(), 1)),
            }
        }
        if seen.len() == 1 {
            return seen.remove(0).0;
        }
        seen.iter()
            .map(|(d, n)| format!("{d} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn line(&self, repeats: usize) -> String {
        let Some((med, lo, hi)) = self.spread() else {
            return format!(
                "- {}: – (a side kept nothing up or did not run)",
                self.kind.name()
            );
        };
        let got = self.per_repeat.iter().flatten().count();
        let spread = match (repeats, got) {
            (1, _) => String::new(),
            (r, g) if g == r => format!(" ({lo:.2}–{hi:.2} over {r} repeats)"),
            (r, g) => format!(" ({lo:.2}–{hi:.2} over the {g} of {r} repeats with both sides)"),
        };
        let against = match self.kind {
            RatioKind::BestLibrary | RatioKind::Control => format!(" ({})", self.denominators()),
            _ => String::new(),
        };
        let floor = match (self.floor, self.met()) {
            (Some(f), Some(true)) => format!("; floor {f:.2}: met"),
            (Some(f), _) => format!("; floor {f:.2}: MISSED"),
            (None, _) => String::new(),
        };
        let flagged = self
            .per_repeat
            .iter()
            .flatten()
            .filter(|r| r.flagged)
            .count();
        let flagged = if flagged > 0 {
            format!(" (resting on slowed or disturbed trials in {flagged} of {got})")
        } else {
            String::new()
        };
        let device = self
            .per_repeat
            .iter()
            .flatten()
            .filter(|r| r.device_bound)
            .count();
        let work = match self.work_spread() {
            Some((w, wlo, whi)) if device > 0 => {
                let spread = if repeats > 1 {
                    format!(" ({wlo:.2}–{whi:.2})")
                } else {
                    String::new()
                };
                format!("; a side bound by the device in {device} of {got}: server-work ratio {w:.2}{spread}")
            }
            _ => String::new(),
        };
        format!(
            "- {}{against}: {med:.2}{spread}{flagged}{floor}{work}",
            self.kind.name()
        )
    }
}

/// Every headline ratio over the repeats of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Headlines {
    /// Repeats of the whole search.
    pub repeats: usize,
    /// Each ratio some repeat could compute, in [`RatioKind::ALL`]'s order.
    pub ratios: Vec<RatioSpread>,
}

impl Headlines {
    /// The ratios of each repeat's summaries (`repeats[r]`: repeat r's), with `floors`.
    pub fn of(repeats: &[Vec<EmuSummary>], roles: &Roles<'_>, floors: &[Floor]) -> Headlines {
        let per: Vec<Vec<Ratio>> = repeats.iter().map(|s| ratios(s, roles)).collect();
        let spreads = RatioKind::ALL
            .into_iter()
            .map(|kind| RatioSpread {
                kind,
                per_repeat: per
                    .iter()
                    .map(|rs| rs.iter().find(|r| r.kind == kind).cloned())
                    .collect(),
                floor: floors.iter().find(|f| f.kind == kind).map(|f| f.min),
            })
            .filter(|s| s.per_repeat.iter().any(Option::is_some))
            .collect();
        Headlines {
            repeats: repeats.len(),
            ratios: spreads,
        }
    }

    /// The ratios in words, one line each, under a line that says how many repeats they
    /// rest on.
    pub fn text(&self) -> String {
        let mut s = String::new();
        if self.repeats > 1 {
            let _ = writeln!(
                s,
                "Ratios: the median of the {} repeats' ratios, their min–max beside it; each \
                 floor is judged on the median.",
                self.repeats
            );
        } else {
            let _ = writeln!(
                s,
                "Ratios of one repeat (--repeat 1): on this machine a ratio moves by up to \
                 ±30 % between quiet runs; --repeat 3 prints each as the median of three with \
                 their spread, and judges the floors on the median."
            );
        }
        for r in &self.ratios {
            let _ = writeln!(s, "{}", r.line(self.repeats));
        }
        if s.contains("server-work ratio") {
            let _ = writeln!(
                s,
                "(server-work ratio: the denominator's server nanoseconds per request ÷ the \
                 numerator's, each at its best load, from the server's time split: what the \
                 ratio would be were both bound by their server core)"
            );
        }
        s
    }

    /// The floors whose median missed, by name.
    pub fn missed(&self) -> Vec<&'static str> {
        self.ratios
            .iter()
            .filter(|r| r.met() == Some(false))
            .map(|r| r.kind.name())
            .collect()
    }

    /// The ratios as JSON (`ratios.json`): per ratio its per-repeat values (with the server
    /// work ratio and the modes), median, min, max, floor and whether the median met it.
    pub fn to_json(&self) -> Value {
        let ratios: Vec<Value> = self
            .ratios
            .iter()
            .map(|r| {
                let (median, min, max) = r
                    .spread()
                    .map_or((None, None, None), |(a, b, c)| (Some(a), Some(b), Some(c)));
                let work = r.work_spread();
                json!({
                    "ratio": r.kind.key(),
                    "name": r.kind.name(),
                    "median": median,
                    "min": min,
                    "max": max,
                    "work_ratio_median": work.map(|w| w.0),
                    "floor": r.floor,
                    "met": r.met(),
                    "per_repeat": r.per_repeat.iter().map(|p| p.as_ref().map(|p| json!({
                        "value": p.value,
                        "numerator": p.num,
                        "denominator": p.den,
                        "work_ratio": p.work,
                        "device_bound": p.device_bound,
                        "flagged": p.flagged,
                    }))).collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({ "repeats": self.repeats, "ratios": ratios })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::search::LoadSummary;
    use crate::Bottleneck;
    use percore::TimeSplit;

    /// A mode's summary: kept up to `rps` (trials `rps - 10` to `rps + 10`), bounded by
    /// `bound`, its server busy `ns` per request at that load (an idle quarter).
    pub(crate) fn summary(mode: &str, rps: f64, bound: Bound, ns: f64) -> EmuSummary {
        let requests = 1000;
        let busy = (ns * requests as f64) as u64;
        let split = TimeSplit {
            receive_ns: busy / 4,
            handler_ns: busy / 2,
            flush_reap_ns: busy - busy / 4 - busy / 2,
            idle_ns: busy / 3,
            bursts: 100,
            requests,
            sampled_ns: 1000,
            sampled_send_ns: 250,
        };
        let load = LoadSummary {
            offered_rps: rps,
            median_rps: rps,
            min_rps: rps - 10.0,
            max_rps: rps + 10.0,
            trials: 2,
            p99_us: Some(50.0),
            device_busy: if bound == Bound::Device { 0.97 } else { 0.4 },
            work_p50_ns: Some(ns),
            split: Some(split),
            frames: (4178.0, Some(4178.0)),
            bottleneck: if bound == Bound::Device {
                Bottleneck::Device
            } else {
                Bottleneck::None
            },
            line_rate_rps: Some(2_990_000.0),
            disturbed: 0,
            slowed: 0,
            slowed_reruns: 0,
            checked: 1,
            answered: 8,
            incomplete: 0,
        };
        EmuSummary {
            mode: mode.to_owned(),
            cores: 1,
            best: Some(load),
            first_miss: None,
            bound,
            loads: 5,
            trials: 10,
            mismatched: 0,
            malformed: 0,
            lost: 0,
            disturbed: 0,
            slowed: 0,
            slowed_reruns: 0,
            slowed_retries: 2,
            faster_than_reference: 0,
            desc_ns: 0,
            check_every: 8,
            incomplete: 0,
        }
    }

    /// A repeat: cornflakes device-bound at `cf`, the others server-bound.
    pub(crate) fn repeat(cf: f64, protobuf: f64) -> Vec<EmuSummary> {
        vec![
            summary("raw", 2600e3, Bound::Device, 100.0),
            summary("cornflakes", cf, Bound::Device, 190.0),
            summary("cornflakes-sg", 2400e3, Bound::Device, 200.0),
            summary("cornflakes-copy", 1700e3, Bound::Server, 430.0),
            summary("cornflakes-no-ssend", 2450e3, Bound::Device, 240.0),
            summary("protobuf", protobuf, Bound::Server, 590.0),
            summary("capnp", 840e3, Bound::Server, 1050.0),
        ]
    }

    fn roles() -> Roles<'static> {
        Roles {
            raw: Some("raw"),
            ..Roles::CORNFLAKES
        }
    }

    #[test]
    fn each_ratio_pairs_its_modes_and_says_when_the_device_bounds_one() {
        let r = ratios(&repeat(2500e3, 1400e3), &roles());
        let get = |k| r.iter().find(|x| x.kind == k).unwrap();
        let h = get(RatioKind::BestLibrary);
        assert_eq!((h.num.as_str(), h.den.as_str()), ("cornflakes", "protobuf"));
        assert!((h.value - 2500.0 / 1400.0).abs() < 1e-12);
        // Device-bound: the server-work ratio is protobuf's 590 ns ÷ cornflakes' 190.
        assert!(h.device_bound);
        assert!((h.work.unwrap() - 590.0 / 190.0).abs() < 1e-9, "{h:?}");
        let c = get(RatioKind::Control);
        assert_eq!(
            (c.num.as_str(), c.den.as_str()),
            ("cornflakes-copy", "protobuf")
        );
        assert!(!c.device_bound);
        assert!((get(RatioKind::Raw).value - 2500.0 / 2600.0).abs() < 1e-12);
        assert_eq!(get(RatioKind::SerializeAndSend).den, "cornflakes-no-ssend");
        assert_eq!(get(RatioKind::HybridSg).den, "cornflakes-sg");
        assert_eq!(get(RatioKind::HybridCopy).den, "cornflakes-copy");
        // A mode that kept nothing up gives no ratio.
        let mut none = repeat(2500e3, 1400e3);
        none[3].best = None;
        let r = ratios(&none, &roles());
        assert!(r
            .iter()
            .all(|x| x.kind != RatioKind::HybridCopy && x.kind != RatioKind::Control));
    }

    #[test]
    fn repeats_give_the_median_and_spread_and_floors_are_judged_on_the_median() {
        // Three repeats: the headline 1.60, 1.80, 2.00; capnp the best library in none.
        let reps = [
            repeat(2400e3, 1500e3),
            repeat(2520e3, 1400e3),
            repeat(2600e3, 1300e3),
        ];
        let floors = [
            Floor {
                kind: RatioKind::BestLibrary,
                min: 1.7,
            },
            Floor {
                kind: RatioKind::SerializeAndSend,
                min: 1.07,
            },
        ];
        let h = Headlines::of(&reps, &roles(), &floors);
        assert_eq!(h.repeats, 3);
        let best = &h.ratios[0];
        assert_eq!(best.kind, RatioKind::BestLibrary);
        let (m, lo, hi) = best.spread().unwrap();
        assert!((m - 1.8).abs() < 1e-9 && (lo - 1.6).abs() < 1e-9 && (hi - 2.0).abs() < 1e-9);
        // 1.80 >= 1.7: met on the median though one repeat read 1.60.
        assert_eq!(best.met(), Some(true));
        // 2520 / 2450 = 1.03 < 1.07: missed.
        assert_eq!(h.missed(), vec![RatioKind::SerializeAndSend.name()]);
        let text = h.text();
        assert!(
            text.starts_with("Ratios: the median of the 3 repeats"),
            "{text}"
        );
        assert!(
            text.contains("- cornflakes ÷ best library (protobuf): 1.80 (1.60–2.00 over 3 repeats); floor 1.70: met; a side bound by the device in 3 of 3: server-work ratio 3.11"),
            "{text}"
        );
        assert!(text.contains("floor 1.07: MISSED"), "{text}");
        // No floor, no verdict.
        assert!(
            text.lines()
                .any(|l| l.starts_with("- hybrid ÷ only-scatter-gather:") && !l.contains("floor")),
            "{text}"
        );
        let j = h.to_json();
        assert_eq!(j["repeats"], 3);
        assert_eq!(j["ratios"][0]["ratio"], "best_library");
        assert_eq!(j["ratios"][0]["met"], true);
        assert_eq!(j["ratios"][0]["per_repeat"][2]["denominator"], "protobuf");
        // One repeat says so, and how far a ratio moves.
        let one = Headlines::of(&reps[..1], &roles(), &floors);
        assert!(
            one.text().starts_with("Ratios of one repeat (--repeat 1)"),
            "{}",
            one.text()
        );
        assert!(!one.text().contains("over 1 repeats"), "{}", one.text());
        assert_eq!(median_min_max(&[3.0, 1.0, 2.0, 4.0]), Some((2.0, 1.0, 4.0)));
        assert_eq!(median_min_max(&[]), None);
    }
}

//! The highest load each mode kept up, as one horizontal bar per mode with the spread of its
//! trials (or repeats) and the limits beside it: a reference load drawn across every bar (e.g.
//! raw's), and each mode's 100 GbE line rate as a mark on its bar. Coloured by what bounded
//! the mode; the title, the values and the legend are drawn inside the canvas.

use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plot::{draw_title, err, register_font, Legend, PlotError};
use crate::record::Record;

/// One mode's bar.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// The mode.
    pub label: String,
    /// The highest load it kept up, requests per second.
    pub rps: f64,
    /// The spread drawn as a whisker: lowest and highest (e.g. of the best load's trials).
    pub spread: Option<(f64, f64)>,
    /// What bounded it (`server`, `device`, `grid`, …): the bar's colour and legend entry.
    pub bound: String,
    /// The most requests per second a 100 Gbit/s port carries with its frames: a mark on the
    /// bar.
    pub line_rate_rps: Option<f64>,
}

/// A bar chart of the highest loads kept up.
#[derive(Clone, Debug, PartialEq)]
pub struct BarChart {
    /// The title (shrunk to fit the canvas).
    pub title: String,
    /// The bars, drawn top to bottom in this order.
    pub bars: Vec<Bar>,
    /// Dashed vertical lines across every bar: a name and a load (e.g. `raw`'s).
    pub references: Vec<(String, f64)>,
    /// What the whiskers show, for the legend (e.g. `min–max of the best load's trials`).
    pub spread_means: String,
}

/// One bar per mode of `records` (sweeps of single points: no spread): its highest achieved
/// load within `keep_up` of offered ([`crate::max_kept_up`]), with `bound` as what bounded
/// it; modes in the order they first appear, one that kept nothing up an empty bar.
pub fn bars_from_records(records: &[Record], keep_up: f64, bound: &str) -> Vec<Bar> {
    let mut modes: Vec<&str> = Vec::new();
    for r in records {
        if !modes.contains(&r.mode.as_str()) {
            modes.push(&r.mode);
        }
    }
    modes
        .into_iter()
        .map(|m| {
            let mine: Vec<Record> = records.iter().filter(|r| r.mode == m).cloned().collect();
            let best = crate::max_kept_up(&mine, keep_up);
            Bar {
                label: m.to_owned(),
                rps: best.map_or(0.0, |b| b.achieved_rps),
                spread: None,
                bound: if best.is_some() {
                    bound.to_owned()
                } else {
                    "nothing kept up".to_owned()
                },
                line_rate_rps: None,
            }
        })
        .collect()
}

/// Width of the canvas; its height follows the number of bars.
pub const BARS_WIDTH: u32 = 1000;
const TITLE_H: u32 = 48;
const LEGEND_H: u32 = 84;
const BAR_H: u32 = 38;
const AXIS_H: u32 = 56;

/// The canvas of `bars` bars.
pub fn bars_size(bars: usize) -> (u32, u32) {
    (
        BARS_WIDTH,
        TITLE_H + LEGEND_H + AXIS_H + 16 + BAR_H * bars.max(1) as u32,
    )
}

/// The colour of a bound.
fn bound_color(bound: &str) -> RGBColor {
    match bound.split_whitespace().next().unwrap_or("") {
        "server" => RGBColor(31, 119, 180),
        "device" => RGBColor(230, 120, 20),
        "grid" => RGBColor(120, 170, 90),
        "nothing" => RGBColor(190, 190, 190),
        _ => RGBColor(110, 130, 170),
    }
}

/// How far a line-rate mark may lie beyond the longest bar and still widen the axis: a port
/// far faster than every mode (small frames) would squash the bars, so its mark is left off
/// and the legend says so.
const LINE_RATE_REACH: f64 = 1.6;

fn kilo(rps: f64) -> String {
    if rps >= 100_000.0 {
        format!("{:.0} k", rps / 1e3)
    } else {
        format!("{:.1} k", rps / 1e3)
    }
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, c: &BarChart) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(err)?;
    let (_, h) = root.dim_in_pixel();
    let (top, rest) = root.split_vertically(TITLE_H);
    let (body, legend_area) = rest.split_vertically(h - TITLE_H - LEGEND_H);
    draw_title(&top, &c.title)?;
    let n = c.bars.len() as i32;
    let label_font = ("sans-serif", 16);
    let label_w = c
        .bars
        .iter()
        .map(|b| {
            body.estimate_text_size(&b.label, &label_font.into_font().into())
                .map_or(0, |s| s.0)
        })
        .max()
        .unwrap_or(0)
        + 14;
    let data_max = c
        .bars
        .iter()
        .flat_map(|b| [Some(b.rps), b.spread.map(|s| s.1)].into_iter().flatten())
        .chain(c.references.iter().map(|r| r.1))
        .fold(0.0f64, f64::max)
        .max(1.0);
    // Line-rate marks near the data widen the axis; those far beyond it are left off.
    let shown_rate = |l: &f64| *l <= data_max * LINE_RATE_REACH;
    let max_x = c
        .bars
        .iter()
        .filter_map(|b| b.line_rate_rps.filter(shown_rate))
        .fold(data_max, f64::max)
        * 1.2;
    let x_fmt = move |x: &f64| {
        if max_x < 2_000.0 {
            format!("{:.2}", x / 1e3)
        } else if max_x < 20_000.0 {
            format!("{:.1}", x / 1e3)
        } else {
            format!("{:.0}", x / 1e3)
        }
    };
    // Bar i (top to bottom) sits in row n - 1 - i.
    let row = |i: usize| n - 1 - i as i32;
    let mut chart = ChartBuilder::on(&body)
        .margin_left(8)
        .margin_right(28)
        .margin_top(8)
        .x_label_area_size(AXIS_H)
        .y_label_area_size(label_w)
        .build_cartesian_2d(0.0..max_x, (0..n - 1).into_segmented())
        .map_err(err)?;
    let names = |v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(r) => c
            .bars
            .get((n - 1 - r) as usize)
            .map_or(String::new(), |b| b.label.clone()),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(c.bars.len() + 1)
        .y_label_formatter(&names)
        .x_label_formatter(&x_fmt)
        .x_desc("highest load kept up (thousand requests per second)")
        .label_style(label_font)
        .axis_desc_style(("sans-serif", 16))
        .draw()
        .map_err(err)?;
    // The reference lines under the bars, the values over everything.
    for (_, x) in &c.references {
        chart
            .draw_series(std::iter::once(DashedPathElement::new(
                vec![(*x, SegmentValue::Exact(0)), (*x, SegmentValue::Exact(n))],
                6,
                4,
                BLACK.stroke_width(2),
            )))
            .map_err(err)?;
    }
    for (i, b) in c.bars.iter().enumerate() {
        let y = row(i);
        let mut bar = Rectangle::new(
            [
                (0.0, SegmentValue::Exact(y)),
                (b.rps, SegmentValue::Exact(y + 1)),
            ],
            bound_color(&b.bound).filled(),
        );
        bar.set_margin(7, 7, 0, 0);
        chart.draw_series(std::iter::once(bar)).map_err(err)?;
        let mid = SegmentValue::CenterOf(y);
        if let Some((lo, hi)) = b.spread.filter(|s| s.1 > s.0) {
            let cap = |x: f64| {
                EmptyElement::at((x, mid.clone()))
                    + PathElement::new(vec![(0, -8), (0, 8)], BLACK.stroke_width(2))
            };
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(lo, mid.clone()), (hi, mid.clone())],
                    BLACK.stroke_width(2),
                )))
                .map_err(err)?;
            chart.draw_series([cap(lo), cap(hi)]).map_err(err)?;
        }
        if let Some(l) = b.line_rate_rps.filter(shown_rate) {
            chart
                .draw_series(std::iter::once(
                    EmptyElement::at((l, mid.clone()))
                        + PathElement::new(vec![(0, -15), (0, 15)], RED.stroke_width(3)),
                ))
                .map_err(err)?;
        }
    }
    let value_font = ("sans-serif", 15);
    for (i, b) in c.bars.iter().enumerate() {
        let mid = SegmentValue::CenterOf(row(i));
        let end = b.spread.map_or(b.rps, |s| s.1.max(b.rps));
        let text = if b.rps > 0.0 {
            kilo(b.rps)
        } else {
            "none kept up".to_owned()
        };
        let (tw, th) = body
            .estimate_text_size(&text, &value_font.into_font().into())
            .map_err(err)?;
        let (tw, th) = (tw as i32, th as i32);
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((end, mid))
                    + Rectangle::new(
                        [(6, -th / 2 - 2), (10 + tw + 2, th / 2 + 2)],
                        WHITE.filled(),
                    )
                    + Text::new(
                        text,
                        (9, 0),
                        value_font
                            .into_font()
                            .color(&BLACK)
                            .pos(Pos::new(HPos::Left, VPos::Center)),
                    ),
            ))
            .map_err(err)?;
    }
    let mut legend = Legend::new(&legend_area);
    let mut bounds: Vec<&str> = Vec::new();
    for b in &c.bars {
        if !bounds.contains(&b.bound.as_str()) {
            bounds.push(&b.bound);
        }
    }
    for b in bounds {
        let text = match b {
            "server" | "device" => format!("bounded by the {b}"),
            other => other.to_owned(),
        };
        legend.swatch(&text, bound_color(b))?;
    }
    if c.bars.iter().any(|b| b.spread.is_some_and(|s| s.1 > s.0)) {
        legend.whisker(&c.spread_means)?;
    }
    let rates: Vec<f64> = c.bars.iter().filter_map(|b| b.line_rate_rps).collect();
    let off = rates.iter().filter(|l| !shown_rate(l)).count();
    if off == rates.len() && off > 0 {
        let lowest = rates.iter().copied().fold(f64::INFINITY, f64::min);
        legend.note(&format!(
            "100 GbE line rate of the frames: {} and above, off the chart",
            kilo(lowest)
        ))?;
    } else if off > 0 {
        legend.mark(
            &format!("100 GbE line rate of its frames ({off} off the chart)"),
            RED,
        )?;
    } else if !rates.is_empty() {
        legend.mark("100 GbE line rate of its frames", RED)?;
    }
    for (name, x) in &c.references {
        legend.dashed(&format!("{name}: {}", kilo(*x)))?;
    }
    root.present().map_err(err)
}

/// Draws `chart` to `svg_path` and `png_path`.
pub fn plot_bars(chart: &BarChart, svg_path: &Path, png_path: &Path) -> Result<(), PlotError> {
    register_font()?;
    if chart.bars.is_empty() {
        return Err(err("no mode kept any load up: no bar to draw"));
    }
    let size = bars_size(chart.bars.len());
    draw(SVGBackend::new(svg_path, size).into_drawing_area(), chart)?;
    draw(
        BitMapBackend::new(png_path, size).into_drawing_area(),
        chart,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::svg_check;

    fn chart(title: &str) -> BarChart {
        let bar = |label: &str, rps: f64, bound: &str| Bar {
            label: label.to_owned(),
            rps,
            spread: Some((rps * 0.97, rps * 1.02)),
            bound: bound.to_owned(),
            line_rate_rps: Some(2_980_000.0),
        };
        BarChart {
            title: title.to_owned(),
            bars: vec![
                bar("raw", 2_618_000.0, "device"),
                bar("zero-copy", 2_526_000.0, "device"),
                bar("one-copy", 1_445_000.0, "device"),
                bar("two-copy", 1_382_000.0, "server"),
                bar("cornflakes", 2_505_000.0, "device"),
                bar("cornflakes-sg", 2_379_000.0, "device"),
                bar("cornflakes-copy", 1_745_000.0, "device"),
                bar("cornflakes-no-ssend", 2_514_000.0, "device"),
                bar("protobuf", 1_401_000.0, "server"),
                bar("capnp", 841_000.0, "server"),
                bar("flatbuffers", 1_376_000.0, "server"),
            ],
            references: vec![("raw".to_owned(), 2_618_000.0)],
            spread_means: "min–max of the best load's trials".to_owned(),
        }
    }

    /// The SVG has one bar per mode in its bound's colour, and every text (a long title
    /// included) lies inside the canvas; the PNG is written beside it.
    #[test]
    fn every_mode_has_a_bar_and_every_text_is_inside_the_canvas() {
        let dir = std::env::temp_dir().join(format!("loadgen-bars-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (svg, png) = (dir.join("b.svg"), dir.join("b.png"));
        // Too long for one line even at 15 px.
        let long = "echo list-2x2048, server core with an emulated ConnectX on a second core: \
                    the highest load each mode kept up (the median of its trials), with the \
                    spread of those trials and the limits a real port would set beside it";
        let c = chart(long);
        plot_bars(&c, &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        // A bar per mode: 7 device-bound, 4 server-bound (the legend's swatches are one each).
        assert_eq!(svg_check::rects_filled(&text, "#E67814"), 7 + 1, "device");
        assert_eq!(svg_check::rects_filled(&text, "#1F77B4"), 4 + 1, "server");
        svg_check::all_text_inside(&text);
        let texts = svg_check::texts(&text);
        for b in &c.bars {
            assert!(
                texts.iter().any(|(t, _)| *t == b.label),
                "no label {}",
                b.label
            );
        }
        // The long title, broken in two.
        let title: Vec<&str> = texts
            .iter()
            .map(|(t, _)| t.as_str())
            .filter(|t| long.starts_with(t) || long.ends_with(t))
            .collect();
        assert_eq!(title.len(), 2, "{title:?}");
        assert_eq!(format!("{} {}", title[0], title[1]), long);
        assert!(
            texts.iter().any(|(t, _)| t == "2505 k"),
            "cornflakes' value"
        );
        assert!(texts
            .iter()
            .any(|(t, _)| t == "100 GbE line rate of its frames"));
        assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
        assert_eq!(svg_check::size(&text), (1000.0, bars_size(11).1 as f64));
        // Small frames: a line rate far beyond every bar is left off, and the legend says
        // where it is.
        let mut small = c.clone();
        for b in &mut small.bars {
            b.line_rate_rps = Some(90_000_000.0);
        }
        plot_bars(&small, &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        svg_check::all_text_inside(&text);
        assert!(
            text.contains("100 GbE line rate of the frames: 90000 k and above, off the chart"),
            "{text}"
        );
        // A sweep's records: one bar per mode that kept a load up, at its best.
        let rec = |m: &str, offered: f64, achieved: f64| Record {
            mode: m.to_owned(),
            offered_rps: offered,
            achieved_rps: achieved,
            ..Record::default()
        };
        let recs = [
            rec("a", 100.0, 100.0),
            rec("a", 200.0, 198.0),
            rec("a", 400.0, 210.0),
            rec("b", 100.0, 50.0),
        ];
        let bars = bars_from_records(&recs, 0.95, "kernel sockets");
        assert_eq!(bars.len(), 2);
        assert_eq!((bars[0].label.as_str(), bars[0].rps), ("a", 198.0));
        assert_eq!(
            (bars[1].label.as_str(), bars[1].rps, bars[1].bound.as_str()),
            ("b", 0.0, "nothing kept up")
        );
        let mut empty = c.clone();
        empty.bars.clear();
        assert!(plot_bars(&empty, &svg, &png).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

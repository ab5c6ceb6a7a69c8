//! Latency against offered load, p50 and p99 side by side, one curve per mode, up to each
//! mode's saturation only. The x axis is the offered load, so a curve never runs back. Each
//! curve is the lower non-decreasing envelope of its points ([`lower_envelope`]): the
//! latency at a load is drawn at most as high as the lowest measured at any higher load.
//! Latency cannot fall as the load rises, and on a shared machine the noise is one-sided (a
//! descheduled thread adds milliseconds to a trial's tail, nothing takes them away), so a
//! point above a higher load's is a disturbed trial, not the server. The measured points are
//! drawn as dots beside the curve, spikes included.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::plot::{draw_title, err, register_font, Legend, PlotError};
use crate::record::Record;

/// The canvas of the latency plot.
pub const LATENCY_SIZE: (u32, u32) = (1200, 640);
const TITLE_H: u32 = 48;
const LEGEND_H: u32 = 100;

/// One mode's points kept up, as `(offered k req/s, p50 µs, p99 µs)`, ascending in load.
type Curve = (String, Vec<(f64, f64, f64)>);

/// The points each mode kept up (achieved within `keep_up` of offered, with both
/// percentiles), by offered load: its curve up to saturation. A load decided twice keeps its
/// last record. Modes in the order they first appear.
fn curves(records: &[Record], keep_up: f64) -> Vec<Curve> {
    let mut out: Vec<Curve> = Vec::new();
    for r in records {
        let (Some(p50), Some(p99)) = (r.p50_us, r.p99_us) else {
            continue;
        };
        if !r.keeps_up(keep_up) || p50 <= 0.0 || p99 <= 0.0 {
            continue;
        }
        let point = (r.offered_rps / 1e3, p50, p99);
        match out.iter_mut().find(|(m, _)| *m == r.mode) {
            Some((_, pts)) => match pts.iter_mut().find(|p| p.0 == point.0) {
                Some(p) => *p = point,
                None => pts.push(point),
            },
            None => out.push((r.mode.clone(), vec![point])),
        }
    }
    for (_, pts) in &mut out {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out.retain(|(_, p)| !p.is_empty());
    out
}

/// The lower non-decreasing envelope of `y`: each value replaced by the lowest at or after
/// it (`min(y[i..])`).
pub fn lower_envelope(y: &[f64]) -> Vec<f64> {
    let mut out = y.to_vec();
    for i in (0..out.len().saturating_sub(1)).rev() {
        out[i] = out[i].min(out[i + 1]);
    }
    out
}

fn color(i: usize) -> RGBColor {
    const C: [RGBColor; 12] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(110, 110, 110),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
        RGBColor(0, 0, 128),
        RGBColor(128, 64, 0),
    ];
    C[i % C.len()]
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    curves: &[Curve],
    which: usize,
    name: &str,
) -> Result<(), PlotError> {
    let pick = |p: &(f64, f64, f64)| if which == 0 { p.1 } else { p.2 };
    let xs = || curves.iter().flat_map(|(_, p)| p.iter().map(|q| q.0));
    let ys = || curves.iter().flat_map(|(_, p)| p.iter().map(pick));
    let max_x = xs().fold(0.0f64, f64::max).max(1e-3) * 1.05;
    let (lo, hi) = ys().fold((f64::INFINITY, 0.0f64), |(l, h), y| (l.min(y), h.max(y)));
    let (lo, hi) = (lo * 0.7, (hi * 1.5).max(lo * 10.0));
    let mut chart = ChartBuilder::on(area)
        .caption(name, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..max_x, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("offered load (thousand requests per second)")
        .y_desc("latency (µs, log scale)")
        .y_labels(8)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| {
            if *y >= 10.0 {
                format!("{y:.0}")
            } else {
                format!("{y:.1}")
            }
        })
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    for (i, (_, pts)) in curves.iter().enumerate() {
        let c = color(i);
        let y: Vec<f64> = pts.iter().map(pick).collect();
        let fit = lower_envelope(&y);
        chart
            .draw_series(LineSeries::new(
                pts.iter().zip(&fit).map(|(p, &f)| (p.0, f)),
                c.stroke_width(2),
            ))
            .map_err(err)?;
        chart
            .draw_series(
                pts.iter()
                    .map(|p| Circle::new((p.0, pick(p)), 3, c.filled())),
            )
            .map_err(err)?;
    }
    Ok(())
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    curves: &[Curve],
) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(err)?;
    let (w, h) = root.dim_in_pixel();
    let (top, rest) = root.split_vertically(TITLE_H);
    let (body, legend_area) = rest.split_vertically(h - TITLE_H - LEGEND_H);
    draw_title(&top, title)?;
    if curves.is_empty() {
        body.draw(&Text::new(
            "no mode kept any load up: no latency to draw (see the table)",
            (w as i32 / 2, (h - TITLE_H - LEGEND_H) as i32 / 2),
            ("sans-serif", 18)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Center)),
        ))
        .map_err(err)?;
        return root.present().map_err(err);
    }
    let halves = body.split_evenly((1, 2));
    panel(&halves[0], curves, 0, "median (p50)")?;
    panel(&halves[1], curves, 1, "99th percentile (p99)")?;
    let mut legend = Legend::new(&legend_area);
    for (i, (mode, _)) in curves.iter().enumerate() {
        legend.line(mode, color(i).stroke_width(2), true)?;
    }
    legend.note(
        "dots: each load's median trial, up to the highest load kept up; lines: their lower \
         non-decreasing envelope (a dot above a higher load's is a disturbed trial)",
    )?;
    root.present().map_err(err)
}

/// Draws p50 and p99 latency against offered load for every mode of `records`, each up to
/// the highest load it kept up (achieved within `keep_up` of offered), to `svg_path` and
/// `png_path`; when no mode kept any load up, a canvas that says so.
pub fn plot_latency(
    records: &[Record],
    title: &str,
    keep_up: f64,
    svg_path: &Path,
    png_path: &Path,
) -> Result<(), PlotError> {
    register_font()?;
    let c = curves(records, keep_up);
    draw(
        SVGBackend::new(svg_path, LATENCY_SIZE).into_drawing_area(),
        title,
        &c,
    )?;
    draw(
        BitMapBackend::new(png_path, LATENCY_SIZE).into_drawing_area(),
        title,
        &c,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::svg_check;

    fn rec(mode: &str, offered: f64, achieved: f64, p50: f64, p99: f64) -> Record {
        Record {
            mode: mode.into(),
            shape: "s".into(),
            offered_rps: offered,
            achieved_rps: achieved,
            p50_us: Some(p50),
            p99_us: Some(p99),
            ..Record::default()
        }
    }

    #[test]
    fn the_envelope_never_falls_and_drops_spikes_below_a_higher_load() {
        assert_eq!(
            lower_envelope(&[1.0, 3.0, 2.0, 4.0]),
            vec![1.0, 2.0, 2.0, 4.0]
        );
        assert_eq!(lower_envelope(&[5.0, 1.0, 1.0]), vec![1.0, 1.0, 1.0]);
        assert_eq!(lower_envelope(&[1.0, 2.0]), vec![1.0, 2.0]);
        assert!(lower_envelope(&[]).is_empty());
        // A 10 ms spike at a low load does not lift the curve.
        let f = lower_envelope(&[30.0, 10_000.0, 40.0, 35.0, 60.0, 90.0]);
        assert_eq!(f, vec![30.0, 35.0, 35.0, 35.0, 60.0, 90.0]);
    }

    /// Only the loads each mode kept up, by offered load (a load decided twice: its last
    /// record); a mode that kept nothing up has no curve.
    #[test]
    fn curves_stop_at_saturation_and_follow_the_offered_load() {
        let recs = vec![
            rec("a", 300.0, 290.0, 20.0, 40.0),
            rec("a", 100.0, 100.0, 10.0, 30.0),
            // Saturated: left out, as is the point above it.
            rec("a", 400.0, 200.0, 900.0, 20_000.0),
            rec("a", 200.0, 199.0, 12.0, 10_000.0),
            rec("a", 200.0, 200.0, 12.0, 35.0),
            rec("b", 100.0, 10.0, 10.0, 10.0),
        ];
        let c = curves(&recs, 0.95);
        assert_eq!(c.len(), 1);
        assert_eq!(
            c[0].1,
            vec![(0.1, 10.0, 30.0), (0.2, 12.0, 35.0), (0.3, 20.0, 40.0)]
        );
    }

    /// Both panels, a legend entry per mode and every text inside the canvas.
    #[test]
    fn the_plot_has_both_panels_and_every_text_inside() {
        let dir = std::env::temp_dir().join(format!("loadgen-latency-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (svg, png) = (dir.join("l.svg"), dir.join("l.png"));
        let modes = [
            "raw",
            "zero-copy",
            "one-copy",
            "two-copy",
            "cornflakes",
            "cornflakes-sg",
            "cornflakes-copy",
            "cornflakes-no-ssend",
            "protobuf",
            "capnp",
            "flatbuffers",
        ];
        let mut recs = Vec::new();
        for (i, m) in modes.iter().enumerate() {
            for k in 1..=6 {
                let load = 125_000.0 * k as f64 * (1.0 + i as f64 / 10.0);
                recs.push(rec(m, load, load, 20.0 + k as f64, 40.0 * k as f64));
            }
        }
        plot_latency(
            &recs,
            "echo list-2x2048: latency up to saturation",
            0.95,
            &svg,
            &png,
        )
        .unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        svg_check::all_text_inside(&text);
        let texts = svg_check::texts(&text);
        for m in modes {
            assert!(texts.iter().any(|(t, _)| t == m), "no legend entry {m}");
        }
        for p in ["median (p50)", "99th percentile (p99)"] {
            assert!(texts.iter().any(|(t, _)| t == p), "no panel {p}");
        }
        assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
        // Nothing kept up: the canvas says so.
        plot_latency(&recs[..0], "t", 0.95, &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("no mode kept any load up"), "{text}");
        svg_check::all_text_inside(&text);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! The Figure 9 box plot: per mode a box from p25 to p75 with the median, whiskers from p5
//! to p99; SVG and PNG, text in the embedded DejaVu Sans (no system fonts).

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::Percentiles;

/// Size of the plot in pixels.
pub const SIZE: (u32, u32) = (900, 560);

fn register_font() -> Result<(), String> {
    static OK: OnceLock<bool> = OnceLock::new();
    let ok = *OK.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .is_ok()
    });
    ok.then_some(())
        .ok_or_else(|| "the embedded DejaVu font failed to load".to_string())
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    rows: &[(String, Percentiles)],
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |x: &dyn std::fmt::Display| x.to_string();
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let top = rows.iter().map(|(_, p)| p.p99).fold(1.0f64, f64::max) * 1.1;
    let n = rows.len().max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(90)
        .build_cartesian_2d(-0.5f64..n - 0.5, 0f64..top)
        .map_err(|x| e(&x))?;
    let labels: Vec<String> = rows.iter().map(|(l, _)| l.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(rows.len().max(1))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("latency (µs); box p25–p75, line p50, whiskers p5–p99")
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(|x| e(&x))?;
    for (i, (_, p)) in rows.iter().enumerate() {
        let x = i as f64;
        let color = Palette99::pick(i).to_rgba();
        let w = 0.3;
        chart
            .draw_series([Rectangle::new(
                [(x - w, p.p25), (x + w, p.p75)],
                color.mix(0.35).filled(),
            )])
            .map_err(|x| e(&x))?;
        let line =
            |a: (f64, f64), b: (f64, f64)| PathElement::new(vec![a, b], BLACK.stroke_width(2));
        chart
            .draw_series([
                Rectangle::new([(x - w, p.p25), (x + w, p.p75)], BLACK.stroke_width(1)),
                Rectangle::new([(x - w, p.p50), (x + w, p.p50)], BLACK.stroke_width(3)),
            ])
            .map_err(|x| e(&x))?;
        chart
            .draw_series([
                line((x, p.p5), (x, p.p25)),
                line((x, p.p75), (x, p.p99)),
                line((x - w / 2.0, p.p5), (x + w / 2.0, p.p5)),
                line((x - w / 2.0, p.p99), (x + w / 2.0, p.p99)),
            ])
            .map_err(|x| e(&x))?;
    }
    root.present().map_err(|x| e(&x))
}

/// Draws the box plot of `rows` (label, percentiles) to `svg` and `png`.
pub fn box_plot(
    title: &str,
    rows: &[(String, Percentiles)],
    svg: &Path,
    png: &Path,
) -> Result<(), String> {
    register_font()?;
    draw(&SVGBackend::new(svg, SIZE).into_drawing_area(), title, rows)?;
    draw(
        &BitMapBackend::new(png, SIZE).into_drawing_area(),
        title,
        rows,
    )
}

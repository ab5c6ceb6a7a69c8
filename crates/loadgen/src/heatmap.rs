//! A ratio heatmap over a grid (e.g. scatter-gather / copy throughput per segment size and
//! count, the paper's Figure 5), drawn to SVG and PNG with the same embedded font as the curves.

use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::plot::{draw_title, err, register_font, Legend, PlotError, PLOT_SIZE};

/// A grid of ratios to draw: `values[row][col]`, rows along the y axis (bottom first),
/// columns along the x axis. `None` cells (not measured) are drawn grey.
#[derive(Debug, Clone, PartialEq)]
pub struct Heatmap {
    /// Title above the plot.
    pub title: String,
    /// X axis description.
    pub x_desc: String,
    /// Y axis description.
    pub y_desc: String,
    /// One label per column.
    pub x_labels: Vec<String>,
    /// One label per row.
    pub y_labels: Vec<String>,
    /// Ratios; 1.0 is neutral (white), above 1 green, below 1 red. Each cell is annotated with
    /// the percent difference `(ratio - 1) × 100`.
    pub values: Vec<Vec<Option<f64>>>,
    /// Draw a vertical line on the left edge of this column (e.g. the recommended threshold).
    pub mark_column: Option<usize>,
}

/// The colour of `ratio`: white at 1, saturating green at ≥ 1.5, red at ≤ 1/1.5.
fn color(ratio: Option<f64>) -> RGBColor {
    let Some(r) = ratio.filter(|r| r.is_finite() && *r > 0.0) else {
        return RGBColor(200, 200, 200);
    };
    // log scale, so 2x and 0.5x are equally strong
    let t = (r.ln() / 1.5f64.ln()).clamp(-1.0, 1.0);
    let fade = |full: u8| (255.0 - (255.0 - f64::from(full)) * t.abs()) as u8;
    if t >= 0.0 {
        RGBColor(fade(40), fade(160), fade(60))
    } else {
        RGBColor(fade(210), fade(50), fade(40))
    }
}

fn draw<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, h: &Heatmap) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(err)?;
    let (_, height) = root.dim_in_pixel();
    let (top, rest) = root.split_vertically(48);
    let (body, legend_area) = rest.split_vertically(height - 48 - 40);
    draw_title(&top, &h.title)?;
    // An integer range into_segmented() has one bucket per value, ends included.
    let (nx, ny) = (h.x_labels.len() as i32, h.y_labels.len() as i32);
    let mut chart = ChartBuilder::on(&body)
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(72)
        .build_cartesian_2d((0..nx - 1).into_segmented(), (0..ny - 1).into_segmented())
        .map_err(err)?;
    let label = |labels: &[String], v: &SegmentValue<i32>| match v {
        SegmentValue::CenterOf(i) => labels.get(*i as usize).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_labels(h.x_labels.len() + 1)
        .y_labels(h.y_labels.len() + 1)
        .x_label_formatter(&|v| label(&h.x_labels, v))
        .y_label_formatter(&|v| label(&h.y_labels, v))
        .x_desc(h.x_desc.as_str())
        .y_desc(h.y_desc.as_str())
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(err)?;
    let cell = |x: i32, y: i32| {
        [
            (SegmentValue::Exact(x), SegmentValue::Exact(y + 1)),
            (SegmentValue::Exact(x + 1), SegmentValue::Exact(y)),
        ]
    };
    for (y, row) in h.values.iter().enumerate() {
        for (x, v) in row.iter().enumerate() {
            let (x, y) = (x as i32, y as i32);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    cell(x, y),
                    color(*v).filled(),
                )))
                .map_err(err)?;
            let text = v.map_or_else(|| "–".to_owned(), |r| format!("{:+.0}%", (r - 1.0) * 100.0));
            chart
                .draw_series(std::iter::once(Text::new(
                    text,
                    (SegmentValue::CenterOf(x), SegmentValue::CenterOf(y)),
                    ("sans-serif", 16).into_font().color(&BLACK),
                )))
                .map_err(err)?;
        }
    }
    if let Some(c) = h.mark_column {
        let c = c as i32;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![
                    (SegmentValue::Exact(c), SegmentValue::Exact(0)),
                    (SegmentValue::Exact(c), SegmentValue::Exact(ny)),
                ],
                BLUE.stroke_width(4),
            )))
            .map_err(err)?;
    }
    let mut legend = Legend::new(&legend_area);
    legend.swatch(
        "ratio above 1 (the number: how much higher)",
        color(Some(1.4)),
    )?;
    legend.swatch("below 1", color(Some(1.0 / 1.4)))?;
    legend.swatch("not measured", color(None))?;
    if h.mark_column.is_some() {
        legend.mark("the marked column (left edge)", BLUE)?;
    }
    root.present().map_err(err)
}

/// Draws `h` to `svg_path` and `png_path`.
pub fn plot_heatmap(h: &Heatmap, svg_path: &Path, png_path: &Path) -> Result<(), PlotError> {
    register_font()?;
    if h.x_labels.is_empty() || h.y_labels.is_empty() {
        return Err(err("the heatmap has no rows or columns"));
    }
    if h.values.len() != h.y_labels.len() || h.values.iter().any(|r| r.len() != h.x_labels.len()) {
        return Err(err(format!(
            "the heatmap's values are not {} rows of {} columns",
            h.y_labels.len(),
            h.x_labels.len()
        )));
    }
    draw(SVGBackend::new(svg_path, PLOT_SIZE).into_drawing_area(), h)?;
    draw(
        BitMapBackend::new(png_path, PLOT_SIZE).into_drawing_area(),
        h,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_are_neutral_at_one_and_signed_around_it() {
        assert_eq!(color(Some(1.0)), RGBColor(255, 255, 255));
        let (up, down) = (color(Some(2.0)), color(Some(0.5)));
        assert!(up.1 > up.0, "{up:?}");
        assert!(down.0 > down.1, "{down:?}");
        assert_eq!(color(None), RGBColor(200, 200, 200));
    }

    #[test]
    fn writes_svg_and_png_and_rejects_ragged_grids() {
        let dir = std::env::temp_dir().join(format!("loadgen-heatmap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (svg, png) = (dir.join("h.svg"), dir.join("h.png"));
        let mut h = Heatmap {
            title: "sg / copy".into(),
            x_desc: "segment size (B)".into(),
            y_desc: "segments".into(),
            x_labels: vec!["64".into(), "512".into()],
            y_labels: vec!["1".into(), "2".into()],
            values: vec![vec![Some(0.8), Some(1.3)], vec![Some(0.7), None]],
            mark_column: Some(1),
        };
        plot_heatmap(&h, &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.starts_with("<svg") && text.contains("+30%") && text.contains("-20%"));
        crate::plot::svg_check::all_text_inside(&text);
        // A title as long as calibrate's fits too.
        h.title = "sg vs copy saturation load (medians), server core with an emulated ConnectX \
                   on a second core; threshold 512 B"
            .into();
        plot_heatmap(&h, &svg, &png).unwrap();
        crate::plot::svg_check::all_text_inside(&std::fs::read_to_string(&svg).unwrap());
        assert_eq!(&std::fs::read(&png).unwrap()[..4], b"\x89PNG");
        h.values[1].pop();
        assert!(plot_heatmap(&h, &svg, &png).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

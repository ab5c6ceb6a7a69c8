//! Throughput–p99 latency curves, drawn to SVG and PNG.
//!
//! Everything is pure Rust: the SVG is written by plotters' SVG backend, the
//! PNG is rasterized in memory and encoded without system libraries, and text
//! uses an embedded DejaVu Sans font, so no system fonts are needed.

use crate::record::Record;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::fmt;
use std::path::Path;
use std::sync::OnceLock;

/// Size of the plots in pixels.
pub const PLOT_SIZE: (u32, u32) = (960, 640);

/// A plot could not be drawn or written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlotError {
    message: String,
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "plot failed: {}", self.message)
    }
}

impl std::error::Error for PlotError {}

pub(crate) fn err(e: impl fmt::Display) -> PlotError {
    PlotError {
        message: e.to_string(),
    }
}

/// Registers the embedded DejaVu Sans as plotters' "sans-serif", once.
pub(crate) fn register_font() -> Result<(), PlotError> {
    static FONT_OK: OnceLock<bool> = OnceLock::new();
    let ok = *FONT_OK.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular())
            .is_ok()
    });
    ok.then_some(())
        .ok_or_else(|| err("embedded DejaVu font failed to load"))
}

/// One line of the plot: a label and its `(achieved krps, p99 us)` points.
type Series = (String, Vec<(f64, f64)>);

/// Groups records into one series per (mode, shape), sorted by offered load.
/// Points without a p99 (nothing verified) are left out. The label is the mode
/// alone when all records share one shape.
fn series(records: &[Record]) -> Vec<Series> {
    let one_shape = records.windows(2).all(|w| w[0].shape == w[1].shape);
    // (mode, shape, [(offered, achieved krps, p99)])
    type Group = (String, String, Vec<(f64, f64, f64)>);
    let mut out: Vec<Group> = Vec::new();
    for r in records {
        let Some(p99) = r.p99_us else { continue };
        let point = (r.offered_rps, r.achieved_rps / 1e3, p99);
        match out
            .iter_mut()
            .find(|(m, s, _)| *m == r.mode && *s == r.shape)
        {
            Some((_, _, pts)) => pts.push(point),
            None => out.push((r.mode.clone(), r.shape.clone(), vec![point])),
        }
    }
    out.into_iter()
        .map(|(mode, shape, mut pts)| {
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let label = if one_shape {
                mode
            } else {
                format!("{mode} {shape}")
            };
            (label, pts.into_iter().map(|(_, x, y)| (x, y)).collect())
        })
        .collect()
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    lines: &[Series],
) -> Result<(), PlotError> {
    root.fill(&WHITE).map_err(err)?;
    let max_x = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .fold(0.0f64, f64::max);
    let ys = || lines.iter().flat_map(|(_, p)| p.iter().map(|q| q.1));
    let max_y = ys().fold(0.0f64, f64::max);
    // Latency spans orders of magnitude (tens of µs idle, ms under overload): a log axis keeps
    // the low-load differences visible. Its floor is the smallest positive value seen.
    let min_y = ys().filter(|&y| y > 0.0).fold(f64::INFINITY, f64::min);
    let min_y = if min_y.is_finite() { min_y * 0.8 } else { 1.0 };
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 26))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(
            0.0..(max_x * 1.05).max(1.0),
            (min_y..(max_y * 1.25).max(min_y * 10.0)).log_scale(),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("achieved load (k req/s)")
        .y_desc("p99 latency (us, log scale)")
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 18))
        .draw()
        .map_err(err)?;
    for (i, (label, pts)) in lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                pts.iter().copied().filter(|p| p.1 > 0.0),
                color.stroke_width(2),
            ))
            .map_err(err)?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(2))
            });
        chart
            .draw_series(
                pts.iter()
                    .filter(|p| p.1 > 0.0)
                    .map(|&p| Circle::new(p, 4, color.filled())),
            )
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 16))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

/// [`plot_p99_curves`] of the points that kept up (achieved within
/// [`DEFAULT_KEEP_UP`](crate::DEFAULT_KEEP_UP) of offered), or of every point when none did
/// (very short runs), the title ending in which: `"{title} (points within 95% of offered)"` or
/// `"{title} (all points)"`. Saturated points (achieved far below offered, p99 = the loss
/// timeout) would squash the curves into the x axis; the JSON keeps them all.
pub fn plot_kept_p99_curves(
    records: &[Record],
    title: &str,
    svg_path: &Path,
    png_path: &Path,
) -> Result<(), PlotError> {
    let kept: Vec<Record> = records
        .iter()
        .filter(|r| r.keeps_up(crate::DEFAULT_KEEP_UP))
        .cloned()
        .collect();
    let (points, which) = if kept.is_empty() {
        (records, "all points")
    } else {
        (&kept[..], "points within 95% of offered")
    };
    plot_p99_curves(points, &format!("{title} ({which})"), svg_path, png_path)
}

/// Draws p99 latency against achieved load, one line per (mode, shape), to
/// `svg_path` and `png_path`.
pub fn plot_p99_curves(
    records: &[Record],
    title: &str,
    svg_path: &Path,
    png_path: &Path,
) -> Result<(), PlotError> {
    register_font()?;
    let lines = series(records);
    if lines.is_empty() {
        return Err(err("no record has a p99 latency to plot"));
    }
    draw(
        SVGBackend::new(svg_path, PLOT_SIZE).into_drawing_area(),
        title,
        &lines,
    )?;
    draw(
        BitMapBackend::new(png_path, PLOT_SIZE).into_drawing_area(),
        title,
        &lines,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(mode: &str, shape: &str, offered: f64, p99: Option<f64>) -> Record {
        Record {
            mode: mode.into(),
            shape: shape.into(),
            offered_rps: offered,
            achieved_rps: offered * 0.99,
            p50_us: p99.map(|p| p / 2.0),
            p99_us: p99,
            p999_us: p99,
            mean_us: p99,
            sent: 1,
            received: 1,
            verified: 1,
            threads: 1,
            measured_s: 1.0,
            ..Record::default()
        }
    }

    #[test]
    fn series_group_sort_and_skip_empty_points() {
        let recs = vec![
            rec("b", "s", 2000.0, Some(20.0)),
            rec("a", "s", 3000.0, Some(30.0)),
            rec("a", "s", 1000.0, Some(10.0)),
            rec("a", "s", 5000.0, None),
        ];
        let s = series(&recs);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].0, "b");
        assert_eq!(s[1].0, "a");
        assert_eq!(s[1].1, vec![(0.99, 10.0), (2.97, 30.0)]);
        let mixed = vec![rec("a", "x", 1.0, Some(1.0)), rec("a", "y", 1.0, Some(1.0))];
        assert_eq!(series(&mixed)[1].0, "a y");
    }

    #[test]
    fn writes_svg_and_png() {
        let dir = std::env::temp_dir().join(format!("loadgen-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (svg, png) = (dir.join("p.svg"), dir.join("p.png"));
        let recs: Vec<Record> = (1..=5)
            .flat_map(|i| {
                let x = i as f64 * 1e5;
                [
                    rec("protobuf", "list-2x2048", x, Some(10.0 + i as f64 * 3.0)),
                    rec("capnp", "list-2x2048", x, Some(12.0 + (i * i) as f64)),
                ]
            })
            .collect();
        plot_p99_curves(&recs, "echo list-2x2048", &svg, &png).unwrap();
        let svg_text = std::fs::read_to_string(&svg).unwrap();
        assert!(svg_text.starts_with("<svg"));
        assert!(svg_text.contains("protobuf") && svg_text.contains("capnp"));
        let png_bytes = std::fs::read(&png).unwrap();
        assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(plot_p99_curves(&[rec("a", "s", 1.0, None)], "t", &svg, &png).is_err());
    }

    #[test]
    fn kept_curves_leave_saturated_points_out_and_say_so() {
        let dir = std::env::temp_dir().join(format!("loadgen-kept-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (svg, png) = (dir.join("k.svg"), dir.join("k.png"));
        let mut saturated = rec("raw", "s", 9e6, Some(200_000.0));
        saturated.achieved_rps = 1e6;
        let recs = vec![rec("raw", "s", 1e5, Some(10.0)), saturated.clone()];
        plot_kept_p99_curves(&recs, "echo s", &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.contains("echo s (points within 95% of offered)"),
            "{text}"
        );
        // Only the saturated point: every point is drawn.
        plot_kept_p99_curves(&[saturated], "echo s", &svg, &png).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("echo s (all points)"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Throughput–p99 latency curves, drawn to SVG and PNG.
//!
//! Everything is pure Rust: the SVG is written by plotters' SVG backend, the
//! PNG is rasterized in memory and encoded without system libraries, and text
//! uses an embedded DejaVu Sans font, so no system fonts are needed.

use crate::record::Record;
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
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

/// The width of `text` at font `size` on `area`, pixels.
fn text_width<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    size: u32,
) -> Result<u32, PlotError> {
    area.estimate_text_size(text, &("sans-serif", size).into_font().into())
        .map(|s| s.0)
        .map_err(err)
}

/// The largest font size from `start` down to `min` at which `text` is at most `max_w`
/// pixels wide on `area` (`None` when even `min` is too wide).
pub(crate) fn fit_font<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    max_w: u32,
    start: u32,
    min: u32,
) -> Result<Option<u32>, PlotError> {
    for size in (min..=start).rev() {
        if text_width(area, text, size)? <= max_w {
            return Ok(Some(size));
        }
    }
    Ok(None)
}

/// Draws `text` centred in `area` (a strip above a chart), as large as fits up to 24 px; a
/// title too long for one line at 15 px is broken at the space nearest its middle into two.
/// Nothing of it leaves the area.
pub(crate) fn draw_title<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
) -> Result<(), PlotError> {
    let (w, h) = area.dim_in_pixel();
    let max_w = w.saturating_sub(24);
    let center = |size: u32| {
        ("sans-serif", size)
            .into_font()
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center))
    };
    if let Some(size) = fit_font(area, text, max_w, 24, 15)? {
        return area
            .draw(&Text::new(
                text.to_owned(),
                (w as i32 / 2, h as i32 / 2),
                center(size),
            ))
            .map_err(err);
    }
    let mid = text.len() / 2;
    let cut = text
        .match_indices(' ')
        .map(|(i, _)| i)
        .min_by_key(|&i| i.abs_diff(mid))
        .unwrap_or(mid);
    let (a, b) = (text[..cut].trim_end(), text[cut..].trim_start());
    let line_h = (h / 2).max(10);
    let start = (line_h * 4 / 5).clamp(9, 20);
    let size = fit_font(area, a, max_w, start, 8)?
        .unwrap_or(8)
        .min(fit_font(area, b, max_w, start, 8)?.unwrap_or(8));
    for (i, line) in [a, b].into_iter().enumerate() {
        area.draw(&Text::new(
            line.to_owned(),
            (w as i32 / 2, (line_h * i as u32 + line_h / 2) as i32),
            center(size),
        ))
        .map_err(err)?;
    }
    Ok(())
}

/// A legend drawn into its own area of the canvas, entries left to right, wrapping to a new
/// line when the next one would not fit: nothing of it can overlap the data or leave the
/// canvas.
pub(crate) struct Legend<'a, DB: DrawingBackend> {
    area: &'a DrawingArea<DB, Shift>,
    x: i32,
    y: i32,
}

const LEGEND_FONT: u32 = 15;
const LEGEND_KEY: i32 = 28;
const LEGEND_ROW: i32 = 22;

impl<'a, DB: DrawingBackend> Legend<'a, DB> {
    pub(crate) fn new(area: &'a DrawingArea<DB, Shift>) -> Self {
        Legend { area, x: 12, y: 8 }
    }

    /// Places an entry of `text` after a key `LEGEND_KEY` wide; returns the key's left edge
    /// and its vertical middle.
    fn place(&mut self, text: &str) -> Result<(i32, i32), PlotError> {
        let font = ("sans-serif", LEGEND_FONT).into_font();
        let (tw, _) = self
            .area
            .estimate_text_size(text, &font.clone().into())
            .map_err(err)?;
        let need = LEGEND_KEY + 6 + tw as i32 + 18;
        let (w, h) = self.area.dim_in_pixel();
        if self.x > 12 && self.x + need > w as i32 - 8 {
            self.x = 12;
            self.y += LEGEND_ROW;
        }
        self.fits(h)?;
        let at = (self.x, self.y + LEGEND_ROW / 2);
        self.area
            .draw(&Text::new(
                text.to_owned(),
                (self.x + LEGEND_KEY + 6, at.1),
                font.color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
        self.x += need;
        Ok(at)
    }

    /// A filled square of `color`.
    pub(crate) fn swatch(&mut self, text: &str, color: RGBColor) -> Result<(), PlotError> {
        let (x, y) = self.place(text)?;
        self.area
            .draw(&Rectangle::new(
                [(x + 4, y - 7), (x + LEGEND_KEY - 4, y + 7)],
                color.filled(),
            ))
            .map_err(err)
    }

    /// A line of `style`, with a dot in its middle when `dot`.
    pub(crate) fn line(
        &mut self,
        text: &str,
        style: ShapeStyle,
        dot: bool,
    ) -> Result<(), PlotError> {
        let (x, y) = self.place(text)?;
        self.area
            .draw(&PathElement::new(vec![(x, y), (x + LEGEND_KEY, y)], style))
            .map_err(err)?;
        if dot {
            self.area
                .draw(&Circle::new(
                    (x + LEGEND_KEY / 2, y),
                    3,
                    style.color.filled(),
                ))
                .map_err(err)?;
        }
        Ok(())
    }

    /// A whisker with its end caps.
    pub(crate) fn whisker(&mut self, text: &str) -> Result<(), PlotError> {
        let (x, y) = self.place(text)?;
        let s = BLACK.stroke_width(2);
        for e in [
            vec![(x + 2, y), (x + LEGEND_KEY - 2, y)],
            vec![(x + 2, y - 6), (x + 2, y + 6)],
            vec![(x + LEGEND_KEY - 2, y - 6), (x + LEGEND_KEY - 2, y + 6)],
        ] {
            self.area.draw(&PathElement::new(e, s)).map_err(err)?;
        }
        Ok(())
    }

    /// A short vertical mark of `color`.
    pub(crate) fn mark(&mut self, text: &str, color: RGBColor) -> Result<(), PlotError> {
        let (x, y) = self.place(text)?;
        self.area
            .draw(&PathElement::new(
                vec![(x + LEGEND_KEY / 2, y - 9), (x + LEGEND_KEY / 2, y + 9)],
                color.stroke_width(3),
            ))
            .map_err(err)
    }

    /// An error when the next row would run out of the legend's strip (the strips are sized
    /// for what the charts put there: a layout that outgrows one fails, never draws cut off).
    fn fits(&self, h: u32) -> Result<(), PlotError> {
        if self.y + LEGEND_ROW > h as i32 {
            return Err(err("the legend does not fit its strip"));
        }
        Ok(())
    }

    /// A line of text on a line of its own (shrunk to the width).
    pub(crate) fn note(&mut self, text: &str) -> Result<(), PlotError> {
        if self.x > 12 {
            self.x = 12;
            self.y += LEGEND_ROW;
        }
        let (w, h) = self.area.dim_in_pixel();
        self.fits(h)?;
        let size =
            fit_font(self.area, text, w.saturating_sub(24), LEGEND_FONT - 1, 8)?.unwrap_or(8);
        self.area
            .draw(&Text::new(
                text.to_owned(),
                (self.x, self.y + LEGEND_ROW / 2),
                ("sans-serif", size)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Left, VPos::Center)),
            ))
            .map_err(err)?;
        self.y += LEGEND_ROW;
        Ok(())
    }

    /// A dashed line.
    pub(crate) fn dashed(&mut self, text: &str) -> Result<(), PlotError> {
        let (x, y) = self.place(text)?;
        self.area
            .draw(&DashedPathElement::new(
                vec![(x, y), (x + LEGEND_KEY, y)],
                6,
                4,
                BLACK.stroke_width(2),
            ))
            .map_err(err)
    }
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
    let (top, root) = root.split_vertically(48);
    draw_title(&top, title)?;
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
        svg_check::all_text_inside(&svg_text);
        let png_bytes = std::fs::read(&png).unwrap();
        assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(plot_p99_curves(&[rec("a", "s", 1.0, None)], "t", &svg, &png).is_err());
    }
}

/// What a test reads back from a drawn SVG.
#[cfg(test)]
pub(crate) mod svg_check {
    use plotters::prelude::*;

    /// The width in pixels of `text` in the embedded font at the SVG's `font-size` (which
    /// plotters writes as its size ÷ 1.24): measured with the font itself.
    fn width(text: &str, svg_size: f64) -> f64 {
        super::register_font().unwrap();
        let mut buf = vec![0u8; 3 * 4 * 4];
        let area = BitMapBackend::with_buffer(&mut buf, (4, 4)).into_drawing_area();
        let size = (svg_size * 1.24).round();
        area.estimate_text_size(text, &("sans-serif", size).into_font().into())
            .unwrap()
            .0 as f64
    }

    /// Each `<text>` element: its text and its box (x0, y0, x1, y1), from its position,
    /// anchor, font size, rotation and its width in the embedded font.
    pub(crate) fn texts(svg: &str) -> Vec<(String, (f64, f64, f64, f64))> {
        let attr = |tag: &str, name: &str| -> Option<String> {
            let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
            Some(tag[at..at + tag[at..].find('"')?].to_owned())
        };
        let mut out = Vec::new();
        let mut rest = svg;
        while let Some(start) = rest.find("<text") {
            let open_end = start + rest[start..].find('>').expect("tag ends");
            let tag = &rest[start..open_end];
            let close = open_end + rest[open_end..].find("</text>").expect("text closes");
            let text = rest[open_end + 1..close].trim().to_owned();
            rest = &rest[close..];
            let num = |n: &str| attr(tag, n).and_then(|v| v.parse::<f64>().ok());
            let (x, y, size) = (
                num("x").unwrap(),
                num("y").unwrap(),
                num("font-size").unwrap(),
            );
            let unescaped = text
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&amp;", "&");
            let w = width(&unescaped, size);
            let (x0, x1) = match attr(tag, "text-anchor").as_deref() {
                Some("middle") => (x - w / 2.0, x + w / 2.0),
                Some("end") => (x - w, x),
                _ => (x, x + w),
            };
            let dy = attr(tag, "dy").unwrap_or_default();
            let (y0, y1) = if dy.ends_with("em") {
                (y, y + size)
            } else if dy.starts_with('-') {
                (y - size, y)
            } else {
                (y - size / 2.0, y + size / 2.0)
            };
            let b = if attr(tag, "transform").is_some_and(|t| t.starts_with("rotate(270")) {
                // Rotated about (x, y): the width runs up the canvas.
                let (a0, a1) = (x0 - x, x1 - x);
                (x - size / 2.0, y - a1, x + size / 2.0, y - a0)
            } else {
                (x0, y0, x1, y1)
            };
            out.push((text, b));
        }
        out
    }

    /// The canvas size of an SVG (`width`, `height` of its root).
    pub(crate) fn size(svg: &str) -> (f64, f64) {
        let head = &svg[..svg.find('>').unwrap()];
        let get = |n: &str| {
            let at = head.find(&format!("{n}=\"")).unwrap() + n.len() + 2;
            head[at..at + head[at..].find('"').unwrap()]
                .parse()
                .unwrap()
        };
        (get("width"), get("height"))
    }

    /// Asserts every text lies inside the canvas.
    pub(crate) fn all_text_inside(svg: &str) {
        let (w, h) = size(svg);
        let texts = texts(svg);
        assert!(!texts.is_empty());
        for (t, (x0, y0, x1, y1)) in texts {
            assert!(
                x0 >= 0.0 && y0 >= 0.0 && x1 <= w && y1 <= h,
                "text {t:?} at ({x0:.0}, {y0:.0})–({x1:.0}, {y1:.0}) leaves the {w}x{h} canvas"
            );
        }
    }

    /// The `<rect>` elements filled with `rgb` (e.g. `#1F77B4`).
    pub(crate) fn rects_filled(svg: &str, rgb: &str) -> usize {
        svg.split("<rect")
            .skip(1)
            .filter(|r| {
                let tag = &r[..r.find('>').unwrap_or(r.len())];
                tag.contains(&format!("fill=\"{rgb}\""))
            })
            .count()
    }
}

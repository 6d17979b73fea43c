//! Curves of training runs drawn with plotters: `curves.svg` in every run directory (rewritten at
//! each epoch's end) and the overlays of `trainer plot`. SVG, or PNG with an embedded font (no
//! system font library is needed).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::figure::{COLUMN_WIDTH, Figure, Layout, plot_err, render_figure};
use super::legend;
use super::metrics_row::{EPOCH, MetricsRow};

/// One chart of `curves.svg`: metrics columns against the epoch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Panel {
    pub title: String,
    /// Columns drawn as lines with a marker per epoch.
    pub series: Vec<String>,
    /// Columns drawn as dashed reference lines (e.g. the identity baseline).
    pub baselines: Vec<String>,
}

impl Panel {
    pub(crate) fn new(title: &str, series: &[&str], baselines: &[&str]) -> Self {
        Self {
            title: title.into(),
            series: series.iter().map(|s| s.to_string()).collect(),
            baselines: baselines.iter().map(|s| s.to_string()).collect(),
        }
    }
}

/// A line of a chart: `(epoch, value)` points.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

/// A chart: a title and its lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub title: String,
    pub lines: Vec<Line>,
}

/// The stage of a row ("fold 0"): the values of the columns before `epoch`.
pub(crate) fn stage_of(row: &MetricsRow) -> String {
    row.stage_columns()
        .map(|(k, v)| format!("{k} {}", v.to_string().trim_matches('"')))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `(epoch, value)` of `column` in each row of `rows` that has a finite value, grouped by stage
/// (in order of appearance).
pub(crate) fn column_by_stage(rows: &[MetricsRow], column: &str) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut groups: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for row in rows {
        let (Some(e), Some(v)) = (row.number(EPOCH), row.number(column)) else {
            continue;
        };
        if !v.is_finite() {
            continue;
        }
        let stage = stage_of(row);
        match groups.iter_mut().find(|(s, _)| *s == stage) {
            Some((_, pts)) => pts.push((e, v)),
            None => groups.push((stage, vec![(e, v)])),
        }
    }
    groups
}

/// The charts of one run's `curves.svg`.
/// The lines of `column` in `rows`, one per stage, labelled `name`, or `name (stage)` when
/// there are several stages.
pub(crate) fn stage_lines(
    rows: &[MetricsRow],
    column: &str,
    name: &str,
    dashed: bool,
) -> Vec<Line> {
    let groups = column_by_stage(rows, column);
    let several = groups.len() > 1;
    groups
        .into_iter()
        .map(|(stage, points)| Line {
            label: match several && !stage.is_empty() {
                true => format!("{name} ({stage})"),
                false => name.to_string(),
            },
            points,
            dashed,
        })
        .collect()
}

pub(crate) fn run_charts(rows: &[MetricsRow], panels: &[Panel]) -> Vec<Chart> {
    panels
        .iter()
        .map(|p| {
            let mut lines = Vec::new();
            let cols = p.series.iter().map(|c| (c, false));
            for (col, dashed) in cols.chain(p.baselines.iter().map(|c| (c, true))) {
                lines.extend(stage_lines(rows, col, col, dashed));
            }
            Chart {
                title: p.title.clone(),
                lines,
            }
        })
        .collect()
}

/// Rewrites `<run_dir>/curves.svg` from the run's metrics rows.
pub(crate) fn write(run_dir: &Path, rows: &[MetricsRow], panels: &[Panel]) -> Result<()> {
    if panels.is_empty() {
        return Ok(());
    }
    render(
        &run_charts(rows, panels),
        &super::RunDir::new(run_dir).curves_svg(),
    )
}

const PANEL_HEIGHT: u32 = 320;
const WIDTH: u32 = 900;

/// Draws `charts` one above the other into `out`: SVG, or PNG when `out` ends in `.png`.
/// Written atomically.
pub(crate) fn render(charts: &[Chart], out: &Path) -> Result<()> {
    render_titled(charts, None, Layout::Screen, out)
}

/// [`render`] with a title above the charts (`--title`), laid out for a screen or a journal's
/// column (`--column`: [`COLUMN_WIDTH`] wide, each chart's legend under it).
pub fn render_titled(
    charts: &[Chart],
    title: Option<&str>,
    layout: Layout,
    out: &Path,
) -> Result<()> {
    render_figure(
        &Charts {
            charts,
            title,
            layout,
        },
        out,
    )
}

/// The band a figure's title takes above its charts.
const TITLE_BAND: u32 = 34;

/// Charts one above the other, under an optional title.
struct Charts<'a> {
    charts: &'a [Chart],
    title: Option<&'a str>,
    layout: Layout,
}

/// A chart's height in a journal's column, above its legend.
const COLUMN_PANEL_HEIGHT: u32 = 250;

/// The height of each chart of a column layout with its legend under it.
fn column_heights(charts: &[Chart]) -> Vec<u32> {
    charts
        .iter()
        .map(|c| COLUMN_PANEL_HEIGHT + legend::below_height(c.lines.len()))
        .collect()
}

impl Figure for Charts<'_> {
    fn size(&self) -> (u32, u32) {
        let band = if self.title.is_some() { TITLE_BAND } else { 0 };
        if self.layout == Layout::Column {
            let h: u32 = column_heights(self.charts).iter().sum();
            return (COLUMN_WIDTH, h.max(COLUMN_PANEL_HEIGHT) + band);
        }
        (
            WIDTH + legend_width(self.charts),
            PANEL_HEIGHT * self.charts.len().max(1) as u32 + band,
        )
    }
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, _: bool) -> Result<()> {
        root.fill(&WHITE).map_err(plot_err)?;
        let Some(title) = self.title else {
            return draw(root, self.charts, self.layout);
        };
        let (head, body) = root.split_vertically(TITLE_BAND);
        head.draw(&Text::new(
            title.to_string(),
            (12, 8),
            (
                "sans-serif",
                if self.layout == Layout::Column {
                    15
                } else {
                    20
                },
            )
                .into_font(),
        ))
        .map_err(plot_err)?;
        draw(&body, self.charts, self.layout)
    }
}

/// The legend's width, right of the charts (outside the data): room for the longest label.
fn legend_width(charts: &[Chart]) -> u32 {
    legend::width(
        charts
            .iter()
            .flat_map(|c| c.lines.iter().map(|l| l.label.as_str())),
    )
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    charts: &[Chart],
    layout: Layout,
) -> Result<()> {
    let column = layout == Layout::Column;
    let areas = if column {
        // Each chart its own height: its legend's rows under it.
        let mut rest = root.clone();
        let mut out = Vec::new();
        for h in column_heights(charts) {
            let (area, below) = rest.split_vertically(h);
            out.push(area);
            rest = below;
        }
        out
    } else {
        root.split_evenly((charts.len().max(1), 1))
    };
    let colours = legend::colours(
        charts
            .iter()
            .flat_map(|c| c.lines.iter().map(|l| l.label.as_str())),
    );
    let legend = legend_width(charts);
    for (area, chart) in areas.iter().zip(charts) {
        let width = area.dim_in_pixel().0;
        let (plot, key) = if column {
            area.split_vertically(COLUMN_PANEL_HEIGHT)
        } else {
            area.split_horizontally(width.saturating_sub(legend))
        };
        draw_chart(&plot, chart, &colours, column)?;
        let entries: Vec<legend::Entry> = chart
            .lines
            .iter()
            .map(|l| legend::Entry {
                label: &l.label,
                dashed: l.dashed,
            })
            .collect();
        legend::draw(&key, &entries, &colours, if column { 10 } else { 40 })?;
    }
    Ok(())
}

/// The x and y ranges covering every finite point, padded; an error naming the chart when they
/// cannot be drawn (values whose spread overflows f64, or beyond ±1e150, where the axis' tick
/// steps would no longer move a float and the drawing would spin).
fn ranges(chart: &Chart) -> Result<(std::ops::Range<f64>, std::ops::Range<f64>)> {
    let pts = chart.lines.iter().flat_map(|l| l.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts.filter(|(x, y)| x.is_finite() && y.is_finite()) {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if x0 > x1 {
        return Ok((0.0..1.0, 0.0..1.0));
    }
    const LIMIT: f64 = 1e150;
    if [x0, x1, y0, y1].iter().any(|v| v.abs() > LIMIT) {
        anyhow::bail!(
            "chart `{}`: values from {y0:e} to {y1:e} (epochs {x0:e} to {x1:e}) are beyond \
             ±1e150, too large to plot; check that column of metrics.jsonl",
            chart.title
        );
    }
    // A spread below a billionth of the values' size draws as flat (tick steps that small
    // would not move the float they are added to).
    let flat = |lo: f64, hi: f64| hi - lo <= 1e-9 * lo.abs().max(hi.abs());
    let pad_y = if flat(y0, y1) {
        0.1 * y0.abs().max(1e-3)
    } else {
        0.05 * (y1 - y0)
    };
    let pad_x = if flat(x0, x1) { 0.5 } else { 0.02 * (x1 - x0) };
    Ok((x0 - pad_x..x1 + pad_x, y0 - pad_y..y1 + pad_y))
}

/// Whether a chart's values span decades: all positive, the largest at least 100 times the
/// smallest. Such a chart is drawn on a log axis.
fn spans_decades(chart: &Chart) -> bool {
    let ys = || {
        chart
            .lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .filter(|y| y.is_finite())
    };
    let lo = ys().fold(f64::INFINITY, f64::min);
    let hi = ys().fold(f64::NEG_INFINITY, f64::max);
    lo > 0.0 && hi >= 100.0 * lo
}

fn draw_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    chart: &Chart,
    colours: &BTreeMap<String, usize>,
    column: bool,
) -> Result<()> {
    // A metric spanning decades is drawn as log10 of its values, ticks labelled with the values.
    let log = spans_decades(chart);
    let logged;
    let chart = if log {
        logged = Chart {
            title: format!("{} (log scale)", chart.title),
            lines: chart
                .lines
                .iter()
                .map(|l| Line {
                    points: l.points.iter().map(|&(x, y)| (x, y.log10())).collect(),
                    ..l.clone()
                })
                .collect(),
        };
        &logged
    } else {
        chart
    };
    let (xr, yr) = ranges(chart)?;
    // About one x label per epoch (at most 12), printed as whole epochs.
    let epochs = (xr.end - xr.start).round().clamp(1.0, 11.0) as usize + 1;
    let mut builder = ChartBuilder::on(area);
    builder
        .caption(&chart.title, ("sans-serif", if column { 14 } else { 18 }))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(64);
    if log {
        // Ticks at 1-2-5 × powers of ten (log_axis.rs), labelled with the values.
        let mut c = builder
            .build_cartesian_2d(xr, log_axis::LogAxis::new(yr))
            .map_err(plot_err)?;
        draw_lines(&mut c, chart, colours, epochs)
    } else {
        let mut c = builder.build_cartesian_2d(xr, yr).map_err(plot_err)?;
        draw_lines(&mut c, chart, colours, epochs)
    }
}

/// The mesh (whole epochs on x) and the lines of `chart` on a built chart, linear or log on y.
fn draw_lines<DB: DrawingBackend, Y>(
    c: &mut ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    chart: &Chart,
    colours: &BTreeMap<String, usize>,
    epochs: usize,
) -> Result<()>
where
    Y: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let mut mesh = c.configure_mesh();
    // Ticks and axis names at 12 px (plotters' default shrinks them in a small chart).
    mesh.label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 12))
        .x_desc("epoch")
        .x_labels(epochs)
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 {
                format!("{x:.0}")
            } else {
                String::new()
            }
        })
        .light_line_style(WHITE);
    mesh.draw().map_err(plot_err)?;
    for (i, line) in chart.lines.iter().enumerate() {
        let color = legend::colour(colours.get(&line.label).copied().unwrap_or(i));
        let style = color.stroke_width(2);
        let pts = line.points.clone();
        if line.dashed {
            c.draw_series(DashedLineSeries::new(pts, 8, 5, style))
                .map_err(plot_err)?;
        } else {
            c.draw_series(
                line.points
                    .iter()
                    .map(|&p| Circle::new(p, 3, color.filled())),
            )
            .map_err(plot_err)?;
            c.draw_series(LineSeries::new(pts, style))
                .map_err(plot_err)?;
        }
    }
    Ok(())
}

mod labelled;
mod log_axis;

pub(crate) use labelled::plot_labelled;
#[cfg(test)]
mod tests;

//! Curves of training runs drawn with plotters: `curves.svg` in every run directory (rewritten at
//! each epoch's end) and the overlays of `trainer plot`. SVG, or PNG with an embedded font (no
//! system font library is needed).

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

mod chart;
mod labelled;
mod log_axis;

use chart::draw_chart;
#[cfg(test)]
use chart::spans_decades;
pub(crate) use labelled::plot_labelled;
#[cfg(test)]
mod tests;

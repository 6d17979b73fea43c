//! One chart of `curves.svg` drawn on its area: the ranges, the log axis when a metric spans
//! decades, the mesh and the lines in their colours.

use std::collections::BTreeMap;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::super::figure::plot_err;
use super::super::legend;
use super::{Chart, Line, log_axis};

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
pub(super) fn spans_decades(chart: &Chart) -> bool {
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

pub(super) fn draw_chart<DB: DrawingBackend>(
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

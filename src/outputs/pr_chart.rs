//! Precision–recall curves of new-edge scores (`plot-sc --new-edges`): one curve and one colour
//! per run, or per configuration when several runs share a `--label` name (their folds, their
//! seeds): the mean precision over the runs at each recall with its 95% t-band, the mean
//! average precision with its interval in the legend. The legend sits beside the chart (outside
//! the data), with a dashed line at each distinct chance level (the share of absent edges that
//! appear).

use std::collections::BTreeMap;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::figure::{COLUMN_WIDTH, Figure, Layout, plot_err};
use super::legend;
use super::strata::pool::mean_interval;
use crate::metrics::pr::PrCurve;

/// The curves of several runs (or configurations) under one title.
pub struct PrChart {
    pub title: String,
    pub lines: Vec<PrLine>,
    /// The legend beside the chart, or under it in a journal's column (`--column`).
    pub layout: Layout,
}

/// One curve of the chart: a run's, or a configuration's mean over its runs.
pub struct PrLine {
    pub name: String,
    /// (recall, precision) of the line drawn.
    pub points: Vec<(f64, f64)>,
    /// (recall, low, high): the 95% band of the mean precision (pooled lines with 2+ runs).
    pub band: Vec<(f64, f64, f64)>,
    /// The average precision (the runs' mean) and its 95% t-interval over the runs.
    pub ap: f64,
    pub ap_interval: Option<(f64, f64)>,
    pub runs: usize,
    /// The chance levels of its runs (one when they share a test split).
    pub chances: Vec<f64>,
}

/// Recall points of a pooled curve.
const GRID: usize = 200;

impl PrLine {
    /// One run's curve: the steps whose area is its average precision (threshold k's precision
    /// over the recall it adds, [Rₖ₋₁, Rₖ]; a tie adds its recall at one precision).
    pub fn of_run(name: &str, c: &PrCurve) -> Self {
        let mut points = Vec::new();
        let mut last_recall = 0.0;
        for (r, p) in c.thinned(600) {
            points.push((last_recall, p));
            points.push((r, p));
            last_recall = r;
        }
        Self {
            name: name.to_string(),
            points,
            band: Vec::new(),
            ap: c.average_precision,
            ap_interval: None,
            runs: 1,
            chances: vec![c.chance()],
        }
    }

    /// The mean of `curves` (one configuration's runs): at each of [`GRID`] + 1 recalls the
    /// mean of the runs' step precisions there, with its 95% t-interval over the runs; the mean
    /// average precision and its interval. One curve: [`PrLine::of_run`].
    pub fn pooled(name: &str, curves: &[&PrCurve]) -> Self {
        if let [one] = curves {
            return Self::of_run(name, one);
        }
        let (mut points, mut band) = (Vec::new(), Vec::new());
        for i in 0..=GRID {
            let r = i as f64 / GRID as f64;
            let at: Vec<f64> = curves.iter().map(|c| c.precision_at(r)).collect();
            let (mean, interval) = mean_interval(&at);
            points.push((r, mean));
            if let Some((lo, hi)) = interval {
                band.push((r, lo.max(0.0), hi.min(1.0)));
            }
        }
        let aps: Vec<f64> = curves.iter().map(|c| c.average_precision).collect();
        let (ap, ap_interval) = mean_interval(&aps);
        let mut chances: Vec<f64> = Vec::new();
        for c in curves {
            if !chances.iter().any(|&x| (x - c.chance()).abs() < 1e-12) {
                chances.push(c.chance());
            }
        }
        Self {
            name: name.to_string(),
            points,
            band,
            ap,
            ap_interval,
            runs: curves.len(),
            chances,
        }
    }

    /// Its legend label: the name and average precision (with its interval and run count when
    /// pooled).
    fn label(&self) -> String {
        let sig = super::group_table::sig4;
        match (self.runs, self.ap_interval) {
            (1, _) => format!("{} (AP {})", self.name, sig(self.ap)),
            (k, Some((lo, hi))) => format!(
                "{} (AP {} [{}, {}], {k} runs)",
                self.name,
                sig(self.ap),
                sig(lo),
                sig(hi)
            ),
            (k, None) => format!("{} (AP {}, {k} runs)", self.name, sig(self.ap)),
        }
    }
}

const SIDE: u32 = 520;
/// The chart's height in a journal's column, above the legend.
const COLUMN_SIDE: u32 = 360;

impl PrChart {
    /// Each line's legend label.
    fn labels(&self) -> Vec<String> {
        self.lines.iter().map(PrLine::label).collect()
    }

    /// The distinct chance levels (runs on one test split share one).
    fn chances(&self) -> Vec<f64> {
        let mut out: Vec<f64> = Vec::new();
        for p in self.lines.iter().flat_map(|l| l.chances.iter().copied()) {
            if !out.iter().any(|&x| (x - p).abs() < 1e-12) {
                out.push(p);
            }
        }
        out
    }
}

impl Figure for PrChart {
    fn size(&self) -> (u32, u32) {
        let mut labels = self.labels();
        if self.layout == Layout::Column {
            let rows = labels.len() + self.chances().len();
            return (COLUMN_WIDTH, COLUMN_SIDE + legend::below_height(rows));
        }
        labels.push("chance 0.0000".into());
        (
            SIDE + 80 + legend::width(labels.iter().map(String::as_str)),
            SIDE,
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, _: bool) -> Result<()> {
        root.fill(&WHITE).map_err(plot_err)?;
        let column = self.layout == Layout::Column;
        let (plot, key) = if column {
            root.split_vertically(COLUMN_SIDE)
        } else {
            root.split_horizontally(SIDE + 80)
        };
        let mut chart = ChartBuilder::on(&plot)
            .caption(&self.title, ("sans-serif", if column { 14 } else { 16 }))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..1.0f64, 0.0..1.02f64)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            // Ticks and axis names at 12 px (plotters' default shrinks them in a small chart).
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 12))
            .x_desc("recall (share of new edges found)")
            .y_desc("precision")
            .light_line_style(WHITE)
            .draw()
            .map_err(plot_err)?;
        let grey = RGBColor(127, 127, 127); // legend::colour(7), the legend's chance rows
        for p in self.chances() {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(0.0, p), (1.0, p)],
                    6,
                    4,
                    grey.stroke_width(1),
                ))
                .map_err(plot_err)?;
        }
        // Colours by name (legend::colours): the same run or configuration, the same colour in
        // every figure.
        let by_name = legend::colours(self.lines.iter().map(|l| l.name.as_str()));
        for l in &self.lines {
            let colour = legend::colour(by_name[l.name.as_str()]);
            if !l.band.is_empty() {
                let mut area: Vec<(f64, f64)> = l.band.iter().map(|&(r, lo, _)| (r, lo)).collect();
                area.extend(l.band.iter().rev().map(|&(r, _, hi)| (r, hi)));
                chart
                    .draw_series(std::iter::once(Polygon::new(
                        area,
                        colour.mix(0.18).filled(),
                    )))
                    .map_err(plot_err)?;
            }
            chart
                .draw_series(LineSeries::new(l.points.clone(), colour.stroke_width(2)))
                .map_err(plot_err)?;
        }
        let mut labels = self.labels();
        let chances = self.chances();
        labels.extend(
            chances
                .iter()
                .map(|p| format!("chance {}", super::group_table::sig4(*p))),
        );
        let colours: BTreeMap<String, usize> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let run = self.lines.get(i).map(|l| by_name[l.name.as_str()]);
                (l.clone(), run.unwrap_or(7))
            })
            .collect();
        let entries: Vec<legend::Entry> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| legend::Entry {
                label: l,
                dashed: i >= self.lines.len(),
            })
            .collect();
        legend::draw(&key, &entries, &colours, if column { 10 } else { 48 })
    }
}

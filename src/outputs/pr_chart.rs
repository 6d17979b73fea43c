//! Precision–recall curves of new-edge scores (`plot-sc --new-edges`): one curve and one colour
//! per run, its average precision in the legend beside the chart (outside the data), and a
//! dashed line at each distinct chance level (the share of absent edges that appear).

use std::collections::BTreeMap;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::figure::{Figure, plot_err};
use super::legend;
use crate::metrics::pr::PrCurve;

/// The curves of several runs under one title.
pub struct PrChart {
    pub title: String,
    /// (run label, its curve).
    pub runs: Vec<(String, PrCurve)>,
}

const SIDE: u32 = 520;

impl PrChart {
    /// Each run's legend label: its name and average precision.
    fn labels(&self) -> Vec<String> {
        self.runs
            .iter()
            .map(|(name, c)| {
                format!(
                    "{name} (AP {})",
                    super::group_table::sig4(c.average_precision)
                )
            })
            .collect()
    }

    /// The distinct chance levels (runs on one test split share one).
    fn chances(&self) -> Vec<f64> {
        let mut out: Vec<f64> = Vec::new();
        for (_, c) in &self.runs {
            if !out.iter().any(|&x| (x - c.chance()).abs() < 1e-12) {
                out.push(c.chance());
            }
        }
        out
    }
}

impl Figure for PrChart {
    fn size(&self) -> (u32, u32) {
        let mut labels = self.labels();
        labels.push("chance 0.0000".into());
        (
            SIDE + 80 + legend::width(labels.iter().map(String::as_str)),
            SIDE,
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, _: bool) -> Result<()> {
        root.fill(&WHITE).map_err(plot_err)?;
        let (plot, key) = root.split_horizontally(SIDE + 80);
        let mut chart = ChartBuilder::on(&plot)
            .caption(&self.title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(56)
            .build_cartesian_2d(0.0..1.0f64, 0.0..1.02f64)
            .map_err(plot_err)?;
        chart
            .configure_mesh()
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
        // Colours by run name (legend::colours): the same run, the same colour in every figure.
        let by_name = legend::colours(self.runs.iter().map(|(name, _)| name.as_str()));
        for (name, c) in &self.runs {
            // Steps whose area is the average precision: threshold k's precision over the
            // recall it adds, [Rₖ₋₁, Rₖ] (a tie adds its recall at one precision).
            let mut pts = Vec::new();
            let mut last_recall = 0.0;
            for (r, p) in c.thinned(600) {
                pts.push((last_recall, p));
                pts.push((r, p));
                last_recall = r;
            }
            chart
                .draw_series(LineSeries::new(
                    pts,
                    legend::colour(by_name[name.as_str()]).stroke_width(2),
                ))
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
                let run = self.runs.get(i).map(|(name, _)| by_name[name.as_str()]);
                (l.clone(), run.unwrap_or(7))
            })
            .collect();
        let entries: Vec<legend::Entry> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| legend::Entry {
                label: l,
                dashed: i >= self.runs.len(),
            })
            .collect();
        legend::draw(&key, &entries, &colours, 48)
    }
}

//! Subject trajectories over age (`plot-sc --trajectories`): one panel per measure, in each the
//! observed scans of every subject (dots joined by a thin dashed line) and the forecast from its
//! first scan (a solid line), one colour per subject across the panels, the subjects named in a
//! legend beside the panels (outside the data).

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::figure::{COLUMN_WIDTH, Figure, Layout, plot_err};
use super::legend;

/// One subject in one panel.
pub struct Track {
    pub subject: String,
    /// (age, value) of each observed scan.
    pub observed: Vec<(f64, f64)>,
    /// (age, value) of the forecast, from the first scan on.
    pub forecast: Vec<(f64, f64)>,
}

/// One panel: a measure and every subject's track.
pub struct Panel {
    pub measure: String,
    pub tracks: Vec<Track>,
}

/// The figure: a title and its panels side by side.
pub struct Trajectories {
    pub title: String,
    pub panels: Vec<Panel>,
    /// Panels side by side with the legend beside them, or one above the other with the
    /// legend under them in a journal's column (`--column`).
    pub layout: Layout,
}

const PANEL_W: u32 = 460;
const HEIGHT: u32 = 420;
const TITLE_BAND: u32 = 34;
/// A panel's height in a journal's column.
const COLUMN_PANEL_H: u32 = 260;

impl Trajectories {
    fn subjects(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for t in self.panels.iter().flat_map(|p| &p.tracks) {
            if !out.contains(&t.subject.as_str()) {
                out.push(&t.subject);
            }
        }
        out
    }
}

/// The padded range of `values`: 8 % of the spread each side; a flat one widened by 5 % of its
/// value, at least 0.05, so that its tick labels read (a panel of zeros spans ±0.05).
fn span(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if lo > hi {
        return 0.0..1.0;
    }
    let pad = if hi - lo > 1e-12 * lo.abs().max(hi.abs()) {
        0.08 * (hi - lo)
    } else {
        0.05 * lo.abs().max(1.0)
    };
    lo - pad..hi + pad
}

impl Figure for Trajectories {
    fn size(&self) -> (u32, u32) {
        let mut labels = self.subjects();
        if self.layout == Layout::Column {
            let panels = COLUMN_PANEL_H * self.panels.len().max(1) as u32;
            let key = legend::below_height(labels.len() + 2);
            return (COLUMN_WIDTH, TITLE_BAND + panels + key);
        }
        labels.push("forecast from the first scan");
        (
            PANEL_W * self.panels.len().max(1) as u32 + legend::width(labels),
            HEIGHT + TITLE_BAND,
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, _: bool) -> Result<()> {
        root.fill(&WHITE).map_err(plot_err)?;
        let column = self.layout == Layout::Column;
        let (head, body) = root.split_vertically(TITLE_BAND);
        head.draw(&Text::new(
            self.title.clone(),
            (12, 8),
            ("sans-serif", if column { 14 } else { 18 }).into_font(),
        ))
        .map_err(plot_err)?;
        let subjects = self.subjects();
        let colours = legend::colours(subjects.iter().copied());
        let k = self.panels.len().max(1);
        let (plots, key) = if column {
            body.split_vertically(COLUMN_PANEL_H * k as u32)
        } else {
            body.split_horizontally(PANEL_W * k as u32)
        };
        let areas = plots.split_evenly(if column { (k, 1) } else { (1, k) });
        for (area, panel) in areas.iter().zip(&self.panels) {
            let pts = || {
                panel
                    .tracks
                    .iter()
                    .flat_map(|t| t.observed.iter().chain(&t.forecast))
            };
            let (xr, yr) = (span(pts().map(|p| p.0)), span(pts().map(|p| p.1)));
            let mut c = ChartBuilder::on(area)
                .caption(&panel.measure, ("sans-serif", 15))
                .margin(12)
                .x_label_area_size(36)
                .y_label_area_size(60)
                .build_cartesian_2d(xr, yr)
                .map_err(plot_err)?;
            c.configure_mesh()
                // Ticks and axis names at 12 px (plotters' default shrinks them in a small chart).
                .label_style(("sans-serif", 12))
                .axis_desc_style(("sans-serif", 12))
                .x_desc("age (years)")
                .light_line_style(WHITE)
                .draw()
                .map_err(plot_err)?;
            for t in &panel.tracks {
                let colour = legend::colour(colours[t.subject.as_str()]);
                c.draw_series(DashedLineSeries::new(
                    t.observed.clone(),
                    4,
                    4,
                    colour.mix(0.6).stroke_width(1),
                ))
                .map_err(plot_err)?;
                c.draw_series(LineSeries::new(t.forecast.clone(), colour.stroke_width(2)))
                    .map_err(plot_err)?;
                c.draw_series(
                    t.observed
                        .iter()
                        .map(|&p| Circle::new(p, 4, colour.filled())),
                )
                .map_err(plot_err)?;
            }
        }
        let mut entries: Vec<legend::Entry> = subjects
            .iter()
            .map(|s| legend::Entry {
                label: s,
                dashed: false,
            })
            .collect();
        let mut keyed = colours.clone();
        keyed.insert("forecast from the first scan".into(), 7);
        keyed.insert("observed scans (dots)".into(), 7);
        entries.push(legend::Entry {
            label: "forecast from the first scan",
            dashed: false,
        });
        entries.push(legend::Entry {
            label: "observed scans (dots)",
            dashed: true,
        });
        legend::draw(&key, &entries, &keyed, if column { 10 } else { 48 })
    }
}

/// Whether every value of the panel (observed and forecast) is the same: nothing to see.
pub(crate) fn flat(panel: &Panel) -> bool {
    let mut values = panel
        .tracks
        .iter()
        .flat_map(|t| t.observed.iter().chain(&t.forecast))
        .map(|p| p.1);
    match values.next() {
        Some(first) => values.all(|v| v == first),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flat_panel_gets_a_readable_range_and_is_named_flat() {
        let r = span([0.0, 0.0, 0.0].into_iter());
        assert_eq!((r.start, r.end), (-0.05, 0.05));
        let r = span([2.0, 2.0].into_iter());
        assert!(
            (r.start - 1.9).abs() < 1e-12 && (r.end - 2.1).abs() < 1e-12,
            "{r:?}"
        );
        let r = span([1.0, 2.0].into_iter());
        assert!(
            (r.start - 0.92).abs() < 1e-12 && (r.end - 2.08).abs() < 1e-12,
            "{r:?}"
        );
        let track = |v: f64| Track {
            subject: "s".into(),
            observed: vec![(9.0, v), (11.0, 0.0)],
            forecast: vec![(10.0, 0.0)],
        };
        let panel = |v| Panel {
            measure: "m".into(),
            tracks: vec![track(v)],
        };
        assert!(flat(&panel(0.0)));
        assert!(!flat(&panel(0.3)));
    }
}

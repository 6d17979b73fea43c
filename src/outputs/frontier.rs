//! The frontier of both errors (`compare --frontier`): one panel per topology skill (x: 1 −
//! model / identity of a distance such as ECC L2), the log-MSE skill on every panel's y axis;
//! one point per configuration at its mean over its runs (folds, seeds, pooled cohorts) with
//! its 95% t-interval over those runs on both axes; the identity at the origin (both skills
//! are 0 there by definition) and the quadrant where a forecast beats it on both axes shaded.
//!
//! Laid out for a journal's single column whatever `--column` says ([`Layout::Column`]'s width
//! and text: 6 pt at 89 mm); two panels a row, the legend under them.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::{COLUMN_WIDTH, Figure, plot_err};
use super::legend;
use super::strata::pool::mean_interval;

/// One configuration: its name and, per run, its value of the y metric and of each panel's.
pub struct FrontierPoint {
    pub label: String,
    /// `y[i]`: run i's log-MSE skill (finite values only).
    pub y: Vec<f64>,
    /// `x[p]`: the runs' values of panel p's metric (finite values only).
    pub x: Vec<Vec<f64>>,
}

/// The figure: the panels' metric names (x axes), the y metric's, and the configurations.
pub struct Frontier {
    pub title: String,
    pub x_metrics: Vec<String>,
    pub y_metric: String,
    pub points: Vec<FrontierPoint>,
}

/// Canvas width (a single column), panel height, title band, legend row.
const WIDTH: u32 = COLUMN_WIDTH;
const PANEL_H: u32 = 210;
const TITLE: u32 = 26;
const ROW: u32 = 18;

/// A panel's axis name for metric `m`: `skill_ecc_l2` → "ECC L2 skill".
pub(crate) fn axis_name(m: &str) -> String {
    let base = m.strip_prefix("skill_").unwrap_or(m);
    let name = match base {
        "skill" => return "log-MSE skill".into(),
        "ecc_l2" => "ECC L2",
        "betti0_l1" => "β0 L1",
        "betti1_l1" => "β1 L1",
        "strength_mae" => "strength MAE",
        "deg_mae" => "degree MAE",
        "sc_log_mse" => "log-MSE",
        other => other,
    };
    if m.starts_with("skill_") {
        format!("{name} skill")
    } else {
        name.to_string()
    }
}

/// A point's mean and interval (the mean twice without one) on one axis; `None` without values.
fn centre(values: &[f64]) -> Option<(f64, f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let (m, i) = mean_interval(values);
    let (lo, hi) = i.unwrap_or((m, m));
    Some((m, lo, hi))
}

/// The range of an axis holding every interval and the identity's 0, padded.
fn span(ends: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = ends.fold((0.0f64, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let pad = ((hi - lo) * 0.1).max(0.02);
    (lo - pad, hi + pad)
}

impl Frontier {
    fn columns(&self) -> u32 {
        if self.x_metrics.len() > 1 { 2 } else { 1 }
    }

    fn rows(&self) -> u32 {
        (self.x_metrics.len() as u32)
            .div_ceil(self.columns())
            .max(1)
    }

    fn legend_labels(&self) -> Vec<String> {
        let mut labels: Vec<String> = self
            .points
            .iter()
            .map(|p| match p.y.len() {
                1 => format!("{} (1 run)", p.label),
                k => format!("{} (mean of {k} runs ± 95% CI)", p.label),
            })
            .collect();
        labels.push("identity (the start scan): 0 on both axes".into());
        labels
    }
}

impl Figure for Frontier {
    fn size(&self) -> (u32, u32) {
        let key = ROW * self.legend_labels().len() as u32 + 12;
        (WIDTH, TITLE + PANEL_H * self.rows() + key)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, _: bool) -> Result<()> {
        root.fill(&WHITE).map_err(plot_err)?;
        let (head, rest) = root.split_vertically(TITLE);
        head.draw(&Text::new(
            self.title.clone(),
            (8, 6),
            ("sans-serif", 14).into_font(),
        ))
        .map_err(plot_err)?;
        let (body, key) = rest.split_vertically(PANEL_H * self.rows());
        let panels = body.split_evenly((self.rows() as usize, self.columns() as usize));
        let colours = legend::colours(self.points.iter().map(|p| p.label.as_str()));
        let ys: Vec<Option<(f64, f64, f64)>> = self.points.iter().map(|p| centre(&p.y)).collect();
        let y_range = span(ys.iter().flatten().flat_map(|&(_, a, b)| [a, b]));
        for (p, metric) in self.x_metrics.iter().enumerate() {
            let xs: Vec<Option<(f64, f64, f64)>> = self
                .points
                .iter()
                .map(|pt| pt.x.get(p).and_then(|v| centre(v)))
                .collect();
            let x_range = span(xs.iter().flatten().flat_map(|&(_, a, b)| [a, b]));
            let mut chart = ChartBuilder::on(&panels[p])
                .margin(6)
                .margin_right(12)
                .x_label_area_size(34)
                .y_label_area_size(46)
                .build_cartesian_2d(x_range.0..x_range.1, y_range.0..y_range.1)
                .map_err(plot_err)?;
            // Better than the identity on both axes: the upper right quadrant.
            chart
                .draw_series([Rectangle::new(
                    [(0.0, 0.0), (x_range.1, y_range.1)],
                    RGBColor(44, 160, 44).mix(0.08).filled(),
                )])
                .map_err(plot_err)?;
            chart
                .configure_mesh()
                .disable_mesh()
                .x_labels(4)
                .y_labels(5)
                .label_style(("sans-serif", 12))
                .axis_desc_style(("sans-serif", 13))
                .x_desc(axis_name(metric))
                .y_desc(axis_name(&self.y_metric))
                .draw()
                .map_err(plot_err)?;
            let zero = ShapeStyle::from(&BLACK.mix(0.45)).stroke_width(1);
            chart
                .draw_series([
                    PathElement::new(vec![(0.0, y_range.0), (0.0, y_range.1)], zero),
                    PathElement::new(vec![(x_range.0, 0.0), (x_range.1, 0.0)], zero),
                ])
                .map_err(plot_err)?;
            chart
                .draw_series([Cross::new((0.0, 0.0), 5, BLACK.stroke_width(2))])
                .map_err(plot_err)?;
            for (i, pt) in self.points.iter().enumerate() {
                let (Some((x, x0, x1)), Some((y, y0, y1))) = (xs[i], ys[i]) else {
                    continue;
                };
                let c = legend::colour(colours[pt.label.as_str()]);
                let ink = c.stroke_width(2);
                chart
                    .draw_series([
                        PathElement::new(vec![(x0, y), (x1, y)], ink),
                        PathElement::new(vec![(x, y0), (x, y1)], ink),
                    ])
                    .map_err(plot_err)?;
                chart
                    .draw_series([Circle::new((x, y), 4, c.filled())])
                    .map_err(plot_err)?;
            }
        }
        let style =
            TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
        for (i, label) in self.legend_labels().iter().enumerate() {
            let y = 10 + (ROW * i as u32) as i32;
            match self.points.get(i) {
                Some(pt) => {
                    let c = legend::colour(colours[pt.label.as_str()]);
                    key.draw(&Circle::new((16, y), 4, c.filled()))
                        .map_err(plot_err)?;
                }
                None => key
                    .draw(&Cross::new((16, y), 5, BLACK.stroke_width(2)))
                    .map_err(plot_err)?,
            }
            key.draw(&Text::new(label.clone(), (28, y), style.clone()))
                .map_err(plot_err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outputs::figure::svg_string;

    fn figure(order: &[usize]) -> Frontier {
        let all = [
            ("eb-drift / dense", 0.45, -0.7),
            ("eb-drift / sparse", 0.36, -0.8),
            ("linear-drift / dense", 0.01, -1.4),
        ];
        Frontier {
            title: "frontier".into(),
            x_metrics: vec!["skill_ecc_l2".into(), "skill_strength_mae".into()],
            y_metric: "skill".into(),
            points: order
                .iter()
                .map(|&i| FrontierPoint {
                    label: all[i].0.into(),
                    y: vec![all[i].1, all[i].1 + 0.01, all[i].1 - 0.01],
                    x: vec![vec![all[i].2, all[i].2 + 0.1], vec![0.1]],
                })
                .collect(),
        }
    }

    /// The fill colour of the legend's circle before `label` in `svg`.
    fn colour_of(svg: &str, label: &str) -> String {
        let at = svg.find(&format!(">\n{label}")).expect("label drawn");
        let before = &svg[..at];
        let circle = before.rfind("<circle").expect("a circle before the label");
        let fill = before[circle..].find("fill=\"").unwrap() + circle + 6;
        before[fill..fill + 7].to_string()
    }

    #[test]
    fn the_frontier_names_its_axes_and_keeps_each_configuration_s_colour() {
        let a = svg_string(&figure(&[0, 1, 2])).unwrap();
        let b = svg_string(&figure(&[2, 0, 1])).unwrap();
        for text in [
            "ECC L2 skill",
            "strength MAE skill",
            "log-MSE skill",
            "eb-drift / sparse (mean of 3 runs ± 95% CI)",
            "identity (the start scan): 0 on both axes",
        ] {
            assert!(a.contains(text), "{text} missing");
        }
        for label in [
            "eb-drift / dense",
            "eb-drift / sparse",
            "linear-drift / dense",
        ] {
            assert_eq!(colour_of(&a, label), colour_of(&b, label), "{label}");
        }
        assert_ne!(
            colour_of(&a, "eb-drift / dense"),
            colour_of(&a, "eb-drift / sparse")
        );
    }

    #[test]
    fn a_point_s_interval_spans_its_runs() {
        let (m, lo, hi) = centre(&[0.1, 0.2, 0.3]).unwrap();
        assert!((m - 0.2).abs() < 1e-12);
        let half = 4.303 * 0.1 / 3f64.sqrt();
        assert!((hi - m - half).abs() < 1e-12 && (m - lo - half).abs() < 1e-12);
        assert_eq!(centre(&[0.5]), Some((0.5, 0.5, 0.5)));
        assert_eq!(centre(&[]), None);
        assert_eq!(axis_name("skill_betti0_l1"), "β0 L1 skill");
        assert_eq!(axis_name("skill"), "log-MSE skill");
    }
}

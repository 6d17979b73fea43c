//! The skill per stratum as bars (`plot-sc --strata`): grouped by stratum, one bar per run, its
//! n above it and the Δt thresholds under the stratum's name; with several runs one colour per
//! run and a legend beside the chart (outside the data), with one run bars coloured by sign. A
//! configuration's runs pooled ([`super::pool`]) draw one bar, their mean, with its 95%
//! interval over the runs as a whisker, and the legend says how many runs it pools.

use std::collections::BTreeMap;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{MIN_N, Stratum};
use crate::outputs::figure::{COLUMN_WIDTH, Figure, Layout, plot_err, wrap};
use crate::outputs::legend;

/// The strata of one run or several (their runs' labels beside them).
pub struct StrataSkill {
    pub title: String,
    pub runs: Vec<(String, Vec<Stratum>)>,
    /// Whether the small-strata warning is drawn under the bars (`plot-sc
    /// --no-figure-warning` leaves it to the log).
    pub warning_on_figure: bool,
    /// The entries of `runs` that pool a configuration's runs, with how many (absent: one run).
    pub pooled: BTreeMap<String, usize>,
    /// The legend beside the chart, or under it in a journal's column (`--column`).
    pub layout: Layout,
}

/// The chart's height: the bars, the two rows of labels under them and the warning line.
const HEIGHT: u32 = 440;
const FOOT: u32 = 30;

impl StrataSkill {
    /// The strata labels in order of first appearance, each with its Δt range when every run
    /// that has it gives the same one (`by run` when they differ: the legend gives each run's).
    fn columns(&self) -> Vec<(String, String)> {
        let mut ranges: Vec<(String, Vec<&str>)> = Vec::new();
        for s in self.runs.iter().flat_map(|(_, st)| st) {
            if s.skill.is_none() {
                continue;
            }
            match ranges.iter_mut().find(|(l, _)| *l == s.label) {
                Some((_, r)) => r.push(&s.range),
                None => ranges.push((s.label.clone(), vec![&s.range])),
            }
        }
        ranges
            .into_iter()
            .map(|(label, r)| {
                let same = r.iter().all(|x| *x == r[0]);
                let range = if same {
                    r[0].to_string()
                } else {
                    "by run".into()
                };
                (label, range)
            })
            .collect()
    }

    /// The legend's labels: each run's, with its Δt thresholds where the runs' differ.
    fn run_labels(&self) -> Vec<String> {
        let differ = self.columns().iter().any(|(_, r)| r == "by run");
        self.runs
            .iter()
            .map(|(name, strata)| {
                let ranges: Vec<String> = strata
                    .iter()
                    .filter(|s| differ && !s.range.is_empty() && s.label != "Δt middle")
                    .map(|s| s.range.clone())
                    .collect();
                let name = match self.pooled.get(name) {
                    Some(k) => format!("{name}, mean of {k} runs ± 95% CI"),
                    None => name.clone(),
                };
                if ranges.is_empty() {
                    name
                } else {
                    format!("{name} (Δt {})", ranges.join(", "))
                }
            })
            .collect()
    }

    fn several(&self) -> bool {
        self.runs.len() > 1
    }

    fn legend_width(&self) -> u32 {
        if self.several() {
            legend::width(self.run_labels().iter().map(String::as_str))
        } else {
            0
        }
    }
}

impl Figure for StrataSkill {
    fn size(&self) -> (u32, u32) {
        if self.layout == Layout::Column {
            let key = if self.several() {
                legend::below_height(self.runs.len())
            } else {
                0
            };
            return (COLUMN_WIDTH, HEIGHT + key);
        }
        let k = self.columns().len().max(1) as u32;
        let per = (60 * self.runs.len() as u32).max(170);
        (per * k + 120 + self.legend_width(), HEIGHT)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, _: bool) -> Result<()> {
        root.fill(&WHITE).map_err(plot_err)?;
        let width = root.dim_in_pixel().0;
        let column = self.layout == Layout::Column;
        let (plot, key) = if column {
            root.split_vertically(HEIGHT)
        } else {
            root.split_horizontally(width - self.legend_width())
        };
        let (body, foot) = plot.split_vertically(HEIGHT - FOOT);
        let all: Vec<&Stratum> = self.runs.iter().flat_map(|(_, s)| s).collect();
        let small = all.iter().filter(|s| s.n < MIN_N).count();
        if small > 0 && self.warning_on_figure {
            let tail = if column {
                ""
            } else {
                ": their skill is a subject or two"
            };
            foot.draw(&Text::new(
                format!(
                    "warning: {small} of {} strata have fewer than {MIN_N} forecasts (faint \
                     bars){tail}",
                    all.len()
                ),
                (12, 4),
                ("sans-serif", 13).into_font().color(&RGBColor(178, 24, 43)),
            ))
            .map_err(plot_err)?;
        }
        let columns = self.columns();
        let ends = all
            .iter()
            .filter_map(|s| s.interval)
            .flat_map(|(a, b)| [a, b]);
        let skills = all.iter().filter_map(|s| s.skill).chain(ends);
        let lo = skills.clone().fold(0.0f64, f64::min);
        let hi = skills.fold(0.0f64, f64::max);
        let pad = ((hi - lo) * 0.15).max(0.05);
        let k = columns.len().max(1) as i32;
        // A stratum's name in lines that fit its segment (the plot's width less the y labels
        // and margins, shared by the strata): the first under the axis, the rest below it.
        let segment_px = body.dim_in_pixel().0.saturating_sub(56 + 24) / k as u32;
        let names: Vec<Vec<String>> = columns
            .iter()
            .map(|(name, _)| wrap(name, segment_px.saturating_sub(6), 12))
            .collect();
        let extra = names.iter().map(|l| l.len() - 1).max().unwrap_or(0) as i32;
        let mut chart = ChartBuilder::on(&body)
            .caption(&self.title, ("sans-serif", if column { 14 } else { 16 }))
            .margin(12)
            .x_label_area_size(48 + 14 * extra as u32 + if column { 14 } else { 0 })
            .y_label_area_size(56)
            // `into_segmented` makes a segment of each end: 0..k - 1 gives k segments.
            .build_cartesian_2d((0..k - 1).into_segmented(), (lo - pad)..(hi + pad))
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            // Ticks and axis names at 12 px (plotters' default shrinks them in a small chart).
            .label_style(("sans-serif", 12))
            .axis_desc_style(("sans-serif", 12))
            .disable_x_mesh()
            .x_labels(columns.len().max(1))
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => names
                    .get(*i as usize)
                    .map(|lines| lines[0].clone())
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc("skill (1 − mse/identity)")
            .draw()
            .map_err(plot_err)?;
        // The Δt range under a tercile's name (the plot sits at the figure's top left, so the
        // chart's pixel coordinates are the body's).
        let under = ("sans-serif", 12)
            .into_font()
            .color(&BLACK.mix(0.7))
            .pos(Pos::new(HPos::Center, VPos::Top));
        let more =
            TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
        // In a column the bars are too narrow for an n each: a stratum whose runs share one
        // says it once, under its range.
        let shared: Vec<Option<u64>> = columns
            .iter()
            .map(|(label, _)| {
                let ns: Vec<u64> = all
                    .iter()
                    .filter(|s| s.label == *label)
                    .map(|s| s.n)
                    .collect();
                (column && ns.iter().all(|&n| Some(&n) == ns.first()))
                    .then(|| ns.first().copied())
                    .flatten()
            })
            .collect();
        for (i, (_, range)) in columns.iter().enumerate() {
            let (x, y) = chart.backend_coord(&(SegmentValue::CenterOf(i as i32), lo - pad));
            if let Some(n) = shared[i] {
                let at = (x, y + 24 + 14 * (extra + 1));
                body.draw(&Text::new(format!("n={n}"), at, under.clone()))
                    .map_err(plot_err)?;
            }
            for (j, line) in names[i].iter().enumerate().skip(1) {
                let at = (x, y + 24 + 14 * (j as i32 - 1));
                body.draw(&Text::new(line.clone(), at, more.clone()))
                    .map_err(plot_err)?;
            }
            let at = (x, y + 24 + 14 * extra);
            body.draw(&Text::new(range.clone(), at, under.clone()))
                .map_err(plot_err)?;
        }
        let segment = chart.plotting_area().dim_in_pixel().0 as f64 / k as f64;
        let r_count = self.runs.len().max(1) as f64;
        let gap = segment * 0.12;
        let slot = (segment - 2.0 * gap) / r_count;
        let font = if column {
            12
        } else if r_count > 2.0 {
            11
        } else {
            13
        };
        // Colours by run name (legend::colours): the same run, the same colour in every figure.
        let by_name = legend::colours(self.runs.iter().map(|(name, _)| name.as_str()));
        for (r, (name, strata)) in self.runs.iter().enumerate() {
            let bars: Vec<(i32, &Stratum, f64)> = strata
                .iter()
                .filter_map(|s| {
                    let i = columns.iter().position(|c| c.0 == s.label)?;
                    Some((i as i32, s, s.skill?))
                })
                .collect();
            let left = gap + r as f64 * slot;
            let right = segment - left - slot;
            let colour = |v: f64| {
                if self.several() {
                    legend::colour(by_name[name.as_str()])
                } else if v >= 0.0 {
                    RGBColor(33, 145, 140).to_rgba()
                } else {
                    RGBColor(178, 24, 43).to_rgba()
                }
            };
            chart
                .draw_series(bars.iter().map(|&(i, s, v)| {
                    let c = colour(v);
                    let style = if s.n < MIN_N {
                        c.mix(0.45).filled()
                    } else {
                        c.filled()
                    };
                    let mut bar = Rectangle::new(
                        [
                            (SegmentValue::Exact(i), 0.0),
                            (SegmentValue::Exact(i + 1), v),
                        ],
                        style,
                    );
                    bar.set_margin(0, 0, left.round() as u32, right.max(0.0).round() as u32);
                    bar
                }))
                .map_err(plot_err)?;
            let dx = (left + slot / 2.0 - segment / 2.0).round() as i32;
            // The interval of a pooled bar: a whisker with caps, over the bar's middle.
            for &(i, s, _) in &bars {
                let Some((a, b)) = s.interval else { continue };
                let px = |y: f64| chart.backend_coord(&(SegmentValue::CenterOf(i), y));
                let ((x, ya), (_, yb)) = (px(a), px(b));
                let x = x + dx;
                let cap = (slot / 6.0).clamp(2.0, 8.0).round() as i32;
                let ink = ShapeStyle::from(&BLACK).stroke_width(1);
                for line in [
                    vec![(x, ya), (x, yb)],
                    vec![(x - cap, ya), (x + cap, ya)],
                    vec![(x - cap, yb), (x + cap, yb)],
                ] {
                    body.draw(&PathElement::new(line, ink)).map_err(plot_err)?;
                }
            }
            let labelled = bars
                .iter()
                .filter(|(i, _, _)| shared[*i as usize].is_none());
            chart
                .draw_series(labelled.map(|&(i, s, v)| {
                    let mark = if s.n < MIN_N && !self.several() {
                        " (few)"
                    } else {
                        ""
                    };
                    let anchor = if v >= 0.0 { VPos::Bottom } else { VPos::Top };
                    let style = TextStyle::from(("sans-serif", font).into_font())
                        .pos(Pos::new(HPos::Center, anchor));
                    // Past the whisker's end on the bar's side.
                    let at = match s.interval {
                        Some((_, b)) if v >= 0.0 => b.max(v),
                        Some((a, _)) => a.min(v),
                        None => v,
                    };
                    EmptyElement::at((SegmentValue::CenterOf(i), at))
                        + Text::new(format!("n={}{mark}", s.n), (dx, 0), style)
                }))
                .map_err(plot_err)?;
        }
        if self.several() {
            let labels = self.run_labels();
            let colours: BTreeMap<String, usize> = labels
                .iter()
                .zip(&self.runs)
                .map(|(l, (name, _))| (l.clone(), by_name[name.as_str()]))
                .collect();
            let entries: Vec<legend::Entry> = labels
                .iter()
                .map(|l| legend::Entry {
                    label: l,
                    dashed: false,
                })
                .collect();
            legend::draw(&key, &entries, &colours, if column { 10 } else { 48 })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The small-strata warning is drawn under the bars unless the figure is asked without it.
    #[test]
    fn the_small_strata_warning_can_be_left_off_the_figure() {
        let stratum = |label: &str, n: u64| Stratum {
            label: label.into(),
            range: String::new(),
            n,
            mse: Some(1.0),
            identity_mse: Some(2.0),
            skill: Some(0.5),
            interval: None,
        };
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("s.svg");
        for on in [true, false] {
            let fig = StrataSkill {
                title: "skill".into(),
                runs: vec![(
                    "a".into(),
                    vec![stratum("Δt short", 2), stratum("Δt long", 40)],
                )],
                warning_on_figure: on,
                pooled: BTreeMap::new(),
                layout: Layout::Screen,
            };
            crate::outputs::heatmap::render(&fig, &out).unwrap();
            let svg = std::fs::read_to_string(&out).unwrap();
            assert_eq!(svg.contains("fewer than"), on, "warning drawn: {on}");
        }
    }

    /// A configuration's pooled bar carries a whisker (three lines: its stem and two caps) and
    /// the legend says how many runs it pools; one run's bar has neither.
    #[test]
    fn a_pooled_configuration_draws_its_interval_and_says_so() {
        let stratum = |interval: Option<(f64, f64)>| Stratum {
            label: "Δt short".into(),
            range: String::new(),
            n: 20,
            mse: Some(1.0),
            identity_mse: Some(2.0),
            skill: Some(0.5),
            interval,
        };
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("s.svg");
        let draw = |interval: Option<(f64, f64)>| {
            let mut pooled = BTreeMap::new();
            if interval.is_some() {
                pooled.insert("eb".to_string(), 5);
            }
            let fig = StrataSkill {
                title: "skill".into(),
                runs: vec![
                    ("eb".into(), vec![stratum(interval)]),
                    ("lin".into(), vec![stratum(None)]),
                ],
                warning_on_figure: true,
                pooled,
                layout: Layout::Screen,
            };
            crate::outputs::heatmap::render(&fig, &out).unwrap();
            std::fs::read_to_string(&out).unwrap()
        };
        // An interval inside the axis the bars make, so that the mesh is the same.
        let (one, five) = (draw(None), draw(Some((0.45, 0.5))));
        let lines = |svg: &str| svg.matches("<polyline").count() + svg.matches("<line").count();
        assert_eq!(lines(&five), lines(&one) + 3);
        assert!(five.contains("eb, mean of 5 runs ± 95% CI"), "{five}");
        assert!(!one.contains("mean of"));
    }
}

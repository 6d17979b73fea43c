//! The strata of a run's `strata.json` (Δt terciles, horizons: written by train-gnn and
//! eval-gnn) as a bar chart of skill (`plot-sc --strata`) and as a text table
//! (`compare --strata`), each stratum with its n, and a warning where n is too small for its
//! skill to mean much.

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde_json::Value;

use super::figure::{Figure, plot_err};
use super::group_table::sig4;

/// Below this many forecasts a stratum's skill is one or two subjects' luck: marked and warned.
pub const MIN_N: u64 = 5;

/// One stratum: its label, n, the model's and the identity's sc_log_mse and the skill.
#[derive(Debug, Clone, PartialEq)]
pub struct Stratum {
    pub label: String,
    pub n: u64,
    pub mse: Option<f64>,
    pub identity_mse: Option<f64>,
    pub skill: Option<f64>,
}

/// The strata of `strata.json`, in order: Δt short, middle, long, then the horizons.
pub fn read(strata: &Value) -> Vec<Stratum> {
    let mut out = Vec::new();
    let mut add = |label: String, s: &Value| {
        if let Some(n) = s["n"].as_u64() {
            out.push(Stratum {
                label,
                n,
                mse: s["model"]["sc_log_mse"].as_f64(),
                identity_mse: s["identity"]["sc_log_mse"].as_f64(),
                skill: s["skill"]["skill"].as_f64(),
            });
        }
    };
    if let Some(t) = strata["dt_terciles"].as_object() {
        for k in ["short", "middle", "long"] {
            if let Some(s) = t.get(k) {
                add(format!("Δt {k}"), s);
            }
        }
    }
    if let Some(h) = strata["horizons"].as_object() {
        for (k, s) in h.iter().filter(|(_, s)| s.is_object()) {
            add(k.replace('_', " "), s);
        }
    }
    out
}

/// The strata with fewer than [`MIN_N`] forecasts, as a warning line (`None`: none).
pub fn small_warning(strata: &[Stratum]) -> Option<String> {
    let small: Vec<String> = strata
        .iter()
        .filter(|s| s.n < MIN_N)
        .map(|s| format!("{} (n={})", s.label, s.n))
        .collect();
    (!small.is_empty()).then(|| {
        format!(
            "{} stratum(s) with fewer than {MIN_N} forecasts, whose skill is a subject or two: {}",
            small.len(),
            small.join(", ")
        )
    })
}

/// The strata as a text table: stratum, n, mse, identity mse, skill; `*` marks n < MIN_N.
pub fn table(strata: &[Stratum]) -> String {
    let cell = |v: Option<f64>| v.map_or("N/A".into(), sig4);
    let mut lines = vec![format!(
        "{:<36} {:>4} {:>10} {:>10} {:>8}",
        "stratum", "n", "mse", "identity", "skill"
    )];
    for s in strata {
        let mark = if s.n < MIN_N { "*" } else { "" };
        lines.push(format!(
            "{:<36} {:>4} {:>10} {:>10} {:>8}",
            s.label,
            format!("{}{mark}", s.n),
            cell(s.mse),
            cell(s.identity_mse),
            cell(s.skill)
        ));
    }
    if strata.iter().any(|s| s.n < MIN_N) {
        lines.push(format!(
            "* fewer than {MIN_N} forecasts: read the skill as anecdote"
        ));
    }
    lines.join("\n") + "\n"
}

/// The skill of every stratum as bars, each labelled under the axis and with its n above it.
pub struct StrataSkill {
    pub title: String,
    pub strata: Vec<Stratum>,
}

impl StrataSkill {
    pub fn from_json(title: &str, strata: &Value) -> Self {
        Self {
            title: title.to_string(),
            strata: read(strata),
        }
    }

    /// The strata that have a skill (one bar each).
    fn bars(&self) -> Vec<(&Stratum, f64)> {
        self.strata
            .iter()
            .filter_map(|s| Some((s, s.skill?)))
            .collect()
    }
}

impl Figure for StrataSkill {
    fn size(&self) -> (u32, u32) {
        (170 * self.bars().len().max(1) as u32 + 120, 400)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, _: bool) -> Result<()> {
        root.fill(&WHITE).map_err(plot_err)?;
        let bars = self.bars();
        let (body, foot) = root.split_vertically(370);
        let small = self.strata.iter().filter(|s| s.n < MIN_N).count();
        if small > 0 {
            foot.draw(&Text::new(
                format!(
                    "warning: {small} of {} strata have fewer than {MIN_N} forecasts (faint \
                     bars): their skill is a subject or two",
                    self.strata.len()
                ),
                (12, 4),
                ("sans-serif", 13).into_font().color(&RGBColor(178, 24, 43)),
            ))
            .map_err(plot_err)?;
        }
        let lo = bars.iter().fold(0.0f64, |a, b| a.min(b.1));
        let hi = bars.iter().fold(0.0f64, |a, b| a.max(b.1));
        let pad = ((hi - lo) * 0.15).max(0.05);
        let k = bars.len().max(1) as i32;
        let mut chart = ChartBuilder::on(&body)
            .caption(&self.title, ("sans-serif", 16))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d((0..k).into_segmented(), (lo - pad)..(hi + pad))
            .map_err(plot_err)?;
        let labels: Vec<&str> = bars.iter().map(|(s, _)| s.label.as_str()).collect();
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(bars.len().max(1))
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => labels
                    .get(*i as usize)
                    .map(|l| l.to_string())
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc("skill (1 − mse/identity)")
            .draw()
            .map_err(plot_err)?;
        let color = |s: f64| {
            if s >= 0.0 {
                RGBColor(33, 145, 140)
            } else {
                RGBColor(178, 24, 43)
            }
        };
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (s, v))| {
                let c = color(*v);
                let style = if s.n < MIN_N {
                    c.mix(0.45).filled()
                } else {
                    c.filled()
                };
                let i = i as i32;
                let mut bar = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), 0.0),
                        (SegmentValue::Exact(i + 1), *v),
                    ],
                    style,
                );
                bar.set_margin(0, 0, 24, 24);
                bar
            }))
            .map_err(plot_err)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, (s, v))| {
                let mark = if s.n < MIN_N { " (few)" } else { "" };
                let anchor = if *v >= 0.0 { VPos::Bottom } else { VPos::Top };
                Text::new(
                    format!("n={}{mark}", s.n),
                    (SegmentValue::CenterOf(i as i32), *v),
                    TextStyle::from(("sans-serif", 13).into_font())
                        .pos(Pos::new(HPos::Center, anchor)),
                )
            }))
            .map_err(plot_err)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strata_are_read_in_order_and_small_ones_are_marked() {
        let s = |n: u64, skill: f64| {
            json!({"n": n, "model": {"sc_log_mse": 1.0}, "identity": {"sc_log_mse": 2.0},
                   "skill": {"skill": skill}})
        };
        let strata = json!({
            "dt_terciles": {"p33_years": 1.0, "long": s(1, -0.5), "short": s(7, 0.25)},
            "horizons": {"note": "text", "baseline_to_2year": s(9, 0.1)}
        });
        let read = read(&strata);
        let labels: Vec<&str> = read.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["Δt short", "Δt long", "baseline to 2year"]);
        let t = table(&read);
        assert!(
            t.contains("Δt long") && t.contains("1*") && t.contains("-0.5000"),
            "{t}"
        );
        assert!(small_warning(&read).unwrap().contains("Δt long (n=1)"));
        assert!(small_warning(&read[..1]).is_none());
    }
}

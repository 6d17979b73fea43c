//! Connectome heatmaps: a subject's truth, prediction and identity forecast (the start scan) in
//! log1p weight on one colour scale, and the prediction's and the identity's errors against the
//! truth on one symmetric diverging scale (each titled with its rms); a colour bar under every
//! panel; nodes in atlas order, network boundaries marked when ROI names
//! are known (Schaefer `7Networks_LH_Vis_1`: the network is the third `_` field). The per-stratum
//! skill chart is [`super::strata`].

use std::path::Path;

use anyhow::{Context, Result, bail};
use ndarray::Array2;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::{Figure, plot_err, render_figure};

/// Pixels of one matrix panel (square), the title band above it and the gap between panels.
const PANEL: u32 = 300;
const TITLE: u32 = 28;
const GAP: u32 = 12;
/// The colour bar under each panel: its height, and the band it and its labels take.
const BAR: u32 = 10;
const BAR_BAND: u32 = 36;
/// At most this many cells per side in an SVG (blocks are averaged; a PNG draws every node).
const SVG_CELLS: usize = 100;

/// Truth, prediction and identity of one subject, and both errors.
pub struct Comparison<'a> {
    pub title: String,
    pub truth: &'a Array2<f32>,
    pub prediction: &'a Array2<f32>,
    pub start: &'a Array2<f32>,
    pub roi_names: Option<&'a [String]>,
}

/// Draws `fig` into `out` (`.png` or `.svg`).
pub fn render<F: Figure>(fig: &F, out: &Path) -> Result<()> {
    render_figure(fig, out)
}

/// Reads ROI names, one per line, and checks there are `n`.
pub fn read_roi_names(path: &Path, n: usize) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--roi-names {}: cannot read", path.display()))?;
    let names: Vec<String> = text
        .lines()
        .map(|l| l.split(',').next().unwrap_or("").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect();
    if names.len() != n {
        bail!(
            "--roi-names {}: {} names, the matrices have {n} nodes",
            path.display(),
            names.len()
        );
    }
    Ok(names)
}

/// The node positions where the network changes (Schaefer names `<k>Networks_<hemi>_<net>_…`;
/// none when the names do not follow it).
pub fn network_boundaries(names: &[String]) -> Vec<usize> {
    let net = |s: &String| -> Option<String> {
        let f: Vec<&str> = s.split('_').collect();
        (f.len() >= 3).then(|| format!("{}_{}", f[1], f[2]))
    };
    let nets: Vec<Option<String>> = names.iter().map(net).collect();
    if nets.iter().any(Option::is_none) {
        return Vec::new();
    }
    (1..nets.len())
        .filter(|&i| nets[i] != nets[i - 1])
        .collect()
}

/// A sequential colour map (dark blue → teal → yellow), `t` in [0, 1].
fn sequential(t: f64) -> RGBColor {
    const STOPS: [(f64, f64, f64); 5] = [
        (68.0, 1.0, 84.0),
        (59.0, 82.0, 139.0),
        (33.0, 145.0, 140.0),
        (94.0, 201.0, 98.0),
        (253.0, 231.0, 37.0),
    ];
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let x = t * (STOPS.len() - 1) as f64;
    let i = (x.floor() as usize).min(STOPS.len() - 2);
    let f = x - i as f64;
    let (a, b) = (STOPS[i], STOPS[i + 1]);
    let mix = |u: f64, v: f64| (u + (v - u) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// A diverging colour map (blue → white → red), `t` in [−1, 1].
fn diverging(t: f64) -> RGBColor {
    let t = if t.is_finite() {
        t.clamp(-1.0, 1.0)
    } else {
        0.0
    };
    let fade = |c: f64| (255.0 - (255.0 - c) * t.abs()).round() as u8;
    if t < 0.0 {
        RGBColor(fade(33.0), fade(102.0), fade(172.0))
    } else {
        RGBColor(fade(178.0), fade(24.0), fade(43.0))
    }
}

/// `m` averaged in blocks to at most `cells` per side.
fn downsample(m: &Array2<f64>, cells: usize) -> Array2<f64> {
    let n = m.nrows();
    if n <= cells {
        return m.clone();
    }
    let edge = |k: usize| k * n / cells;
    Array2::from_shape_fn((cells, cells), |(i, j)| {
        let block = m.slice(ndarray::s![edge(i)..edge(i + 1), edge(j)..edge(j + 1)]);
        block.mean().unwrap_or(0.0)
    })
}

struct Panel {
    title: String,
    values: Array2<f64>,
    color: fn(f64) -> RGBColor,
    /// Maps a value to the colour map's domain.
    scale: f64,
    /// The values at the colour bar's ends.
    range: (f64, f64),
}

/// A horizontal colour bar from `range.0` to `range.1` under a panel, its ends labelled.
fn draw_colour_bar<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, p: &Panel) -> Result<()> {
    let y0 = (TITLE + PANEL + 6) as i32;
    let steps = 60;
    for k in 0..steps {
        let t = (k as f64 + 0.5) / steps as f64;
        let value = p.range.0 + t * (p.range.1 - p.range.0);
        let x = |k: u32| (k * PANEL / steps) as i32;
        area.draw(&Rectangle::new(
            [(x(k), y0), (x(k + 1), y0 + BAR as i32)],
            (p.color)(value * p.scale).filled(),
        ))
        .map_err(plot_err)?;
    }
    let font = ("sans-serif", 12).into_font();
    let label = |v: f64| super::group_table::sig4(v);
    area.draw(&Text::new(
        label(p.range.0),
        (0, y0 + BAR as i32 + 3),
        font.clone(),
    ))
    .map_err(plot_err)?;
    let right = TextStyle::from(font).pos(Pos::new(HPos::Right, VPos::Top));
    area.draw(&Text::new(
        label(p.range.1),
        (PANEL as i32, y0 + BAR as i32 + 3),
        right,
    ))
    .map_err(plot_err)?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    boundaries: &[usize],
    n: usize,
    cells: usize,
) -> Result<()> {
    area.draw(&Text::new(
        p.title.clone(),
        (2, 4),
        ("sans-serif", 14).into_font(),
    ))
    .map_err(plot_err)?;
    let m = downsample(&p.values, cells);
    let k = m.nrows().max(1);
    let at = |i: usize| (TITLE + (i as u32 * PANEL) / k as u32) as i32;
    let x = |j: usize| ((j as u32 * PANEL) / k as u32) as i32;
    for i in 0..k {
        for j in 0..k {
            let c = (p.color)(m[(i, j)] * p.scale);
            area.draw(&Rectangle::new(
                [(x(j), at(i)), (x(j + 1), at(i + 1))],
                c.filled(),
            ))
            .map_err(plot_err)?;
        }
    }
    let line = BLACK.mix(0.6).stroke_width(1);
    for &b in boundaries {
        let pos = ((b * k) as f64 / n as f64).round() as usize;
        area.draw(&PathElement::new(
            vec![(x(pos), at(0)), (x(pos), at(k))],
            line,
        ))
        .map_err(plot_err)?;
        area.draw(&PathElement::new(
            vec![(x(0), at(pos)), (x(k), at(pos))],
            line,
        ))
        .map_err(plot_err)?;
    }
    draw_colour_bar(area, p)
}

impl Comparison<'_> {
    fn panels(&self) -> Vec<Panel> {
        let log = |m: &Array2<f32>| m.mapv(|v| f64::from(v.max(0.0)).ln_1p());
        let (t, p, s) = (log(self.truth), log(self.prediction), log(self.start));
        let hi = [&t, &p, &s]
            .iter()
            .flat_map(|m| m.iter())
            .fold(0.0f64, |a, &b| a.max(b))
            .max(1e-12);
        let (dp, ds) = (&p - &t, &s - &t);
        // Both error panels on one symmetric scale, so that their colours compare; each title
        // gives its panel's rms error.
        let largest = |m: &Array2<f64>| m.iter().fold(0.0f64, |a, &b| a.max(b.abs()));
        let err = largest(&dp).max(largest(&ds)).max(1e-12);
        let rms = |m: &Array2<f64>| m.mapv(|v| v * v).mean().unwrap_or(0.0).sqrt();
        let seq = |title: &str, values: Array2<f64>| Panel {
            title: format!("{title} (log1p)"),
            values,
            color: sequential,
            scale: 1.0 / hi,
            range: (0.0, hi),
        };
        let div = |title: &str, values: Array2<f64>| Panel {
            title: format!("{title}, rms {}", super::group_table::sig4(rms(&values))),
            values,
            color: diverging,
            scale: 1.0 / err,
            range: (-err, err),
        };
        vec![
            seq("truth", t),
            seq("prediction", p),
            seq("identity", s),
            div("prediction − truth", dp),
            div("identity − truth", ds),
        ]
    }
}

impl Figure for Comparison<'_> {
    fn size(&self) -> (u32, u32) {
        (5 * PANEL + 6 * GAP, PANEL + TITLE + BAR_BAND + 2 * GAP + 24)
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, vector: bool) -> Result<()> {
        root.fill(&WHITE).map_err(plot_err)?;
        root.draw(&Text::new(
            self.title.clone(),
            (GAP as i32, 4),
            ("sans-serif", 16).into_font(),
        ))
        .map_err(plot_err)?;
        let n = self.truth.nrows();
        let boundaries = self.roi_names.map(network_boundaries).unwrap_or_default();
        let cells = if vector { SVG_CELLS } else { n };
        for (k, panel) in self.panels().iter().enumerate() {
            let x0 = (GAP + k as u32 * (PANEL + GAP)) as i32;
            let area = root
                .clone()
                .shrink((x0, 24), (PANEL, PANEL + TITLE + BAR_BAND));
            draw_panel(&area, panel, &boundaries, n, cells)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schaefer_names_give_network_boundaries_and_others_none() {
        let names: Vec<String> = [
            "7Networks_LH_Vis_1",
            "7Networks_LH_Vis_2",
            "7Networks_LH_SomMot_1",
            "7Networks_RH_SomMot_1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(network_boundaries(&names), vec![2, 3]);
        assert!(network_boundaries(&["a".to_string(), "b".to_string()]).is_empty());
    }

    #[test]
    fn colour_maps_span_their_ends_and_white_at_zero() {
        assert_eq!(sequential(0.0), RGBColor(68, 1, 84));
        assert_eq!(sequential(1.0), RGBColor(253, 231, 37));
        assert_eq!(diverging(0.0), RGBColor(255, 255, 255));
        assert_eq!(diverging(1.0), RGBColor(178, 24, 43));
        assert_eq!(downsample(&Array2::ones((10, 10)), 4).dim(), (4, 4));
    }
}

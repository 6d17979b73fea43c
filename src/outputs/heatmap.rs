//! Connectome heatmaps: a subject's truth, prediction and identity forecast (the start scan) in
//! log1p weight on one colour scale, and the prediction's and the identity's errors against the
//! truth on one symmetric diverging scale (each titled with its rms); a colour bar under every
//! panel; nodes in atlas order. When ROI names are known (Schaefer `7Networks_LH_Vis_1`: the
//! hemisphere is the second `_` field, the network the third) a colour strip along the top and
//! the left of every panel says which network each node is in, one colour per network name
//! ([`super::legend::colours`], the same in every figure), with the networks named in a key
//! under the panels in atlas order and the hemispheres marked on the strip; lines across the
//! matrices at every boundary only when asked (`network_lines`). The per-stratum skill chart is
//! [`super::strata`].

use std::path::Path;

use anyhow::{Context, Result, bail};
use ndarray::Array2;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::{COLUMN_WIDTH, Figure, Layout, plot_err, render_figure};

mod networks;
#[cfg(test)]
use networks::network_boundaries;
use networks::{
    NetworkRun, Networks, draw_network_key, key_entries, key_rows, network_key, network_runs,
};

/// Pixels of one matrix panel (square): in a row of five, and two a row in a journal's column
/// ([`Layout::Column`]); the title band above it and the gap between panels.
const PANEL: u32 = 300;
const COLUMN_PANEL: u32 = (COLUMN_WIDTH - 3 * GAP) / 2;
const TITLE: u32 = 28;
const GAP: u32 = 12;
/// The colour bar under each panel: its height, and the band it and its labels take.
const BAR: u32 = 10;
const BAR_BAND: u32 = 36;
/// At most this many cells per side in an SVG (blocks are averaged; a PNG draws every node).
const SVG_CELLS: usize = 100;
/// The network strip's width along a panel's top and left, and a row of the network key.
const STRIP: u32 = 9;
const KEY_ROW: u32 = 20;
/// The network key's column width (a name of up to ~18 characters at 13 px).
const KEY_COLUMN: u32 = 150;

/// Truth, prediction and identity of one subject, and both errors.
pub struct Comparison<'a> {
    pub title: String,
    pub truth: &'a Array2<f32>,
    pub prediction: &'a Array2<f32>,
    pub start: &'a Array2<f32>,
    pub roi_names: Option<&'a [String]>,
    /// Also draw a line across the matrices at every network boundary (`--network-lines`).
    pub network_lines: bool,
    /// Five panels in a row, or two a row for a journal's column (`--column`).
    pub layout: Layout,
}

/// Draws `fig` into `out` (`.png` or `.svg`).
pub fn render<F: Figure>(fig: &F, out: &Path) -> Result<()> {
    render_figure(fig, out)
}

/// The lines of a heatmap figure's title: one on a screen, wrapped at spaces to the width in a
/// journal's column (a subject's scan ids and the model do not fit one line).
pub fn title_lines(title: &str, layout: Layout) -> Vec<String> {
    match layout {
        Layout::Screen => vec![title.to_string()],
        Layout::Column => super::figure::wrap(title, COLUMN_WIDTH - 2 * GAP, 14),
    }
}

/// Reads ROI names, one per line, and checks there are `n`.
pub(crate) fn read_roi_names(path: &Path, n: usize) -> Result<Vec<String>> {
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
fn draw_colour_bar<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    panel: u32,
) -> Result<()> {
    let y0 = (TITLE + panel + 6) as i32;
    let steps = 60;
    for k in 0..steps {
        let t = (k as f64 + 0.5) / steps as f64;
        let value = p.range.0 + t * (p.range.1 - p.range.0);
        let x = |k: u32| (k * panel / steps) as i32;
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
        (panel as i32, y0 + BAR as i32 + 3),
        right,
    ))
    .map_err(plot_err)?;
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    networks: &Networks,
    n: usize,
    cells: usize,
    panel: u32,
) -> Result<()> {
    let font = if panel < PANEL { 13 } else { 14 };
    area.draw(&Text::new(
        p.title.clone(),
        (2, 4),
        ("sans-serif", font).into_font(),
    ))
    .map_err(plot_err)?;
    // With networks, the strip takes STRIP pixels at the matrix's top and left.
    let strip = if networks.runs.is_empty() { 0 } else { STRIP };
    let side = panel - strip;
    let m = downsample(&p.values, cells);
    let k = m.nrows().max(1);
    let at = |i: usize| (TITLE + strip + (i as u32 * side) / k as u32) as i32;
    let x = |j: usize| (strip + (j as u32 * side) / k as u32) as i32;
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
    // A node's position on the matrix's side (a fraction of k cells of n nodes).
    let node = |b: usize| (b as f64 * k as f64 / n as f64).round() as usize;
    let line = BLACK.mix(0.6).stroke_width(1);
    for r in networks.runs {
        let c = super::legend::colour(networks.colours.get(&r.network).copied().unwrap_or(0));
        let (a, b) = (node(r.start), node(r.end));
        area.draw(&Rectangle::new(
            [(x(a), at(0) - strip as i32), (x(b), at(0) - 1)],
            c.filled(),
        ))
        .map_err(plot_err)?;
        area.draw(&Rectangle::new(
            [(0, at(a)), (strip as i32 - 1, at(b))],
            c.filled(),
        ))
        .map_err(plot_err)?;
        if networks.lines && r.start > 0 {
            area.draw(&PathElement::new(vec![(x(a), at(0)), (x(a), at(k))], line))
                .map_err(plot_err)?;
            area.draw(&PathElement::new(vec![(x(0), at(a)), (x(k), at(a))], line))
                .map_err(plot_err)?;
        }
    }
    // The hemispheres: a black tick across the strip where the hemisphere changes.
    for w in networks.runs.windows(2) {
        if w[0].hemisphere != w[1].hemisphere {
            let h = node(w[1].start);
            let tick = BLACK.stroke_width(2);
            area.draw(&PathElement::new(
                vec![(x(h), at(0) - strip as i32), (x(h), at(0))],
                tick,
            ))
            .map_err(plot_err)?;
            area.draw(&PathElement::new(
                vec![(0, at(h)), (strip as i32, at(h))],
                tick,
            ))
            .map_err(plot_err)?;
        }
    }
    draw_colour_bar(area, p, panel)
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

impl Comparison<'_> {
    /// The runs of networks the ROI names give (none without names, or names not Schaefer's).
    fn network_runs(&self) -> Vec<NetworkRun> {
        self.roi_names.map(network_runs).unwrap_or_default()
    }

    fn title_lines(&self) -> Vec<String> {
        title_lines(&self.title, self.layout)
    }

    /// The band the title takes above the panels.
    fn head(&self) -> u32 {
        match self.layout {
            Layout::Screen => 24,
            Layout::Column => 6 + 18 * self.title_lines().len() as u32,
        }
    }

    /// A panel's side, panels per row and rows.
    fn grid(&self) -> (u32, u32, u32) {
        match self.layout {
            Layout::Screen => (PANEL, 5, 1),
            Layout::Column => (COLUMN_PANEL, 2, 3),
        }
    }
}

impl Figure for Comparison<'_> {
    fn size(&self) -> (u32, u32) {
        let (panel, per_row, rows) = self.grid();
        let width = per_row * panel + (per_row + 1) * GAP;
        let runs = self.network_runs();
        let key = if runs.is_empty() {
            0
        } else {
            KEY_ROW * key_rows(key_entries(&runs), width - 2 * GAP)
        };
        (
            width,
            rows * (panel + TITLE + BAR_BAND + GAP) + GAP + self.head() + key,
        )
    }

    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, vector: bool) -> Result<()> {
        root.fill(&WHITE).map_err(plot_err)?;
        let (panel, per_row, rows) = self.grid();
        let title = if self.layout == Layout::Column {
            14
        } else {
            16
        };
        for (i, line) in self.title_lines().into_iter().enumerate() {
            root.draw(&Text::new(
                line,
                (GAP as i32, 4 + 18 * i as i32),
                ("sans-serif", title).into_font(),
            ))
            .map_err(plot_err)?;
        }
        let head = self.head();
        let n = self.truth.nrows();
        let runs = self.network_runs();
        let (_, colours) = network_key(&runs);
        let networks = Networks {
            runs: &runs,
            colours: &colours,
            lines: self.network_lines,
        };
        let cells = if vector { SVG_CELLS } else { n };
        let band = panel + TITLE + BAR_BAND;
        for (k, p) in self.panels().iter().enumerate() {
            let (col, row) = (k as u32 % per_row, k as u32 / per_row);
            let x0 = (GAP + col * (panel + GAP)) as i32;
            let y0 = (head + row * (band + GAP)) as i32;
            let area = root.clone().shrink((x0, y0), (panel, band));
            draw_panel(&area, p, &networks, n, cells, panel)?;
        }
        if !runs.is_empty() {
            let top = (head + rows * (band + GAP)) as i32;
            let width = root.dim_in_pixel().0 - 2 * GAP;
            draw_network_key(root, &runs, top, width)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

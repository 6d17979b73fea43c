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
}

/// Draws `fig` into `out` (`.png` or `.svg`).
pub fn render<F: Figure>(fig: &F, out: &Path) -> Result<()> {
    render_figure(fig, out)
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

/// The node positions where the network changes (Schaefer names `<k>Networks_<hemi>_<net>_…`;
/// none when the names do not follow it).
#[cfg(test)]
pub(crate) fn network_boundaries(names: &[String]) -> Vec<usize> {
    network_runs(names)
        .iter()
        .skip(1)
        .map(|r| r.start)
        .collect()
}

/// A run of consecutive nodes of one network in one hemisphere.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NetworkRun {
    pub start: usize,
    pub end: usize,
    pub hemisphere: String,
    pub network: String,
}

/// The runs of consecutive nodes of one network and hemisphere, in atlas order (Schaefer names
/// `<k>Networks_<hemi>_<net>_…`; none when a name does not follow it).
pub(crate) fn network_runs(names: &[String]) -> Vec<NetworkRun> {
    let mut out: Vec<NetworkRun> = Vec::new();
    for (i, s) in names.iter().enumerate() {
        let f: Vec<&str> = s.split('_').collect();
        if f.len() < 3 || !f[0].ends_with("Networks") {
            return Vec::new();
        }
        match out.last_mut() {
            Some(r) if r.hemisphere == f[1] && r.network == f[2] => r.end = i + 1,
            _ => out.push(NetworkRun {
                start: i,
                end: i + 1,
                hemisphere: f[1].to_string(),
                network: f[2].to_string(),
            }),
        }
    }
    out
}

/// The networks' names in atlas order, each once, and the colour index of each
/// ([`super::legend::colours`]: from the name, the same in every figure).
fn network_key(runs: &[NetworkRun]) -> (Vec<&str>, std::collections::BTreeMap<String, usize>) {
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        if !names.contains(&r.network.as_str()) {
            names.push(&r.network);
        }
    }
    let colours = super::legend::colours(names.iter().copied());
    (names, colours)
}

/// The hemispheres in atlas order, each once.
fn hemispheres(runs: &[NetworkRun]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for r in runs {
        if !out.contains(&r.hemisphere.as_str()) {
            out.push(&r.hemisphere);
        }
    }
    out
}

/// The entries of the network key: one per network, and the hemispheres' tick when there are
/// two or more.
fn key_entries(runs: &[NetworkRun]) -> usize {
    network_key(runs).0.len() + usize::from(hemispheres(runs).len() > 1)
}

/// The rows the network key takes under the panels, `width` wide.
fn key_rows(networks: usize, width: u32) -> u32 {
    let per_row = (width / KEY_COLUMN).max(1) as usize;
    networks.div_ceil(per_row) as u32
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

/// How a panel marks the networks: the strip (runs of nodes, colour per network) and whether
/// lines cross the matrix at the boundaries.
struct Networks<'a> {
    runs: &'a [NetworkRun],
    colours: &'a std::collections::BTreeMap<String, usize>,
    lines: bool,
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    p: &Panel,
    networks: &Networks,
    n: usize,
    cells: usize,
) -> Result<()> {
    area.draw(&Text::new(
        p.title.clone(),
        (2, 4),
        ("sans-serif", 14).into_font(),
    ))
    .map_err(plot_err)?;
    // With networks, the strip takes STRIP pixels at the matrix's top and left.
    let strip = if networks.runs.is_empty() { 0 } else { STRIP };
    let side = PANEL - strip;
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
    draw_colour_bar(area, p)
}

/// The network key under the panels, from `top`: a swatch and the network's name, in atlas
/// order, as many columns as fit; the hemispheres' order after it.
fn draw_network_key<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    runs: &[NetworkRun],
    top: i32,
    width: u32,
) -> Result<()> {
    let (names, colours) = network_key(runs);
    let per_row = (width / KEY_COLUMN).max(1) as usize;
    let style =
        TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    let slot = |i: usize| {
        let x = (GAP + (i % per_row) as u32 * KEY_COLUMN) as i32;
        let y = top + (KEY_ROW * (i / per_row) as u32) as i32 + KEY_ROW as i32 / 2;
        (x, y)
    };
    for (i, name) in names.iter().enumerate() {
        let (x, y) = slot(i);
        let c = super::legend::colour(colours.get(*name).copied().unwrap_or(0));
        root.draw(&Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()))
            .map_err(plot_err)?;
        root.draw(&Text::new(name.to_string(), (x + 19, y), style.clone()))
            .map_err(plot_err)?;
    }
    let hemi = hemispheres(runs);
    if hemi.len() > 1 {
        let (x, y) = slot(names.len());
        root.draw(&PathElement::new(
            vec![(x + 7, y - 7), (x + 7, y + 7)],
            BLACK.stroke_width(2),
        ))
        .map_err(plot_err)?;
        root.draw(&Text::new(hemi.join(" | "), (x + 19, y), style))
            .map_err(plot_err)?;
    }
    Ok(())
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
}

impl Figure for Comparison<'_> {
    fn size(&self) -> (u32, u32) {
        let width = 5 * PANEL + 6 * GAP;
        let runs = self.network_runs();
        let key = if runs.is_empty() {
            0
        } else {
            KEY_ROW * key_rows(key_entries(&runs), width - 2 * GAP)
        };
        (width, PANEL + TITLE + BAR_BAND + 2 * GAP + 24 + key)
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
        let runs = self.network_runs();
        let (_, colours) = network_key(&runs);
        let networks = Networks {
            runs: &runs,
            colours: &colours,
            lines: self.network_lines,
        };
        let cells = if vector { SVG_CELLS } else { n };
        for (k, panel) in self.panels().iter().enumerate() {
            let x0 = (GAP + k as u32 * (PANEL + GAP)) as i32;
            let area = root
                .clone()
                .shrink((x0, 24), (PANEL, PANEL + TITLE + BAR_BAND));
            draw_panel(&area, panel, &networks, n, cells)?;
        }
        if !runs.is_empty() {
            let top = (24 + PANEL + TITLE + BAR_BAND + GAP) as i32;
            let width = root.dim_in_pixel().0 - 2 * GAP;
            draw_network_key(root, &runs, top, width)?;
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

    /// Schaefer-like 17-network names: `per` nodes per network, the networks in each
    /// hemisphere in `nets` order.
    fn schaefer(nets: &[&str], per: usize) -> Vec<String> {
        let mut out = Vec::new();
        for hemi in ["LH", "RH"] {
            for net in nets {
                for i in 0..per {
                    out.push(format!("17Networks_{hemi}_{net}_{}", i + 1));
                }
            }
        }
        out
    }

    fn figure_svg(names: &[String], lines: bool) -> String {
        let n = names.len();
        let m = Array2::from_shape_fn((n, n), |(i, j)| ((i * j) % 7) as f32);
        let fig = Comparison {
            title: "t".into(),
            truth: &m,
            prediction: &m,
            start: &m,
            roi_names: Some(names),
            network_lines: lines,
        };
        crate::outputs::figure::svg_string(&fig).unwrap()
    }

    #[test]
    fn networks_are_a_strip_in_the_colour_of_their_name_lines_only_when_asked() {
        let nets = ["VisCent", "SomMotA", "DefaultB"];
        let names = schaefer(&nets, 3);
        let runs = network_runs(&names);
        assert_eq!(runs.len(), 6, "{runs:?}");
        assert_eq!(
            (runs[3].start, runs[3].end, runs[3].hemisphere.as_str()),
            (9, 12, "RH")
        );
        assert_eq!(network_boundaries(&names), [3, 6, 9, 12, 15]);
        let svg = figure_svg(&names, false);
        // Every network named once in the key, the hemispheres after them.
        for net in nets {
            assert_eq!(svg.matches(&format!(">\n{net}\n<")).count(), 1, "{net}");
        }
        assert!(svg.contains(">\nLH | RH\n<"), "no hemispheres");
        // Each network's strip in its name's colour, the same as in any other figure.
        let colours = crate::outputs::legend::colours(nets);
        for net in nets {
            let c = crate::outputs::legend::colour(colours[net]);
            let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
            // Two strips per panel and hemisphere, five panels, and the key's swatch.
            assert!(svg.matches(&fill).count() > 2 * 2 * 5, "{net}: {fill}");
        }
        // No line across the matrices by default; with network_lines, one each way per
        // boundary and panel (the hemisphere's tick aside).
        let crossing = |svg: &str| svg.matches("opacity=\"0.6\" stroke=\"#000000\"").count();
        assert_eq!(crossing(&svg), 0);
        assert_eq!(crossing(&figure_svg(&names, true)), 5 * 2 * 5);
        // Names that are not Schaefer's: no strip, no key.
        let plain: Vec<String> = (0..4).map(|i| format!("roi_{i}_x")).collect();
        assert!(network_runs(&plain).is_empty());
        let svg = figure_svg(&plain, false);
        assert!(!svg.contains("LH | RH"));
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

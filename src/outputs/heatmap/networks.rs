//! The networks of Schaefer ROI names along a heatmap: runs of nodes per network and
//! hemisphere, the colour strip's data and the key under the panels.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::{GAP, KEY_COLUMN, KEY_ROW};
use crate::outputs::figure::plot_err;
use anyhow::Result;

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
/// ([`crate::outputs::legend::colours`]: from the name, the same in every figure).
pub(super) fn network_key(
    runs: &[NetworkRun],
) -> (Vec<&str>, std::collections::BTreeMap<String, usize>) {
    let mut names: Vec<&str> = Vec::new();
    for r in runs {
        if !names.contains(&r.network.as_str()) {
            names.push(&r.network);
        }
    }
    let colours = crate::outputs::legend::colours(names.iter().copied());
    (names, colours)
}

/// The hemispheres in atlas order, each once.
pub(super) fn hemispheres(runs: &[NetworkRun]) -> Vec<&str> {
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
pub(super) fn key_entries(runs: &[NetworkRun]) -> usize {
    network_key(runs).0.len() + usize::from(hemispheres(runs).len() > 1)
}

/// The rows the network key takes under the panels, `width` wide.
pub(super) fn key_rows(networks: usize, width: u32) -> u32 {
    let per_row = (width / KEY_COLUMN).max(1) as usize;
    networks.div_ceil(per_row) as u32
}

/// How a panel marks the networks: the strip (runs of nodes, colour per network) and whether
/// lines cross the matrix at the boundaries.
pub(super) struct Networks<'a> {
    pub runs: &'a [NetworkRun],
    pub colours: &'a std::collections::BTreeMap<String, usize>,
    pub lines: bool,
}

/// The network key under the panels, from `top`: a swatch and the network's name, in atlas
/// order, as many columns as fit; the hemispheres' order after it.
pub(super) fn draw_network_key<DB: DrawingBackend>(
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
        let c = crate::outputs::legend::colour(colours.get(*name).copied().unwrap_or(0));
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

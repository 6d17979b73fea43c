//! The legend of a figure, drawn beside its charts (outside the data), and the one colour each
//! label keeps across every panel of a figure (a run is the same colour in each chart).

use std::collections::BTreeMap;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::plot_err;

/// One row of a legend: its label and whether its line is dashed (else a filled box).
pub struct Entry<'a> {
    pub label: &'a str,
    pub dashed: bool,
}

/// One colour index per label, in order of first appearance.
pub fn colours<'a>(labels: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for label in labels {
        let next = out.len();
        out.entry(label.to_string()).or_insert(next);
    }
    out
}

/// Tableau's ten categorical colours (readable on white, told apart in print).
const TABLEAU10: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

/// The colour of index `i`: Tableau's ten, then plotters' 99-colour palette.
pub fn colour(i: usize) -> RGBAColor {
    match TABLEAU10.get(i) {
        Some(&(r, g, b)) => RGBColor(r, g, b).to_rgba(),
        None => Palette99::pick(i - TABLEAU10.len()).to_rgba(),
    }
}

/// The legend's width: room for the longest label.
pub fn width<'a>(labels: impl IntoIterator<Item = &'a str>) -> u32 {
    let longest = labels
        .into_iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    (40 + 7 * longest as u32).clamp(120, 520)
}

/// The entries, one row each from `top` (as many as fit; then how many more).
pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    colours: &BTreeMap<String, usize>,
    top: i32,
) -> Result<()> {
    const ROW: i32 = 18;
    let height = area.dim_in_pixel().1 as i32;
    let fit = ((height - top - 8) / ROW).max(1) as usize;
    let style =
        TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, e) in entries.iter().enumerate() {
        let y = top + ROW * i as i32;
        if i + 1 == fit && entries.len() > fit {
            let more = format!("… and {} more", entries.len() - i);
            area.draw(&Text::new(more, (24, y), style.clone()))
                .map_err(plot_err)?;
            break;
        }
        let c = colour(colours.get(e.label).copied().unwrap_or(i));
        if e.dashed {
            for x in [2, 12] {
                area.draw(&PathElement::new(
                    vec![(x, y), (x + 6, y)],
                    c.stroke_width(2),
                ))
                .map_err(plot_err)?;
            }
        } else {
            area.draw(&Rectangle::new([(2, y - 4), (18, y + 4)], c.filled()))
                .map_err(plot_err)?;
        }
        area.draw(&Text::new(e.label.to_string(), (24, y), style.clone()))
            .map_err(plot_err)?;
    }
    Ok(())
}

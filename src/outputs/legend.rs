//! The legend of a figure, drawn beside its charts (outside the data), and the one colour each
//! label keeps across every panel of a figure (a run is the same colour in each chart).

use std::collections::BTreeMap;

use anyhow::Result;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::figure::plot_err;

/// One row of a legend: its label and whether its line is dashed (else a filled box).
pub(crate) struct Entry<'a> {
    pub label: &'a str,
    pub dashed: bool,
}

/// One colour index per label, from its name, so that a model or configuration keeps its colour
/// from figure to figure whatever the order of the arguments. A label's own colour is a hash of
/// its name (FNV-1a) among Tableau's ten less the grey (index 7, kept for chance and baseline
/// rows); the labels are placed in sorted order, and one whose colour a label before it already
/// holds takes the next free one (after the nine, plotters' palette). The same set of names
/// therefore always gets the same colours; a name keeps its own colour unless it meets one that
/// hashes alike.
pub(crate) fn colours<'a>(labels: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, usize> {
    const OWN: [usize; 9] = [0, 1, 2, 3, 4, 5, 6, 8, 9];
    let names: std::collections::BTreeSet<&str> = labels.into_iter().collect();
    let mut taken = std::collections::BTreeSet::new();
    let mut out = BTreeMap::new();
    for name in names {
        let own = (fnv1a(name) % OWN.len() as u64) as usize;
        let index = (0..OWN.len())
            .map(|k| OWN[(own + k) % OWN.len()])
            .chain(TABLEAU10.len()..)
            .find(|i| !taken.contains(i))
            .expect("an unbounded range has a free index");
        taken.insert(index);
        out.insert(name.to_string(), index);
    }
    out
}

/// FNV-1a, 64 bits: a hash that is the same on every machine and in every release.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
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
pub(crate) fn colour(i: usize) -> RGBAColor {
    match TABLEAU10.get(i) {
        Some(&(r, g, b)) => RGBColor(r, g, b).to_rgba(),
        None => Palette99::pick(i - TABLEAU10.len()).to_rgba(),
    }
}

/// The legend's width: room for the longest label.
pub(crate) fn width<'a>(labels: impl IntoIterator<Item = &'a str>) -> u32 {
    let longest = labels
        .into_iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    (40 + 7 * longest as u32).clamp(120, 520)
}

/// A legend's row height.
pub(crate) const ROW: u32 = 18;

/// The height of a legend of `n` entries drawn under a chart ([`draw`] from `top` = 10: every
/// entry fits, none is summed up as "… and k more").
pub(crate) fn below_height(n: usize) -> u32 {
    ROW * n as u32 + 20
}

/// The entries, one row each from `top` (as many as fit; then how many more).
pub(crate) fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    colours: &BTreeMap<String, usize>,
    top: i32,
) -> Result<()> {
    let row = ROW as i32;
    let height = area.dim_in_pixel().1 as i32;
    let fit = ((height - top - 8) / row).max(1) as usize;
    let style =
        TextStyle::from(("sans-serif", 13).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, e) in entries.iter().enumerate() {
        let y = top + row * i as i32;
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

#[cfg(test)]
mod tests {
    use super::colours;

    #[test]
    fn a_name_keeps_its_colour_whatever_the_order_and_names_never_share_one() {
        let names = [
            "identity",
            "linear-drift",
            "eb-drift",
            "clg-ode",
            "eb-drift sparse",
        ];
        let a = colours(names);
        let mut reversed = names;
        reversed.reverse();
        assert_eq!(
            a,
            colours(reversed),
            "the order of the arguments changes nothing"
        );
        let mut seen: Vec<usize> = a.values().copied().collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), names.len(), "two names share a colour: {a:?}");
        assert!(
            !a.values().any(|&i| i == 7),
            "grey is for chance rows: {a:?}"
        );
        // A name alone, or among others that do not collide with it, keeps its own colour.
        assert_eq!(colours(["eb-drift"])["eb-drift"], a["eb-drift"]);
        // Repeated names are one label.
        assert_eq!(colours(["x", "x"]).len(), 1);
        // More names than colours: all distinct still (plotters' palette after Tableau's).
        let many: Vec<String> = (0..30).map(|i| format!("run {i}")).collect();
        let m = colours(many.iter().map(String::as_str));
        let mut v: Vec<usize> = m.values().copied().collect();
        v.sort_unstable();
        v.dedup();
        assert_eq!(v.len(), 30);
    }
}

//! A figure drawn with plotters into a file: SVG, or PNG with an embedded font (no system font
//! library is needed), written atomically; an SVG is well-formed XML whatever text it draws
//! ([`super::text`]).

use std::io::Write;
use std::path::Path;
use std::sync::Once;

use anyhow::{Context, Result, anyhow, bail};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::text;
use crate::files::write_atomic;

/// How a figure is laid out: for a screen (legends beside the charts, panels in a row), or for
/// a journal's single column (`--column`): [`COLUMN_WIDTH`] pixels wide, legends under the
/// charts, panels two a row, so that placed 89 mm wide its smallest text prints at 6 pt (the
/// 5–7 pt journals ask for): plotters' 12-pixel font is 9.68 pixels high in an SVG (its size
/// over 1.24), 9.68 × 89 / 400 mm = 2.15 mm = 6.1 pt. The screen layouts, 750–1,600 pixels
/// wide, print it at 1.5–3 pt there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    #[default]
    Screen,
    Column,
}

/// The width of a figure laid out for a journal's column (89 mm: 4.5 pixels per mm).
pub const COLUMN_WIDTH: u32 = 400;

impl Layout {
    /// `--column`'s value as a layout.
    pub fn column(yes: bool) -> Self {
        if yes { Self::Column } else { Self::Screen }
    }
}

/// `text` in lines of at most `width` pixels at `font` pixels (a character of DejaVu Sans is
/// about 0.6 of the font size wide on average), broken at spaces; a word longer than a line
/// keeps a line of its own.
pub(crate) fn wrap(text: &str, width: u32, font: u32) -> Vec<String> {
    let per_line = ((width as f64) / (0.6 * font as f64)).floor().max(1.0) as usize;
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let fits = line.chars().count() + 1 + word.chars().count() <= per_line;
        if line.is_empty() {
            line = word.to_string();
        } else if fits {
            line.push(' ');
            line.push_str(word);
        } else {
            lines.push(std::mem::replace(&mut line, word.to_string()));
        }
    }
    lines.push(line);
    lines
}

/// Something drawn on one canvas.
pub trait Figure {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    /// Draws onto `root`; `vector`: the file is an SVG (a figure may draw less detail there).
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>, vector: bool) -> Result<()>;
}

/// Draws `fig` into `out`: SVG, or PNG when `out` ends in `.png`.
pub(crate) fn render_figure<F: Figure>(fig: &F, out: &Path) -> Result<()> {
    register_font();
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("{}: cannot create its folder", out.display()))?;
    }
    let size = fig.size();
    let ext = out
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => {
            let svg = svg_string(fig)?;
            write_atomic(out, |w| Ok(w.write_all(svg.as_bytes())?))
        }
        Some("png") => {
            let mut rgb = vec![0u8; (size.0 * size.1 * 3) as usize];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
                fig.draw(&root, false)?;
                root.present().map_err(plot_err)?;
            }
            write_atomic(out, |w| {
                use image::ImageEncoder;
                image::codecs::png::PngEncoder::new(w)
                    .write_image(&rgb, size.0, size.1, image::ColorType::Rgb8)
                    .context("PNG encoding failed")
            })
        }
        _ => bail!("{}: the plot file must end in .svg or .png", out.display()),
    }
}

/// `fig` as an SVG document, well-formed XML whatever its text (titles, labels and names
/// through [`text::svg_document`]). Every SVG the binary writes is drawn here: no other code
/// uses plotters' SVG backend (`outputs::text`'s tests check it).
pub(crate) fn svg_string<F: Figure>(fig: &F) -> Result<String> {
    register_font();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, fig.size()).into_drawing_area();
        fig.draw(&root, true)?;
        root.present().map_err(plot_err)?;
    }
    Ok(text::svg_document(&svg))
}

/// Text needs a font (to measure it in SVG, to draw it in PNG): DejaVu Sans, embedded in the
/// binary.
fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

pub(crate) fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing the plot failed: {e:?}")
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn text_wraps_at_spaces_within_the_width() {
        // 100 px at 10 px: 16 characters a line.
        let lines = wrap("sub-01 → ses-2 (eb_drift, best checkpoint)", 100, 10);
        assert_eq!(lines, ["sub-01 → ses-2", "(eb_drift, best", "checkpoint)"]);
        assert_eq!(wrap("short", 100, 10), ["short"]);
        // A word longer than a line stands alone, unbroken.
        assert_eq!(
            wrap("a sub-COUNT00006_ses-baselineYear1Arm1 b", 100, 10),
            ["a", "sub-COUNT00006_ses-baselineYear1Arm1", "b"]
        );
    }
}

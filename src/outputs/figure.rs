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

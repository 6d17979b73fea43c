//! 2-D convolution (`groups == 1`, any stride, padding and dilation), forward and backward, as
//! one GEMM per image over a 2-D im2col in a per-thread scratch buffer:
//!
//! * forward: `y_i[O, L] = W[O, K] · col(x_i)[K, L] (+ b)`;
//! * input gradient: `dcol = Wᵀ[K, O] · dy_i[O, L]`, scattered back by col2im;
//! * weight gradient: `dW[O, K] = Σ_i dy_i[O, L] · col(x_i)ᵀ[L, K]`, summed over a fixed
//!   partition of the batch so that the result does not depend on the number of threads
//!   ([`batch_sums`](super::batch_sums), which also holds the bias gradient `db[o] = Σ_i Σ_l
//!   dy_i[o, l]`).
//!
//! with `K = C·KH·KW` and `L = OH·OW`. A large image is done in tiles of output rows, so that
//! the scratch buffer stays small (2 MB). Images run in parallel on the rayon pool; a batch
//! smaller than the pool hands the spare threads to the GEMMs instead.
//!
//! Where [`direct`](super::direct) applies (stride 1, on x86-64 with AVX-512 or AVX2 + FMA),
//! the forward pass and the weight gradient run there instead, and with AVX-512 the input
//! gradient too; where [`winograd`](super::winograd) applies (3×3, stride 1, many channels),
//! before both, all three passes. Every other shape stays here.

use std::ops::Range;

use gemm::Parallelism;
use rayon::prelude::*;

use super::batch_sums::{add_parts, batch_parts, bias_backward, bias_of_plane_sums, plane_sums};
use super::direct::{self, Isa, Pass};
use super::geom::Geom;
use super::kernels::{Mat, add_into, filled, inner_par, matmul, with_scratch, written_in};
use super::winograd;

/// The output positions `p` along one axis whose input index `p·stride + offset − pad` lies in
/// `0..size`: a range `lo..hi` (empty when there are none).
fn valid(out: usize, stride: usize, offset: usize, pad: usize, size: usize) -> (usize, usize) {
    let lo = pad.saturating_sub(offset).div_ceil(stride);
    let hi = (size + pad)
        .saturating_sub(offset)
        .div_ceil(stride)
        .min(out);
    (lo.min(hi), hi)
}

/// Bytes of im2col values per tile. Measured on the MNIST CNN's conv2 (one 663 KB im2col
/// matrix per image), whole images beat tiles that fit a 512 KiB L2 (the GEMMs get narrower),
/// so tiles only bound the scratch memory of large images.
const TILE_BYTES: usize = 2 << 20;

/// Output rows per tile (depends on the shapes only, so results never depend on the thread
/// count; gemm's micro-kernels, chosen per CPU, still set the summation order per machine).
fn tile_rows(g: &Geom) -> usize {
    (TILE_BYTES / (4 * g.k() * g.ow).max(1)).clamp(1, g.oh.max(1))
}

/// The tiles of output rows of one image.
fn tiles(g: &Geom) -> impl Iterator<Item = Range<usize>> + use<> {
    let (step, oh) = (tile_rows(g), g.oh);
    (0..oh).step_by(step).map(move |r| r..(r + step).min(oh))
}

/// Visits the im2col block of output rows `rows` of one image (`K × rows.len()·ow`, row-major)
/// segment by segment: `f(cols, Some(start))` for a run of positions of one output row reading
/// the input from index `start` on (every `stride[1]`-th value), `f(cols, None)` for positions
/// that fall into the padding.
fn for_each_segment(g: &Geom, rows: Range<usize>, mut f: impl FnMut(Range<usize>, Option<usize>)) {
    let ([sh, sw], [ph, pw], [dh, dw]) = (g.stride, g.pad, g.dil);
    let lt = rows.len() * g.ow;
    for c in 0..g.c {
        for i in 0..g.kh {
            let (oh_lo, oh_hi) = valid(g.oh, sh, i * dh, ph, g.h);
            let (lo, hi) = (
                oh_lo.clamp(rows.start, rows.end),
                oh_hi.clamp(rows.start, rows.end),
            );
            let (lo, hi) = (lo.min(hi), hi);
            for j in 0..g.kw {
                let row = ((c * g.kh + i) * g.kw + j) * lt;
                let (ow_lo, ow_hi) = valid(g.ow, sw, j * dw, pw, g.w);
                f(row..row + (lo - rows.start) * g.ow, None);
                f(row + (hi - rows.start) * g.ow..row + lt, None);
                for oh in lo..hi {
                    let ih = oh * sh + i * dh - ph;
                    let seg = row + (oh - rows.start) * g.ow;
                    f(seg..seg + ow_lo, None);
                    f(seg + ow_hi..seg + g.ow, None);
                    if ow_lo < ow_hi {
                        let iw = ow_lo * sw + j * dw - pw;
                        f(seg + ow_lo..seg + ow_hi, Some((c * g.h + ih) * g.w + iw));
                    }
                }
            }
        }
    }
}

/// `col = im2col(x)` for output rows `rows` of one image `x[c, h, w]`.
fn im2col(x: &[f32], g: &Geom, rows: Range<usize>, col: &mut [f32]) {
    let sw = g.stride[1];
    for_each_segment(g, rows, |cols, src| {
        let dst = &mut col[cols];
        match src {
            None => dst.fill(0.0),
            Some(s) if sw == 1 => copy(dst, &x[s..s + dst.len()]),
            Some(s) => {
                for (d, v) in dst.iter_mut().zip(x[s..].iter().step_by(sw)) {
                    *d = *v;
                }
            }
        }
    });
}

#[cfg(test)]
pub(super) fn im2col_for_test(x: &[f32], g: &Geom, col: &mut [f32]) {
    for rows in tiles(g) {
        let lt = rows.len() * g.ow;
        let mut tile = vec![f32::NAN; g.k() * lt];
        im2col(x, g, rows.clone(), &mut tile);
        for (r, chunk) in tile.chunks(lt.max(1)).enumerate() {
            col[r * g.l() + rows.start * g.ow..][..lt].copy_from_slice(chunk);
        }
    }
}

#[cfg(test)]
pub(super) fn col2im_for_test(col: &[f32], g: &Geom, x: &mut [f32]) {
    for rows in tiles(g) {
        let lt = rows.len() * g.ow;
        let tile: Vec<f32> = (0..g.k())
            .flat_map(|r| col[r * g.l() + rows.start * g.ow..][..lt].iter().copied())
            .collect();
        col2im(&tile, g, rows, x);
    }
}

/// `dst = src` for the short runs of im2col (an output row, often a few dozen values), eight
/// values at a time: `copy_from_slice` would call `memmove` for each run.
fn copy(dst: &mut [f32], src: &[f32]) {
    let mut d = dst.chunks_exact_mut(8);
    let mut s = src.chunks_exact(8);
    for (d, s) in (&mut d).zip(&mut s) {
        let s: &[f32; 8] = s.try_into().expect("chunks of 8");
        d.copy_from_slice(s);
    }
    for (d, s) in d.into_remainder().iter_mut().zip(s.remainder()) {
        *d = *s;
    }
}

/// `x += col2im(col)` for output rows `rows` of one image: the adjoint of [`im2col`].
fn col2im(col: &[f32], g: &Geom, rows: Range<usize>, x: &mut [f32]) {
    let sw = g.stride[1];
    for_each_segment(g, rows, |cols, dst| {
        let src = &col[cols];
        match dst {
            None => {}
            Some(d) if sw == 1 => add_into(&mut x[d..d + src.len()], src),
            Some(d) => {
                for (v, s) in x[d..].iter_mut().step_by(sw).zip(src) {
                    *v += s;
                }
            }
        }
    });
}

/// The columns of output rows `rows` of the `[rows_total, l]` row-major matrix `m` (a view).
fn columns<'a>(
    m: &'a [f32],
    rows_total: usize,
    l: usize,
    rows: &Range<usize>,
    ow: usize,
) -> Mat<'a> {
    Mat::strided(&m[rows.start * ow..], rows_total, rows.len() * ow, l, 1)
}

/// How a pass of a convolution runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// Winograd's F(2×2, 3×3) ([`winograd`](super::winograd)), its products on this
    /// instruction set's tiles if it has one.
    Winograd(Option<Isa>),
    /// Register tiles reading the padded image in place ([`direct`](super::direct)).
    Direct(Isa),
    /// im2col and GEMM (here): every other shape.
    Im2col,
}

/// The one place the choice is made: Winograd where it applies (3×3, stride 1, many channels),
/// else the direct tiles where they apply (stride 1 on x86-64 with AVX-512 or AVX2 + FMA; the
/// input gradient with AVX-512 only), else im2col and GEMM. Both switches
/// (`TRAINER_CONV_WINOGRAD=0`, `TRAINER_CONV_DIRECT=0`) act through their `usable`.
pub(crate) fn route(g: &Geom, pass: Pass) -> Route {
    if winograd::usable(g, pass) {
        return Route::Winograd(Isa::detect());
    }
    match direct::usable(g, pass) {
        Some(isa) => Route::Direct(isa),
        None => Route::Im2col,
    }
}

/// `conv2d(x, w) + b` as `[n, o, oh, ow]`, by its [`route`].
pub(super) fn forward(x: &[f32], w: &[f32], b: Option<&[f32]>, g: &Geom) -> Vec<f32> {
    match route(g, Pass::Forward) {
        Route::Winograd(isa) => winograd::forward(isa, x, w, b, g),
        Route::Direct(isa) => direct::forward(isa, x, w, b, g),
        Route::Im2col => im2col_forward(x, w, b, g),
    }
}

/// [`forward`] as im2col and GEMM.
pub(super) fn im2col_forward(x: &[f32], w: &[f32], b: Option<&[f32]>, g: &Geom) -> Vec<f32> {
    let (k, l) = (g.k(), g.l());
    if g.n * g.o * l == 0 {
        return vec![0.0; g.n * g.o * l];
    }
    let par = inner_par(g.n);
    let wm = Mat::rows(w, g.o, k);
    let image = |start: usize| &x[start / (g.o * l) * g.image()..][..g.image()];
    // Each image's output is set to its bias (or 0) by the task that computes it, while it is
    // in cache, instead of zeroing the whole batch's output first.
    // SAFETY: `filled` writes every value of the image's chunk before anything else.
    unsafe {
        written_in(g.n * g.o * l, g.o * l, |start, yi| {
            let (yi, xi) = (filled(yi, 0.0), image(start));
            if let Some(b) = b {
                for (row, &bias) in yi.chunks_mut(l).zip(b) {
                    row.fill(bias);
                }
            }
            forward_image(xi, wm, b.is_some(), g, par, yi);
        })
    }
}

/// One image's `y_i[O, L] = W · col(x_i)`, added to `y_i` when `bias` (which it then holds).
fn forward_image(xi: &[f32], wm: Mat, bias: bool, g: &Geom, par: Parallelism, yi: &mut [f32]) {
    let (k, l) = (g.k(), g.l());
    for rows in tiles(g) {
        let dst = &mut yi[rows.start * g.ow..];
        if g.pointwise() {
            let xm = columns(xi, k, l, &rows, g.ow);
            matmul(dst, l, wm, xm, bias, par);
        } else {
            let lt = rows.len() * g.ow;
            with_scratch(k * lt, |col| {
                im2col(xi, g, rows.clone(), col);
                matmul(dst, l, wm, Mat::rows(col, k, lt), bias, par);
            });
        }
    }
}

/// The gradient with respect to the input `[n, c, h, w]`, given `dy` `[n, o, oh, ow]`.
pub(super) fn x_backward(dy: &[f32], w: &[f32], g: &Geom) -> Vec<f32> {
    match route(g, Pass::Input) {
        Route::Winograd(isa) => winograd::input_backward(isa, dy, w, g),
        Route::Direct(isa) => direct::input_backward(isa, dy, w, g),
        Route::Im2col => im2col_x_backward(dy, w, g),
    }
}

/// [`x_backward`] as im2col's transpose: GEMM, then col2im.
pub(crate) fn im2col_x_backward(dy: &[f32], w: &[f32], g: &Geom) -> Vec<f32> {
    let (k, l) = (g.k(), g.l());
    if g.n * g.image() == 0 || l == 0 {
        return vec![0.0; g.n * g.image()];
    }
    let par = inner_par(g.n);
    let wt = Mat::rows(w, g.o, k).t();
    let image_dy = |start: usize| &dy[start / g.image() * g.o * l..][..g.o * l];
    // Each image's gradient is zeroed by the task that accumulates it, while it is in cache.
    // SAFETY: `filled` writes every value of the image's chunk before anything else.
    unsafe {
        written_in(g.n * g.image(), g.image(), |start, dxi| {
            let (dxi, dyi) = (filled(dxi, 0.0), image_dy(start));
            if g.pointwise() {
                matmul(dxi, l, wt, Mat::rows(dyi, g.o, l), false, par);
                return;
            }
            for rows in tiles(g) {
                let lt = rows.len() * g.ow;
                with_scratch(k * lt, |col| {
                    matmul(col, lt, wt, columns(dyi, g.o, l, &rows, g.ow), false, par);
                    col2im(col, g, rows, dxi);
                });
            }
        })
    }
}

/// The gradients with respect to the weight `[o, c, kh, kw]` and the bias `[o]`: the bias
/// gradient is summed from each image's output gradient while the weight gradient has it in
/// cache, and is [`bias_backward`]'s, bit for bit.
pub fn weight_backward(x: &[f32], dy: &[f32], g: &Geom) -> (Vec<f32>, Vec<f32>) {
    match route(g, Pass::Weight) {
        Route::Winograd(isa) => winograd::weight_backward(isa, x, dy, g),
        Route::Direct(isa) => direct::weight_backward(isa, x, dy, g),
        Route::Im2col => im2col_weight_backward(x, dy, g),
    }
}

/// [`weight_backward`] as im2col and GEMM.
pub(crate) fn im2col_weight_backward(x: &[f32], dy: &[f32], g: &Geom) -> (Vec<f32>, Vec<f32>) {
    let (k, l, size) = (g.k(), g.l(), g.o * g.k());
    if g.n == 0 || size == 0 || l == 0 {
        return (vec![0.0; size], bias_backward(dy, g.n, g.o, l));
    }
    let parts = batch_parts(g.n, size);
    let par = inner_par(parts.len());
    let (partials, sums): (Vec<Vec<f32>>, Vec<Vec<f32>>) = parts
        .into_par_iter()
        .map(|images| {
            let mut acc = vec![0.0; size];
            let mut sums = Vec::with_capacity(images.len() * g.o);
            let mut first = true;
            for i in images {
                let dyi = &dy[i * g.o * l..(i + 1) * g.o * l];
                let xi = &x[i * g.image()..(i + 1) * g.image()];
                for rows in tiles(g) {
                    let dym = columns(dyi, g.o, l, &rows, g.ow);
                    if g.pointwise() {
                        let xm = columns(xi, k, l, &rows, g.ow);
                        matmul(&mut acc, k, dym, xm.t(), !first, par);
                    } else {
                        let lt = rows.len() * g.ow;
                        with_scratch(k * lt, |col| {
                            im2col(xi, g, rows.clone(), col);
                            matmul(&mut acc, k, dym, Mat::rows(col, k, lt).t(), !first, par);
                        });
                    }
                    first = false;
                }
                plane_sums(dyi, g.o, l, &mut sums);
            }
            (acc, sums)
        })
        .unzip();
    (
        add_parts(partials, size),
        bias_of_plane_sums(&sums.concat(), g.n, g.o),
    )
}

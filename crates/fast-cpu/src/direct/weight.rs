//! The weight gradient: `dW[tap][o] = Σ_i Σ_q x_i[q + tap] · dy_i[q][o]`, in tiles of `MR`
//! taps × `NV` vectors of output channels, over a fixed partition of the batch; and the bias
//! gradient, from each image's output gradient while it is in cache for those tiles.

use rayon::prelude::*;

use std::ops::Range;

use super::super::batch_sums::{
    add_parts, batch_parts, bias_backward, bias_of_plane_sums, plane_sums as sum_planes,
};
use super::super::geom::Geom;
use super::super::kernels::{threads, with_scratch};
use super::Isa;
use super::flat::Flat;
#[cfg(target_arch = "x86_64")]
use super::simd::{avx2, avx512};

/// Bytes of output-gradient rows a weight tile goes through before the next tile takes them.
const CHUNK_BYTES: usize = 16 << 10;

/// The gradients with respect to the weight `[o, c, kh, kw]` and the bias `[o]` (`usable` gave
/// `isa`). The bias gradient is [`bias_backward`]'s, bit for bit: the same sum of each plane,
/// the planes' sums added in image order.
pub(crate) fn weight_backward(isa: Isa, x: &[f32], dy: &[f32], g: &Geom) -> (Vec<f32>, Vec<f32>) {
    if g.n == 0 || g.o * g.k() == 0 {
        let bias = bias_backward(dy, g.n, g.o, g.oh * g.ow);
        return (vec![0.0; g.o * g.k()], bias);
    }
    let (lanes, (mr, nv)) = isa.weight_sizes(g.o);
    let flat = Flat::new([g.c, g.h, g.w], g.pad, g.dil, [g.kh, g.kw], 1);
    let k = g.k();
    let (o_pad, k_pad) = (g.o.div_ceil(nv * lanes) * nv * lanes, k.div_ceil(mr) * mr);
    let pads = (o_pad, k_pad);
    let parts = batch_parts(g.n, k_pad * o_pad);
    let count = parts.len();
    let (partials, plane_sums): (Vec<Vec<f32>>, Vec<Vec<f32>>) = parts
        .into_par_iter()
        .map(|images| part_gradient(isa, &flat, (x, dy), g, images, pads, count))
        .unzip();
    let total = add_parts(partials, k_pad * o_pad);
    let mut dw = Vec::with_capacity(g.o * k);
    for o in 0..g.o {
        dw.extend((0..k).map(|t| total[t * o_pad + o]));
    }
    // `[n][o]`: the parts are consecutive images, in order.
    (dw, bias_of_plane_sums(&plane_sums.concat(), g.n, g.o))
}

/// The weight gradient `[k_pad][o_pad]` of one part (`images`) of the batch, one of `parts`,
/// and the sums of its output-gradient planes (`[images][o]`).
fn part_gradient(
    isa: Isa,
    flat: &Flat,
    (x, dy): (&[f32], &[f32]),
    g: &Geom,
    images: Range<usize>,
    (o_pad, k_pad): (usize, usize),
    parts: usize,
) -> (Vec<f32>, Vec<f32>) {
    let (lanes, (mr, nv)) = isa.weight_sizes(g.o);
    let (plane, image) = (g.oh * g.ow, g.image());
    // One image at a time: its input in the flat layout, then its output gradient transposed
    // to `[q][o_pad]` on the same positions (zeros in the padded columns and channels), in
    // this thread's scratch buffer, where its tiles then find them (in L2).
    let (x_len, dy_len) = (flat.len, flat.positions * o_pad);
    let mut partial = vec![0.0; k_pad * o_pad];
    let mut plane_sums = Vec::with_capacity(images.len() * g.o);
    let blocks = k_pad / mr;
    // Groups of tap blocks run in parallel when there are fewer parts than threads, and each
    // goes through the positions in chunks whose gradient rows stay in L1 across its blocks.
    let group = blocks.div_ceil(threads().div_ceil(parts).max(1));
    let chunk = (CHUNK_BYTES / (4 * o_pad)).max(16);
    // Each chunk's runs of positions in the output (the padded columns left out).
    let chunks: Vec<(usize, Vec<(usize, usize)>)> = (0..flat.positions)
        .step_by(chunk)
        .map(|q0| (q0, runs(flat, q0..(q0 + chunk).min(flat.positions))))
        .collect();
    let window = |b: usize| -> Vec<usize> {
        (0..mr)
            .map(|t| flat.taps.get(b * mr + t).copied().unwrap_or(0))
            .collect()
    };
    let groups: Vec<Vec<Vec<usize>>> = (0..blocks)
        .step_by(group)
        .map(|b0| (b0..blocks.min(b0 + group)).map(window).collect())
        .collect();
    with_scratch(x_len + dy_len, |buf| {
        let (xs, dys) = buf.split_at_mut(x_len);
        for (s, i) in images.enumerate() {
            flat.fill(&x[i * image..][..image], xs);
            let dyi = &dy[i * g.o * plane..][..g.o * plane];
            flat.spread_transposed(dyi, o_pad, dys);
            sum_planes(dyi, g.o, plane, &mut plane_sums);
            let (xs, dys) = (&*xs, &*dys);
            partial
                .par_chunks_mut(group * mr * o_pad)
                .zip(&groups)
                .for_each(|(rows, taps)| {
                    for (ci, (q0, runs)) in chunks.iter().enumerate() {
                        for (bi, taps) in taps.iter().enumerate() {
                            for o0 in (0..o_pad).step_by(nv * lanes) {
                                // SAFETY: the flat input holds `positions + max tap` values
                                // and the transposed gradient `positions` rows of `o_pad`;
                                // `rows` holds the group's `mr` rows of `o_pad` per block,
                                // and `o0 + nv · lanes ≤ o_pad`.
                                unsafe {
                                    weight_tile(
                                        isa,
                                        xs[*q0..].as_ptr(),
                                        taps,
                                        dys[q0 * o_pad + o0..].as_ptr(),
                                        (o_pad, runs),
                                        rows.as_mut_ptr().add(bi * mr * o_pad + o0),
                                        s == 0 && ci == 0,
                                    )
                                }
                            }
                        }
                    }
                });
        }
    });
    (partial, plane_sums)
}

/// The runs `(start, len)` of output positions in `chunk` (flat positions), relative to its
/// start: every row's first `ow` columns, the padded columns after them left out (their
/// output gradient is zero).
fn runs(flat: &Flat, chunk: Range<usize>) -> Vec<(usize, usize)> {
    let rows = chunk.start / flat.wp..chunk.end.div_ceil(flat.wp).min(flat.oh);
    rows.filter_map(|r| {
        let lo = (r * flat.wp).max(chunk.start);
        let hi = (r * flat.wp + flat.ow).min(chunk.end);
        (lo < hi).then(|| (lo - chunk.start, hi - lo))
    })
    .collect()
}

/// [`simd`](super::simd)'s weight tile for `isa`: taps `taps` (taps past the last read the first
/// input value and land in the padding rows of the output), one image.
unsafe fn weight_tile(
    isa: Isa,
    x: *const f32,
    taps: &[usize],
    dyt: *const f32,
    (ld, runs): (usize, &[(usize, usize)]),
    out: *mut f32,
    first: bool,
) {
    #[cfg(target_arch = "x86_64")]
    {
        const A: (usize, usize) = avx512::WEIGHT;
        const N: (usize, usize) = avx512::WEIGHT_NARROW;
        const B: (usize, usize) = avx2::WEIGHT;
        // SAFETY: as the caller's; `isa` was checked to be available on this CPU.
        unsafe {
            match isa {
                // The two AVX-512 tiles differ in their taps (`Isa::weight_sizes`).
                Isa::Avx512 if taps.len() == N.0 => {
                    let taps = taps.try_into().expect("a tile's taps");
                    avx512::weight::<{ N.0 }, { N.1 }>(x, taps, dyt, ld, runs, out, ld, first)
                }
                Isa::Avx512 => {
                    let taps = taps.try_into().expect("a tile's taps");
                    avx512::weight::<{ A.0 }, { A.1 }>(x, taps, dyt, ld, runs, out, ld, first)
                }
                Isa::Avx2 => {
                    let taps = taps.try_into().expect("a tile's taps");
                    avx2::weight::<{ B.0 }, { B.1 }>(x, taps, dyt, ld, runs, out, ld, first)
                }
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (isa, x, taps, dyt, ld, runs, out, first);
}

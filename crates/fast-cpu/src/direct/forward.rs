//! The forward pass: `y[o][q] = b[o] + Σ_tap w[o][tap] · x[q + tap]`, in tiles of `MR`
//! channels × `NV` vectors of flat positions, images (or, for fewer images than threads, runs
//! of tiles) in parallel.

use rayon::prelude::*;

use super::super::geom::Geom;
use super::super::kernels::{Shared, threads, with_scratch};
use super::Isa;
use super::flat::Flat;
use super::simd::Segment;
#[cfg(target_arch = "x86_64")]
use super::simd::{avx2, avx512};

/// Weights `at(o, tap)` packed for the forward tiles: `[o / mr][tap][o % mr]`, channels past
/// `o` zero.
pub(super) fn pack(o: usize, taps: usize, mr: usize, at: impl Fn(usize, usize) -> f32) -> Vec<f32> {
    let blocks = o.div_ceil(mr);
    let mut packed = vec![0.0; blocks * taps * mr];
    for (b, block) in packed.chunks_exact_mut(taps * mr).enumerate() {
        for (t, row) in block.chunks_exact_mut(mr).enumerate() {
            for (m, v) in row.iter_mut().enumerate() {
                if b * mr + m < o {
                    *v = at(b * mr + m, t);
                }
            }
        }
    }
    packed
}

/// `[n, o, oh, ow]`: every image of `input` (`[n, c, h, w]` in `flat`'s geometry) convolved
/// with `packed` (see [`pack`]) plus `bias` (`o` values or none).
pub(super) fn convolve(
    isa: Isa,
    input: &[f32],
    n: usize,
    flat: &Flat,
    packed: &[f32],
    bias: Option<&[f32]>,
    o: usize,
) -> Vec<f32> {
    let (lanes, (mr, nv)) = isa.sizes();
    let (plane, image) = (flat.oh * flat.ow, flat.c * flat.h * flat.w);
    let blocks = o.div_ceil(mr);
    let mut bias_packed = vec![0.0; blocks * mr];
    if let Some(b) = bias {
        bias_packed[..o].copy_from_slice(b);
    }
    // Where each tile's vectors come from and go: the same for every image and channel block.
    let layout = flat.tiles(nv, lanes);
    let tiles = layout.len();
    // Tasks: images, each cut into chunks of tiles when there are fewer images than threads.
    let chunks = threads().div_ceil(n.max(1)).clamp(1, tiles.max(1));
    let per = tiles.div_ceil(chunks);
    let mut y: Vec<f32> = Vec::with_capacity(n * o * plane);
    let out = Shared(y.as_mut_ptr());
    let ntaps = flat.taps.len();
    (0..n * chunks).into_par_iter().for_each(|task| {
        let (i, chunk) = (task / chunks, task % chunks);
        let yi = out.at(i * o * plane);
        with_scratch(flat.len, |xp| {
            flat.fill(&input[i * image..][..image], xp);
            let tiles = chunk * per..((chunk + 1) * per).min(tiles);
            let run = |b: usize, t: usize| {
                let rows = (o - b * mr).min(mr);
                let tile = &layout[t];
                // SAFETY: `fill` wrote `len ≥ positions + max tap` values, and every tile's
                // vectors start at or below `positions - lanes` (`Flat::tiles`), so every
                // load is inside `xp`; `packed` holds `ntaps · mr` values per block, the bias
                // `mr` per block; the segments name values of rows `oh < OH`, columns
                // `ow < OW` of channels `b·mr + m < o` of image `i`, inside `y`'s
                // capacity, and no other task writes this tile's positions.
                unsafe {
                    forward_tile(
                        isa,
                        (packed.as_ptr().add(b * ntaps * mr), &flat.taps),
                        (xp.as_ptr(), &tile.starts),
                        bias_packed.as_ptr().add(b * mr),
                        yi.add(b * mr * plane),
                        (plane, rows),
                        &tile.segments,
                    )
                }
            };
            // Channel blocks outside: a block's packed weights stay in L1 across the tiles.
            for b in 0..blocks {
                for t in tiles.clone() {
                    run(b, t);
                }
            }
        })
    });
    // SAFETY: the tiles' segments cover every position of every channel of every image.
    unsafe { y.set_len(n * o * plane) };
    y
}

/// [`simd`](super::simd)'s forward tile for `isa`: a narrower one for a last block of
/// `rows ≤ FORWARD_FEW` channels (weights still packed for the wide one).
unsafe fn forward_tile(
    isa: Isa,
    (w, taps): (*const f32, &[usize]),
    x: (*const f32, &[usize]),
    bias: *const f32,
    y: *mut f32,
    (plane, rows): (usize, usize),
    segments: &[Segment],
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as the caller's; `isa` was checked to be available on this CPU.
    unsafe {
        super::simd::call_tile!(
            isa,
            rows,
            forward,
            FORWARD,
            FORWARD_FEW,
            w,
            (taps, x, bias, y, plane, rows, segments)
        )
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (isa, w, taps, x, bias, y, plane, rows, segments);
}

/// `conv2d(x, w) + b` as `[n, o, oh, ow]` (`usable` gave `isa`).
pub(crate) fn forward(isa: Isa, x: &[f32], w: &[f32], b: Option<&[f32]>, g: &Geom) -> Vec<f32> {
    let (lanes, (mr, nv)) = isa.sizes();
    let flat = Flat::new([g.c, g.h, g.w], g.pad, g.dil, [g.kh, g.kw], nv * lanes);
    debug_assert_eq!((flat.oh, flat.ow), (g.oh, g.ow));
    let k = g.k();
    let packed = pack(g.o, k, mr, |o, t| w[o * k + t]);
    convolve(isa, x, g.n, &flat, &packed, b, g.o)
}

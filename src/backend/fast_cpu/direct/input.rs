//! The input gradient, `dx[c][y][x] = Σ_o Σ_(i,j) w[o][c][i][j] · dy[o][y + p − i·d][x + p − j·d]`,
//! as a scatter of the output gradient: every output position `q` adds, for every tap, the
//! `c` values `Σ_o w[o][c][tap] · dy[o][q]` to the input position the tap read in the forward
//! pass. It is im2col's GEMM (`Wᵀ · dy`) and col2im in one tile, with no column matrix.
//!
//! Both sides use the forward pass's flat geometry ([`Flat`]): rows of the padded input's width
//! `wp`, so that output position `(r, col)` is `q = r · wp + col` in the output gradient and
//! tap `(i, j)` adds to `q + i·d·wp + j·d` in the padded input gradient, whose border is
//! dropped at the end. The output gradient's columns `ow..wp` are zeros: they add nothing.
//! Each value is summed over the channels `o` in a tile, then over the taps in tap order,
//! an order fixed by the shapes.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::super::conv::Geom;
use super::super::kernels::{threads, with_scratch};
use super::Isa;
use super::flat::Flat;
use super::forward::{Shared, pack};
#[cfg(target_arch = "x86_64")]
use super::simd::{avx2, avx512};

/// The gradient with respect to the input `[n, c, h, w]`, given `dy` `[n, o, oh, ow]`
/// (`usable` gave `isa`).
pub(crate) fn input_backward(isa: Isa, dy: &[f32], w: &[f32], g: &Geom) -> Vec<f32> {
    let (lanes, (mr, nv)) = isa.scatter_sizes();
    let tile = nv * lanes;
    // The forward geometry of one input channel gives the padded sizes and the tap offsets.
    let flat = Flat::new([1, g.h, g.w], g.pad, g.dil, [g.kh, g.kw], tile);
    let (wp, taps) = (flat.wp, &flat.taps);
    // Output-gradient channels at a pitch of whole tiles, zeros past the last row; padded
    // input-gradient channels wide enough for every tap of every tile.
    let ld = flat.positions;
    let plane = ld + taps.iter().max().copied().unwrap_or(0);
    let blocks = g.c.div_ceil(mr);
    let k = g.k();
    // Weights `[tap][block][o][mr]`: w[o][c][tap] for channel c = block · mr + m.
    let per_tap = blocks * g.o * mr;
    let packed: Vec<f32> = (0..taps.len())
        .flat_map(|t| pack(g.c, g.o, mr, move |c, o| w[o * k + c * taps.len() + t]))
        .collect();
    debug_assert_eq!(packed.len(), taps.len() * per_tap);
    let (image_dy, image_dx, plane_dx) = (g.o * g.oh * g.ow, g.c * g.h * g.w, g.h * g.w);
    // Tasks: images, each cut into runs of channel blocks when there are fewer images than
    // threads (the blocks write disjoint channels).
    let chunks = threads().div_ceil(g.n.max(1)).clamp(1, blocks.max(1));
    let per = blocks.div_ceil(chunks);
    let mut dx: Vec<f32> = Vec::with_capacity(g.n * image_dx);
    let out = Shared(dx.as_mut_ptr());
    (0..g.n * chunks).into_par_iter().for_each(|task| {
        let (i, chunk) = (task / chunks, task % chunks);
        let blocks = chunk * per..((chunk + 1) * per).min(blocks);
        let channels = blocks.start * mr..(blocks.end * mr).min(g.c);
        if channels.is_empty() {
            return;
        }
        let dyi = &dy[i * image_dy..][..image_dy];
        // SAFETY: these channels of image `i` are inside `dx`'s capacity, and no other task
        // writes them.
        let dxi = unsafe {
            std::slice::from_raw_parts_mut(
                out.at(i * image_dx + channels.start * plane_dx)
                    .cast::<MaybeUninit<f32>>(),
                channels.len() * plane_dx,
            )
        };
        with_scratch(g.o * ld + blocks.len() * mr * plane, |buf| {
            let (dyf, dxp) = buf.split_at_mut(g.o * ld);
            spread(dyi, g, wp, ld, dyf);
            dxp.fill(0.0);
            for q0 in (0..ld).step_by(tile) {
                for (t, &offset) in taps.iter().enumerate() {
                    for (j, b) in blocks.clone().enumerate() {
                        // SAFETY: `dyf` holds `o` channels of `ld ≥ q0 + tile` values;
                        // `packed` `o · mr` per block and tap; `dxp` `mr` planes per block of
                        // `plane ≥ q0 + offset + tile` values.
                        unsafe {
                            scatter_tile(
                                isa,
                                packed.as_ptr().add(t * per_tap + b * g.o * mr),
                                dyf.as_ptr().add(q0),
                                ld,
                                g.o,
                                dxp.as_mut_ptr().add(j * mr * plane + q0 + offset),
                                plane,
                            )
                        }
                    }
                }
            }
            gather(dxp, g, flat.wp, plane, dxi);
        })
    });
    // SAFETY: the tasks' channels cover every channel of every image, and `gather` wrote
    // every value of them.
    unsafe { dx.set_len(g.n * image_dx) };
    dx
}

/// Writes one image's `dy` (`[o, oh, ow]`) into `out`: channels `ld` values apart, rows `wp`
/// apart, zeros elsewhere.
fn spread(dy: &[f32], g: &Geom, wp: usize, ld: usize, out: &mut [f32]) {
    for (src, dst) in dy.chunks_exact(g.oh * g.ow).zip(out.chunks_exact_mut(ld)) {
        let (rows, tail) = dst.split_at_mut(g.oh * wp);
        for (src, dst) in src.chunks_exact(g.ow).zip(rows.chunks_exact_mut(wp)) {
            dst[..g.ow].copy_from_slice(src);
            dst[g.ow..].fill(0.0);
        }
        tail.fill(0.0);
    }
}

/// Writes every value of `dx` (`[channels, h, w]`, as many channels as it holds): the
/// interior of the padded input gradient `dxp` (planes `plane` apart, rows `wp` apart).
fn gather(dxp: &[f32], g: &Geom, wp: usize, plane: usize, dx: &mut [MaybeUninit<f32>]) {
    let [ph, pw] = g.pad;
    for (src, dst) in dxp.chunks(plane).zip(dx.chunks_exact_mut(g.h * g.w)) {
        for (r, dst) in dst.chunks_exact_mut(g.w).enumerate() {
            let start = (r + ph) * wp + pw;
            for (d, s) in dst.iter_mut().zip(&src[start..start + g.w]) {
                d.write(*s);
            }
        }
    }
}

/// [`simd`](super::simd)'s input-gradient tile for `isa`.
unsafe fn scatter_tile(
    isa: Isa,
    w: *const f32,
    dy: *const f32,
    ld: usize,
    k: usize,
    dx: *mut f32,
    plane: usize,
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as the caller's; `isa` was checked to be available on this CPU.
    unsafe {
        match isa {
            Isa::Avx512 => avx512::scatter::<{ avx512::SCATTER.0 }, { avx512::SCATTER.1 }>(
                w, dy, ld, k, dx, plane,
            ),
            Isa::Avx2 => {
                avx2::scatter::<{ avx2::SCATTER.0 }, { avx2::SCATTER.1 }>(w, dy, ld, k, dx, plane)
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (isa, w, dy, ld, k, dx, plane);
}

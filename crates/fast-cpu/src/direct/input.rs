//! The input gradient, `dx[c][y][x] = Σ_o Σ_(i,j) w[o][c][i][j] · dy[o][y + p − i·d][x + p − j·d]`,
//! as a scatter of the output gradient: every output position `q` adds, for every tap, the
//! `c` values `Σ_o w[o][c][tap] · dy[o][q]` to the input position the tap read in the forward
//! pass. It is im2col's GEMM (`Wᵀ · dy`) and col2im in one tile, with no column matrix.
//!
//! Both sides use the forward pass's flat geometry ([`Flat`]): rows of the padded input's width
//! `wp`, so that output position `(r, col)` is `q = r · wp + col` in the output gradient and
//! tap `(i, j)` adds to `q + i·d·wp + j·d` in the padded input gradient, whose border is
//! dropped at the end. The output gradient's columns `ow..wp` are zeros: they add nothing.
//! Where the tiles go by rows ([`Flat::tiles`]), each vector is a whole vector of an output
//! row instead: the output gradient is read where it is, and no zero column is multiplied.
//! Each value is summed over the channels `o` in a tile, then over the taps in tap order,
//! an order fixed by the shapes.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::super::geom::Geom;
use super::super::kernels::{Shared, threads, with_scratch};
use super::Isa;
use super::flat::Flat;
use super::forward::pack;
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
    // Padded input-gradient channels wide enough for every tap of every tile.
    let plane = flat.positions + taps.iter().max().copied().unwrap_or(0);
    // Where each tile reads the output gradient and adds to the padded input gradient: by
    // rows (`Flat::row_tiles`), the output gradient read where it is; else at consecutive
    // flat positions, the output gradient spread onto them (channels `ld` apart, zeros past
    // each row and past the last one).
    let by_rows = flat.row_tiles(nv, lanes);
    let ld = if by_rows.is_some() {
        g.oh * g.ow
    } else {
        flat.positions
    };
    let tiles: Vec<Scatter> = match &by_rows {
        Some(rows) => rows
            .iter()
            .map(|tile| Scatter {
                dy_at: tile.vectors.iter().map(|&k| k * lanes).collect(),
                dx_at: tile
                    .vectors
                    .iter()
                    .map(|&k| flat.row_start(k, lanes))
                    .collect(),
                count: tile.count,
            })
            .collect(),
        None => (0..flat.positions)
            .step_by(tile)
            .map(|q0| {
                let at: Vec<usize> = (0..nv).map(|v| q0 + v * lanes).collect();
                Scatter {
                    dy_at: at.clone(),
                    dx_at: at,
                    count: nv,
                }
            })
            .collect(),
    };
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
        let spread_len = if by_rows.is_some() { 0 } else { g.o * ld };
        with_scratch(spread_len + blocks.len() * mr * plane, |buf| {
            let (dyf, dxp) = buf.split_at_mut(spread_len);
            let source: &[f32] = if by_rows.is_some() {
                dyi
            } else {
                spread(dyi, g, wp, ld, dyf);
                dyf
            };
            dxp.fill(0.0);
            for tile in &tiles {
                for (t, &offset) in taps.iter().enumerate() {
                    for (j, b) in blocks.clone().enumerate() {
                        let rows = (g.c - b * mr).min(mr);
                        // SAFETY: `source` holds `o` channels `ld` apart, and every vector's
                        // `dy_at + lanes ≤ ld` (by rows `oh · ow`, else `positions`);
                        // `packed` holds `o · mr` values per block and tap; `dxp` `mr`
                        // planes per block of `plane ≥ dx_at + lanes + offset` values.
                        unsafe {
                            scatter_tile(
                                isa,
                                packed.as_ptr().add(t * per_tap + b * g.o * mr),
                                (source.as_ptr(), &tile.dy_at),
                                (ld, g.o),
                                (dxp.as_mut_ptr().add(j * mr * plane + offset), &tile.dx_at),
                                (tile.count, plane, rows),
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

/// One input-gradient tile's vectors: where each reads the output gradient (from a
/// channel's start) and adds to the padded input gradient (from a channel's start, before the
/// tap's offset), and how many are real (the last tile by rows may repeat its last vector).
struct Scatter {
    dy_at: Vec<usize>,
    dx_at: Vec<usize>,
    count: usize,
}

/// [`simd`](super::simd)'s input-gradient tile for `isa`: a narrower one for a last block of
/// `rows ≤ SCATTER_FEW` channels (weights still packed for the wide one).
unsafe fn scatter_tile(
    isa: Isa,
    w: *const f32,
    dy: (*const f32, &[usize]),
    (ld, k): (usize, usize),
    (dx, dx_at): (*mut f32, &[usize]),
    (count, plane, rows): (usize, usize, usize),
) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as the caller's; `isa` was checked to be available on this CPU.
    unsafe {
        let dx = (dx, dx_at, count);
        super::simd::call_tile!(
            isa,
            rows,
            scatter,
            SCATTER,
            SCATTER_FEW,
            w,
            (dy, ld, k, dx, plane)
        )
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (isa, w, dy, ld, k, dx, dx_at, count, plane, rows);
}

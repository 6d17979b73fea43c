//! The transforms of F(2×2, 3×3) around the products ([`super`]): the input's (`Bᵀ d B`),
//! the output's (`Aᵀ M A`) and, for the weight gradient, the output gradient's (`A dY Aᵀ`).
//!
//! A row of tiles is short (12 or 13 for the MNIST CNN), and loops over a row of run-time
//! length spent more time starting, checking bounds and ending than computing: written with
//! steps of four tiles, both transforms took 1.5–2 times as long as this. So each transform is
//! compiled for every row width up to [`MAX_ROW_TILES`] (`TW`): each row is an array of `TW`
//! values, and the compiler unrolls every step into vector instructions. Two more things cost
//! as much as the arithmetic: a padded row copied onto the stack just before its values were
//! read back stalled the reads on store-to-load forwarding (rows without padding are read in
//! place now), and `V` and `D` laid out `[ξ][c][t]` spread each channel's writes over 16
//! regions of the buffer (`[c][ξ][t]` halved the output gradient's transform).

use std::array::from_fn;
use std::ops::Range;

use super::super::direct::Isa;
use super::prefetch::prefetch;
use super::{Plan, stride};

/// The widest row of tiles the transforms are compiled for (outputs of up to 32 columns).
pub(super) const MAX_ROW_TILES: usize = 16;

/// `f::<TW>(args)`, or with `padded` `f::<TW, { 2·TW + 2 }>(args)`, for the row width `tw`:
/// the call of the copy of `f` compiled for it.
macro_rules! by_row_width {
    ($tw:expr, $f:ident, padded $args:tt) => {
        by_row_width!(@padded $tw, $f $args; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
    };
    ($tw:expr, $f:ident $args:tt) => {
        by_row_width!(@ $tw, $f $args; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
    };
    (@ $tw:expr, $f:ident $args:tt; $($n:literal)*) => {
        match $tw {
            $($n => $f::<$n> $args,)*
            tw => unreachable!("rows of {tw} tiles (`fits` allows {MAX_ROW_TILES})"),
        }
    };
    (@padded $tw:expr, $f:ident $args:tt; $($n:literal)*) => {
        match $tw {
            $($n => $f::<$n, { 2 * $n + 2 }> $args,)*
            tw => unreachable!("rows of {tw} tiles (`fits` allows {MAX_ROW_TILES})"),
        }
    };
}

/// Scratch values [`input`] needs besides `V`, for `rows` tile rows of `tw` tiles: the
/// block's padded rows and their horizontal transforms.
pub(super) fn work(tw: usize, rows: usize) -> usize {
    (2 * rows + 2) * (4 * tw + 2 * tw + 2)
}

/// `V[c][ξ][t] = (Bᵀ d B)[ξ]` of the input tiles `d` of the tile rows `rows` of one image `x`
/// (`[c, h, w]`), `t` counting tiles from the first of them in rows of
/// [`stride`](super::stride) values (the values past the tiles left as they are); `work` holds
/// [`work`] values.
/// With AVX-512 when `isa` says so (the CPU has it), else portable code.
pub(super) fn input(
    isa: Option<Isa>,
    plan: &Plan,
    x: &[f32],
    rows: Range<usize>,
    v: &mut [f32],
    work: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if isa == Some(Isa::Avx512) {
        // SAFETY: the CPU has AVX-512F (the caller's `isa`); `fits` keeps rows to 16 tiles.
        return unsafe { super::avx512::input(plan, x, rows, v) };
    }
    let _ = isa;
    by_row_width!(plan.tw, input_rows, padded(plan, x, rows, v, work))
}

/// [`input`] for rows of `TW` tiles, which read padded rows of `PW = 2·TW + 2` columns.
fn input_rows<const TW: usize, const PW: usize>(
    plan: &Plan,
    x: &[f32],
    rows: Range<usize>,
    v: &mut [f32],
    work: &mut [f32],
) {
    let stride = stride(rows.len() * TW);
    let padded_rows = 2 * rows.len() + 2;
    let (padded, work) = work.split_at_mut(padded_rows * PW);
    let (padded, _) = padded.as_chunks_mut::<PW>();
    // `lines[4·y + s]`: column `s` of `d B` of every tile of the block's padded row `y`.
    let (lines, _) = work.as_chunks_mut::<TW>();
    let lines = &mut lines[..padded_rows * 4];
    let (pad, w) = (plan.pad[1], plan.w);
    // Input row of the block's padded row `y`, if any.
    let source = |y: usize| {
        (2 * rows.start + y)
            .checked_sub(plan.pad[0])
            .filter(|&r| r < plan.h)
    };
    // Rows read in place when they are the padded rows (no padding, an even `ow`); else
    // copied into `padded`, whose padding stays zero. (A padded row built on the stack just
    // before its values are read back stalled every read on store-to-load forwarding.)
    let in_place = pad == 0 && w == PW;
    if !in_place {
        padded.as_flattened_mut().fill(0.0);
    }
    for (ch, xc) in x.chunks_exact(plan.h * w).enumerate() {
        if !in_place {
            for (y, p) in padded.iter_mut().enumerate() {
                if let Some(row) = source(y) {
                    let row = &xc[row * w..][..w];
                    prefetch(row.as_ptr(), w);
                    p[pad..pad + w].copy_from_slice(row);
                }
            }
        }
        for (y, line) in lines.chunks_exact_mut(4).enumerate() {
            let p: &[f32; PW] = match (in_place, source(y)) {
                (true, Some(row)) => {
                    prefetch(xc[row * w..].as_ptr(), w);
                    xc[row * w..][..PW].try_into().expect("PW")
                }
                (true, None) => &[0.0; PW],
                (false, _) => &padded[y],
            };
            let e0: [f32; TW] = from_fn(|k| p[2 * k]);
            let o0: [f32; TW] = from_fn(|k| p[2 * k + 1]);
            let e1: [f32; TW] = from_fn(|k| p[2 * k + 2]);
            let o1: [f32; TW] = from_fn(|k| p[2 * k + 3]);
            line[0] = from_fn(|k| e0[k] - e1[k]);
            line[1] = from_fn(|k| o0[k] + e1[k]);
            line[2] = from_fn(|k| e1[k] - o0[k]);
            line[3] = from_fn(|k| o0[k] - o1[k]);
        }
        // Vertical: tile row `ti` reads padded rows `2·ti..2·ti + 4`.
        for ti in 0..rows.len() {
            for s in 0..4 {
                let [r0, r1, r2, r3] = from_fn(|r| lines[4 * (2 * ti + r) + s]);
                let mut put = |r: usize, values: [f32; TW]| {
                    let at = (16 * ch + 4 * r + s) * stride + ti * TW;
                    let dst: &mut [f32; TW] = (&mut v[at..at + TW]).try_into().expect("TW");
                    *dst = values;
                };
                put(0, from_fn(|k| r0[k] - r2[k]));
                put(1, from_fn(|k| r1[k] + r2[k]));
                put(2, from_fn(|k| r2[k] - r1[k]));
                put(3, from_fn(|k| r1[k] - r3[k]));
            }
        }
    }
}

/// `y = Aᵀ M A + b` for the tile rows `rows` of one image, from `M[o][ξ][t]`, into `y`
/// (`[o, oh, ow]`).
///
/// # Safety
/// `y` must be valid for writes of `o · oh · ow` values, and nobody else may write the output
/// rows of these tile rows at the same time. `isa` as for [`input`].
pub(super) unsafe fn output(
    isa: Option<Isa>,
    plan: &Plan,
    m: &[f32],
    rows: Range<usize>,
    bias: Option<&[f32]>,
    y: *mut f32,
) {
    // SAFETY: the caller's contract (and for AVX-512, the CPU has it; `fits` keeps rows to 16
    // tiles).
    unsafe {
        #[cfg(target_arch = "x86_64")]
        if isa == Some(Isa::Avx512) {
            return super::avx512::output(plan, m, rows, bias, y);
        }
        let _ = isa;
        by_row_width!(plan.tw, output_rows(plan, m, rows, bias, y))
    }
}

/// [`output`] for rows of `TW` tiles.
///
/// # Safety
/// As [`output`]'s.
unsafe fn output_rows<const TW: usize>(
    plan: &Plan,
    m: &[f32],
    rows: Range<usize>,
    bias: Option<&[f32]>,
    y: *mut f32,
) {
    let (stride, plane, ow) = (stride(rows.len() * TW), plan.oh * plan.ow, plan.ow);
    for (o, mo) in m.chunks_exact(16 * stride).take(plan.o).enumerate() {
        let b = bias.map_or(0.0, |b| b[o]);
        for ti in 0..rows.len() {
            let at = |xi: usize| -> &[f32; TW] {
                mo[xi * stride + ti * TW..][..TW].try_into().expect("TW")
            };
            // Rows 0 and 1 of Aᵀ M, four columns `s` each.
            let mut am = [[[0.0f32; TW]; 4]; 2];
            let [top, bottom] = &mut am;
            for (s, (t, u)) in top.iter_mut().zip(bottom).enumerate() {
                let (a0, a1, a2, a3) = (at(s), at(4 + s), at(8 + s), at(12 + s));
                for k in 0..TW {
                    t[k] = a0[k] + a1[k] + a2[k];
                    u[k] = a1[k] - a2[k] - a3[k];
                }
            }
            for (r, [c0, c1, c2, c3]) in am.iter().enumerate() {
                let oy = 2 * (rows.start + ti) + r;
                if oy >= plan.oh {
                    break;
                }
                let (mut first, mut second) = ([0.0f32; TW], [0.0f32; TW]);
                for k in 0..TW {
                    first[k] = c0[k] + c1[k] + c2[k] + b;
                    second[k] = c1[k] - c2[k] - c3[k] + b;
                }
                // SAFETY: row `oy < oh` of channel `o` (the caller's contract).
                let out = unsafe { std::slice::from_raw_parts_mut(y.add(o * plane + oy * ow), ow) };
                if ow == 2 * TW {
                    // Every row but an odd last one: a length the compiler knows.
                    let out = &mut out[..2 * TW];
                    for (pair, (first, second)) in
                        out.chunks_exact_mut(2).zip(first.iter().zip(&second))
                    {
                        pair[0] = *first;
                        pair[1] = *second;
                    }
                } else {
                    // An odd `ow`: the last tile's first column only.
                    for (k, value) in out.iter_mut().enumerate() {
                        *value = if k % 2 == 0 {
                            first[k / 2]
                        } else {
                            second[k / 2]
                        };
                    }
                }
            }
        }
    }
}

/// `D[o][ξ][t] = (A dY Aᵀ)[ξ]` of the output-gradient tiles `dY` (2 × 2, zero past the
/// output's last row or column) of the tile rows `rows` of one image `dy` (`[o, oh, ow]`):
/// the gradient of `M` in [`output`], for the weight gradient.
/// `isa` as for [`input`].
pub(super) fn gradient(
    isa: Option<Isa>,
    plan: &Plan,
    dy: &[f32],
    rows: Range<usize>,
    d: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if isa == Some(Isa::Avx512) {
        // SAFETY: the CPU has AVX-512F (the caller's `isa`); `fits` keeps rows to 16 tiles.
        return unsafe { super::avx512::gradient(plan, dy, rows, d) };
    }
    let _ = isa;
    by_row_width!(plan.tw, gradient_rows(plan, dy, rows, d))
}

/// [`gradient`] for rows of `TW` tiles.
fn gradient_rows<const TW: usize>(plan: &Plan, dy: &[f32], rows: Range<usize>, d: &mut [f32]) {
    let (stride, ow) = (stride(rows.len() * TW), plan.ow);
    // The even and odd columns of output-gradient row `oy`, zero past the output.
    let split = |plane: &[f32], oy: usize| -> ([f32; TW], [f32; TW]) {
        if oy >= plan.oh {
            return ([0.0; TW], [0.0; TW]);
        }
        let row = &plane[oy * ow..][..ow];
        prefetch(row.as_ptr(), ow);
        if ow == 2 * TW {
            let row = &row[..2 * TW];
            (from_fn(|k| row[2 * k]), from_fn(|k| row[2 * k + 1]))
        } else {
            let at = |j: usize| row.get(j).copied().unwrap_or(0.0);
            (from_fn(|k| at(2 * k)), from_fn(|k| at(2 * k + 1)))
        }
    };
    for (o, plane) in dy.chunks_exact(plan.oh * ow).enumerate().take(plan.o) {
        for ti in 0..rows.len() {
            let oy = 2 * (rows.start + ti);
            let ((e0, o0), (e1, o1)) = (split(plane, oy), split(plane, oy + 1));
            // A dY: rows r of the tile, as their even and odd columns.
            let left: [([f32; TW], [f32; TW]); 4] = [
                (e0, o0),
                (from_fn(|k| e0[k] + e1[k]), from_fn(|k| o0[k] + o1[k])),
                (from_fn(|k| e0[k] - e1[k]), from_fn(|k| o0[k] - o1[k])),
                (from_fn(|k| -e1[k]), from_fn(|k| -o1[k])),
            ];
            for (r, (even, odd)) in left.into_iter().enumerate() {
                let columns: [[f32; TW]; 4] = [
                    even,
                    from_fn(|k| even[k] + odd[k]),
                    from_fn(|k| even[k] - odd[k]),
                    from_fn(|k| -odd[k]),
                ];
                for (s, values) in columns.into_iter().enumerate() {
                    let at = (16 * o + 4 * r + s) * stride + ti * TW;
                    let dst: &mut [f32; TW] = (&mut d[at..at + TW]).try_into().expect("TW");
                    *dst = values;
                }
            }
        }
    }
}

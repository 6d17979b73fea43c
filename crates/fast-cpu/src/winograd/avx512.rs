//! The output's and the output gradient's transforms ([`transform`](super::transform)) written
//! for AVX-512: a row of up to 16 tiles is one register (masked past the row), and the two
//! columns of each tile are interleaved into, or split out of, an output row by permutes.
//! Compiled from [`transform`](super::transform)'s arrays with AVX-512 enabled, the two took
//! 0.63 and 0.66 ms per batch of the MNIST CNN's second layer against 0.13 and 0.28 here
//! (2 threads). Each value is computed with the same operations in the same order as there,
//! so the two give the same bits.

use std::arch::x86_64::*;
use std::ops::Range;

use super::prefetch::prefetch;
use super::{Plan, stride};

/// The first `n ≤ 16` lanes.
fn lanes(n: usize) -> __mmask16 {
    ((1u32 << n) - 1) as u16
}

/// The even and odd values of the 32 in `low` (0–15) and `high` (16–31): the two columns of
/// every tile of a row, or its padded row's even and odd columns.
#[inline]
#[target_feature(enable = "avx512f")]
fn split_even_odd(low: __m512, high: __m512) -> (__m512, __m512) {
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    (
        _mm512_permutex2var_ps(low, even, high),
        _mm512_permutex2var_ps(low, odd, high),
    )
}

/// `-v`, bit for bit as the scalar negation (the sign flipped, also of a zero).
#[inline]
#[target_feature(enable = "avx512f")]
fn negate(v: __m512) -> __m512 {
    let sign = _mm512_set1_epi32(i32::MIN);
    _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), sign))
}

/// [`output`](super::transform::output) with AVX-512.
///
/// # Safety
/// The CPU has AVX-512F; `plan.tw ≤ 16`; and `output`'s contract.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn output(
    plan: &Plan,
    m: &[f32],
    rows: Range<usize>,
    bias: Option<&[f32]>,
    y: *mut f32,
) {
    let tw = plan.tw;
    assert!(tw <= 16);
    let (stride, plane, ow) = (stride(rows.len() * tw), plan.oh * plan.ow, plan.ow);
    let row = lanes(tw);
    // Output columns 0..16 and 16..32 of a pair of vectors (first column, second column).
    let low = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    let high = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    let (low_lanes, high_lanes) = (lanes(ow.min(16)), lanes(ow.saturating_sub(16)));
    for (o, mo) in m.chunks_exact(16 * stride).take(plan.o).enumerate() {
        let b = _mm512_set1_ps(bias.map_or(0.0, |b| b[o]));
        for ti in 0..rows.len() {
            let first_tile = ti * tw;
            // SAFETY: lanes `< tw` of row `ξ` of this tile row lie inside `mo`; masked lanes
            // are not read.
            let at = |xi: usize| unsafe {
                _mm512_maskz_loadu_ps(row, mo.as_ptr().add(xi * stride + first_tile))
            };
            // Rows 0 and 1 of Aᵀ M, four columns `s` each.
            let (mut top, mut bottom) = ([_mm512_setzero_ps(); 4], [_mm512_setzero_ps(); 4]);
            for s in 0..4 {
                let (a0, a1, a2, a3) = (at(s), at(4 + s), at(8 + s), at(12 + s));
                top[s] = _mm512_add_ps(_mm512_add_ps(a0, a1), a2);
                bottom[s] = _mm512_sub_ps(_mm512_sub_ps(a1, a2), a3);
            }
            for (r, [c0, c1, c2, c3]) in [top, bottom].into_iter().enumerate() {
                let oy = 2 * (rows.start + ti) + r;
                if oy >= plan.oh {
                    break;
                }
                let first = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), c2), b);
                let second = _mm512_add_ps(_mm512_sub_ps(_mm512_sub_ps(c1, c2), c3), b);
                // SAFETY: row `oy < oh` of channel `o` (the caller's contract), `ow` values.
                unsafe {
                    let out = y.add(o * plane + oy * ow);
                    let values = _mm512_permutex2var_ps(first, low, second);
                    _mm512_mask_storeu_ps(out, low_lanes, values);
                    if ow > 16 {
                        let values = _mm512_permutex2var_ps(first, high, second);
                        _mm512_mask_storeu_ps(out.add(16), high_lanes, values);
                    }
                }
            }
        }
    }
}

/// [`gradient`](super::transform::gradient) with AVX-512.
///
/// # Safety
/// The CPU has AVX-512F; `plan.tw ≤ 16`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn gradient(plan: &Plan, dy: &[f32], rows: Range<usize>, d: &mut [f32]) {
    let tw = plan.tw;
    assert!(tw <= 16);
    let (stride, ow) = (stride(rows.len() * tw), plan.ow);
    assert!(d.len() >= 16 * plan.o * stride, "D holds the block's tiles");
    let row = lanes(tw);
    let (low_lanes, high_lanes) = (lanes(ow.min(16)), lanes(ow.saturating_sub(16)));
    // The even and odd columns of output-gradient row `oy`, zero past the output.
    let split = |plane: &[f32], oy: usize| -> (__m512, __m512) {
        if oy >= plan.oh {
            return (_mm512_setzero_ps(), _mm512_setzero_ps());
        }
        let line = plane[oy * ow..][..ow].as_ptr();
        prefetch(line, ow);
        // SAFETY: the `ow` values of the row; masked lanes are not read.
        let (low, high) = unsafe {
            (
                _mm512_maskz_loadu_ps(low_lanes, line),
                _mm512_maskz_loadu_ps(high_lanes, line.wrapping_add(16)),
            )
        };
        split_even_odd(low, high)
    };
    let d = d.as_mut_ptr();
    for (o, plane) in dy.chunks_exact(plan.oh * ow).enumerate().take(plan.o) {
        for ti in 0..rows.len() {
            let oy = 2 * (rows.start + ti);
            let ((e0, o0), (e1, o1)) = (split(plane, oy), split(plane, oy + 1));
            // A dY: rows r of the tile, as their even and odd columns.
            let left = [
                (e0, o0),
                (_mm512_add_ps(e0, e1), _mm512_add_ps(o0, o1)),
                (_mm512_sub_ps(e0, e1), _mm512_sub_ps(o0, o1)),
                (negate(e1), negate(o1)),
            ];
            for (r, (even, odd)) in left.into_iter().enumerate() {
                let columns = [
                    even,
                    _mm512_add_ps(even, odd),
                    _mm512_sub_ps(even, odd),
                    negate(odd),
                ];
                for (s, values) in columns.into_iter().enumerate() {
                    let at = (16 * o + 4 * r + s) * stride + ti * tw;
                    // SAFETY: `tw` values of row `(o, ξ)` of this tile row, inside `D` (asserted).
                    unsafe { _mm512_mask_storeu_ps(d.add(at), row, values) };
                }
            }
        }
    }
}

/// [`input`](super::transform::input) with AVX-512: each padded row is read from the image
/// in place, the padding as masked-off lanes.
///
/// # Safety
/// The CPU has AVX-512F; `plan.tw ≤ 16`.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn input(plan: &Plan, x: &[f32], rows: Range<usize>, v: &mut [f32]) {
    let tw = plan.tw;
    assert!(tw <= 16);
    let (stride, w, pad) = (stride(rows.len() * tw), plan.w, plan.pad[1]);
    assert!(
        x.len() == plan.c * plan.h * w && v.len() >= 16 * plan.c * stride,
        "one image, and V holds the block's tiles"
    );
    let row = lanes(tw);
    // The lanes of the 16 padded columns from `first` that lie inside the image row, and the
    // offset of lane 0 in it.
    let window = |first: usize| -> (__mmask16, isize) {
        let mask = (0..16).fold(0u16, |mask, lane| {
            let column = (first + lane).wrapping_sub(pad);
            mask | (u16::from(column < w) << lane)
        });
        (mask, first as isize - pad as isize)
    };
    let windows = [window(0), window(16), window(2), window(18)];
    // `d B` of padded row `y` of the block: its four columns `s`, one lane per tile.
    let line = |xc: &[f32], y: usize| -> [__m512; 4] {
        let Some(source) = (2 * rows.start + y)
            .checked_sub(plan.pad[0])
            .filter(|&r| r < plan.h)
        else {
            return [_mm512_setzero_ps(); 4];
        };
        let start = xc[source * w..][..w].as_ptr();
        prefetch(start, w);
        // SAFETY: only the lanes inside the row `[start, start + w)` are read.
        let [a0, a1, a2, a3] = windows.map(|(mask, offset)| unsafe {
            _mm512_maskz_loadu_ps(mask, start.wrapping_offset(offset))
        });
        let ((e0, o0), (e1, o1)) = (split_even_odd(a0, a1), split_even_odd(a2, a3));
        [
            _mm512_sub_ps(e0, e1),
            _mm512_add_ps(o0, e1),
            _mm512_sub_ps(e1, o0),
            _mm512_sub_ps(o0, o1),
        ]
    };
    let v = v.as_mut_ptr();
    for (ch, xc) in x.chunks_exact(plan.h * w).enumerate() {
        // Padded rows `2·ti` and `2·ti + 1`, carried over from the last tile row.
        let (mut r0, mut r1) = (line(xc, 0), line(xc, 1));
        for ti in 0..rows.len() {
            let (r2, r3) = (line(xc, 2 * ti + 2), line(xc, 2 * ti + 3));
            for s in 0..4 {
                let values = [
                    _mm512_sub_ps(r0[s], r2[s]),
                    _mm512_add_ps(r1[s], r2[s]),
                    _mm512_sub_ps(r2[s], r1[s]),
                    _mm512_sub_ps(r1[s], r3[s]),
                ];
                for (r, values) in values.into_iter().enumerate() {
                    let at = (16 * ch + 4 * r + s) * stride + ti * tw;
                    // SAFETY: `tw` values of row `(c, ξ)` of this tile row, inside `V` (asserted).
                    unsafe { _mm512_mask_storeu_ps(v.add(at), row, values) };
                }
            }
            (r0, r1) = (r2, r3);
        }
    }
}

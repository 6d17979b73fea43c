//! The direct convolution ([`direct`](super)) against im2col and GEMM
//! ([`conv`](super::super::conv)), with every instruction set this CPU has: the forward output,
//! the input gradient and the weight gradient agree to a relative 1e-4 (the two sum each value
//! in another order, in `f32`), for stride-1 shapes with padding, dilation, channel counts that
//! are not multiples of a tile, rows of whole vectors (the tiles' row layout) and single
//! images; and the direct kernels give the same bits on 1 and 3 threads.

use burn_backend::ops::ConvOptions;

use super::super::batch_sums::bias_backward;
use super::super::conv::{im2col_forward, im2col_weight_backward, im2col_x_backward};
use super::super::geom::Geom;
use super::flat::Flat;
use super::{Isa, forward, input_backward, weight_backward};

fn geom(x: [usize; 4], w: [usize; 4], pad: [usize; 2], dil: [usize; 2]) -> Geom {
    Geom::new(&x, &w, &ConvOptions::new([1, 1], pad, dil, 1)).unwrap()
}

fn cases() -> Vec<Geom> {
    vec![
        // The MNIST CNN's two layers, on two images.
        geom([2, 1, 28, 28], [32, 1, 3, 3], [0, 0], [1, 1]),
        geom([2, 32, 26, 26], [64, 32, 3, 3], [0, 0], [1, 1]),
        // Padding, dilation, a non-square kernel, channel counts off every tile.
        geom([3, 5, 7, 9], [70, 5, 3, 2], [1, 2], [2, 1]),
        geom([1, 3, 11, 4], [5, 3, 2, 3], [2, 1], [1, 2]),
        // Blocks of 8 channels × 8 columns and the values around them.
        geom([2, 3, 12, 19], [67, 3, 3, 2], [1, 0], [1, 1]),
        // AVX-512's narrow weight tile on taps off its 9 (12 taps, 20 channels).
        geom([2, 3, 9, 8], [20, 3, 2, 2], [1, 0], [1, 1]),
        // Output rows of whole vectors (`Flat::tiles` by rows): 7 rows of 8 columns (an odd
        // count of AVX2 vectors, a last tile short of one), 32 × 32 padded (both instruction
        // sets).
        geom([2, 3, 9, 10], [7, 3, 3, 3], [0, 0], [1, 1]),
        geom([1, 3, 32, 32], [5, 3, 3, 3], [1, 1], [1, 1]),
        // One output row and one output column; a 1×1 kernel.
        geom([2, 4, 3, 17], [9, 4, 3, 17], [0, 0], [1, 1]),
        geom([1, 6, 5, 5], [65, 6, 1, 1], [0, 0], [1, 1]),
        // No images.
        geom([0, 2, 5, 5], [64, 2, 3, 3], [1, 1], [1, 1]),
    ]
}

/// Deterministic values in [-1, 1).
pub(in super::super) fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

pub(in super::super) fn assert_close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1.0f32, |m, v| m.max(v.abs()));
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-4 * scale,
            "{what}: value {i} is {g}, im2col gives {w}"
        );
    }
}

/// An input, a weight and an output gradient for `g`.
pub(in super::super) fn operands(g: &Geom) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    (
        values(g.n * g.image(), 5),
        values(g.o * g.k(), 6),
        values(g.n * g.o * g.l(), 7),
    )
}

/// `f` on a rayon pool of `threads` threads.
pub(in super::super) fn on_threads<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> R {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap();
    pool.install(f)
}

fn isas() -> Vec<Isa> {
    [Isa::Avx512, Isa::Avx2]
        .into_iter()
        .filter(|isa| isa.available())
        .collect()
}

#[test]
fn direct_convolution_matches_im2col() {
    for isa in isas() {
        for g in cases() {
            let x = values(g.n * g.image(), 1);
            let w = values(g.o * g.k(), 2);
            let b = values(g.o, 3);
            let dy = values(g.n * g.o * g.l(), 4);
            let what = format!("{isa:?} {g:?}");
            let want = im2col_forward(&x, &w, Some(&b), &g);
            assert_close(
                &format!("forward {what}"),
                &forward(isa, &x, &w, Some(&b), &g),
                &want,
            );
            let want = im2col_forward(&x, &w, None, &g);
            assert_close(
                &format!("forward, no bias, {what}"),
                &forward(isa, &x, &w, None, &g),
                &want,
            );
            assert_close(
                &format!("input gradient {what}"),
                &input_backward(isa, &dy, &w, &g),
                &im2col_x_backward(&dy, &w, &g),
            );
            let (want, im2col_bias) = im2col_weight_backward(&x, &dy, &g);
            let (dw, bias) = weight_backward(isa, &x, &dy, &g);
            assert_close(&format!("weight gradient {what}"), &dw, &want);
            // The bias gradient summed beside the weight's is the bias pass's, bit for bit.
            let want = bias_backward(&dy, g.n, g.o, g.oh * g.ow);
            let bits = |v: &[f32]| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert!(bits(&bias) == bits(&want), "bias gradient {what}");
            assert!(
                bits(&im2col_bias) == bits(&want),
                "bias gradient, im2col, {what}"
            );
        }
    }
}

#[test]
fn direct_convolution_gives_the_same_bits_on_any_thread_count() {
    for isa in isas() {
        for g in cases() {
            let (x, w, dy) = operands(&g);
            let run = |threads: usize| {
                on_threads(threads, || {
                    (
                        forward(isa, &x, &w, None, &g),
                        weight_backward(isa, &x, &dy, &g).0,
                        input_backward(isa, &dy, &w, &g),
                    )
                })
            };
            assert!(run(1) == run(3), "{isa:?} {g:?}");
        }
    }
}

#[test]
fn forward_tiles_go_by_rows_where_that_computes_fewer_positions() {
    // The CNN's second layer: 24 output columns of a 26-wide input, 24 rows.
    let flat = |tile| Flat::new([32, 26, 26], [0, 0], [1, 1], [3, 3], tile);
    // AVX2 (2 vectors of 8): 72 whole vectors of a row, 36 tiles, against 39 tiles of
    // consecutive flat positions; each vector written whole.
    let by_row = flat(16).tiles(2, 8);
    assert_eq!(by_row.len(), 36);
    for tile in &by_row {
        let whole = tile.segments.iter().map(|s| (s.vector, s.lo, s.hi));
        assert!(whole.eq([(0, 0, 8), (1, 0, 8)]));
    }
    // Vectors 2 and 3: row 0 from column 16, row 1 from column 0 (flat position 26); they
    // go to output positions 16 and 24.
    assert_eq!(by_row[1].starts, [16, 26]);
    let bases: Vec<isize> = by_row[1].segments.iter().map(|s| s.base).collect();
    assert_eq!(bases, [16, 24]);
    // AVX-512 (3 vectors of 16): a row is a vector and a half, so flat positions, 13 tiles.
    assert_eq!(flat(48).tiles(3, 16).len(), 13);
}

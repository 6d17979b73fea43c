//! Batched matrix products with a thin side, `[B, M, K] · [B, K, N]` with K ≤ 4 (each item a
//! sum of K outer products) or N ≤ 4 (each item's matrix times a few vectors), and 2-D ones
//! as a batch of one. CLG-ODE's topology loss is made of them: its heat-kernel Taylor series
//! multiplies the `[G·K, N, N]` soft adjacencies by two probe vectors twenty times, and the
//! backward pass forms the twenty outer products of the probes' gradients. Flex gives each
//! batch item to one GEMM, whose packing is built for wide products: the outer products ran at
//! 2.7 GB/s of output on a 2-core Zen 3, a fifth of a CLG-ODE step.
//!
//! Here each value is read and written once, on rayon's threads in blocks of rows that depend
//! on the shapes only. Each output value is summed in one fixed order (over k; a dot product in
//! eight lanes combined in a fixed tree), so the bits depend on neither the thread count nor the
//! CPU. They differ from a GEMM's by rounding only (a multiply, then an add: no fused
//! multiply-add).

use std::mem::MaybeUninit;

use burn_flex::FlexTensor;

use super::kernels::{Batch, assume_init, f32_tensor, written_in};
use super::{FAST_CALLS, fast};

/// The widest inner or output dimension taken as thin.
const THIN: usize = 4;
/// Multiply-adds per rayon task, about.
const TASK_WORK: usize = 1 << 16;

impl Batch<'_> {
    /// The values in `[batch, rows, cols]` order (each item's rows as contiguous vectors).
    fn by_rows(&self) -> Vec<f32> {
        let (rows, cols) = (self.rows, self.cols);
        (0..self.batch)
            .flat_map(|b| (0..rows).flat_map(move |i| (0..cols).map(move |j| self.at(b, i, j))))
            .collect()
    }

    /// The values in `[batch, cols, rows]` order (each item's columns as contiguous vectors).
    fn by_columns(&self) -> Vec<f32> {
        let (rows, cols) = (self.rows, self.cols);
        (0..self.batch)
            .flat_map(|b| (0..cols).flat_map(move |j| (0..rows).map(move |i| self.at(b, i, j))))
            .collect()
    }

    /// Row `i` of item `b`, when the rows are contiguous.
    fn row(&self, b: usize, i: usize) -> &[f32] {
        &self.data[b * self.bs + i * self.rs..][..self.cols]
    }

    /// Rows `rows` of column `j` of item `b`, when the columns are contiguous.
    fn column(&self, b: usize, j: usize, rows: std::ops::Range<usize>) -> &[f32] {
        &self.data[b * self.bs + j * self.cs + rows.start..][..rows.len()]
    }
}

/// `lhs · rhs` for rank-2 or rank-3 `f32` operands (of one batch size) with a thin side, or
/// `other(lhs, rhs)` for anything else.
pub(super) fn matmul(
    lhs: FlexTensor,
    rhs: FlexTensor,
    other: impl FnOnce(FlexTensor, FlexTensor) -> FlexTensor,
) -> FlexTensor {
    let (Some(a), Some(c)) = (Batch::of(&lhs), Batch::of(&rhs)) else {
        return other(lhs, rhs);
    };
    let (batch, m, k, n, rank) = (a.batch, a.rows, a.cols, c.cols, a.rank);
    let sized = batch > 0 && m > 0 && k > 0 && n > 0;
    if !fast() || !sized || c.batch != batch || c.rows != k || c.rank != rank {
        return other(lhs, rhs);
    }
    // Whole rows per task, as many as make about TASK_WORK multiply-adds.
    let chunk = (TASK_WORK / (k * n)).clamp(1, batch * m) * n;
    let out = if k <= THIN {
        outer_products(a, c, chunk)
    } else if n <= THIN && a.cs == 1 {
        row_dots(a, c, chunk)
    } else if n <= THIN && a.rs == 1 {
        column_sums(a, c)
    } else {
        return other(lhs, rhs);
    };
    FAST_CALLS.count();
    f32_tensor(out, &[batch, m, n][3 - rank..])
}

/// Rows `start / n ..` of the `[batch, m, n]` output, one `(item, row)` per row of `dst`.
fn rows_of(
    dst: &mut [MaybeUninit<f32>],
    start: usize,
    m: usize,
    n: usize,
) -> impl Iterator<Item = (usize, usize, &mut [MaybeUninit<f32>])> {
    dst.chunks_exact_mut(n).enumerate().map(move |(r, row)| {
        let g = start / n + r;
        (g / m, g % m, row)
    })
}

/// K ≤ 4: `out[b, i, :] = Σ_k a[b, i, k] · c[b, k, :]`, k in order.
fn outer_products(a: Batch, c: Batch, chunk: usize) -> Vec<f32> {
    let (batch, m, k, n) = (a.batch, a.rows, a.cols, c.cols);
    let c = c.by_rows();
    // SAFETY: `outer_row` writes every value of each row.
    unsafe {
        written_in(batch * m * n, chunk, |start, dst| {
            for (b, i, row) in rows_of(dst, start, m, n) {
                let a: [f32; THIN] =
                    std::array::from_fn(|kk| if kk < k { a.at(b, i, kk) } else { 0.0 });
                outer_row(&a[..k], &c[b * k * n..][..k * n], row);
            }
        })
    }
}

/// Runs `$body` compiled for AVX2 where the CPU has it (chosen at run time), else for the
/// baseline: the same operations in the same order, so the same bits, only wider registers.
macro_rules! avx2_or_baseline {
    ($(#[$doc:meta])* fn $name:ident$(<const $c:ident: usize>)?($($arg:ident: $ty:ty),* $(,)?) $body:block) => {
        $(#[$doc])*
        fn $name$(<const $c: usize>)?($($arg: $ty),*) {
            #[inline(always)]
            fn body$(<const $c: usize>)?($($arg: $ty),*) $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            fn avx2$(<const $c: usize>)?($($arg: $ty),*) {
                body$(::<$c>)?($($arg),*)
            }
            #[cfg(target_arch = "x86_64")]
            if crate::isa::avx2() {
                // SAFETY: the CPU has AVX2.
                return unsafe { avx2$(::<$c>)?($($arg),*) };
            }
            body$(::<$c>)?($($arg),*)
        }
    };
}

avx2_or_baseline! {
    /// `out[j] = Σ_i a[i] · x[j·len + i]` for the `N` vectors in `x`, each in eight lanes (lane
    /// `l` sums `i ≡ l mod 8` in order), combined in a fixed tree, plus the tail in order.
    fn dots<const N: usize>(a: &[f32], x: &[f32], out: &mut [MaybeUninit<f32>]) {
        let k = a.len();
        let (a8, a_tail) = a.as_chunks::<8>();
        let xs: [(&[[f32; 8]], &[f32]); N] = std::array::from_fn(|j| x[j * k..][..k].as_chunks::<8>());
        let mut lanes = [[0.0f32; 8]; N];
        for (q, av) in a8.iter().enumerate() {
            for (lanes, (x8, _)) in lanes.iter_mut().zip(&xs) {
                let xv = &x8[q];
                for l in 0..8 {
                    lanes[l] += av[l] * xv[l];
                }
            }
        }
        for ((o, lanes), (_, x_tail)) in out.iter_mut().zip(&lanes).zip(&xs) {
            let tail = a_tail.iter().zip(*x_tail).fold(0.0f32, |s, (a, x)| s + a * x);
            let [l0, l1, l2, l3, l4, l5, l6, l7] = *lanes;
            o.write((((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7))) + tail);
        }
    }
}

avx2_or_baseline! {
    /// `row = Σ_k a[k] · c[k·n..(k + 1)·n]`, k in order (`n` = the row's length).
    fn outer_row(a: &[f32], c: &[f32], row: &mut [MaybeUninit<f32>]) {
        let n = row.len();
        for (o, &x) in row.iter_mut().zip(&c[..n]) {
            o.write(a[0] * x);
        }
        // SAFETY: every value was just written.
        let row = unsafe { assume_init(row) };
        for (kk, &ak) in a.iter().enumerate().skip(1) {
            for (o, &x) in row.iter_mut().zip(&c[kk * n..][..n]) {
                *o += ak * x;
            }
        }
    }
}

/// N ≤ 4, rows of `a` contiguous: each output value one [`dots`] of a row of `a` with a column
/// of `c`.
fn row_dots(a: Batch, c: Batch, chunk: usize) -> Vec<f32> {
    let (batch, m, k, n) = (a.batch, a.rows, a.cols, c.cols);
    let columns = c.by_columns();
    let dots = match n {
        1 => dots::<1>,
        2 => dots::<2>,
        3 => dots::<3>,
        _ => dots::<4>,
    };
    // SAFETY: `dots` writes each row's `n` values.
    unsafe {
        written_in(batch * m * n, chunk, |start, dst| {
            for (b, i, row) in rows_of(dst, start, m, n) {
                dots(a.row(b, i), &columns[b * n * k..][..n * k], row);
            }
        })
    }
}

avx2_or_baseline! {
    /// `sums[j·rows + r] += Σ_k col_k[r] · x[k·n + j]`, k in order, where `col_k` is rows
    /// `first..first + rows` of column k of item `b` of `a`.
    fn column_run(a: Batch, b: usize, first: usize, x: &[f32], n: usize, sums: &mut [f32]) {
        let rows = sums.len() / n;
        for (kk, x) in x.chunks_exact(n).enumerate() {
            let col = a.column(b, kk, first..first + rows);
            for (s, &x) in sums.chunks_exact_mut(rows).zip(x) {
                for (s, &v) in s.iter_mut().zip(col) {
                    *s += v * x;
                }
            }
        }
    }
}

/// N ≤ 4, columns of `a` contiguous (a transposed view): `out[b, :, j] = Σ_k a[b, :, k] ·
/// c[b, k, j]`, k in order, down the rows of the chunk that lie in one item.
fn column_sums(a: Batch, c: Batch) -> Vec<f32> {
    let (batch, m, k, n) = (a.batch, a.rows, a.cols, c.cols);
    let c = c.by_rows();
    // A whole item per task reads its columns end to end; a quarter of one when there are
    // fewer than four items, so that the threads share them.
    let rows = if batch >= 4 { m } else { m.div_ceil(4) };
    // SAFETY: each run of rows in one item writes all `n` values of each of its rows.
    unsafe {
        written_in(batch * m * n, rows * n, |start, dst| {
            let mut first = start / n;
            let mut dst = dst;
            while !dst.is_empty() {
                let (b, i0) = (first / m, first % m);
                let rows = (m - i0).min(dst.len() / n);
                let (run, rest) = dst.split_at_mut(rows * n);
                // `sums[j·rows + r]`: column j of these rows.
                let mut sums = vec![0.0f32; n * rows];
                column_run(a, b, i0, &c[b * k * n..][..k * n], n, &mut sums);
                for (r, row) in run.chunks_exact_mut(n).enumerate() {
                    for (j, o) in row.iter_mut().enumerate() {
                        o.write(sums[j * rows + r]);
                    }
                }
                (first, dst) = (first + rows, rest);
            }
        })
    }
}

pub mod series;

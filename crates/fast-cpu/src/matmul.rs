//! 2-D `f32` matrix products (the linear layers, CLG-ODE's per-node MLPs) split into blocks of
//! rows, one single-threaded GEMM per block on the rayon pool. Flex hands such products to one
//! multi-threaded GEMM, which on these tall-and-narrow shapes (800 × 128 · 128 × 128, 64 × 9216
//! · 9216 × 128) keeps barely more than one core busy. The blocks depend on the shapes only, so
//! a result never depends on the number of threads. A product with few rows and a wide output
//! is one GEMM on `gemm`'s own threads instead. Any operand layout with non-negative
//! strides is read in place (a transposed weight is never copied).

use burn_flex::FlexTensor;
use gemm::Parallelism;

use super::fast;
use super::kernels::{Batch, f32_tensor, filled, matmul, written_in, zeroed};

/// Products smaller than this (m·n·k) run as one GEMM on the calling thread.
const MIN_SPLIT: usize = 1 << 20;

/// Rows per block of a product with `m` rows: about an eighth of them, 32 to 256, a multiple of
/// 16 (the GEMM micro-kernel's height).
fn block_rows(m: usize) -> usize {
    (m / 8).clamp(32, 256) / 16 * 16
}

/// `lhs × rhs` for 2-D `f32` operands, or `flex(lhs, rhs)` for anything else.
pub(super) fn matmul_2d(
    lhs: FlexTensor,
    rhs: FlexTensor,
    flex: impl FnOnce(FlexTensor, FlexTensor) -> FlexTensor,
) -> FlexTensor {
    let (Some(a), Some(b)) = (Batch::of(&lhs), Batch::of(&rhs)) else {
        return flex(lhs, rhs);
    };
    let (m, k, n) = (a.rows, a.cols, b.cols);
    if !fast() || a.rank != 2 || b.rank != 2 || k != b.rows {
        return flex(lhs, rhs);
    }
    let rhs_m = b.rows_of(0, 0, k);
    // Few rows and a wide output (the fc1 input gradient, 64 × 128 · 128 × 9216): each block
    // of rows would pack the whole right operand again, and one GEMM on gemm's own threads was
    // faster (0.49–0.52 vs 0.61–0.68 ms with AVX-512, 0.80 vs 0.96 with FMA, 2 cores); with a
    // narrow output (the fc1 forward, 64 × 9216 · 9216 × 128) the blocks stay faster.
    let wide = n >= 16 * m;
    let out = if m * n * k < MIN_SPLIT || m < 2 * block_rows(m) || wide {
        let lhs_m = a.rows_of(0, 0, m);
        let par = if m * n * k < MIN_SPLIT {
            Parallelism::None
        } else {
            Parallelism::Rayon(0)
        };
        // Zeroed in parallel when large (the fc1 input gradient is 2.25 MiB).
        let mut out = zeroed(m * n, n);
        matmul(&mut out, n, lhs_m, rhs_m, false, par);
        out
    } else {
        let rows = block_rows(m);
        // SAFETY: `filled` initialises each block before its product overwrites it.
        unsafe {
            written_in(m * n, rows * n, |start, dst| {
                let dst = filled(dst, 0.0);
                let (i, r) = (start / n, dst.len() / n);
                matmul(dst, n, a.rows_of(0, i, r), rhs_m, false, Parallelism::None);
            })
        }
    };
    f32_tensor(out, &[m, n])
}

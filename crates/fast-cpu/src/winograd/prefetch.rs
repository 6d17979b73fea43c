//! Software prefetch of the rows the Winograd transforms read next (`transform.rs` and the
//! AVX-512 transforms in `avx512.rs`).

/// Rows read ahead of the one being transformed ([`prefetch`]).
const AHEAD_ROWS: usize = 32;

/// Asks for the row of `width ≤ 32` values [`AHEAD_ROWS`] after the one at `row` (a plane's
/// rows, then the next channel's, one after another): the transforms read each image once,
/// from a tensor another operation wrote a while ago, and waited on those reads. For the MNIST
/// CNN in a training step with AVX-512, the input transforms' share of the step halved, and
/// the step took 11.4–11.7 ms against 11.7–12.0 without it for the output gradient's and
/// 12.0–13.4 without it for the input's (ahead 4 rows: 12.8; 16 to 64 rows: alike). A
/// prefetch never faults, also past the tensor's end.
#[inline]
pub(super) fn prefetch(row: *const f32, width: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let ahead = row.wrapping_add(AHEAD_ROWS * width);
        // SAFETY: x86-64 has SSE; a prefetch reads nothing the program sees and cannot
        // fault.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
            _mm_prefetch::<_MM_HINT_T0>(ahead.wrapping_add(16).cast());
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (row, width);
}

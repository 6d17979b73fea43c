//! The products of the Winograd convolutions with our own register tiles (x86-64 with AVX-512
//! or AVX2 + FMA; elsewhere [`matmul`](super::super::kernels::matmul) runs them): a block of
//! `MR` rows of `a` times `NV` vectors of columns of `b`, per step of the depth `MR`
//! broadcasts of `a`, `NV` loads of `b` and `MR · NV` fused multiply-adds, summed in depth
//! order.
//!
//! The same tile does the forward products `M_ξ = U_ξ · V_ξ` (rows: output channels; depth:
//! input channels; columns: tiles, their row padded to [`STRIDE_STEP`](super::STRIDE_STEP))
//! and the weight gradient's `dU_ξ += D_ξ · V_ξᵀ` (rows: output channels; depth: tiles;
//! columns: input channels, from `V_ξ` transposed by [`transpose`]). For the MNIST CNN's
//! second layer with AVX-512 they took 1.26 ms per batch of 64 images against 1.59 for
//! `gemm`'s micro-kernels, whose per-call set-up the 16 small products of a task pay every
//! time.

use gemm::Parallelism;

use super::super::direct::Isa;
use super::super::kernels::{Mat, matmul};

/// `M_ξ = U_ξ · V_ξ` for every `ξ`: `m` (`[o][ξ][t]`) from `u` (`[ξ][o][c]`) and `v`
/// (`[c][ξ][t]`), rows of `stride` tiles (a multiple of 16), all of them computed.
/// With `isa`'s register tiles, or [`matmul`] when `None`.
pub(super) fn forward(
    isa: Option<Isa>,
    u: &[f32],
    [o, c]: [usize; 2],
    v: &[f32],
    stride: usize,
    m: &mut [f32],
) {
    assert!(u.len() >= 16 * o * c && v.len() >= 16 * c * stride && m.len() >= 16 * o * stride);
    assert_eq!(stride % 16, 0);
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = isa {
        for xi in 0..16 {
            let p = Product {
                a: Rows {
                    ptr: u[xi * o * c..].as_ptr(),
                    stride: c,
                },
                rows: o,
                b: Rows {
                    ptr: v[xi * stride..].as_ptr(),
                    stride: 16 * stride,
                },
                depth: c,
                cols: stride,
                out: m[xi * stride..].as_mut_ptr(),
                stride: 16 * stride,
                accumulate: false,
            };
            // SAFETY: the caller's `isa` runs here; the assertions keep `U_ξ`'s `o × c`,
            // `V_ξ`'s `c × stride` and `M_ξ`'s `o × stride` inside the slices.
            unsafe { product(isa, p) };
        }
        return;
    }
    let _ = isa;
    for xi in 0..16 {
        matmul(
            &mut m[xi * stride..],
            16 * stride,
            Mat::rows(&u[xi * o * c..][..o * c], o, c),
            Mat::strided(&v[xi * stride..], c, stride, 16 * stride, 1),
            false,
            Parallelism::None,
        );
    }
}

/// `dU_ξ += D_ξ · V_ξᵀ` for every `ξ`: `du` (`[ξ][o][cs]`, `cs = stride(c)`) from
/// `d` (`[o][ξ][t]`) and `v` (`[c][ξ][t]`), rows of `stride` tiles of which the first `tiles`
/// count; `work` holds `tiles · cs` values. With `isa`'s register tiles, or [`matmul`] when
/// `None`.
pub(super) fn weight(
    isa: Option<Isa>,
    (d, v): (&[f32], &[f32]),
    [o, c]: [usize; 2],
    [tiles, stride]: [usize; 2],
    du: &mut [f32],
    work: &mut [f32],
) {
    let cs = super::stride(c);
    assert!(d.len() >= 16 * o * stride && v.len() >= 16 * c * stride && du.len() >= 16 * o * cs);
    assert!(tiles <= stride && work.len() >= tiles * cs);
    #[cfg(target_arch = "x86_64")]
    if let Some(isa) = isa {
        // The transposes fill the first `c` columns of each row; the rest stay zero.
        work[..tiles * cs]
            .chunks_exact_mut(cs)
            .for_each(|row| row[c..].fill(0.0));
        for xi in 0..16 {
            // SAFETY: AVX comes with the caller's `isa`; `V_ξ` is `c × tiles` at row stride `16 · stride`
            // inside `v`, its transpose `tiles × c` at row stride `cs` inside `work`.
            unsafe {
                transpose(
                    (v[xi * stride..].as_ptr(), 16 * stride),
                    [c, tiles],
                    (work.as_mut_ptr(), cs),
                )
            };
            let p = Product {
                a: Rows {
                    ptr: d[xi * stride..].as_ptr(),
                    stride: 16 * stride,
                },
                rows: o,
                b: Rows {
                    ptr: work.as_ptr(),
                    stride: cs,
                },
                depth: tiles,
                cols: cs,
                out: du[xi * o * cs..].as_mut_ptr(),
                stride: cs,
                accumulate: true,
            };
            // SAFETY: the caller's `isa` runs here; the assertions keep `D_ξ`'s `o × tiles`,
            // the transpose's `tiles × cs` and `dU_ξ`'s `o × cs` inside the slices.
            unsafe { product(isa, p) };
        }
        return;
    }
    let _ = (isa, work);
    for xi in 0..16 {
        matmul(
            &mut du[xi * o * cs..],
            cs,
            Mat::strided(&d[xi * stride..], o, tiles, 16 * stride, 1),
            Mat::strided(&v[xi * stride..], c, tiles, 16 * stride, 1).t(),
            true,
            Parallelism::None,
        );
    }
}

/// A matrix read by rows: element `(r, k)` at `ptr + r · stride + k`.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct Rows {
    pub ptr: *const f32,
    pub stride: usize,
}

/// One product for [`product`]: `out[r · stride + j] (+)= Σ_{k < depth} a(r, k) · b(k, j)`
/// for `r < rows`, `j < cols` (a multiple of 16), added to `out` when `accumulate`, else
/// written.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct Product {
    pub a: Rows,
    pub rows: usize,
    pub b: Rows,
    pub depth: usize,
    pub cols: usize,
    pub out: *mut f32,
    pub stride: usize,
    pub accumulate: bool,
}

/// Computes `p` with the register tiles of `isa`.
///
/// # Safety
/// `isa` runs on this CPU; every `a(r, k)` and `b(k, j)` named is readable and every
/// `out[r · stride + j]` writable (and readable when `accumulate`), not aliasing `a` or `b`.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn product(isa: Isa, p: Product) {
    debug_assert_eq!(p.cols % 16, 0);
    // SAFETY: the caller's contract.
    unsafe {
        match isa {
            Isa::Avx512 => avx512::product(p),
            Isa::Avx2 => avx2::product(p),
        }
    }
}

/// `dst[j · ds + i] = src[i · ss + j]` for `i < rows`, `j < cols`: `V_ξ` (`[c][t]`) as
/// `[t][c]` for the weight gradient's products, 8 × 8 blocks in registers.
///
/// # Safety
/// The CPU has AVX; `src` and `dst` hold every value named.
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn transpose(
    (src, ss): (*const f32, usize),
    [rows, cols]: [usize; 2],
    (dst, ds): (*mut f32, usize),
) {
    let (whole_rows, whole_cols) = (rows - rows % 8, cols - cols % 8);
    // SAFETY: the caller's contract; every block lies inside `rows × cols`.
    unsafe {
        for i in (0..whole_rows).step_by(8) {
            for j in (0..whole_cols).step_by(8) {
                super::super::lanes::transpose8(src.add(i * ss + j), ss, dst.add(j * ds + i), ds);
            }
        }
        for i in 0..rows {
            let rest = if i < whole_rows { whole_cols } else { 0 };
            for j in rest..cols {
                *dst.add(j * ds + i) = *src.add(i * ss + j);
            }
        }
    }
}

/// The tile and its driver, for the module's `L`, `MR`, `NV`, vector helpers and target
/// feature string.
#[cfg(target_arch = "x86_64")]
macro_rules! tiles {
    ($feature:literal) => {
        /// [`product`](super::product) for this instruction set.
        ///
        /// # Safety
        /// As [`product`](super::product)'s.
        #[target_feature(enable = $feature)]
        pub(super) unsafe fn product(p: Product) {
            let Product {
                a,
                rows,
                b,
                depth,
                cols,
                out,
                stride,
                accumulate,
            } = p;
            let vectors = cols / L;
            for first in (0..rows).step_by(MR) {
                let count = (rows - first).min(MR);
                // Rows past `rows` read the block's last row again; they are not stored.
                let a_rows: [*const f32; MR] = std::array::from_fn(|r| {
                    a.ptr.wrapping_add((first + r.min(count - 1)) * a.stride)
                });
                let mut v = 0;
                while v < vectors {
                    let n = (vectors - v).min(NV);
                    let b = Rows {
                        ptr: b.ptr.wrapping_add(v * L),
                        stride: b.stride,
                    };
                    let out = (out.wrapping_add(first * stride + v * L), stride, count);
                    // SAFETY: the caller's contract.
                    unsafe {
                        match n {
                            1 => tile::<1>(a_rows, b, depth, out, accumulate),
                            2 => tile::<2>(a_rows, b, depth, out, accumulate),
                            _ => tile::<NV>(a_rows, b, depth, out, accumulate),
                        }
                    }
                    v += n;
                }
            }
        }

        /// One tile: `MR` rows of `a` (at `a_rows`) times `N` vectors of `b`, over `depth`;
        /// the first `count` rows stored to `out` (row stride `stride`), or added to it.
        ///
        /// # Safety
        /// As [`product`](super::product)'s, for this tile.
        #[inline]
        #[target_feature(enable = $feature)]
        unsafe fn tile<const N: usize>(
            a_rows: [*const f32; MR],
            b: Rows,
            depth: usize,
            (out, stride, count): (*mut f32, usize, usize),
            accumulate: bool,
        ) {
            // SAFETY: the caller's contract.
            unsafe {
                let mut acc = [[zero(); N]; MR];
                if accumulate {
                    for (r, row) in acc.iter_mut().enumerate().take(count) {
                        for (v, a) in row.iter_mut().enumerate() {
                            *a = load(out.add(r * stride + v * L));
                        }
                    }
                }
                for k in 0..depth {
                    let line = b.ptr.add(k * b.stride);
                    let mut bv = [zero(); N];
                    for (v, x) in bv.iter_mut().enumerate() {
                        *x = load(line.add(v * L));
                    }
                    for (row, &a) in acc.iter_mut().zip(&a_rows) {
                        let s = splat(*a.add(k));
                        for (acc, x) in row.iter_mut().zip(&bv) {
                            *acc = fma(s, *x, *acc);
                        }
                    }
                }
                for (r, row) in acc.iter().enumerate().take(count) {
                    for (v, a) in row.iter().enumerate() {
                        store(out.add(r * stride + v * L), *a);
                    }
                }
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::super::super::lanes::avx512::*;
    use super::{Product, Rows};

    /// Rows of `a` per tile.
    const MR: usize = 8;
    /// Vectors of columns per tile (24 accumulators of 32 registers).
    const NV: usize = 3;

    tiles!("avx512f");
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::super::super::lanes::avx2::*;
    use super::{Product, Rows};

    /// Rows of `a` per tile.
    const MR: usize = 6;
    /// Vectors of columns per tile (12 accumulators of 16 registers).
    const NV: usize = 2;

    tiles!("avx2,fma");
}

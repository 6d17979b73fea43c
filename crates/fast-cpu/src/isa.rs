//! Which of `gemm`'s micro-kernels the fast kernels' GEMMs run: what `gemm` chooses at run time
//! (AVX-512 where the CPU has AVX-512F, built in by its `x86-v4` feature; else FMA), or the FMA
//! kernels on an AVX-512 CPU when `TRAINER_CPU_AVX512=0` is set, to compare the two on one
//! machine. The switch covers the GEMMs of the fast kernels (convolutions, 2-D matrix products,
//! the benches' floor); operations Flex runs itself keep `gemm`'s own choice.

use std::sync::LazyLock;

use gemm::Parallelism;

/// The environment variable that turns the AVX-512 micro-kernels off (`0`).
pub const AVX512_VAR: &str = "TRAINER_CPU_AVX512";

/// Whether `TRAINER_CPU_AVX512=0` is set (read once).
static FMA_FORCED: LazyLock<bool> =
    LazyLock::new(|| std::env::var(AVX512_VAR).is_ok_and(|v| v.trim() == "0"));

/// Whether the fast kernels run `gemm`'s AVX-512 micro-kernels on this CPU.
pub fn avx512_in_use() -> bool {
    cpu_has_avx512() && !*FMA_FORCED
}

/// Whether the CPU has AVX-512F.
pub fn cpu_has_avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU has AVX2, which the thin matrix products' eight-lane loops use.
pub(super) fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU has AVX2 and FMA, which the `avx2` convolution tiles and the eight-lane
/// `exp`, `ln_1p` and sigmoid need.
pub(super) fn avx2_and_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx2() && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The environment that keeps a PyTorch contender off AVX-512 as well when the switch is set on an
/// AVX-512 CPU, so that both sides of the bench run as on a CPU without it: ATen's vectorised
/// kernels, oneDNN (convolutions) and MKL (matrix products) each have their own cap. Empty
/// otherwise.
pub fn pytorch_env() -> &'static [(&'static str, &'static str)] {
    if fma_forced() {
        &[
            ("ATEN_CPU_CAPABILITY", "avx2"),
            ("ONEDNN_MAX_CPU_ISA", "AVX2"),
            ("MKL_ENABLE_INSTRUCTIONS", "AVX2"),
        ]
    } else {
        &[]
    }
}

/// Whether the FMA micro-kernels must replace `gemm`'s own choice (the switch is set and the
/// CPU has AVX-512F, so that `gemm` would choose those).
pub(super) fn fma_forced() -> bool {
    *FMA_FORCED && cpu_has_avx512()
}

/// `gemm::gemm` with `gemm`'s FMA micro-kernels whatever the CPU (which must have AVX2 and
/// FMA). Non-negative strides only; the transposition to a column-major destination is
/// `gemm::gemm`'s own.
///
/// # Safety
/// As `gemm::gemm`: every element read or written must be inside its allocation.
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_fma(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut f32,
    (dst_cs, dst_rs): (isize, isize),
    read_dst: bool,
    lhs: *const f32,
    (lhs_cs, lhs_rs): (isize, isize),
    rhs: *const f32,
    (rhs_cs, rhs_rs): (isize, isize),
    parallelism: Parallelism,
) {
    use gemm_common::simd::{MixedSimd, V3};
    use gemm_f32::microkernel::fma::f32::{H_M, H_N, H_UKR, MR_DIV_N, NR, UKR};
    /// f32 lanes of an AVX2 register.
    const N: usize = 8;
    // The micro-kernels prefer a column-major destination: transpose the product if not.
    let (m, n, dst_cs, dst_rs, lhs, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs) = if dst_cs < dst_rs {
        (
            n, m, dst_rs, dst_cs, rhs, rhs_rs, rhs_cs, lhs, lhs_rs, lhs_cs,
        )
    } else {
        (
            m, n, dst_cs, dst_rs, lhs, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs,
        )
    };
    let simd = <V3 as MixedSimd<f32, f32, f32, f32>>::try_new()
        .expect("gemm_fma is only called on CPUs with AVX-512F, which have AVX2 and FMA");
    // SAFETY: the caller's contract; the kernels and their dimensions are gemm's own FMA set,
    // as its `fma::gemm_basic` passes them.
    unsafe {
        gemm_common::gemm::gemm_basic_generic::<_, f32, N, { MR_DIV_N * N }, NR, MR_DIV_N, H_M, H_N>(
            simd,
            m,
            n,
            k,
            dst,
            dst_cs,
            dst_rs,
            read_dst,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs,
            rhs_cs,
            rhs_rs,
            1.0,
            1.0,
            false,
            false,
            false,
            |a, b, c| a * b + c,
            &UKR,
            &H_UKR,
            false,
            parallelism,
        )
    }
}

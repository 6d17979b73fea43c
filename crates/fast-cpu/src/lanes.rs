//! The vector helpers of our register tiles, once per instruction set: `avx512` (16 `f32`
//! lanes, 32 registers) and `avx2` (AVX2 + FMA, 8 lanes, 16 registers). Each module has the
//! same names (`L`, `zero`, `splat`, `load`, `store`, `add`, `fma`, `store_lanes`), so that a
//! tile written once as a macro ([`direct`](super::direct)'s, [`winograd`](super::winograd)'s)
//! compiles for both; and an 8 × 8 transpose.

#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use std::arch::x86_64::*;

    /// `f32` lanes of a register.
    pub(in super::super) const L: usize = 16;

    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in super::super) fn zero() -> __m512 {
        _mm512_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in super::super) fn splat(v: f32) -> __m512 {
        _mm512_set1_ps(v)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in super::super) unsafe fn load(p: *const f32) -> __m512 {
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in super::super) unsafe fn store(p: *mut f32, v: __m512) {
        unsafe { _mm512_storeu_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in super::super) fn add(a: __m512, b: __m512) -> __m512 {
        _mm512_add_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in super::super) fn fma(a: __m512, b: __m512, c: __m512) -> __m512 {
        _mm512_fmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx512f")]
    pub(in super::super) unsafe fn store_lanes(p: *mut f32, v: __m512, lo: usize, hi: usize) {
        let mask = ((1u32 << hi) - (1u32 << lo)) as u16;
        unsafe { _mm512_mask_storeu_ps(p, mask, v) }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use std::arch::x86_64::*;

    /// `f32` lanes of a register.
    pub(in super::super) const L: usize = 8;

    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) fn zero() -> __m256 {
        _mm256_setzero_ps()
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) fn splat(v: f32) -> __m256 {
        _mm256_set1_ps(v)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) unsafe fn load(p: *const f32) -> __m256 {
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) unsafe fn store(p: *mut f32, v: __m256) {
        unsafe { _mm256_storeu_ps(p, v) }
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) fn add(a: __m256, b: __m256) -> __m256 {
        _mm256_add_ps(a, b)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) fn fma(a: __m256, b: __m256, c: __m256) -> __m256 {
        _mm256_fmadd_ps(a, b, c)
    }
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    pub(in super::super) unsafe fn store_lanes(p: *mut f32, v: __m256, lo: usize, hi: usize) {
        let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        let after_lo = _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo as i32 - 1));
        let before_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi as i32), lane);
        let mask = _mm256_and_si256(after_lo, before_hi);
        unsafe { _mm256_maskstore_ps(p, mask, v) }
    }
}

/// `dst[j · ds + i] = src[i · ss + j]` for `i, j < 8`: an 8 × 8 block transposed in registers.
///
/// # Safety
/// The CPU has AVX; rows `src + i · ss` and `dst + j · ds` hold 8 values each.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
pub(super) unsafe fn transpose8(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    use std::arch::x86_64::*;
    unsafe {
        let r = |i: usize| _mm256_loadu_ps(src.add(i * ss));
        let (r0, r1, r2, r3, r4, r5, r6, r7) = (r(0), r(1), r(2), r(3), r(4), r(5), r(6), r(7));
        let (t0, t1) = (_mm256_unpacklo_ps(r0, r1), _mm256_unpackhi_ps(r0, r1));
        let (t2, t3) = (_mm256_unpacklo_ps(r2, r3), _mm256_unpackhi_ps(r2, r3));
        let (t4, t5) = (_mm256_unpacklo_ps(r4, r5), _mm256_unpackhi_ps(r4, r5));
        let (t6, t7) = (_mm256_unpacklo_ps(r6, r7), _mm256_unpackhi_ps(r6, r7));
        let (u0, u1) = (
            _mm256_shuffle_ps::<0x44>(t0, t2),
            _mm256_shuffle_ps::<0xEE>(t0, t2),
        );
        let (u2, u3) = (
            _mm256_shuffle_ps::<0x44>(t1, t3),
            _mm256_shuffle_ps::<0xEE>(t1, t3),
        );
        let (u4, u5) = (
            _mm256_shuffle_ps::<0x44>(t4, t6),
            _mm256_shuffle_ps::<0xEE>(t4, t6),
        );
        let (u6, u7) = (
            _mm256_shuffle_ps::<0x44>(t5, t7),
            _mm256_shuffle_ps::<0xEE>(t5, t7),
        );
        let rows = [
            _mm256_permute2f128_ps::<0x20>(u0, u4),
            _mm256_permute2f128_ps::<0x20>(u1, u5),
            _mm256_permute2f128_ps::<0x20>(u2, u6),
            _mm256_permute2f128_ps::<0x20>(u3, u7),
            _mm256_permute2f128_ps::<0x31>(u0, u4),
            _mm256_permute2f128_ps::<0x31>(u1, u5),
            _mm256_permute2f128_ps::<0x31>(u2, u6),
            _mm256_permute2f128_ps::<0x31>(u3, u7),
        ];
        for (j, row) in rows.into_iter().enumerate() {
            _mm256_storeu_ps(dst.add(j * ds), row);
        }
    }
}

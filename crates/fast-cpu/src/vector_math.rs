//! e^x, σ(x) = 1 / (1 + e^−x) and ln(1 + x), eight values at a time with AVX2 + FMA.
//! CLG-ODE's topology loss takes σ of every edge of every prediction at every threshold
//! (`[G, K, N²]`, 2.6 M values for two subjects of 400 nodes at 8 thresholds), 34 times per
//! training step: with the scalar `exp` that was 14 % of the default objective's step on a
//! 2-core Zen 3; `ln_1p` (30 calls) and `exp` (38) took another 3 % and 2 %.
//!
//! * e^x is Cephes' `expf`: n = round(x·log₂e), r = x − n·ln 2 in two parts (Cody–Waite), e^r
//!   by its degree-6 polynomial, times 2^n built from the exponent bits in two halves so that
//!   results below f32's normal range come out subnormal and those above it infinite, as the
//!   scalar `exp` gives them.
//! * σ is the scalar formula, two-sided so that neither side loses precision: with
//!   e = e^−|x|, σ = 1 / (1 + e) for x ≥ 0 and e / (1 + e) for x < 0.
//! * ln(1 + x) is ln(u)·x / (u − 1) with u = 1 + x rounded (x itself where u = 1), which
//!   cancels u's rounding error (Goldberg, "What every computer scientist should know about
//!   floating-point arithmetic", theorem 4); ln(u) is Cephes' `logf`: u = m·2^e with m in
//!   [√½, √2), ln m by its degree-9 polynomial in m − 1.
//!
//! Measured against the scalar forms (`f32::exp`, `ln_1p`) over ±100 (the unit tests below;
//! they allow 1e-6): at most 1.2e-7 (e^x and ln(1 + x)) and 1.7e-7 (σ) relative, 1 to 2 f32
//! ulps. NaN stays NaN; ±∞, 0 and −1 give what the scalar forms give.
//!
//! Which path runs is the CPU's, chosen at run time (AVX2 + FMA, which every AVX-512 CPU has
//! as well, or the scalar forms): the same binary on the same CPU gives the same bits, and each
//! value is computed on its own, so the thread count does not matter.

/// The scalar form, exact for large |x| on both sides (Flex's own).
pub(super) fn sigmoid(x: f32) -> f32 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// `pub(super) fn $name(values: &mut [f32])`: `$simd` eight values at a time where the CPU has
/// AVX2 + FMA, else `$scalar` of each value.
macro_rules! in_place {
    ($(#[$doc:meta])* $name:ident, $simd:ident, $scalar:expr) => {
        $(#[$doc])*
        pub(super) fn $name(values: &mut [f32]) {
            #[cfg(target_arch = "x86_64")]
            if super::isa::avx2_and_fma() {
                // SAFETY: the CPU has AVX2 and FMA.
                unsafe { avx2::map(values, |x| avx2::$simd(x)) };
                return;
            }
            values.iter_mut().for_each(|v| *v = $scalar(*v));
        }
    };
}

in_place!(
    /// σ of every value, in place.
    sigmoid_in_place,
    sigmoid8,
    sigmoid
);
in_place!(
    /// e^x of every value, in place.
    exp_in_place,
    exp8,
    f32::exp
);
in_place!(
    /// ln(1 + x) of every value, in place.
    log1p_in_place,
    log1p8,
    f32::ln_1p
);

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// f32 lanes of an AVX2 register.
    const L: usize = 8;

    /// `f` of every value, in place, eight at a time (the last few in a padded register).
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn map(values: &mut [f32], f: impl Fn(__m256) -> __m256) {
        let mut chunks = values.chunks_exact_mut(L);
        for c in &mut chunks {
            // SAFETY: `c` holds L values (unaligned loads and stores).
            unsafe {
                let x = _mm256_loadu_ps(c.as_ptr());
                _mm256_storeu_ps(c.as_mut_ptr(), f(x));
            }
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let mut lanes = [0.0f32; L];
            lanes[..rest.len()].copy_from_slice(rest);
            // SAFETY: as above, with `lanes` holding L values.
            unsafe {
                let x = _mm256_loadu_ps(lanes.as_ptr());
                _mm256_storeu_ps(lanes.as_mut_ptr(), f(x));
            }
            rest.copy_from_slice(&lanes[..rest.len()]);
        }
    }

    /// σ of eight values.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn sigmoid8(x: __m256) -> __m256 {
        let sign = _mm256_set1_ps(-0.0);
        // −|x|, no lower than LOWEST (NaN goes on, as in `exp8`).
        let neg = _mm256_or_ps(x, sign);
        let neg = _mm256_max_ps(_mm256_set1_ps(LOWEST), neg);
        let e = exp_in_range(neg);
        let one = _mm256_set1_ps(1.0);
        // x ≥ 0 (false for NaN): 1 / (1 + e); else e / (1 + e).
        let non_negative = _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_setzero_ps());
        let numerator = _mm256_blendv_ps(e, one, non_negative);
        _mm256_div_ps(numerator, _mm256_add_ps(one, e))
    }

    /// ln 2 = LN2_HI + LN2_LO, LN2_HI with few enough bits that n·LN2_HI is exact.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;

    /// Below this, e^x rounds to 0 in f32.
    const LOWEST: f32 = -104.0;
    /// Above this, e^x rounds to infinity in f32.
    const HIGHEST: f32 = 89.0;

    /// e^x of eight values.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn exp8(x: __m256) -> __m256 {
        // `max(bound, v)` and `min(bound, v)` return `v` when `v` is NaN, so NaN goes on (and
        // stays NaN through every step of `exp_in_range`).
        let x = _mm256_max_ps(_mm256_set1_ps(LOWEST), x);
        exp_in_range(_mm256_min_ps(_mm256_set1_ps(HIGHEST), x))
    }

    /// e^v for v in [LOWEST, HIGHEST] (Cephes `expf`).
    #[target_feature(enable = "avx2,fma")]
    fn exp_in_range(v: __m256) -> __m256 {
        const LOG2_E: f32 = std::f32::consts::LOG2_E;
        const P: [f32; 6] = [
            1.987_569_1e-4,
            1.398_199_9e-3,
            8.333_452e-3,
            4.166_579_6e-2,
            1.666_666_5e-1,
            0.5,
        ];
        let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
            _mm256_mul_ps(v, _mm256_set1_ps(LOG2_E)),
        );
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), v);
        let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
        let mut p = _mm256_set1_ps(P[0]);
        for c in &P[1..] {
            p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(*c));
        }
        let r2 = _mm256_mul_ps(r, r);
        let p = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), _mm256_set1_ps(1.0));
        // 2^n as 2^h · 2^(n−h), h = ⌊n/2⌋: each half, in [−75, 64], is a normal f32.
        let n = _mm256_cvtps_epi32(n);
        let h = _mm256_srai_epi32::<1>(n);
        let p = _mm256_mul_ps(p, pow2(h));
        _mm256_mul_ps(p, pow2(_mm256_sub_epi32(n, h)))
    }

    /// ln(1 + x) of eight values.
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn log1p8(x: __m256) -> __m256 {
        let one = _mm256_set1_ps(1.0);
        let u = _mm256_add_ps(one, x);
        // ln(u)·x / (u − 1): x / (u − 1) is 1 but for u's rounding error, which it takes back.
        let corrected = _mm256_mul_ps(ln(u), _mm256_div_ps(x, _mm256_sub_ps(u, one)));
        // Where u = 1 (|x| below half an ulp of 1), ln(1 + x) is x to f32's precision; where
        // u = ∞, ∞ (the quotient is ∞ / ∞).
        let tiny = _mm256_cmp_ps::<_CMP_EQ_OQ>(u, one);
        let corrected = _mm256_blendv_ps(corrected, x, tiny);
        let infinite = _mm256_cmp_ps::<_CMP_EQ_OQ>(u, _mm256_set1_ps(f32::INFINITY));
        _mm256_blendv_ps(corrected, u, infinite)
    }

    /// ln(u) of eight values (Cephes `logf`) for finite u ≥ 0 (−∞ at 0), NaN for u < 0 or NaN.
    #[target_feature(enable = "avx2,fma")]
    fn ln(u: __m256) -> __m256 {
        const SQRT_HALF: f32 = std::f32::consts::FRAC_1_SQRT_2;
        const P: [f32; 9] = [
            7.037_683_6e-2,
            -1.151_461e-1,
            1.167_699_9e-1,
            -1.242_014_1e-1,
            1.424_932_3e-1,
            -1.666_805_8e-1,
            2.000_071_4e-1,
            -2.499_999_4e-1,
            3.333_333e-1,
        ];
        let one = _mm256_set1_ps(1.0);
        // u = m·2^e with m in [½, 1): the exponent bits, and the mantissa bits under ½'s
        // exponent (u ≥ 1.2e-7 here, so never subnormal: 1 + x is 0 or at least 2^−24).
        let bits = _mm256_castps_si256(u);
        let e = _mm256_sub_epi32(_mm256_srli_epi32::<23>(bits), _mm256_set1_epi32(126));
        let mantissa = _mm256_castsi256_ps(_mm256_set1_epi32(0x007F_FFFF));
        let m = _mm256_or_ps(_mm256_and_ps(u, mantissa), _mm256_set1_ps(0.5));
        // m < √½: e − 1 and 2m − 1; else m − 1.
        let low = _mm256_cmp_ps::<_CMP_LT_OQ>(m, _mm256_set1_ps(SQRT_HALF));
        let e = _mm256_sub_ps(_mm256_cvtepi32_ps(e), _mm256_and_ps(one, low));
        let m = _mm256_sub_ps(_mm256_add_ps(m, _mm256_and_ps(m, low)), one);
        let z = _mm256_mul_ps(m, m);
        let mut p = _mm256_set1_ps(P[0]);
        for c in &P[1..] {
            p = _mm256_fmadd_ps(p, m, _mm256_set1_ps(*c));
        }
        let y = _mm256_mul_ps(_mm256_mul_ps(p, m), z);
        let y = _mm256_fmadd_ps(e, _mm256_set1_ps(LN2_LO), y);
        let y = _mm256_fnmadd_ps(_mm256_set1_ps(0.5), z, y);
        let r = _mm256_fmadd_ps(e, _mm256_set1_ps(LN2_HI), _mm256_add_ps(m, y));
        // u = 0: −∞; u < 0 or NaN: NaN.
        let zero = _mm256_cmp_ps::<_CMP_EQ_OQ>(u, _mm256_setzero_ps());
        let r = _mm256_blendv_ps(r, _mm256_set1_ps(f32::NEG_INFINITY), zero);
        let invalid = _mm256_cmp_ps::<_CMP_NGE_UQ>(u, _mm256_setzero_ps());
        _mm256_blendv_ps(r, _mm256_set1_ps(f32::NAN), invalid)
    }

    /// 2^k for integer k in [−126, 127].
    #[target_feature(enable = "avx2,fma")]
    fn pow2(k: __m256i) -> __m256 {
        _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(
            k,
            _mm256_set1_epi32(127),
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Inputs over ±100, f32's edges and the special values.
    fn inputs() -> Vec<f32> {
        let n = 1 << 20;
        (0..n)
            .map(|i| -100.0 + 200.0 * i as f32 / n as f32)
            .chain([
                0.0, -0.0, 1e-30, -1e-30, 1e-45, -1e-45, 88.7, 88.8, -87.5, -88.0,
            ])
            .chain([-103.0, -104.5, 103.0, f32::MAX, f32::MIN])
            .chain([f32::INFINITY, f32::NEG_INFINITY])
            .collect()
    }

    /// The eight-lane form (on a CPU without AVX2 + FMA, the scalar one) against the scalar
    /// one: relative 1e-6 (a few f32 ulps: other polynomials than libm's) where the scalar
    /// result is a normal f32; below that, a few of the subnormals' steps (2^−149); infinities
    /// and NaN as the scalar form.
    fn check(name: &str, simd: fn(&mut [f32]), scalar: fn(f32) -> f32) {
        let inputs = inputs();
        let mut values = inputs.clone();
        simd(&mut values);
        let mut worst = 0.0f64;
        for (x, got) in inputs.iter().zip(&values) {
            let want = scalar(*x);
            let diff = (*got as f64 - want as f64).abs();
            if want.is_nan() {
                assert!(got.is_nan(), "{name}({x}) = {got}, scalar NaN");
            } else if want.is_infinite() || want == 0.0 && x.is_infinite() {
                assert_eq!(*got, want, "{name}({x})");
            } else if want.abs() >= f32::MIN_POSITIVE {
                worst = worst.max(diff / want.abs() as f64);
            } else {
                assert!(diff <= 4.0 * 1.5e-45, "{name}({x}) = {got}, scalar {want}");
            }
        }
        assert!(worst <= 1e-6, "{name}: worst relative difference {worst:e}");
        let mut nan = [f32::NAN; 11];
        simd(&mut nan);
        assert!(nan.iter().all(|v| v.is_nan()), "{name}(NaN) = {nan:?}");
    }

    #[test]
    fn sigmoid_matches_the_scalar_form() {
        check("σ", sigmoid_in_place, sigmoid);
        let mut values = inputs();
        sigmoid_in_place(&mut values);
        assert!(values.iter().all(|v| (0.0..=1.0).contains(v)));
    }

    #[test]
    fn exp_matches_the_scalar_form() {
        check("exp", exp_in_place, f32::exp);
    }

    #[test]
    fn log1p_matches_the_scalar_form() {
        check("ln_1p", log1p_in_place, f32::ln_1p);
        // Near −1, where 1 + x loses most of x's digits, and at −1 and below.
        let mut near: Vec<f32> = (1..4096).map(|i| -1.0 + i as f32 * 6e-8).collect();
        near.extend([-1.0, -1.5, -1e30]);
        let want: Vec<f32> = near.iter().map(|x| x.ln_1p()).collect();
        log1p_in_place(&mut near);
        for (got, want) in near.iter().zip(&want) {
            let same = got == want || got.is_nan() && want.is_nan();
            assert!(
                same || ((got - want) / want).abs() <= 1e-6,
                "{got} vs {want}"
            );
        }
    }
}

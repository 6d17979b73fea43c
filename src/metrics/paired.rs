//! Paired statistics over subjects: for one metric, the per-subject differences between two
//! forecasters on the same test subjects, their mean with a bootstrap 95% confidence interval
//! (resampling subjects, seeded) and the Wilcoxon signed-rank test's two-sided p-value, computed
//! as `scipy.stats.wilcoxon` does by default (zeros dropped, exact null distribution for at most
//! 50 differences without a zero, else the normal approximation with the tie correction and no
//! continuity correction). `tests/sweep/compare_paired.rs` checks both against scipy. The p-values of
//! a table's comparisons are adjusted together by Holm's step-down method ([`holm`], as
//! statsmodels' `multipletests(method="holm")`; checked in `tests/sweep/compare_pairing.rs`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// Resamples of the bootstrap.
pub(crate) const RESAMPLES: usize = 10_000;

/// Seed of the bootstrap in `compare --against` and `eval-gnn` (fixed: a table printed twice is
/// the same table).
pub const SEED: u64 = 0x5eed;

/// The paired comparison of one metric over `n` subjects: `d_i = a_i − b_i`.
///
/// Statistics that cannot be computed are NaN (JSON `null`): all of them without a difference
/// or when a difference is not finite (NaN, ±inf), the p-value without a non-zero difference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Paired {
    pub n: usize,
    pub mean: f64,
    /// Percentile bootstrap 95% interval of the mean.
    pub ci_low: f64,
    pub ci_high: f64,
    /// Subjects with `d < 0` and with `d > 0`.
    pub below: usize,
    pub above: usize,
    /// Two-sided Wilcoxon signed-rank p-value (NaN without a non-zero difference).
    pub p_wilcoxon: f64,
    /// `p_wilcoxon` adjusted by Holm's method over the comparisons of a table ([`holm`]; NaN
    /// where `p_wilcoxon` is); `None` outside a table (not serialised).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_holm: Option<f64>,
    /// Every pair of values agrees to [`ROUNDING`] of itself: the two forecasts are one forecast
    /// up to float rounding, so no test is made (`p_wilcoxon` NaN) and tables say so.
    pub rounding_only: bool,
}

/// Relative gap below which two per-subject values are one value up to float rounding. A
/// forecast kept in f32 and scored in f64 moves a subject's metric by about 1e-7 of itself per
/// rounding (at most 8e-7 measured between `--preset eb-residual` and the eb-drift forecast it
/// kept, docs/frontier.md); a real difference between forecasters is orders larger.
pub(crate) const ROUNDING: f64 = 1e-5;

impl Paired {
    /// Whether the mean and its interval could be computed (at least one difference, all
    /// finite).
    pub fn computable(&self) -> bool {
        self.mean.is_finite() && self.ci_low.is_finite() && self.ci_high.is_finite()
    }
}

/// The paired statistics of `d` (bootstrap drawn from `seed`). Without a difference, or with a
/// non-finite one, nothing is computed: the mean, the interval and the p-value are NaN.
pub(crate) fn paired(d: &[f64], seed: u64) -> Paired {
    let n = d.len();
    if n == 0 || d.iter().any(|x| !x.is_finite()) {
        return Paired {
            n,
            mean: f64::NAN,
            ci_low: f64::NAN,
            ci_high: f64::NAN,
            below: d.iter().filter(|&&x| x < 0.0).count(),
            above: d.iter().filter(|&&x| x > 0.0).count(),
            p_wilcoxon: f64::NAN,
            p_holm: None,
            rounding_only: false,
        };
    }
    let mean = d.iter().sum::<f64>() / n as f64;
    let (ci_low, ci_high) = bootstrap_ci(d, seed, RESAMPLES);
    Paired {
        n,
        mean,
        ci_low,
        ci_high,
        below: d.iter().filter(|&&x| x < 0.0).count(),
        above: d.iter().filter(|&&x| x > 0.0).count(),
        p_wilcoxon: wilcoxon(d),
        p_holm: None,
        rounding_only: false,
    }
}

/// [`paired`] of `d_i = a_i − b_i`, marked [`Paired::rounding_only`] (and without a p-value)
/// when every `|a_i − b_i| ≤ ROUNDING · max(|a_i|, |b_i|)` and at least one differs.
pub fn paired_values(ab: &[(f64, f64)], seed: u64) -> Paired {
    let d: Vec<f64> = ab.iter().map(|(a, b)| a - b).collect();
    let mut p = paired(&d, seed);
    let rounding = p.computable()
        && d.iter().any(|&x| x != 0.0)
        && ab
            .iter()
            .all(|(a, b)| (a - b).abs() <= ROUNDING * a.abs().max(b.abs()));
    if rounding {
        p.rounding_only = true;
        p.p_wilcoxon = f64::NAN;
    }
    p
}

/// Holm's step-down adjustment of the p-values `p`, as statsmodels'
/// `multipletests(p, method="holm")` over the finite ones (the family: a NaN, a comparison
/// without a p-value, is no test and stays NaN): the k-th smallest of m becomes
/// `max over j ≤ k of min(1, (m − j + 1) · p_(j))`.
pub(crate) fn holm(p: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p.len()).filter(|&i| p[i].is_finite()).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let m = order.len();
    let mut out = vec![f64::NAN; p.len()];
    let mut running = 0f64;
    for (k, &i) in order.iter().enumerate() {
        running = running.max(((m - k) as f64 * p[i]).min(1.0));
        out[i] = running;
    }
    out
}

/// The percentile bootstrap 95% interval of the mean of `d`: `resamples` means of `n` subjects
/// drawn with replacement, their 2.5th and 97.5th percentiles (linear interpolation, as
/// numpy's default). NaN for no difference, a non-finite one or no resample.
pub fn bootstrap_ci(d: &[f64], seed: u64, resamples: usize) -> (f64, f64) {
    let n = d.len();
    if n == 0 || resamples == 0 || d.iter().any(|x| !x.is_finite()) {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| d[rng.random_range(0..n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    (percentile(&means, 2.5), percentile(&means, 97.5))
}

/// The `q`-th percentile of sorted `v` with linear interpolation.
fn percentile(v: &[f64], q: f64) -> f64 {
    let pos = q / 100.0 * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Average ranks (1-based) of `v`, and the sizes of its groups of ties.
fn ranks(v: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut order: Vec<usize> = (0..v.len()).collect();
    order.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut ties = Vec::new();
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && v[order[j + 1]] == v[order[i]] {
            j += 1;
        }
        let avg = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            r[k] = avg;
        }
        ties.push(j - i + 1);
        i = j + 1;
    }
    (r, ties)
}

/// The exact null distribution of the signed-rank statistic W⁺ for `n` non-zero differences
/// without ties: P(W⁺ = k), k = 0 … n(n+1)/2.
fn null_pmf(n: usize) -> Vec<f64> {
    let max = n * (n + 1) / 2;
    let mut counts = vec![0.0f64; max + 1];
    counts[0] = 1.0;
    for rank in 1..=n {
        for k in (rank..=max).rev() {
            counts[k] += counts[k - rank];
        }
    }
    let total = 2f64.powi(n as i32);
    counts.iter().map(|c| c / total).collect()
}

/// Two-sided p-value of the Wilcoxon signed-rank test of `d` against 0, as
/// `scipy.stats.wilcoxon(d)` with its defaults; NaN when a difference is not finite.
pub fn wilcoxon(d: &[f64]) -> f64 {
    if d.iter().any(|x| !x.is_finite()) {
        return f64::NAN;
    }
    let nonzero: Vec<f64> = d.iter().copied().filter(|&x| x != 0.0).collect();
    let n = nonzero.len();
    if n == 0 {
        return f64::NAN;
    }
    let abs: Vec<f64> = nonzero.iter().map(|x| x.abs()).collect();
    let (r, ties) = ranks(&abs);
    let r_plus: f64 = nonzero
        .iter()
        .zip(&r)
        .filter(|(x, _)| **x > 0.0)
        .map(|(_, r)| r)
        .sum();
    let exact = d.len() <= 50 && n == d.len();
    if exact {
        let pmf = null_pmf(n);
        let cdf = |k: f64| pmf[..=(k as usize).min(pmf.len() - 1)].iter().sum::<f64>();
        let sf = |k: f64| pmf[(k as usize).min(pmf.len())..].iter().sum::<f64>();
        return (2.0 * sf(r_plus.floor()).min(cdf(r_plus.ceil()))).clamp(0.0, 1.0);
    }
    let nf = n as f64;
    let mean = nf * (nf + 1.0) / 4.0;
    let tie: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
    let se = ((nf * (nf + 1.0) * (2.0 * nf + 1.0) - tie / 2.0) / 24.0).sqrt();
    let z = (r_plus - mean) / se;
    2.0 * normal_sf(z.abs())
}

/// P(Z > z) of a standard normal, through erfc (Numerical Recipes' erfc, relative error below
/// 1.2e-7).
fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_null_distribution_sums_to_one_and_is_symmetric() {
        let p = null_pmf(10);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        for k in 0..p.len() {
            assert_eq!(p[k], p[p.len() - 1 - k]);
        }
    }

    #[test]
    fn a_clear_shift_is_significant_and_no_shift_is_not() {
        let shifted: Vec<f64> = (1..=20).map(|i| i as f64 * 0.1).collect();
        assert!(wilcoxon(&shifted) < 1e-4);
        let balanced: Vec<f64> = (1..=20)
            .map(|i| if i % 2 == 0 { i as f64 } else { -(i as f64) })
            .collect();
        assert!(wilcoxon(&balanced) > 0.5);
        let s = paired(&shifted, 1);
        assert!(s.ci_low > 0.0 && s.ci_low < s.mean && s.mean < s.ci_high);
        assert_eq!((s.below, s.above), (0, 20));
    }

    #[test]
    fn non_finite_or_no_differences_compute_nothing_and_never_panic() {
        for d in [
            vec![],
            vec![1.0, f64::NAN, 2.0],
            vec![f64::INFINITY, 1.0],
            vec![f64::NEG_INFINITY; 60],
        ] {
            let p = paired(&d, 1);
            assert!(!p.computable(), "{d:?}: {p:?}");
            assert!(p.mean.is_nan() && p.ci_low.is_nan() && p.p_wilcoxon.is_nan());
            assert!(wilcoxon(&d).is_nan());
            assert!(bootstrap_ci(&d, 1, 100).0.is_nan());
        }
        let json = serde_json::to_value(paired(&[f64::NAN], 1)).unwrap();
        assert!(
            json["ci_low"].is_null() && json["p_wilcoxon"].is_null(),
            "{json}"
        );
        assert!(paired(&[0.5], 1).computable());
    }

    #[test]
    fn rounding_only_differences_are_marked_and_not_tested() {
        // Eight subjects, the second value one f32 rounding (1.2e-7 relative) off the first.
        let ab: Vec<(f64, f64)> = (1..=8)
            .map(|i| {
                let a = 0.01 * i as f64;
                (a, a * (1.0 + 1.2e-7 * if i % 3 == 0 { -1.0 } else { 1.0 }))
            })
            .collect();
        let p = paired_values(&ab, 1);
        assert!(
            p.rounding_only && p.p_wilcoxon.is_nan() && p.computable(),
            "{p:?}"
        );
        // A real difference (1e-3 relative on one subject) is tested.
        let mut real = ab.clone();
        real[0].1 = real[0].0 * (1.0 + 1e-3);
        let p = paired_values(&real, 1);
        assert!(!p.rounding_only && p.p_wilcoxon.is_finite(), "{p:?}");
        // Identical values are no rounding: their p-value is NaN already (no non-zero d).
        let same: Vec<(f64, f64)> = ab.iter().map(|&(a, _)| (a, a)).collect();
        let p = paired_values(&same, 1);
        assert!(!p.rounding_only && p.p_wilcoxon.is_nan(), "{p:?}");
        let json = serde_json::to_value(paired_values(&ab, 1)).unwrap();
        assert_eq!(json["rounding_only"], true, "{json}");
    }

    #[test]
    fn holm_steps_down_over_the_finite_p_values() {
        let adjusted = holm(&[0.01, f64::NAN, 0.04, 0.03, 0.5]);
        let expect = [0.04, f64::NAN, 0.09, 0.09, 0.5];
        for (a, e) in adjusted.iter().zip(expect) {
            assert!(a == &e || (a - e).abs() < 1e-15 || (a.is_nan() && e.is_nan()));
        }
        assert_eq!(holm(&[0.6, 0.6]), [1.0, 1.0]);
        assert!(holm(&[]).is_empty());
    }
}

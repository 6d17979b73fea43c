//! The fit and the forecast on hand-made cohorts.

use super::*;
use crate::models::vector_lstm::upper_triangle;

/// `n`-node matrix whose upper-triangle log1p weights are `f(edge)`.
fn matrix(n: usize, f: impl Fn(usize) -> f64) -> Array2<f32> {
    let mut a = Array2::zeros((n, n));
    let mut e = 0;
    for i in 0..n {
        for j in i + 1..n {
            let w = f(e).exp_m1() as f32;
            a[(i, j)] = w;
            a[(j, i)] = w;
            e += 1;
        }
    }
    a
}

/// N of an upper triangle of `v.len()` values.
fn n_of(v: &[f32]) -> usize {
    (1..).find(|n| n * (n - 1) / 2 >= v.len()).unwrap_or(1)
}

/// The fit's view of `subjects` (each its `(age, upper triangle)` scans), sex unknown.
fn eb_scans(subjects: &[Vec<(f64, Vec<f32>)>]) -> Vec<Vec<EbScan<'_>>> {
    subjects
        .iter()
        .map(|s| {
            s.iter()
                .map(|(age, a)| EbScan {
                    age: *age,
                    n: n_of(a),
                    a_raw: a,
                    sex: 0,
                })
                .collect()
        })
        .collect()
}

/// The strict upper triangle of `a`, row-major.
fn tri(a: &Array2<f32>) -> Vec<f32> {
    let n = a.nrows();
    upper_triangle(a.as_slice().expect("standard layout"), n)
}

#[test]
fn without_visit_noise_it_is_the_linear_drift() {
    // Every edge present, each subject its own offset, one drift per edge for everyone.
    let n = 6;
    let drift = |e: usize| 0.05 * (e as f64 % 3.0) - 0.04;
    let subjects: Vec<Vec<(f64, Vec<f32>)>> = (0..8)
        .map(|s| {
            let base = |e: usize| 1.0 + 0.3 * s as f64 + 0.1 * ((e * 7 + s) % 5) as f64;
            let age0 = 9.0 + 0.25 * s as f64;
            (0..2 + s % 2)
                .map(|v| {
                    let age = age0 + 2.0 * v as f64;
                    (age, tri(&matrix(n, |e| base(e) + drift(e) * age)))
                })
                .collect()
        })
        .collect();
    let scans = eb_scans(&subjects);
    let p = EbParams::fit(&scans);
    assert!((p.k_g - 1.0).abs() < 1e-9, "{}", p.k_g);
    assert!(p.p11.iter().all(|&x| x == 1.0));
    let (a0, age0) = (&subjects[3][0].1, subjects[3][0].0);
    let f = p.forecast(a0, age0, age0 + 3.5, 0, ForecastForm::Dense);
    let (y0, _) = upper(a0);
    let mut e = 0;
    for i in 0..n {
        for j in i + 1..n {
            let want = (y0[e] + drift(e) * 3.5).max(0.0).exp_m1();
            let got = f64::from(f[(i, j)]);
            assert!(
                (got - want).abs() <= 1e-5 * want.max(1.0),
                "{e}: {got} {want}"
            );
            e += 1;
        }
    }
}

#[test]
fn existence_is_shrunk_to_the_bin_and_absent_edges_are_hedged() {
    // Three nodes, edge 0 always present, edge 1 flickers, edge 2 never present.
    let a = |w: [f64; 3]| tri(&matrix(3, |e| w[e]));
    let subjects = [
        vec![(10.0, a([1.0, 0.5, 0.0])), (12.0, a([1.1, 0.0, 0.0]))],
        vec![(10.0, a([0.9, 0.0, 0.0])), (12.0, a([1.0, 0.6, 0.0]))],
    ];
    let scans = eb_scans(&subjects);
    let p = EbParams::fit(&scans);
    assert_eq!(p.seen, vec![true, true, false]);
    // Edge 1 appeared once out of one absent pair: p01 > 0, and an absent edge 1 is
    // forecast as a hedged, positive weight; edge 2 never appeared: 0.
    assert!(p.p01[1] > 0.0 && p.p01[2] == 0.0, "{:?}", p.p01);
    let f = p.forecast(&a([1.0, 0.0, 0.0]), 10.0, 12.0, 0, ForecastForm::Dense);
    assert!(f[(0, 2)] > 0.0 && f[(1, 2)] == 0.0, "{f:?}");
    assert!(f.iter().all(|v| v.is_finite() && *v >= 0.0));
}

#[test]
fn a_drift_that_differs_by_sex_and_slows_with_age_gives_the_two_factors() {
    // Every edge present, no noise; over a pair, edge e moves d_e·Δt·(1 − 0.1·(mid − ā) ± 0.3)
    // (+ males, − females; mid the pair's mid-age, ā the mean scan age): step 8's model,
    // exactly (the sexes balanced and the mean mid-age ā, so the per-edge drift is d_e).
    let n = 5;
    let drift = |e: usize| 0.04 * (e as f64 % 4.0) - 0.05;
    let age0 = |s: usize| 9.0 + 0.3 * s as f64;
    let a_bar = (0..12).map(|s| age0(s) + 2.0).sum::<f64>() / 12.0;
    let step = |e: usize, sex: usize, mid: f64| {
        let sign = if sex == 1 { 1.0 } else { -1.0 };
        drift(e) * 2.0 * (1.0 - 0.1 * (mid - a_bar) + 0.3 * sign)
    };
    type Scans = Vec<(f64, Vec<f32>)>;
    let subjects: Vec<(usize, Scans)> = (0..12)
        .map(|s| {
            let sex = 1 + s % 2;
            let base = |e: usize| 1.5 + 0.1 * s as f64 + 0.05 * ((e * 3 + s) % 4) as f64;
            let scans = (0..3)
                .map(|v| {
                    let moved = |e: usize| {
                        (0..v)
                            .map(|k| step(e, sex, age0(s) + 2.0 * k as f64 + 1.0))
                            .sum::<f64>()
                    };
                    (
                        age0(s) + 2.0 * v as f64,
                        tri(&matrix(n, |e| base(e) + moved(e))),
                    )
                })
                .collect();
            (sex, scans)
        })
        .collect();
    let scans: Vec<Vec<EbScan>> = subjects
        .iter()
        .map(|(sex, s)| {
            s.iter()
                .map(|(age, a)| EbScan {
                    age: *age,
                    n: n_of(a),
                    a_raw: a,
                    sex: *sex,
                })
                .collect()
        })
        .collect();
    let p = EbParams::fit(&scans);
    // f32 weights (6e-8 relative) of log1p levels up to ~3 against changes of ~0.1: 1e-4.
    let [age, sex] = p.drift_factors;
    assert!(
        (age + 0.1).abs() < 1e-4 && (sex - 0.3).abs() < 1e-4,
        "{:?}",
        p.drift_factors
    );
    assert!(
        p.exist.is_none(),
        "every edge always present: one label value"
    );
    // The same start scan of a male and of a female: the forecasts differ by the factor alone.
    let (a, a0) = (&subjects[0].1[0].1, subjects[0].1[0].0);
    let (male, _) = upper(&tri(&p.forecast(a, a0, a0 + 2.0, 1, ForecastForm::Dense)));
    let (female, _) = upper(&tri(&p.forecast(a, a0, a0 + 2.0, 2, ForecastForm::Dense)));
    for e in 0..male.len() {
        // mult differs by 2·β_sex; the f32 forecasts (6e-8 relative of ~3): 1e-6.
        let want = p.drift[e] * 2.0 * 2.0 * sex;
        assert!((male[e] - female[e] - want).abs() < 1e-6, "edge {e}");
    }
}

#[test]
fn sparse_keep_takes_the_expected_number_of_likeliest_edges() {
    // Σp = 1.9 → 2 edges: the two likeliest, the tie at 0.6 to the lower index.
    assert_eq!(
        sparse_keep(&[0.1, 0.6, 0.6, 0.6]),
        vec![false, true, true, false]
    );
    // Σp = 0.4 → none; Σp = 2.6 → 3, but an edge of probability 0 never.
    assert_eq!(sparse_keep(&[0.2, 0.2, 0.0]), vec![false; 3]);
    assert_eq!(
        sparse_keep(&[1.0, 1.0, 0.6, 0.0]),
        vec![true, true, true, false]
    );
    assert!(sparse_keep(&[]).is_empty());
}

#[test]
fn the_sparse_forecast_keeps_round_sum_p_edges_at_their_level() {
    // Edges that flicker: edge e present at a visit unless (e + s + v) % 4 == 0, so p11 and
    // p01 lie strictly between 0 and 1 and the dense forecast hedges every edge.
    let n = 6;
    let subjects: Vec<Vec<(f64, Vec<f32>)>> = (0..10)
        .map(|s| {
            (0..3)
                .map(|v| {
                    let age = 9.0 + 0.2 * s as f64 + 2.0 * v as f64;
                    let w = |e: usize| {
                        if (e + s + v).is_multiple_of(4) {
                            0.0
                        } else {
                            1.0 + 0.1 * ((e * 5 + s) % 7) as f64
                        }
                    };
                    (age, tri(&matrix(n, w)))
                })
                .collect()
        })
        .collect();
    let scans = eb_scans(&subjects);
    let p = EbParams::fit(&scans);
    let (a0, age0) = (&subjects[4][1].1, subjects[4][1].0);
    let (y0, z0) = upper(a0);
    let parts = p.parts(&y0, &z0, age0, age0 + 2.0, 0);
    assert!(
        parts.iter().any(|(q, _)| *q > 0.05 && *q < 0.95),
        "{parts:?}"
    );
    let dense = tri(&p.forecast(a0, age0, age0 + 2.0, 0, ForecastForm::Dense));
    let sparse = tri(&p.forecast(a0, age0, age0 + 2.0, 0, ForecastForm::Sparse));
    let sum_p: f64 = parts.iter().map(|x| x.0).sum();
    let kept = sparse.iter().filter(|v| **v > 0.0).count();
    assert_eq!(kept, sum_p.round() as usize, "Σp {sum_p}");
    assert!(dense.iter().filter(|v| **v > 0.0).count() > kept);
    for (e, (q, level)) in parts.iter().enumerate() {
        // A kept edge carries its level unshrunk (log1p of the f32 weight: 1e-6).
        if sparse[e] > 0.0 {
            assert!(
                (f64::from(sparse[e]).ln_1p() - level).abs() < 1e-6,
                "edge {e}"
            );
            assert!(
                (f64::from(dense[e]).ln_1p() - q * level).abs() < 1e-6,
                "edge {e}"
            );
        }
    }
}

/// Subjects whose edges follow a population line plus a deviation that persists whole (±0.3,
/// the signs balanced at every age): the global factor fits k = 1 and forecasts the start
/// plus the line's change, on every edge.
#[test]
fn the_global_factor_forecasts_the_line_and_a_persistent_deviation() {
    let n = 5;
    let (a, b) = (
        |e: usize| 1.0 + 0.2 * e as f64,
        |e: usize| 0.03 * e as f64 - 0.1,
    );
    let subjects: Vec<Vec<(f64, Vec<f32>)>> = (0..12)
        .map(|s| {
            let dev = if s % 2 == 0 { 0.3 } else { -0.3 };
            let age0 = 9.0 + 0.5 * (s / 2) as f64;
            (0..2)
                .map(|v| {
                    let age = age0 + 2.0 * v as f64;
                    (age, tri(&matrix(n, |e| a(e) + b(e) * (age - 10.0) + dev)))
                })
                .collect()
        })
        .collect();
    let scans = eb_scans(&subjects);
    let p = EbParams::fit_global_shrink(&scans);
    assert!(p.all_present);
    // f32 weights (6e-8 relative of levels up to ~2): 1e-6.
    assert!((p.k_g - 1.0).abs() < 1e-6, "{}", p.k_g);
    let (a0, age0) = (&subjects[5][0].1, subjects[5][0].0);
    let (y0, _) = upper(a0);
    let (f, _) = upper(&tri(&p.forecast(
        a0,
        age0,
        age0 + 3.0,
        0,
        ForecastForm::Dense,
    )));
    for e in 0..f.len() {
        assert!((f[e] - (y0[e] + 3.0 * b(e))).abs() < 1e-5, "edge {e}");
    }
    // The sparse form keeps every edge (p = 1): the same forecast.
    let sparse = p.forecast(a0, age0, age0 + 3.0, 0, ForecastForm::Sparse);
    assert_eq!(
        tri(&sparse),
        tri(&p.forecast(a0, age0, age0 + 3.0, 0, ForecastForm::Dense))
    );
    // Fewer than five subjects with two scans: no check, eb-drift.
    let (few, choice) = EbParams::fit_checked(&scans[..4]);
    assert_eq!(choice, Choice::Unchecked);
    assert!(!few.all_present);
    // Twelve: the check runs and reports both errors.
    let (_, choice) = EbParams::fit_checked(&scans);
    assert!(matches!(choice, Choice::Checked { eb, global } if eb >= 0.0 && global >= 0.0));
}

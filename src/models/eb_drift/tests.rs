//! The fit and the forecast on hand-made cohorts.

use super::*;

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

#[test]
fn without_visit_noise_it_is_the_linear_drift() {
    // Every edge present, each subject its own offset, one drift per edge for everyone.
    let n = 6;
    let drift = |e: usize| 0.05 * (e as f64 % 3.0) - 0.04;
    let subjects: Vec<Vec<(f64, Array2<f32>)>> = (0..8)
        .map(|s| {
            let base = |e: usize| 1.0 + 0.3 * s as f64 + 0.1 * ((e * 7 + s) % 5) as f64;
            let age0 = 9.0 + 0.25 * s as f64;
            (0..2 + s % 2)
                .map(|v| {
                    let age = age0 + 2.0 * v as f64;
                    (age, matrix(n, |e| base(e) + drift(e) * age))
                })
                .collect()
        })
        .collect();
    let scans: Vec<Vec<EbScan>> = subjects
        .iter()
        .map(|s| {
            s.iter()
                .map(|(age, a)| EbScan {
                    age: *age,
                    a_raw: a,
                })
                .collect()
        })
        .collect();
    let p = EbParams::fit(&scans);
    assert!((p.k_g - 1.0).abs() < 1e-9, "{}", p.k_g);
    assert!(p.p11.iter().all(|&x| x == 1.0));
    let (a0, age0) = (&subjects[3][0].1, subjects[3][0].0);
    let f = p.forecast(a0, age0, age0 + 3.5);
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
    let a = |w: [f64; 3]| matrix(3, |e| w[e]);
    let subjects = [
        vec![(10.0, a([1.0, 0.5, 0.0])), (12.0, a([1.1, 0.0, 0.0]))],
        vec![(10.0, a([0.9, 0.0, 0.0])), (12.0, a([1.0, 0.6, 0.0]))],
    ];
    let scans: Vec<Vec<EbScan>> = subjects
        .iter()
        .map(|s| {
            s.iter()
                .map(|(age, a)| EbScan {
                    age: *age,
                    a_raw: a,
                })
                .collect()
        })
        .collect();
    let p = EbParams::fit(&scans);
    assert_eq!(p.seen, vec![true, true, false]);
    // Edge 1 appeared once out of one absent pair: p01 > 0, and an absent edge 1 is
    // forecast as a hedged, positive weight; edge 2 never appeared: 0.
    assert!(p.p01[1] > 0.0 && p.p01[2] == 0.0, "{:?}", p.p01);
    let f = p.forecast(&a([1.0, 0.0, 0.0]), 10.0, 12.0);
    assert!(f[(0, 2)] > 0.0 && f[(1, 2)] == 0.0, "{f:?}");
    assert!(f.iter().all(|v| v.is_finite() && *v >= 0.0));
}

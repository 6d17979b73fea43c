//! Exact graph topology of a predicted connectome against the true one, beside the reference's
//! heat-kernel estimate: Betti curves at the topology loss's thresholds, and per-node degree and
//! strength correlations.
//!
//! At threshold τ the graph keeps the pairs i < j with log1p(w_ij) ≥ τ (all N nodes stay). β0 is
//! its number of connected components (union–find, `petgraph`), β1 = E − N + β0 its number of
//! independent cycles (the graph is a 1-complex, so this is exact). The thresholds are the true
//! graph's, as in the topology loss: quantiles at linspace(0.05, 0.95, K) of its positive log
//! weights. The prediction is top-k sparsified to the true graph's edge count first, as for the
//! reference's ECC, degree and strength metrics.

use ndarray::ArrayView2;
use petgraph::unionfind::UnionFind;
use serde::{Deserialize, Serialize};

use super::sc::{pearson, sparsify_topk};
use crate::models::clg_ode::objective::topology::thresholds;

/// β0 and β1 at one threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Betti {
    pub b0: usize,
    pub b1: usize,
}

/// The Betti numbers of the graph of `w` (N×N, raw weights; the upper triangle is read) at each
/// of `taus` (log1p domain).
pub(crate) fn betti_curve(w: ArrayView2<f32>, taus: &[f64]) -> Vec<Betti> {
    let n = w.nrows();
    taus.iter()
        .map(|&tau| {
            let mut uf = UnionFind::<usize>::new(n);
            let (mut edges, mut merges) = (0usize, 0usize);
            for i in 0..n {
                for j in i + 1..n {
                    let v = w[(i, j)];
                    // log1p in f64, as the thresholds are taken (`log_weights`): a threshold on a
                    // tie of counts is ln(1 + c) to the last bit, and an f32 log1p rounded below
                    // it would drop the whole tie.
                    if v > 0.0 && f64::from(v).ln_1p() >= tau {
                        edges += 1;
                        if uf.union(i, j) {
                            merges += 1;
                        }
                    }
                }
            }
            let b0 = n - merges;
            Betti {
                b0,
                b1: edges + b0 - n,
            }
        })
        .collect()
}

/// The exact-topology comparison of one prediction with its truth.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ExactTopology {
    /// Σ_τ |β0(pred) − β0(true)| and the same for β1, over the K thresholds.
    #[serde(
        default = "super::absent::nan",
        deserialize_with = "super::absent::null_as_nan"
    )]
    pub betti0_l1: f64,
    #[serde(
        default = "super::absent::nan",
        deserialize_with = "super::absent::null_as_nan"
    )]
    pub betti1_l1: f64,
    /// Pearson r over nodes of degree (edges > 0) and strength (row sum).
    #[serde(
        default = "super::absent::nan",
        deserialize_with = "super::absent::null_as_nan"
    )]
    pub degree_pearson: f64,
    #[serde(
        default = "super::absent::nan",
        deserialize_with = "super::absent::null_as_nan"
    )]
    pub strength_pearson: f64,
}

impl ExactTopology {
    /// `pred` and `truth_raw` N×N raw weights, `k` thresholds. All zeros when the truth has no
    /// positive edge (no thresholds).
    pub(crate) fn of(pred: ArrayView2<f32>, truth_raw: ArrayView2<f32>, k: usize) -> Self {
        let n = truth_raw.nrows();
        let flat: Vec<f32> = truth_raw.iter().copied().collect();
        let Some(taus) = thresholds(&flat, n, k) else {
            return Self::default();
        };
        let edges = (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
            .filter(|&ij| truth_raw[ij] > 0.0)
            .count();
        let (sparse, _) = sparsify_topk(pred, edges);
        let (bp, bt) = (
            betti_curve(sparse.view(), &taus),
            betti_curve(truth_raw, &taus),
        );
        let l1 = |f: fn(&Betti) -> usize| -> f64 {
            bp.iter()
                .zip(&bt)
                .map(|(a, b)| (f(a) as f64 - f(b) as f64).abs())
                .sum()
        };
        let rows = |m: ArrayView2<f32>, f: fn(f32) -> f64| -> Vec<f64> {
            m.outer_iter()
                .map(|r| r.iter().map(|v| f(*v)).sum())
                .collect()
        };
        let degree = |v: f32| f64::from(u8::from(v > 0.0));
        Self {
            betti0_l1: l1(|b| b.b0),
            betti1_l1: l1(|b| b.b1),
            degree_pearson: pearson(&rows(sparse.view(), degree), &rows(truth_raw, degree)),
            strength_pearson: pearson(&rows(sparse.view(), f64::from), &rows(truth_raw, f64::from)),
        }
    }

    /// The mean over items, field by field.
    pub(crate) fn mean(items: &[ExactTopology]) -> Self {
        let m = items.len().max(1) as f64;
        let sum = |f: fn(&ExactTopology) -> f64| items.iter().map(f).sum::<f64>() / m;
        Self {
            betti0_l1: sum(|t| t.betti0_l1),
            betti1_l1: sum(|t| t.betti1_l1),
            degree_pearson: sum(|t| t.degree_pearson),
            strength_pearson: sum(|t| t.strength_pearson),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    fn graph(n: usize, edges: &[(usize, usize, f32)]) -> Array2<f32> {
        let mut w = Array2::zeros((n, n));
        for &(i, j, v) in edges {
            w[(i, j)] = v;
            w[(j, i)] = v;
        }
        w
    }

    #[test]
    fn betti_numbers_of_hand_made_graphs() {
        // A triangle 0-1-2 (one cycle), an edge 3-4, and an isolated node 5.
        let w = graph(6, &[(0, 1, 3.0), (1, 2, 3.0), (0, 2, 3.0), (3, 4, 3.0)]);
        assert_eq!(
            betti_curve(w.view(), &[0.0]),
            [Betti { b0: 3, b1: 1 }],
            "components {{0,1,2}}, {{3,4}}, {{5}}; one cycle"
        );
        // A square with a diagonal: two independent cycles; a weak edge drops out at a higher
        // threshold and opens one of them.
        let w = graph(
            4,
            &[
                (0, 1, 5.0),
                (1, 2, 5.0),
                (2, 3, 5.0),
                (3, 0, 5.0),
                (0, 2, 0.5),
            ],
        );
        let taus = [0.1, 0.5f64.ln_1p() + 1e-6, 10.0];
        assert_eq!(
            betti_curve(w.view(), &taus),
            [
                Betti { b0: 1, b1: 2 },
                Betti { b0: 1, b1: 1 },
                Betti { b0: 4, b1: 0 },
            ]
        );
        // K4: β0 = 1, β1 = 6 − 4 + 1 = 3. Empty graph: β0 = N.
        let k4 = graph(
            4,
            &[
                (0, 1, 1.),
                (0, 2, 1.),
                (0, 3, 1.),
                (1, 2, 1.),
                (1, 3, 1.),
                (2, 3, 1.),
            ],
        );
        assert_eq!(betti_curve(k4.view(), &[0.0]), [Betti { b0: 1, b1: 3 }]);
        let empty = Array2::<f32>::zeros((5, 5));
        assert_eq!(betti_curve(empty.view(), &[0.0]), [Betti { b0: 5, b1: 0 }]);
    }

    /// Streamline counts tie: a quantile threshold that lands inside a tie is ln(1 + c) in f64,
    /// and every edge of weight c must stay (`log1p(w) ≥ τ`). An f32 log1p rounds below the f64
    /// value for some c; the graph then lost the whole tie (β0 = N). Each such c in 1..=2000
    /// (which ones depends on the platform's log1pf; the loop covers them all) is checked.
    #[test]
    fn a_threshold_on_a_tie_of_counts_keeps_the_tie() {
        let mut checked = 0;
        for c in 1..=2000u32 {
            let v = c as f32;
            if f64::from(v.ln_1p()) >= f64::from(v).ln_1p() {
                continue;
            }
            // A path 0-1-2-3 and an edge 4-5, every weight c: thresholds all ln(1 + c).
            let w = graph(6, &[(0, 1, v), (1, 2, v), (2, 3, v), (4, 5, v)]);
            let taus = thresholds(&w.iter().copied().collect::<Vec<_>>(), 6, 4).unwrap();
            assert!(
                taus.iter().all(|&t| t == f64::from(v).ln_1p()),
                "{c}: {taus:?}"
            );
            assert!(
                betti_curve(w.view(), &taus)
                    .iter()
                    .all(|b| *b == Betti { b0: 2, b1: 0 }),
                "count {c}: the tie at the threshold was dropped"
            );
            checked += 1;
        }
        assert!(
            checked > 0,
            "no count whose f32 log1p rounds below the f64 one"
        );
    }

    #[test]
    fn exact_topology_against_the_truth() {
        let truth = graph(5, &[(0, 1, 4.0), (1, 2, 3.0), (2, 0, 2.0), (3, 4, 1.0)]);
        let same = ExactTopology::of(truth.view(), truth.view(), 4);
        assert_eq!((same.betti0_l1, same.betti1_l1), (0.0, 0.0));
        assert!((same.degree_pearson - 1.0).abs() < 1e-12);
        assert!((same.strength_pearson - 1.0).abs() < 1e-12);
        // The prediction breaks the cycle and joins 3-4 to the triangle instead: at the lowest
        // threshold (all four edges kept) β0 is 1 instead of 2 and β1 0 instead of 1.
        let pred = graph(5, &[(0, 1, 4.0), (1, 2, 3.0), (2, 3, 2.0), (3, 4, 1.0)]);
        let t = ExactTopology::of(pred.view(), truth.view(), 1);
        let taus = thresholds(&truth.iter().copied().collect::<Vec<_>>(), 5, 1).unwrap();
        let (bp, bt) = (
            betti_curve(pred.view(), &taus),
            betti_curve(truth.view(), &taus),
        );
        assert_eq!(
            t.betti0_l1,
            (bp[0].b0 as f64 - bt[0].b0 as f64).abs(),
            "{bp:?} {bt:?}"
        );
        assert_eq!(t.betti1_l1, (bp[0].b1 as f64 - bt[0].b1 as f64).abs());
        assert!(t.betti0_l1 + t.betti1_l1 > 0.0);
        let none = ExactTopology::of(pred.view(), Array2::zeros((5, 5)).view(), 4);
        assert_eq!(none, ExactTopology::default());
    }
}

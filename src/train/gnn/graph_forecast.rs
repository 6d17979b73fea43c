//! `--forecast graph`: beside the dense forecast (the log-domain columns), a graph for the
//! topology columns (ECC, Betti curves, degree, strength) of least expected loss over the next
//! scan's noise: a minimum-Bayes-risk choice (docs/frontier.md, "A graph of least expected
//! topology loss"; `scripts/topology_mbr.py` is the numpy prototype this follows).
//!
//! 1. pseudo-truths: for the [`PSEUDO`] training pairs whose dense forecast is nearest the
//!    subject's (squared distance of the log1p upper triangles), their whole-scan residual
//!    `log1p(next scan) − log1p(dense forecast)` added to the subject's dense forecast; zero
//!    below 0.5 and rounded when every training next scan is integer valued (streamline counts),
//!    else zero below 1e-6;
//! 2. candidates: the start scan, the dense forecast, the pseudo-truths, and the same
//!    transplants with the residual shrunk by each of [`SHRINK`];
//! 3. the risk of a candidate: its β0 L1 at each pseudo-truth's 8 thresholds, its ECC L2 and its
//!    strength MAE against every pseudo-truth (a pseudo-truth not against itself), the candidate
//!    top-k sparsified to the pseudo-truths' median edge count, as the metrics score; each of
//!    the three over the start scan's, summed; the least is the forecast graph.

use ndarray::{Array1, Array2, ArrayView2};

use crate::data::connectome::preprocess::{ecc, upper_triangle};
use crate::metrics::sc::sparsify_topk;
use crate::metrics::topology::betti_curve;
use crate::models::clg_ode::objective::topology::thresholds;

/// Pseudo-truths per forecast (nearest training pairs).
pub(crate) const PSEUDO: usize = 32;
/// Residual shrinkages of the extra candidates.
pub(crate) const SHRINK: [f64; 2] = [0.75, 0.5];
/// ECC bins and β0 thresholds, as the test metrics read them.
const ECC_BINS: usize = 32;
const B0_BINS: usize = 8;

/// The fold's training pairs (visit 0 → visit 1): their dense forecasts and whole-scan
/// residuals, log1p upper triangles in f64.
pub(crate) struct Transplants {
    n: usize,
    counts: bool,
    dense: Vec<Vec<f64>>,
    resid: Vec<Vec<f64>>,
}

fn log_upper(a: ArrayView2<f32>) -> Vec<f64> {
    upper_triangle(a)
        .map(|v| f64::from(v.max(0.0)).ln_1p())
        .collect()
}

impl Transplants {
    /// From `(dense forecast, true next scan)` pairs, N×N raw weights. `None` without a pair.
    pub(crate) fn new(pairs: &[(Array2<f32>, Array2<f32>)]) -> Option<Self> {
        let n = pairs.first()?.0.nrows();
        let counts = pairs
            .iter()
            .all(|(_, t)| t.iter().all(|v| v.fract() == 0.0));
        let (dense, resid) = pairs
            .iter()
            .map(|(d, t)| {
                let (ld, lt) = (log_upper(d.view()), log_upper(t.view()));
                let r = lt.iter().zip(&ld).map(|(t, d)| t - d).collect();
                (ld, r)
            })
            .unzip();
        Some(Self {
            n,
            counts,
            dense,
            resid,
        })
    }

    /// The indices of the `count` training pairs nearest `dense_log` (ties: the lower index).
    fn nearest(&self, dense_log: &[f64], count: usize) -> Vec<usize> {
        let dist: Vec<f64> = self
            .dense
            .iter()
            .map(|d| {
                d.iter()
                    .zip(dense_log)
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum()
            })
            .collect();
        let mut order: Vec<usize> = (0..dist.len()).collect();
        order.sort_by(|&a, &b| dist[a].total_cmp(&dist[b]).then(a.cmp(&b)));
        order.truncate(count);
        order
    }

    /// The transplant of pair `j`'s residual, times `alpha`, onto `dense_log`.
    fn transplant(&self, dense_log: &[f64], j: usize, alpha: f64) -> Array2<f32> {
        let mut out = Array2::<f32>::zeros((self.n, self.n));
        let mut e = 0;
        for i in 0..self.n {
            for k in i + 1..self.n {
                let v = (dense_log[e] + alpha * self.resid[j][e]).exp_m1();
                let v = match self.counts {
                    true if v < 0.5 => 0.0,
                    true => v.round(),
                    false if v < 1e-6 => 0.0,
                    false => v,
                };
                out[(i, k)] = v as f32;
                out[(k, i)] = v as f32;
                e += 1;
            }
        }
        out
    }

    /// The forecast graph of a subject whose start scan is `start` and dense forecast `dense`.
    pub(crate) fn choose(&self, start: &Array2<f32>, dense: &Array2<f32>) -> Array2<f32> {
        let dense_log = log_upper(dense.view());
        let near = self.nearest(&dense_log, PSEUDO);
        let pseudos: Vec<Array2<f32>> = near
            .iter()
            .map(|&j| self.transplant(&dense_log, j, 1.0))
            .collect();
        let mut cands: Vec<Array2<f32>> = vec![start.clone(), dense.clone()];
        let mut skip: Vec<Option<usize>> = vec![None, None];
        cands.extend(pseudos.iter().cloned());
        skip.extend((0..pseudos.len()).map(Some));
        for alpha in SHRINK {
            cands.extend(near.iter().map(|&j| self.transplant(&dense_log, j, alpha)));
            skip.extend(std::iter::repeat_n(None, near.len()));
        }
        let r = risks(&cands, &pseudos, &skip);
        let base = r[0];
        let total = |x: &[f64; 3]| -> f64 {
            (0..3)
                .map(|m| if base[m] > 0.0 { x[m] / base[m] } else { 0.0 })
                .sum()
        };
        let best = (0..cands.len())
            .min_by(|&a, &b| total(&r[a]).total_cmp(&total(&r[b])).then(a.cmp(&b)))
            .unwrap_or(0);
        cands.swap_remove(best)
    }
}

/// What a pseudo-truth is scored by: its ECC, β0 thresholds and β0 curve, strengths.
struct Truth {
    ecc: Array1<f64>,
    taus: Option<Vec<f64>>,
    b0: Vec<usize>,
    strength: Vec<f64>,
}

fn strengths(m: ArrayView2<f32>) -> Vec<f64> {
    m.outer_iter()
        .map(|r| r.iter().map(|v| f64::from(*v)).sum())
        .collect()
}

fn edge_count(m: &Array2<f32>) -> usize {
    upper_triangle(m.view()).filter(|&v| v > 0.0).count()
}

/// Per candidate, its summed β0 L1, ECC L2 and strength MAE against the pseudo-truths
/// (candidate `i` not against pseudo-truth `skip[i]`).
pub(crate) fn risks(
    cands: &[Array2<f32>],
    pseudos: &[Array2<f32>],
    skip: &[Option<usize>],
) -> Vec<[f64; 3]> {
    let Some(first) = pseudos.first() else {
        return vec![[0.0; 3]; cands.len()];
    };
    let n = first.nrows();
    let mut counts: Vec<usize> = pseudos.iter().map(edge_count).collect();
    counts.sort_unstable();
    let k = median(&counts);
    let truths: Vec<Truth> = pseudos
        .iter()
        .map(|g| {
            let flat: Vec<f32> = g.iter().copied().collect();
            let taus = thresholds(&flat, n, B0_BINS);
            let b0 = taus
                .as_ref()
                .map(|t| betti_curve(g.view(), t).iter().map(|b| b.b0).collect())
                .unwrap_or_default();
            Truth {
                ecc: ecc(g.mapv(f32::ln_1p).view(), ECC_BINS),
                taus,
                b0,
                strength: strengths(g.view()),
            }
        })
        .collect();
    cands
        .iter()
        .zip(skip)
        .map(|(g, skip)| {
            let (kept, _) = sparsify_topk(g.view(), k);
            let (e, s) = (
                ecc(kept.mapv(f32::ln_1p).view(), ECC_BINS),
                strengths(kept.view()),
            );
            let mut out = [0.0; 3];
            for (p, t) in truths.iter().enumerate() {
                if *skip == Some(p) {
                    continue;
                }
                if let Some(taus) = &t.taus {
                    let b = betti_curve(kept.view(), taus);
                    out[0] += b
                        .iter()
                        .zip(&t.b0)
                        .map(|(x, y)| (x.b0 as f64 - *y as f64).abs())
                        .sum::<f64>();
                }
                out[1] += e
                    .iter()
                    .zip(&t.ecc)
                    .map(|(a, b)| (a - b) * (a - b))
                    .sum::<f64>()
                    .sqrt();
                out[2] += s
                    .iter()
                    .zip(&t.strength)
                    .map(|(a, b)| (a - b).abs())
                    .sum::<f64>()
                    / n as f64;
            }
            out
        })
        .collect()
}

/// numpy's median of sorted integers, truncated to an integer as `int(np.median(.))`.
fn median(sorted: &[usize]) -> usize {
    let m = sorted.len();
    if m == 0 {
        return 0;
    }
    if m % 2 == 1 {
        sorted[m / 2]
    } else {
        (sorted[m / 2 - 1] + sorted[m / 2]) / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym(n: usize, v: &[f32]) -> Array2<f32> {
        crate::data::connectome::SymMatrix::from_upper(n, v.to_vec()).dense()
    }

    /// With pseudo-truths of one edge count (the top-k of the risks is then each one's own), a
    /// candidate's risks are the test metrics' own scores summed: `ExactTopology`'s β0 L1 and
    /// `sc_metrics`' ECC L2 and strength MAE, a skipped pseudo-truth left out.
    #[test]
    fn the_risks_are_the_test_metrics_summed() {
        use crate::metrics::sc::sc_metrics;
        use crate::metrics::topology::ExactTopology;
        let n = 12;
        let e = n * (n - 1) / 2;
        let support: Vec<bool> = (0..e).map(|i| (i * 7) % 5 < 2).collect();
        let values: Vec<f32> = (0..support.iter().filter(|b| **b).count())
            .map(|i| 1.0 + ((i * 13) % 9) as f32)
            .collect();
        let pseudos: Vec<Array2<f32>> = (0..5)
            .map(|r| {
                let mut it =
                    (0..values.len()).map(|i| values[(i * (2 * r + 1) + r) % values.len()]);
                let v: Vec<f32> = support
                    .iter()
                    .map(|&b| if b { it.next().unwrap_or(0.0) } else { 0.0 })
                    .collect();
                sym(n, &v)
            })
            .collect();
        let cand = |seed: usize| {
            let v: Vec<f32> = (0..e)
                .map(|i| ((i * 31 + seed * 17) % 23) as f32 / 3.0)
                .collect();
            sym(n, &v)
        };
        let cands = vec![cand(1), pseudos[2].clone(), cand(2)];
        let skip = [Some(3), Some(2), None];
        let r = risks(&cands, &pseudos, &skip);
        for (i, c) in cands.iter().enumerate() {
            let mut want = [0.0; 3];
            for (p, t) in pseudos.iter().enumerate() {
                if skip[i] == Some(p) {
                    continue;
                }
                let sc = sc_metrics(c.view(), t.view(), t.view(), ECC_BINS);
                want[0] += ExactTopology::of(c.view(), t.view(), B0_BINS).betti0_l1;
                want[1] += sc.ecc_l2;
                want[2] += sc.strength_mae;
            }
            for m in 0..3 {
                assert!(
                    (r[i][m] - want[m]).abs() <= 1e-9 * want[m].abs().max(1.0),
                    "{i} {m}: {:?} {want:?}",
                    r[i]
                );
            }
        }
    }

    /// A training pair's own residual on its own dense forecast gives its next scan back, and
    /// the pair is its own nearest.
    #[test]
    fn a_transplant_gives_its_own_truth_back() {
        let n = 8;
        let e = n * (n - 1) / 2;
        let pairs: Vec<(Array2<f32>, Array2<f32>)> = (0..5)
            .map(|s| {
                let d: Vec<f32> = (0..e)
                    .map(|i| 1.0 + ((i * 7 + s * 3) % 11) as f32)
                    .collect();
                let t: Vec<f32> = (0..e)
                    .map(|i| {
                        if (i + s) % 3 == 0 {
                            0.0
                        } else {
                            ((i * 5 + s) % 13) as f32
                        }
                    })
                    .collect();
                (sym(n, &d), sym(n, &t))
            })
            .collect();
        let tp = Transplants::new(&pairs).unwrap();
        assert!(tp.counts);
        for (j, (d, t)) in pairs.iter().enumerate() {
            let dl = log_upper(d.view());
            assert_eq!(tp.nearest(&dl, 1), vec![j]);
            assert_eq!(&tp.transplant(&dl, j, 1.0), t);
        }
    }
}

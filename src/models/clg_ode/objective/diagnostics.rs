//! Diagnostics of the existence probabilities p̂ = σ(ℓ) against the target's edges (porting
//! note §2.11): mass ratio, mean, quantiles, precision@k (= recall@k) and, on request, AUPRC.
//! No loss uses them.

use rayon::prelude::*;

use super::input::ObjectiveInput;
use super::stats::{Stat, Stats};
use super::topology::quantile_by;

/// The diagnostics of one prediction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct MaskDiag {
    pub ratio: f64,
    pub mean_p: f64,
    pub p10: f64,
    pub p50: f64,
    pub p90: f64,
    pub precision_at_k: f64,
    pub auprc: f64,
}

impl MaskDiag {
    /// The statistics, in the reference's order. recall@k equals precision@k: k is the
    /// number of true edges.
    pub(crate) fn columns(&self) -> [(Stat, f64); 8] {
        [
            (Stat::MaskRatio, self.ratio),
            (Stat::MaskMeanP, self.mean_p),
            (Stat::MaskP10, self.p10),
            (Stat::MaskP50, self.p50),
            (Stat::MaskP90, self.p90),
            (Stat::MaskPrecisionAtK, self.precision_at_k),
            (Stat::MaskRecallAtK, self.precision_at_k),
            (Stat::MaskAuprc, self.auprc),
        ]
    }
}

/// Average precision (scikit-learn's `average_precision_score`): Σ (R_n − R_{n−1})·P_n over
/// the distinct scores in decreasing order, ties taken together.
pub(crate) fn average_precision(scores: &[f64], labels: &[bool]) -> f64 {
    let positives = labels.iter().filter(|&&y| y).count();
    if positives == 0 {
        return 0.0;
    }
    // Unstable: values equal under `total_cmp` are the same bits, and a run of them is taken
    // in one step below, so their order among themselves changes nothing.
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_unstable_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    let (mut tp, mut seen, mut ap, mut last_recall) = (0usize, 0usize, 0.0, 0.0);
    let mut i = 0;
    while i < order.len() {
        let s = scores[order[i]];
        // NaN scores (from NaN logits) tie with each other: `==` alone never advanced past one.
        let tied = |x: f64| x == s || (x.is_nan() && s.is_nan());
        while i < order.len() && tied(scores[order[i]]) {
            tp += labels[order[i]] as usize;
            seen += 1;
            i += 1;
        }
        let recall = tp as f64 / positives as f64;
        ap += (recall - last_recall) * tp as f64 / seen as f64;
        last_recall = recall;
    }
    ap
}

/// The q-quantile of `v` as [`super::topology::quantile_sorted`] of its sorted copy, bit for
/// bit, by selection (O(len), reorders `v`): the value at rank `lo` of the `total_cmp` order,
/// and the least above it for rank `lo + 1`. Values equal under `total_cmp` are the same bits,
/// so which of them lands where does not matter.
fn quantile_select(v: &mut [f64], q: f64) -> f64 {
    quantile_by(v.len(), q, |lo, hi| {
        let (_, &mut at_lo, above) = v.select_nth_unstable_by(lo, f64::total_cmp);
        let at_hi = match hi > lo {
            true => above
                .iter()
                .copied()
                .min_by(f64::total_cmp)
                .unwrap_or(at_lo),
            false => at_lo,
        };
        (at_lo, at_hi)
    })
}

/// The diagnostics of probabilities `p` (upper triangle) against `edge` flags; `None` when
/// the target has no edge.
///
/// Selection, not sorting (79,800 values a prediction at N = 400: ~0.9 ms instead of the two
/// full sorts' ~3.8 ms): the quantiles as [`quantile_select`]; precision@k needs only
/// which indices are the top k under (p descending, index ascending), a strict total order,
/// so the set a selection puts first is the sorted order's first k.
pub(crate) fn mask_diagnostics(p: &[f64], edge: &[bool], auprc: bool) -> Option<MaskDiag> {
    let k = edge.iter().filter(|&&y| y).count();
    if k == 0 || p.is_empty() {
        return None;
    }
    let mut values = p.to_vec();
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.select_nth_unstable_by(k - 1, |&a, &b| p[b].total_cmp(&p[a]).then(a.cmp(&b)));
    let hits = order[..k].iter().filter(|&&i| edge[i]).count();
    Some(MaskDiag {
        ratio: p.iter().sum::<f64>() / k as f64,
        mean_p: p.iter().sum::<f64>() / p.len() as f64,
        p10: quantile_select(&mut values, 0.1),
        p50: quantile_select(&mut values, 0.5),
        p90: quantile_select(&mut values, 0.9),
        precision_at_k: hits as f64 / k as f64,
        auprc: if auprc {
            average_precision(p, edge)
        } else {
            0.0
        },
    })
}

/// Adds every prediction's mask diagnostics (σ of the existence logits `[P,N,N]` against the
/// target's upper-triangle edge indicators `y`) to `stats`. The predictions are independent:
/// computed in parallel, added in prediction order (the sums as a serial loop's).
pub(crate) fn diagnostics_into(
    stats: &mut Stats,
    x: &ObjectiveInput,
    logit: &[f32],
    y: &[f32],
    auprc: bool,
) {
    let (n, nn) = (x.n, x.n * x.n);
    let diags: Vec<Option<MaskDiag>> = (0..x.n_preds())
        .into_par_iter()
        .map(|q| {
            let (mut p, mut edge) = (Vec::new(), Vec::new());
            for i in 0..n {
                for j in i + 1..n {
                    // In f32 as the reference (saturated probabilities tie at 1).
                    let l = logit[q * nn + i * n + j];
                    p.push((1.0 / (1.0 + (-l).exp())) as f64);
                    edge.push(y[q * nn + i * n + j] > 0.0);
                }
            }
            mask_diagnostics(&p, &edge, auprc)
        })
        .collect();
    for m in diags.into_iter().flatten() {
        for (stat, v) in m.columns() {
            stats.add(stat, v, 1.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::super::topology::quantile_sorted;
    use super::*;

    /// `quantile_sorted` as it was before it went through [`quantile_by`].
    fn old_quantile_sorted(sorted: &[f64], q: f64) -> f64 {
        match sorted.len() {
            0 => f64::NAN,
            1 => sorted[0],
            len => {
                let h = (len - 1) as f64 * q.clamp(0.0, 1.0);
                let lo = h.floor() as usize;
                let hi = (lo + 1).min(len - 1);
                sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo])
            }
        }
    }

    /// The implementation by full stable sorts that [`mask_diagnostics`] replaced: the
    /// reference its values must equal bit for bit.
    fn sorted_diagnostics(p: &[f64], edge: &[bool], auprc: bool) -> Option<MaskDiag> {
        let k = edge.iter().filter(|&&y| y).count();
        if k == 0 || p.is_empty() {
            return None;
        }
        let mut sorted = p.to_vec();
        sorted.sort_by(f64::total_cmp);
        let mut order: Vec<usize> = (0..p.len()).collect();
        order.sort_by(|&a, &b| p[b].total_cmp(&p[a]).then(a.cmp(&b)));
        let hits = order[..k].iter().filter(|&&i| edge[i]).count();
        Some(MaskDiag {
            ratio: p.iter().sum::<f64>() / k as f64,
            mean_p: p.iter().sum::<f64>() / p.len() as f64,
            p10: old_quantile_sorted(&sorted, 0.1),
            p50: old_quantile_sorted(&sorted, 0.5),
            p90: old_quantile_sorted(&sorted, 0.9),
            precision_at_k: hits as f64 / k as f64,
            auprc: if auprc {
                sorted_average_precision(p, edge)
            } else {
                0.0
            },
        })
    }

    /// [`average_precision`] with the stable sort it had.
    fn sorted_average_precision(scores: &[f64], labels: &[bool]) -> f64 {
        let positives = labels.iter().filter(|&&y| y).count();
        if positives == 0 {
            return 0.0;
        }
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        let (mut tp, mut seen, mut ap, mut last_recall) = (0usize, 0usize, 0.0, 0.0);
        let mut i = 0;
        while i < order.len() {
            let s = scores[order[i]];
            while i < order.len() && scores[order[i]] == s {
                tp += labels[order[i]] as usize;
                seen += 1;
                i += 1;
            }
            let recall = tp as f64 / positives as f64;
            ap += (recall - last_recall) * tp as f64 / seen as f64;
            last_recall = recall;
        }
        ap
    }

    /// Selection gives the sorts' values exactly, on data full of ties (a few distinct
    /// values, saturated ones, ±0) and continuous data, at every length from 1 and edge
    /// densities from one edge to all; and so do the quantiles at other levels.
    #[test]
    fn selection_equals_the_sorted_reference_bit_for_bit() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(74);
        let bits = |d: &MaskDiag| d.columns().map(|(_, v)| v.to_bits());
        let mut compared = 0;
        for case in 0..400 {
            let len = match case % 4 {
                0 => rng.random_range(1..6),
                1 => rng.random_range(6..60),
                _ => rng.random_range(60..3000),
            };
            let levels = [2, 3, 7, 50, 0][case % 5];
            let p: Vec<f64> = (0..len)
                .map(|_| match levels {
                    0 => rng.random::<f64>(),
                    l => match rng.random_range(0..l + 2) {
                        0 => -0.0,
                        1 => 1.0,
                        v => (v - 1) as f64 / l as f64,
                    },
                })
                .collect();
            let density = [0.0, 0.05, 0.5, 1.0][(case / 4) % 4];
            let edge: Vec<bool> = (0..len).map(|_| rng.random_bool(density)).collect();
            let auprc = case % 3 != 0;
            let (new, old) = (
                mask_diagnostics(&p, &edge, auprc),
                sorted_diagnostics(&p, &edge, auprc),
            );
            assert_eq!(new.is_some(), old.is_some(), "case {case}");
            if let (Some(new), Some(old)) = (new, old) {
                assert_eq!(bits(&new), bits(&old), "case {case}: {new:?} vs {old:?}");
                compared += 1;
            }
            let ap = average_precision(&p, &edge).to_bits();
            assert_eq!(ap, sorted_average_precision(&p, &edge).to_bits());
            // The topology thresholds' quantiles, through `quantile_by` now.
            let mut sorted = p.clone();
            sorted.sort_by(f64::total_cmp);
            for q in [0.0, 0.1, 0.37, 0.5, 0.9, 1.0] {
                let want = old_quantile_sorted(&sorted, q).to_bits();
                assert_eq!(quantile_sorted(&sorted, q).to_bits(), want, "case {case}");
                assert_eq!(quantile_select(&mut p.clone(), q).to_bits(), want);
            }
        }
        // Most cases have an edge (so are compared), not only the empty ones.
        assert!(compared > 200, "{compared}");
    }

    #[test]
    fn average_precision_ends_on_nan_scores() {
        // It looped forever: NaN != NaN kept the tie loop from advancing.
        let ap = average_precision(&[f64::NAN, 0.9, f64::NAN], &[true, true, false]);
        assert!(ap.is_finite(), "{ap}");
    }

    #[test]
    fn average_precision_by_hand() {
        // Ranked: y=1 (P 1/1), y=0, y=1 (P 2/3) → AP = 0.5·1 + 0.5·2/3.
        let ap = average_precision(&[0.9, 0.8, 0.7], &[true, false, true]);
        assert!((ap - (0.5 + 1.0 / 3.0)).abs() < 1e-12);
        // Ties count together: both at 0.5 → precision 1/2 at recall 1.
        assert_eq!(average_precision(&[0.5, 0.5], &[true, false]), 0.5);
        assert_eq!(average_precision(&[0.5], &[false]), 0.0);
    }

    #[test]
    fn diagnostics_of_a_perfect_and_an_empty_target() {
        let d = mask_diagnostics(&[0.9, 0.1, 0.8, 0.2], &[true, false, true, false], true).unwrap();
        assert_eq!(d.precision_at_k, 1.0);
        assert_eq!(d.auprc, 1.0);
        assert!((d.ratio - 1.0).abs() < 1e-12);
        assert!(mask_diagnostics(&[0.5], &[false], false).is_none());
    }
}

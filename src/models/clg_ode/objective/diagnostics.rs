//! Diagnostics of the existence probabilities p̂ = σ(ℓ) against the target's edges (porting
//! note §2.11): mass ratio, mean, quantiles, precision@k (= recall@k) and, on request, AUPRC.
//! No loss uses them.

use super::stats::Stat;
use super::topology::quantile_sorted;

/// The diagnostics of one prediction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaskDiag {
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
    pub fn columns(&self) -> [(Stat, f64); 8] {
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
pub fn average_precision(scores: &[f64], labels: &[bool]) -> f64 {
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

/// The diagnostics of probabilities `p` (upper triangle) against `edge` flags; `None` when
/// the target has no edge.
pub fn mask_diagnostics(p: &[f64], edge: &[bool], auprc: bool) -> Option<MaskDiag> {
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
        p10: quantile_sorted(&sorted, 0.1),
        p50: quantile_sorted(&sorted, 0.5),
        p90: quantile_sorted(&sorted, 0.9),
        precision_at_k: hits as f64 / k as f64,
        auprc: if auprc {
            average_precision(p, edge)
        } else {
            0.0
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

//! The pooling of docs/eb-drift.md's fit (steps 3–7): edges cut into bins by rank, the
//! persistence of deviations, and the beta-binomial shrinkage of existence rates.

/// Bins of the persistence and existence pooling.
const BINS: usize = 10;
/// Prior strength of a fully pooled existence rate.
const FULL_POOLING: f64 = 1e6;
/// Below this a sum of squares is zero.
pub(super) const TINY: f64 = 1e-12;

/// Bin of each of `edges` (sorted by `(value, edge)`, cut by rank into `min(BINS, K)` bins);
/// `None` for edges not listed.
pub(super) fn rank_bins(edges: &[usize], value: &[f64], m: usize) -> (Vec<Option<usize>>, usize) {
    let mut order = edges.to_vec();
    order.sort_by(|&a, &b| value[a].total_cmp(&value[b]).then(a.cmp(&b)));
    let k = order.len();
    let bins = BINS.min(k);
    let mut bin = vec![None; m];
    for (q, &e) in order.iter().enumerate() {
        bin[e] = Some(q * bins / k);
    }
    (bin, bins)
}

/// `Σ x·y / Σ x²` clamped to [0, 1]; 1 when `Σ x² ≤ TINY`.
pub(super) fn persistence(xy: f64, xx: f64) -> f64 {
    if xx <= TINY {
        1.0
    } else {
        (xy / xx).clamp(0.0, 1.0)
    }
}

/// Beta-binomial shrinkage of the rates `s/n` of a bin's edges to the bin's pooled rate.
pub(super) fn shrink(edges: &[usize], s: &[f64], n: &[f64], empty: f64, out: &mut [f64]) {
    let with: Vec<usize> = edges.iter().copied().filter(|&e| n[e] > 0.0).collect();
    if with.is_empty() {
        for &e in edges {
            out[e] = empty;
        }
        return;
    }
    let p = with.iter().map(|&e| s[e]).sum::<f64>() / with.iter().map(|&e| n[e]).sum::<f64>();
    let k = with.len() as f64;
    let v = with.iter().map(|&e| (s[e] / n[e] - p).powi(2)).sum::<f64>() / k;
    let w = with.iter().map(|&e| p * (1.0 - p) / n[e]).sum::<f64>() / k;
    let pq = p * (1.0 - p);
    let m = if pq <= 0.0 || v - w <= 0.0 {
        FULL_POOLING
    } else {
        (pq / (v - w) - 1.0).clamp(0.0, FULL_POOLING)
    };
    for &e in edges {
        // m = 0 (rates spread wider than binomial noise) and no pair: the pooled rate, the
        // limit m → 0⁺.
        out[e] = if n[e] + m > 0.0 {
            (s[e] + m * p) / (n[e] + m)
        } else {
            p
        };
    }
}

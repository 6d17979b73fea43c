//! Per-scan preprocessing (docs/clg-ode-model.md §1.4), the ECC curve (§5.3) and the GCN-normalised adjacency
//! (§2.1, as a CPU reference for the model's tensor version).

use ndarray::{Array1, Array2, ArrayView2};

/// `A_raw = (A + Aᵀ)/2` with a zero diagonal (negatives are not clipped) and `A_log =
/// log1p(A_raw)`, both f32 like the reference.
pub(crate) fn preprocess(a: ArrayView2<f32>) -> (Array2<f32>, Array2<f32>) {
    let mut raw = (&a + &a.t()) / 2.0f32;
    raw.diag_mut().fill(0.0);
    let log = raw.mapv(f32::ln_1p);
    (raw, log)
}

/// Strength scalars from the upper triangle of `A_raw`, in f64:
/// `s = ln(Σ ut + 1e-8)`, `s_mean = ln(mean of positive ut entries + 1e-8)` (or `ln(1e-8)`).
pub(crate) fn strengths(a_raw: ArrayView2<f32>) -> (f64, f64) {
    let (mut sum, mut pos_sum, mut pos_n) = (0.0f64, 0.0f64, 0usize);
    for (i, row) in a_raw.outer_iter().enumerate() {
        for &v in row.iter().skip(i + 1) {
            let v = f64::from(v);
            sum += v;
            if v > 0.0 {
                pos_sum += v;
                pos_n += 1;
            }
        }
    }
    let s_mean = if pos_n > 0 {
        (pos_sum / pos_n as f64 + 1e-8).ln()
    } else {
        1e-8f64.ln()
    };
    ((sum + 1e-8).ln(), s_mean)
}

/// numpy `linspace(start, stop, n)` (endpoint included, last value exactly `stop`).
pub(crate) fn linspace(start: f64, stop: f64, n: usize) -> Vec<f64> {
    match n {
        0 => Vec::new(),
        1 => vec![start],
        _ => {
            let step = (stop - start) / (n - 1) as f64;
            let mut v: Vec<f64> = (0..n).map(|i| i as f64 * step + start).collect();
            v[n - 1] = stop;
            v
        }
    }
}

/// numpy's default ("linear") quantile of ascending-sorted, non-empty `sorted` at `q ∈ [0,1]`,
/// including numpy's two-sided lerp.
pub(crate) fn quantile_linear(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    let virtual_index = (n - 1) as f64 * q;
    let lo = (virtual_index.floor().max(0.0) as usize).min(n - 1);
    let hi = (lo + 1).min(n - 1);
    let t = virtual_index - lo as f64;
    let (a, b) = (sorted[lo], sorted[hi]);
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// The thresholds of an ECC/Betti curve: linear quantiles of the positive upper-triangle values
/// of `x` at `linspace(0.05, 0.95, k)`. `None` when `x` has no positive upper-triangle entry.
pub(crate) fn quantile_thresholds(x: ArrayView2<f32>, k: usize) -> Option<Vec<f64>> {
    let mut values: Vec<f64> = upper_triangle(x)
        .filter(|v| *v > 0.0)
        .map(f64::from)
        .collect();
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    Some(
        linspace(0.05, 0.95, k)
            .into_iter()
            .map(|q| quantile_linear(&values, q))
            .collect(),
    )
}

/// Upper-triangle (i < j) entries in row-major order.
pub(crate) fn upper_triangle<'a>(x: ArrayView2<'a, f32>) -> impl Iterator<Item = f32> + 'a {
    let (n, m) = x.dim();
    (0..n).flat_map(move |i| (i + 1..m).map(move |j| x[(i, j)]))
}

/// Euler-characteristic curve of a log-domain matrix with `k` bins (docs/clg-ode-model.md §5.3):
/// for each quantile threshold τ, `B = 1[X ≥ τ]` (zero diagonal), `ECC = N − E + triangles`.
/// Zeros when `x` has no positive entry.
///
/// Only the upper triangle of `x` is read (the matrix is taken as symmetric, which every caller
/// guarantees). Triangles are counted incrementally: edges are added in decreasing weight order
/// while the thresholds are visited from high to low, and an added edge (i, j) closes
/// `|N(i) ∩ N(j)|` new triangles (bitset intersection), so a whole curve costs
/// O(E·N/64) instead of 2·k dense N³ products.
pub(crate) fn ecc(x: ArrayView2<f32>, k: usize) -> Array1<f64> {
    let n = x.nrows();
    let Some(thresholds) = quantile_thresholds(x, k) else {
        return Array1::zeros(k);
    };
    let mut edges: Vec<(f32, u32, u32)> = Vec::new();
    for (i, row) in x.outer_iter().enumerate() {
        for (j, &v) in row.iter().enumerate().skip(i + 1) {
            if v > 0.0 {
                edges.push((v, i as u32, j as u32));
            }
        }
    }
    edges.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut adj = BitAdjacency::new(n);
    let (mut next, mut n_edges, mut triangles) = (0usize, 0u64, 0u64);
    let mut out = Array1::zeros(k);
    for q in (0..k).rev() {
        let tau = thresholds[q];
        while next < edges.len() && f64::from(edges[next].0) >= tau {
            let (_, i, j) = edges[next];
            triangles += adj.common_neighbours(i as usize, j as usize);
            adj.insert(i as usize, j as usize);
            n_edges += 1;
            next += 1;
        }
        out[q] = n as f64 - n_edges as f64 + triangles as f64;
    }
    out
}

/// Symmetric adjacency as one bitset row per node.
#[derive(Debug, Clone)]
pub(crate) struct BitAdjacency {
    words: usize,
    bits: Vec<u64>,
}

impl BitAdjacency {
    pub(crate) fn new(n: usize) -> Self {
        let words = n.div_ceil(64);
        Self {
            words,
            bits: vec![0; words * n],
        }
    }

    /// Add the undirected edge (i, j).
    pub(crate) fn insert(&mut self, i: usize, j: usize) {
        self.bits[i * self.words + j / 64] |= 1 << (j % 64);
        self.bits[j * self.words + i / 64] |= 1 << (i % 64);
    }

    fn row(&self, i: usize) -> &[u64] {
        &self.bits[i * self.words..(i + 1) * self.words]
    }

    /// `|N(i) ∩ N(j)|`.
    pub(crate) fn common_neighbours(&self, i: usize, j: usize) -> u64 {
        self.row(i)
            .iter()
            .zip(self.row(j))
            .map(|(a, b)| u64::from((a & b).count_ones()))
            .sum()
    }
}

/// Â = D^{-1/2} (A + I) D^{-1/2} with d_i = Σ_j (A + I)_ij and D^{-1/2} = diag((d_i + 1e-8)^{-1/2})
/// (docs/clg-ode-model.md §2.1), computed in f64 and returned as f32. CPU reference for the model's version.
#[cfg(test)]
pub(crate) fn normalize_adj(a: ArrayView2<f32>) -> Array2<f32> {
    let n = a.nrows();
    let mut a_hat = a.mapv(f64::from);
    for i in 0..n.min(a.ncols()) {
        a_hat[(i, i)] += 1.0;
    }
    let d_inv_sqrt: Vec<f64> = a_hat
        .outer_iter()
        .map(|row| 1.0 / (row.sum() + 1e-8).sqrt())
        .collect();
    Array2::from_shape_fn(a.dim(), |(i, j)| {
        (d_inv_sqrt[i] * a_hat[(i, j)] * d_inv_sqrt[j]) as f32
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::connectome::test_util::{
        assert_close, assert_matrix_close, golden, matrix, vector,
    };
    use ndarray::array;

    #[test]
    fn golden_preprocess() {
        let g = &golden()["preprocess"];
        let (raw, log) = preprocess(matrix(&g["input"]).view());
        assert_matrix_close(&raw, &matrix(&g["a_raw"]), "a_raw");
        assert_matrix_close(&log, &matrix(&g["a_log"]), "a_log");
        let (s, s_mean) = strengths(raw.view());
        let e = assert_close(s, g["s"].as_f64().unwrap(), "s");
        let e = e.max(assert_close(
            s_mean,
            g["s_mean"].as_f64().unwrap(),
            "s_mean",
        ));
        eprintln!("strengths: worst error {e:.2e} of the tolerance");
    }

    #[test]
    fn reference_unit_tests() {
        // Reference tests 1–3 (docs/clg-ode-model.md §6).
        let (raw, log) = preprocess(array![[0.0f32, 1.0], [3.0, 0.0]].view());
        assert_eq!(raw, array![[0.0f32, 2.0], [2.0, 0.0]]);
        assert_eq!(log, raw.mapv(f32::ln_1p));
        let (s, s_mean) = strengths(array![[0.0f32, 1.0], [1.0, 0.0]].view());
        assert!((s - (1.0f64 + 1e-8).ln()).abs() < 1e-6);
        assert!((s_mean - (1.0f64 + 1e-8).ln()).abs() < 1e-6);
        let path = array![[0.0f32, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]].mapv(f32::ln_1p);
        let e = ecc(path.view(), 32);
        assert_eq!(e.len(), 32);
        assert!(e.iter().all(|v| v.is_finite()));
        // No positive entry: zeros; no edge at all: s_mean = ln(1e-8).
        assert_eq!(
            ecc(Array2::<f32>::zeros((4, 4)).view(), 5),
            Array1::<f64>::zeros(5)
        );
        assert_eq!(
            strengths(Array2::<f32>::zeros((3, 3)).view()).1,
            1e-8f64.ln()
        );
    }

    #[test]
    fn golden_ecc() {
        let g = &golden()["ecc"];
        let k = g["k"].as_u64().unwrap() as usize;
        let got = ecc(matrix(&g["a_log"]).view(), k);
        let want = vector(&g["ecc"]);
        assert_eq!(got.to_vec(), want);
    }

    /// Dense reference: E and trace(B³)/6 from B per threshold.
    fn ecc_dense(x: ArrayView2<f32>, k: usize) -> Vec<f64> {
        let n = x.nrows();
        let Some(th) = quantile_thresholds(x, k) else {
            return vec![0.0; k];
        };
        th.iter()
            .map(|&tau| {
                let b = Array2::from_shape_fn((n, n), |(i, j)| {
                    let v = if i < j { x[(i, j)] } else { x[(j, i)] };
                    if i != j && f64::from(v) >= tau {
                        1.0f64
                    } else {
                        0.0
                    }
                });
                let b3 = b.dot(&b).dot(&b);
                let e = b.sum() / 2.0;
                n as f64 - e + b3.diag().sum() / 6.0
            })
            .collect()
    }

    #[test]
    fn ecc_matches_dense_triangle_count() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        for n in [5usize, 17, 70, 130] {
            let mut x = Array2::<f32>::zeros((n, n));
            for i in 0..n {
                for j in i + 1..n {
                    if rng.random::<f32>() < 0.3 {
                        // Include ties.
                        let v = (rng.random_range(1..20) as f32) / 4.0;
                        x[(i, j)] = v;
                        x[(j, i)] = v;
                    }
                }
            }
            assert_eq!(ecc(x.view(), 32).to_vec(), ecc_dense(x.view(), 32), "n={n}");
        }
    }

    #[test]
    fn quantiles_like_numpy() {
        // numpy.quantile([1, 2, 4, 8, 9], q) for q in linspace(0.05, 0.95, 4)
        let v = [1.0, 2.0, 4.0, 8.0, 9.0];
        let got: Vec<f64> = linspace(0.05, 0.95, 4)
            .into_iter()
            .map(|q| quantile_linear(&v, q))
            .collect();
        let want = [1.2, 2.8, 6.4, 8.8];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?}");
        }
        assert_eq!(quantile_linear(&[3.0], 0.5), 3.0);
        assert_eq!(linspace(0.05, 0.95, 1), [0.05]);
    }

    #[test]
    fn golden_normalize_adj() {
        let g = &golden()["normalize_adj"];
        let got = normalize_adj(matrix(&g["a"]).view());
        assert_matrix_close(&got, &matrix(&g["a_norm"]), "a_norm");
    }
}

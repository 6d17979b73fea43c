//! The Betti-curve topology loss (porting note §2.2): for each prediction, at K thresholds of
//! the target's positive log weights, β0 of the soft-thresholded sparsified prediction and of the
//! thresholded target, estimated as trace(exp(−t·L_sym)) by Hutchinson probes and the truncated
//! Taylor series (as the reference: unconverged for t = 10, values ~1e7), β1 = E − N + β0, and
//! Huber distances between the two. The target side has no gradient and is computed on the host
//! in f64; the prediction side is batched over predictions and thresholds as tensors.

use burn::prelude::*;
use burn::tensor::activation::sigmoid;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::config::TopologyConfig;
#[cfg(test)]
use super::input::t1;
use crate::models::clg_ode::loss::huber;

/// Linear-interpolated quantile (numpy's default) of sorted values.
pub(crate) fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    quantile_by(sorted.len(), q, |lo, hi| (sorted[lo], sorted[hi]))
}

/// [`quantile_sorted`] of `len` values, from `ranks(lo, hi)`: the values at ranks `lo ≤ hi` of
/// their sorted order. A caller that finds the two by selection instead of a full sort (the
/// mask diagnostics) interpolates by the same arithmetic, so gets the same bits.
pub(crate) fn quantile_by(
    len: usize,
    q: f64,
    ranks: impl FnOnce(usize, usize) -> (f64, f64),
) -> f64 {
    match len {
        0 => f64::NAN,
        1 => ranks(0, 0).0,
        len => {
            let h = (len - 1) as f64 * q.clamp(0.0, 1.0);
            let lo = h.floor() as usize;
            let hi = (lo + 1).min(len - 1);
            let (at_lo, at_hi) = ranks(lo, hi);
            at_lo + (h - lo as f64) * (at_hi - at_lo)
        }
    }
}

/// `count` evenly spaced values from `a` to `b` (numpy `linspace`).
pub(crate) fn linspace(a: f64, b: f64, count: usize) -> Vec<f64> {
    match count {
        0 => vec![],
        1 => vec![a],
        c => (0..c)
            .map(|i| a + (b - a) * i as f64 / (c - 1) as f64)
            .collect(),
    }
}

/// ln(1 + w) of each weight of a raw target, in f64: what its thresholds and its thresholded
/// graphs are taken of.
pub(crate) fn log_weights(target_raw: &[f32]) -> Vec<f64> {
    target_raw.iter().map(|&v| (v as f64).ln_1p()).collect()
}

/// The K thresholds of a target (raw N×N): quantiles at linspace(0.05, 0.95, K) of the positive
/// upper-triangle entries of log1p(target). `None` when there is none or all are 0 (loss 0).
pub(crate) fn thresholds(target_raw: &[f32], n: usize, k: usize) -> Option<Vec<f64>> {
    log_thresholds(&log_weights(target_raw), n, k)
}

/// [`thresholds`] of a target already through [`log_weights`] (a positive weight is exactly a
/// positive log1p).
pub(crate) fn log_thresholds(log_target: &[f64], n: usize, k: usize) -> Option<Vec<f64>> {
    let mut v: Vec<f64> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .map(|(i, j)| log_target[i * n + j])
        .filter(|&x| x > 0.0)
        .collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let taus: Vec<f64> = linspace(0.05, 0.95, k.max(1))
        .into_iter()
        .map(|q| quantile_sorted(&v, q))
        .collect();
    taus.iter().any(|&t| t != 0.0).then_some(taus)
}

/// Rademacher probe vectors, `[probes, n]` row-major, drawn from `seed` (the reference draws
/// them from numpy's generator seeded by `--random_state`; ours come from ChaCha8).
pub(crate) fn probes(seed: u64, count: usize, n: usize) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0xBE77_1000);
    (0..count.max(1) * n)
        .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
        .collect()
}

/// Hutchinson estimate of trace(exp(−t·L_sym(W))) with the Taylor series truncated at `order`,
/// for a symmetric W (row-major N×N) and probes `[V, N]`, in f64.
///
/// Each row of W is kept as its nonzero entries, and the probes' series run side by side over
/// them. Every sum still runs over its terms in the dense order (a zero weight's term is a zero,
/// which leaves a nonzero sum as it is), so the value is the dense product's, bit for bit (but
/// for the sign of an all-zero sum); it costs the edges instead of N², and the probes' chains
/// of additions overlap.
pub(crate) fn heat_trace(w: &[f64], n: usize, probes: &[f64], t: f64, order: usize) -> f64 {
    let dinv = inverse_sqrt_degrees(w, n);
    let rows = SparseRows::of(w, n);
    let v = probes.len() / n;
    // The probes side by side: x[i·V + p] is probe p's value at node i.
    let mut term = vec![0.0; n * v];
    for (p, probe) in probes.chunks_exact(n).enumerate() {
        for (i, &x) in probe.iter().enumerate() {
            term[i * v + p] = x;
        }
    }
    let start = term.clone();
    let mut y = term.clone();
    let (mut scaled, mut wy) = (vec![0.0; n * v], vec![0.0; v]);
    for k in 1..=order.max(1) {
        // L_sym x = x − D^{-1/2} W D^{-1/2} x, times −t/k.
        for (s, (x, di)) in scaled.chunks_mut(v).zip(term.chunks(v).zip(&dinv)) {
            s.iter_mut().zip(x).for_each(|(s, x)| *s = x * di);
        }
        let factor = -t / k as f64;
        for i in 0..n {
            wy.iter_mut().for_each(|a| *a = 0.0);
            for (&j, &wij) in rows.row(i) {
                let yj = &scaled[j as usize * v..(j as usize + 1) * v];
                wy.iter_mut().zip(yj).for_each(|(a, b)| *a += wij * b);
            }
            let x = &mut term[i * v..(i + 1) * v];
            for (x, a) in x.iter_mut().zip(&wy) {
                *x = factor * (*x - dinv[i] * a);
            }
        }
        y.iter_mut().zip(&term).for_each(|(a, b)| *a += b);
    }
    let total: f64 = (0..v)
        .map(|p| (0..n).map(|i| start[i * v + p] * y[i * v + p]).sum::<f64>())
        .sum();
    total / v.max(1) as f64
}

/// D^{-1/2} of W (row-major N×N): (d_i + 1e-8)^{-1/2} for the row sums d_i > 0, else 0.
fn inverse_sqrt_degrees(w: &[f64], n: usize) -> Vec<f64> {
    w.chunks(n)
        .map(|row| {
            let d: f64 = row.iter().sum();
            if d > 0.0 {
                1.0 / (d + 1e-8).sqrt()
            } else {
                0.0
            }
        })
        .collect()
}

/// The nonzero entries of a row-major N×N matrix, row by row in column order.
struct SparseRows {
    starts: Vec<usize>,
    cols: Vec<u32>,
    values: Vec<f64>,
}

impl SparseRows {
    fn of(w: &[f64], n: usize) -> Self {
        let mut rows = Self {
            starts: vec![0],
            cols: Vec::new(),
            values: Vec::new(),
        };
        for row in w.chunks(n) {
            for (j, &x) in row.iter().enumerate() {
                if x != 0.0 {
                    rows.cols.push(j as u32);
                    rows.values.push(x);
                }
            }
            rows.starts.push(rows.cols.len());
        }
        rows
    }

    fn row(&self, i: usize) -> impl Iterator<Item = (&u32, &f64)> {
        let r = self.starts[i]..self.starts[i + 1];
        self.cols[r.clone()].iter().zip(&self.values[r])
    }
}

/// β0 and the edge mass E = Σ_{i<j} W of the thresholded target (its [`log_weights`]) at each
/// threshold, the thresholds on rayon's threads (each is independent, so the values do not
/// depend on them).
pub(crate) fn target_betti(
    log_target: &[f64],
    n: usize,
    taus: &[f64],
    probes: &[f64],
    cfg: &TopologyConfig,
) -> Vec<(f64, f64)> {
    taus.par_iter()
        .map(|&tau| {
            let mut w = vec![0.0f64; n * n];
            let mut e = 0.0;
            for i in 0..n {
                for j in 0..n {
                    if i != j && log_target[i * n + j] >= tau {
                        w[i * n + j] = 1.0;
                        if i < j {
                            e += 1.0;
                        }
                    }
                }
            }
            (heat_trace(&w, n, probes, cfg.t, cfg.taylor_order), e)
        })
        .collect()
}

/// The batched prediction side: `log_p` = log1p of the sparsified predictions `[G,N,N]` (the
/// predictions that have thresholds), `taus` their thresholds (G×K), `target` the target's
/// (β0, E) per threshold (G×K), `probes` `[V,N]`. Returns the raw loss per prediction `[G]`:
/// mean over thresholds of Huber(Δβ0) + mean of Huber(Δβ1). (Training reads its inputs from
/// the batch's staged values: [`raw_loss_on`].)
#[cfg(test)]
pub(crate) fn raw_loss<B: Backend>(
    log_p: Tensor<B, 3>,
    taus: &[f64],
    target: &[(f64, f64)],
    probes: &[f32],
    cfg: &TopologyConfig,
) -> Tensor<B, 1> {
    let [_, n, _] = log_p.dims();
    let device = log_p.device();
    let (shift, beta0, beta1) = raw_sides(taus, target, n, cfg);
    let v = probes.len() / n;
    raw_loss_on(
        log_p,
        [
            t1::<B>(shift, &device),
            t1(beta0, &device),
            t1(beta1, &device),
        ],
        Tensor::from_data(
            burn::tensor::TensorData::new(probes.to_vec(), [v, n]),
            &device,
        ),
        cfg,
    )
}

/// The host values [`raw_loss_on`] reads of thresholds `taus` and target values `target`
/// (G×K each), as f32: sharpness × threshold, the target's β0, and its β1 = E − N + β0.
pub(crate) fn raw_sides(
    taus: &[f64],
    target: &[(f64, f64)],
    n: usize,
    cfg: &TopologyConfig,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let s = cfg.sharpness;
    (
        taus.iter().map(|&t| (s * t) as f32).collect(),
        target.iter().map(|&(b, _)| b as f32).collect(),
        target
            .iter()
            .map(|&(b, e)| (e - n as f64 + b) as f32)
            .collect(),
    )
}

/// [`raw_loss`] of the sides on the device: `[shift, β0, β1]` (each `[G·K]`, from
/// [`raw_sides`]) and the probes `[V,N]`.
pub(crate) fn raw_loss_on<B: Backend>(
    log_p: Tensor<B, 3>,
    [shift, t0, t1v]: [Tensor<B, 1>; 3],
    probes: Tensor<B, 2>,
    cfg: &TopologyConfig,
) -> Tensor<B, 1> {
    let [g, n, _] = log_p.dims();
    let gk = shift.dims()[0];
    let k = gk / g.max(1);
    let device = log_p.device();
    // W = σ(s·(log P − τ)) off the diagonal, built by one broadcast [G,1,N²] − [G,K,1] (no
    // repeated copies of the predictions: they dominate the memory of this loss).
    let s = cfg.sharpness;
    let shift = shift.reshape([g, k, 1]);
    let off = crate::models::clg_ode::decoder::off_diagonal::<B>(n, &device).reshape([1, 1, n * n]);
    let w = (sigmoid(log_p.reshape([g, 1, n * n]).mul_scalar(s) - shift) * off).reshape([gk, n, n]);
    // L_sym x = x − D^{-1/2} W D^{-1/2} x, with D^{-1/2} = 0 on isolated nodes.
    let d = w.clone().sum_dim(2); // [GK,N,1]
    let dinv = d.clone().greater_elem(0.0).float() * d.add_scalar(1e-8).powf_scalar(-0.5);
    let x0 = probes.transpose().unsqueeze::<3>().repeat_dim(0, gk); // [GK,N,V]
    let beta0 = super::series::taylor_beta0(w.clone(), dinv, x0, cfg);
    let edges = w.sum_dim(2).sum_dim(1).reshape([gk]).mul_scalar(0.5);
    let beta1 = edges + beta0.clone().sub_scalar(n as f64);
    let h0 = huber(beta0 - t0);
    let h1 = huber(beta1 - t1v);
    (h0 + h1).reshape([g, k]).mean_dim(1).reshape([g])
}

/// The normalised topology value: log1p(raw/S), or raw/S without log compression; S = the
/// current scale (at least 1e-6; a non-finite or non-positive scale counts as 1e-6).
pub(crate) fn normalize<B: Backend>(
    raw: Tensor<B, 1>,
    scale: f64,
    log_compress: bool,
) -> Tensor<B, 1> {
    let s = if scale.is_finite() && scale > 0.0 {
        scale.max(1e-6)
    } else {
        1e-6
    };
    let x = raw.div_scalar(s);
    if log_compress { x.log1p() } else { x }
}

/// The scale after a training epoch whose raw values were `values`:
/// 0.9·S + 0.1·max(q-quantile, 1e-6), non-finite values ignored, S kept when none is left.
pub(crate) fn updated_scale(scale: f64, values: &[f64], quantile: f64) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return scale;
    }
    v.sort_by(f64::total_cmp);
    let q = quantile_sorted(&v, quantile.clamp(0.0, 1.0));
    if !q.is_finite() {
        return scale;
    }
    0.9 * scale + 0.1 * q.max(1e-6)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dense form [`heat_trace`] replaced: every row's product over all N columns, one
    /// probe after another.
    fn dense_heat_trace(w: &[f64], n: usize, probes: &[f64], t: f64, order: usize) -> f64 {
        let dinv = inverse_sqrt_degrees(w, n);
        let lap = |x: &[f64]| -> Vec<f64> {
            let y: Vec<f64> = x.iter().zip(&dinv).map(|(a, b)| a * b).collect();
            (0..n)
                .map(|i| {
                    let wy: f64 = w[i * n..(i + 1) * n]
                        .iter()
                        .zip(&y)
                        .map(|(a, b)| a * b)
                        .sum();
                    x[i] - dinv[i] * wy
                })
                .collect()
        };
        let mut total = 0.0;
        for p in probes.chunks(n) {
            let mut term = p.to_vec();
            let mut y = term.clone();
            for k in 1..=order.max(1) {
                term = lap(&term).iter().map(|x| -t / k as f64 * x).collect();
                y.iter_mut().zip(&term).for_each(|(a, b)| *a += b);
            }
            total += p.iter().zip(&y).map(|(a, b)| a * b).sum::<f64>();
        }
        total / (probes.len() / n).max(1) as f64
    }

    /// Symmetric, zero diagonal; `weighted`: weights in (0, 3), else 0/1 (a thresholded
    /// target). About `keep` of the pairs are edges; node 0 is isolated.
    fn graph(n: usize, keep: u32, weighted: bool, salt: u32) -> Vec<f64> {
        let mut w = vec![0.0; n * n];
        for i in 1..n {
            for j in i + 1..n {
                let h =
                    ((i as u32 * 7919) ^ (j as u32 * 104_729) ^ salt).wrapping_mul(2_654_435_761);
                if h % 100 < keep {
                    let x = if weighted {
                        (h >> 8) as f64 / (1u64 << 24) as f64 * 3.0
                    } else {
                        1.0
                    };
                    (w[i * n + j], w[j * n + i]) = (x, x);
                }
            }
        }
        w
    }

    #[test]
    fn sparse_heat_trace_is_the_dense_one_bit_for_bit() {
        for (n, v, keep, weighted, order) in [
            (40, 2, 50, false, 20),
            (40, 2, 5, false, 20),
            (33, 3, 90, true, 7),
            (17, 1, 100, false, 1),
            (25, 4, 30, true, 12),
        ] {
            let w = graph(n, keep, weighted, n as u32);
            let probes: Vec<f64> = probes(n as u64, v, n).iter().map(|&x| x as f64).collect();
            let (sparse, dense) = (
                heat_trace(&w, n, &probes, 10.0, order),
                dense_heat_trace(&w, n, &probes, 10.0, order),
            );
            assert!(dense.abs() > 0.0, "a case that computes something");
            assert_eq!(
                sparse.to_bits(),
                dense.to_bits(),
                "n {n} V {v}: {sparse} vs {dense}"
            );
        }
    }
}

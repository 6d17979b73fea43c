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
use super::input::t1;
use crate::models::clg_ode::loss::huber;

/// Linear-interpolated quantile (numpy's default) of sorted values.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
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

/// `count` evenly spaced values from `a` to `b` (numpy `linspace`).
pub fn linspace(a: f64, b: f64, count: usize) -> Vec<f64> {
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
pub fn log_weights(target_raw: &[f32]) -> Vec<f64> {
    target_raw.iter().map(|&v| (v as f64).ln_1p()).collect()
}

/// The K thresholds of a target (raw N×N): quantiles at linspace(0.05, 0.95, K) of the positive
/// upper-triangle entries of log1p(target). `None` when there is none or all are 0 (loss 0).
pub fn thresholds(target_raw: &[f32], n: usize, k: usize) -> Option<Vec<f64>> {
    log_thresholds(&log_weights(target_raw), n, k)
}

/// [`thresholds`] of a target already through [`log_weights`] (a positive weight is exactly a
/// positive log1p).
pub fn log_thresholds(log_target: &[f64], n: usize, k: usize) -> Option<Vec<f64>> {
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
pub fn probes(seed: u64, count: usize, n: usize) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0xBE77_1000);
    (0..count.max(1) * n)
        .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
        .collect()
}

/// Hutchinson estimate of trace(exp(−t·L_sym(W))) with the Taylor series truncated at `order`,
/// for a symmetric W (row-major N×N) and probes `[V, N]`, in f64.
pub fn heat_trace(w: &[f64], n: usize, probes: &[f64], t: f64, order: usize) -> f64 {
    let d: Vec<f64> = (0..n).map(|i| w[i * n..(i + 1) * n].iter().sum()).collect();
    let dinv: Vec<f64> = d
        .iter()
        .map(|&d| {
            if d > 0.0 {
                1.0 / (d + 1e-8).sqrt()
            } else {
                0.0
            }
        })
        .collect();
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
    let v = probes.len() / n;
    let mut total = 0.0;
    for p in probes.chunks(n) {
        let mut term = p.to_vec();
        let mut y = term.clone();
        for k in 1..=order.max(1) {
            let lt = lap(&term);
            term = lt.iter().map(|x| -t / k as f64 * x).collect();
            y.iter_mut().zip(&term).for_each(|(a, b)| *a += b);
        }
        total += p.iter().zip(&y).map(|(a, b)| a * b).sum::<f64>();
    }
    total / v.max(1) as f64
}

/// β0 and the edge mass E = Σ_{i<j} W of the thresholded target (its [`log_weights`]) at each
/// threshold, the thresholds on rayon's threads (each is independent, so the values do not
/// depend on them).
pub fn target_betti(
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
/// mean over thresholds of Huber(Δβ0) + mean of Huber(Δβ1).
pub fn raw_loss<B: Backend>(
    log_p: Tensor<B, 3>,
    taus: &[f64],
    target: &[(f64, f64)],
    probes: &[f32],
    cfg: &TopologyConfig,
) -> Tensor<B, 1> {
    let [g, n, _] = log_p.dims();
    let k = taus.len() / g.max(1);
    let device = log_p.device();
    let v = probes.len() / n;
    let gk = g * k;
    // W = σ(s·(log P − τ)) off the diagonal, built by one broadcast [G,1,N²] − [G,K,1] (no
    // repeated copies of the predictions: they dominate the memory of this loss).
    let s = cfg.sharpness;
    let shift = t1::<B>(taus.iter().map(|&t| (s * t) as f32).collect(), &device).reshape([g, k, 1]);
    let off = crate::models::clg_ode::decoder::off_diagonal::<B>(n, &device).reshape([1, 1, n * n]);
    let w = (sigmoid(log_p.reshape([g, 1, n * n]).mul_scalar(s) - shift) * off).reshape([gk, n, n]);
    // L_sym x = x − D^{-1/2} W D^{-1/2} x, with D^{-1/2} = 0 on isolated nodes.
    let d = w.clone().sum_dim(2); // [GK,N,1]
    let dinv = d.clone().greater_elem(0.0).float() * d.add_scalar(1e-8).powf_scalar(-0.5);
    let x0 = Tensor::<B, 2>::from_data(
        burn::tensor::TensorData::new(probes.to_vec(), [v, n]),
        &device,
    )
    .transpose()
    .unsqueeze::<3>()
    .repeat_dim(0, gk); // [GK,N,V]
    let mut term = x0.clone();
    let mut y = x0.clone();
    for step in 1..=cfg.taylor_order.max(1) {
        let lx = term.clone() - dinv.clone() * w.clone().matmul(dinv.clone() * term);
        term = lx.mul_scalar(-cfg.t / step as f64);
        y = y + term.clone();
    }
    let beta0 = (x0 * y)
        .sum_dim(2)
        .sum_dim(1)
        .reshape([gk])
        .div_scalar(v as f64);
    let edges = w.sum_dim(2).sum_dim(1).reshape([gk]).mul_scalar(0.5);
    let beta1 = edges + beta0.clone().sub_scalar(n as f64);
    let t0: Vec<f32> = target.iter().map(|&(b, _)| b as f32).collect();
    let t1v: Vec<f32> = target
        .iter()
        .map(|&(b, e)| (e - n as f64 + b) as f32)
        .collect();
    let h0 = huber(beta0 - t1::<B>(t0, &device));
    let h1 = huber(beta1 - t1::<B>(t1v, &device));
    (h0 + h1).reshape([g, k]).mean_dim(1).reshape([g])
}

/// The normalised topology value: log1p(raw/S), or raw/S without log compression; S = the
/// current scale (at least 1e-6; a non-finite or non-positive scale counts as 1e-6).
pub fn normalize<B: Backend>(raw: Tensor<B, 1>, scale: f64, log_compress: bool) -> Tensor<B, 1> {
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
pub fn updated_scale(scale: f64, values: &[f64], quantile: f64) -> f64 {
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

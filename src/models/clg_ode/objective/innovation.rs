//! The innovation (new-edge) module on forecasts (porting note §2.5): among the start visit's
//! non-edges, the top-M by new-edge logit are candidates; q = g·σ((ℓ_new − δ)/τ) with δ a
//! quantile of their logits and g a gate on Δt in months; the top-K by q are added to the
//! fixed-support prediction with their new-edge weight. Losses: focal on the candidates (×g),
//! sparsity of q, and optionally a log-Huber on the true new edges.

use burn::prelude::*;
use burn::tensor::activation::sigmoid;

use super::config::InnovationConfig;
use super::diagnostics::average_precision;
use super::input::{i1, t1};
use super::topology::quantile_sorted;
use crate::models::clg_ode::loss::{focal, huber};

/// The Δt gate: 0 for a non-finite or non-positive Δt, else clip((12Δt − offset)/ramp, 0, 1).
pub(crate) fn gate(dt_years: f64, cfg: &InnovationConfig) -> f64 {
    if !dt_years.is_finite() || dt_years <= 0.0 {
        return 0.0;
    }
    ((12.0 * dt_years - cfg.dt_offset_months) / cfg.dt_ramp_months.max(1e-6)).clamp(0.0, 1.0)
}

/// The host side of one forecast's innovation: which candidates, δ, which are kept.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    pub gate: f64,
    /// Candidate positions (row-major i·N + j, i < j), by decreasing new-edge logit.
    pub cand: Vec<usize>,
    pub delta: f64,
    /// Kept candidate positions.
    pub keep: Vec<usize>,
    /// 1 where a candidate is a true new edge.
    pub y: Vec<f32>,
    /// The pool (the start visit's non-edges) and its true new edges, for the metrics.
    pub pool: Vec<usize>,
}

/// Plans one forecast from its new-edge logits (row-major N×N, host), start-visit raw SC and
/// target raw SC; `None` when the module does not act (gate 0, empty pool, K = 0).
pub(crate) fn plan(
    l_new: &[f32],
    start_raw_pos: impl Fn(usize) -> bool,
    target: &[f32],
    n: usize,
    dt: f64,
    cfg: &InnovationConfig,
) -> Option<Plan> {
    let g = gate(dt, cfg);
    if g <= 0.0 || cfg.k_new == 0 {
        return None;
    }
    let pool: Vec<usize> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| i * n + j))
        .filter(|&ij| !start_raw_pos(ij))
        .collect();
    if pool.is_empty() {
        return None;
    }
    let mut cand = pool.clone();
    cand.sort_by(|&a, &b| l_new[b].total_cmp(&l_new[a]).then(a.cmp(&b)));
    cand.truncate(cfg.topm.min(pool.len()));
    let mut vals: Vec<f64> = cand.iter().map(|&c| l_new[c] as f64).collect();
    vals.sort_by(f64::total_cmp);
    let delta = quantile_sorted(&vals, cfg.delta_quantile);
    // q is monotone in the logit: the kept ones are the first K candidates.
    let keep = cand[..cfg.k_new.min(cand.len())].to_vec();
    let y = cand
        .iter()
        .map(|&c| if target[c] > 0.0 { 1.0 } else { 0.0 })
        .collect();
    Some(Plan {
        gate: g,
        cand,
        delta,
        keep,
        y,
        pool,
    })
}

/// Values of one forecast's innovation terms (each already weighted as the batch total adds
/// it), as tensors, and its q for the host.
pub(crate) struct Terms<B: Backend> {
    pub new_edge: Tensor<B, 1>,
    pub new_sparse: Tensor<B, 1>,
    pub new_reg: Tensor<B, 1>,
    pub q: Tensor<B, 1>,
}

/// The differentiable part: `l_new` and `w_new` are the forecast's flat `[N·N]` logits and
/// new-edge weights; `sparse_factor` = f(e) of the sparsity ramp; `target` the raw truth.
pub(crate) fn terms<B: Backend>(
    plan: &Plan,
    l_new: Tensor<B, 1>,
    w_new: Tensor<B, 1>,
    target: &[f32],
    sparse_factor: f64,
    cfg: &InnovationConfig,
) -> Terms<B> {
    let device = l_new.device();
    let idx = |v: &[usize]| i1::<B>(v.iter().map(|&i| i as i64).collect(), &device);
    let logits = (l_new.select(0, idx(&plan.cand)).sub_scalar(plan.delta)).div_scalar(cfg.tau);
    let q = sigmoid(logits.clone()).mul_scalar(plan.gate);
    let y = t1::<B>(plan.y.clone(), &device);
    let new_edge = focal(
        logits,
        y,
        cfg.innovation_focal_gamma,
        Some(cfg.innovation_focal_alpha),
    )
    .mean()
    .mul_scalar(plan.gate);
    let new_sparse = q
        .clone()
        .mean()
        .mul_scalar(cfg.lambda_new_sparse * sparse_factor);
    let true_new: Vec<usize> = plan
        .cand
        .iter()
        .zip(&plan.y)
        .filter(|(_, y)| **y > 0.0)
        .map(|(&c, _)| c)
        .collect();
    let new_reg = if cfg.lambda_new_reg > 0.0 && !true_new.is_empty() {
        let truth: Vec<f32> = true_new
            .iter()
            .map(|&c| target[c].max(0.0).ln_1p())
            .collect();
        huber(w_new.select(0, idx(&true_new)).clamp_min(0.0).log1p() - t1::<B>(truth, &device))
            .mean()
            .mul_scalar(cfg.lambda_new_reg)
    } else {
        Tensor::zeros([1], &device)
    };
    Terms {
        new_edge,
        new_sparse,
        new_reg,
        q,
    }
}

/// q = g·σ((ℓ_new − δ)/τ) of the plan's candidates, on the host (`l_new`: the forecast's
/// row-major N×N logits), as [`terms`] computes it on the device.
pub(crate) fn q_host(plan: &Plan, l_new: &[f32], cfg: &InnovationConfig) -> Vec<f32> {
    plan.cand
        .iter()
        .map(|&c| {
            let z = (f64::from(l_new[c]) - plan.delta) / cfg.tau;
            (plan.gate / (1.0 + (-z).exp())) as f32
        })
        .collect()
}

/// New-edge precision and recall at K and AUPRC over the pool (score q on the candidates, 0
/// elsewhere), for the SC metrics; `None` (undefined) when the pool has no true new edge (the
/// reference writes 0 there).
pub(crate) fn new_edge_metrics(
    plan: &Plan,
    q: &[f32],
    target: &[f32],
    k_new: usize,
) -> Option<[f64; 3]> {
    let labels: Vec<bool> = plan.pool.iter().map(|&c| target[c] > 0.0).collect();
    let positives = labels.iter().filter(|&&y| y).count();
    if positives == 0 {
        return None;
    }
    let score: Vec<f64> = plan
        .pool
        .iter()
        .map(|c| {
            plan.cand
                .iter()
                .position(|x| x == c)
                .map_or(0.0, |i| q[i] as f64)
        })
        .collect();
    let k = k_new.min(plan.pool.len());
    let mut order: Vec<usize> = (0..score.len()).collect();
    order.sort_by(|&a, &b| score[b].total_cmp(&score[a]).then(a.cmp(&b)));
    let hits = order[..k].iter().filter(|&&i| labels[i]).count() as f64;
    Some([
        hits / k.max(1) as f64,
        hits / positives as f64,
        average_precision(&score, &labels),
    ])
}

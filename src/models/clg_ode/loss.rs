//! Loss primitives of docs/clg-ode-model.md §3.6, element-wise and generic over the backend, plus the host-side
//! top-k selection used by the sparsified weight loss.

use burn::prelude::*;

/// Numerically stable softplus `ln(1 + e^x) = max(x, 0) + ln(1 + e^{−|x|})` (Burn's
/// `activation::softplus` overflows for large x, and the logits here reach α·S ≫ 100).
pub(crate) fn softplus<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    x.clone().clamp_min(0.0) + x.abs().neg().exp().log1p()
}

/// Element-wise BCE-with-logits with a positive-class weight:
/// `−[w·y·ln σ(ℓ) + (1 − y)·ln(1 − σ(ℓ))] = (1 + (w − 1)y)·softplus(ℓ) − w·y·ℓ`.
pub(crate) fn bce_pos_weight<B: Backend, const D: usize>(
    logit: Tensor<B, D>,
    y: Tensor<B, D>,
    pos_weight: f64,
) -> Tensor<B, D> {
    let coef = y.clone().mul_scalar(pos_weight - 1.0).add_scalar(1.0);
    softplus(logit.clone()) * coef - logit * y.mul_scalar(pos_weight)
}

/// Element-wise Huber / smooth-L1 with β = 1: `0.5 d²` if |d| < 1 else `|d| − 0.5`, written as
/// `0.5 q² + (|d| − q)` with `q = min(|d|, 1)`.
pub(crate) fn huber<B: Backend, const D: usize>(d: Tensor<B, D>) -> Tensor<B, D> {
    let a = d.abs();
    let q = a.clone().clamp_max(1.0);
    q.clone().square().mul_scalar(0.5) + (a - q)
}

/// KL(N(μ, e^{logvar}) ‖ N(0, 1)) averaged over nodes and latent dimensions, one value per batch
/// row: `0.5 · mean_{N×L}(e^{lv} + μ² − 1 − lv)`. `mu`, `logvar` `[B,N,L]` → `[B]`.
pub(crate) fn kl_mean<B: Backend>(mu: Tensor<B, 3>, logvar: Tensor<B, 3>) -> Tensor<B, 1> {
    let [b, n, l] = mu.dims();
    let t = logvar.clone().exp() + mu.square() - logvar;
    t.reshape([b, n * l])
        .mean_dim(1)
        .sub_scalar(1.0)
        .mul_scalar(0.5)
        .reshape([b])
}

/// The top-k keep-mask of the upper triangle of one N×N matrix (row-major `values`), as an N×N
/// 0/1 matrix with ones only at kept (i < j) entries. Ties are broken by row-major position and
/// NaN counts as smallest, exactly as `metrics::sc::sparsify_topk` (the test metrics).
pub(crate) fn topk_upper_mask(values: &[f32], n: usize, k: usize) -> Vec<f32> {
    let mut ut: Vec<(f32, u32)> = Vec::with_capacity(n * (n.saturating_sub(1)) / 2);
    for i in 0..n {
        for j in i + 1..n {
            let v = values[i * n + j];
            ut.push((
                if v.is_nan() { f32::NEG_INFINITY } else { v },
                (i * n + j) as u32,
            ));
        }
    }
    let mut mask = vec![0.0f32; n * n];
    let k = k.min(ut.len());
    if k == 0 {
        return mask;
    }
    let cmp = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if k < ut.len() {
        ut.select_nth_unstable_by(k - 1, cmp);
    }
    for &(_, idx) in &ut[..k] {
        mask[idx as usize] = 1.0;
    }
    mask
}

/// Element-wise focal loss on logits: `(1 − p_t)^γ · BCE`, times `α_t = y·α + (1 − y)(1 − α)`
/// when `alpha` is given (no positive-class weight).
pub(crate) fn focal<B: Backend, const D: usize>(
    logit: Tensor<B, D>,
    y: Tensor<B, D>,
    gamma: f64,
    alpha: Option<f64>,
) -> Tensor<B, D> {
    let bce = softplus(logit.clone()) - logit.clone() * y.clone();
    let p = burn::tensor::activation::sigmoid(logit);
    let p_t = p.clone() * y.clone() + (p.neg().add_scalar(1.0)) * (y.clone().neg().add_scalar(1.0));
    let mut loss = p_t.neg().add_scalar(1.0).clamp_min(0.0).powf_scalar(gamma) * bce;
    if let Some(a) = alpha {
        loss = loss * y.mul_scalar(2.0 * a - 1.0).add_scalar(1.0 - a);
    }
    loss
}

//! β0 of the topology loss's soft graphs by the truncated Taylor series of the heat kernel, with
//! its gradient by the adjoint series.
//!
//! For each graph `[GK]`: β0 = (1/V)·Σ_v x0_vᵀ·p(L)·x0_v, with p the Taylor polynomial of
//! exp(−t·L) to `taylor_order` and L·x = x − D^{-1/2}·(W·(D^{-1/2}·x)). The series is run on
//! detached tensors by the operations the autodiff graph ran before (on `flex`, by
//! `fast_cpu::series`, which makes the same operations one graph at a time, each graph's matrix
//! read once while it is in cache); either way the value is the graph's, bit for bit.
//!
//! The gradient is not formed by the graph. With a_s = −t/s, ḡ_s = ∂β0/∂term_s (ḡ_S = x0/V,
//! ḡ_{s−1} = h_s − D^{-1/2}·Wᵀ·(D^{-1/2}·h_s) + x0/V where h_s = a_s·ḡ_s) and u_s =
//! D^{-1/2}·term_{s−1}:
//!
//! * ∂β0/∂W = −Σ_s (D^{-1/2}·h_s)·u_sᵀ: one `[N, S·V] · [S·V, N]` product, where the graph formed
//!   S rank-V products of N×N and added them one by one (two passes over an N×N matrix each, the
//!   most expensive part of the loss's backward);
//! * ∂β0/∂D^{-1/2} = −Σ_s Σ_v (h_s ⊙ W·u_s + Wᵀ·(D^{-1/2}·h_s) ⊙ term_{s−1}).
//!
//! They enter the graph through ⟨W, G_W⟩ + ⟨D^{-1/2}, G_d⟩ minus its own detached value: zero,
//! exactly, so the value stays β0's and the gradients are G_W and G_d. They equal the graph's up
//! to rounding (the same products summed in another order); `taylor_tests.rs` compares them.

use std::any::TypeId;

use burn::backend::Autodiff;
use burn::prelude::*;
use burn::tensor::TensorData;
use fast_cpu::FastCpu;

use super::config::TopologyConfig;

/// The gradients of β0 with respect to W `[GK,N,N]` and D^{-1/2} `[GK,N,1]`.
type Grads<B> = (Tensor<B, 3>, Tensor<B, 3>);

/// β0 of every graph `[GK]` from `w` `[GK,N,N]`, `dinv` `[GK,N,1]` and the probes `x0`
/// `[GK,N,V]`; differentiable in `w` and `dinv` (see the module's documentation).
pub(super) fn taylor_beta0<B: Backend>(
    w: Tensor<B, 3>,
    dinv: Tensor<B, 3>,
    x0: Tensor<B, 3>,
    cfg: &TopologyConfig,
) -> Tensor<B, 1> {
    let [gk, _, v] = x0.dims();
    let tracked = B::ad_enabled(&w.device());
    let coefs: Vec<f64> = (1..=cfg.taylor_order.max(1))
        .map(|s| -cfg.t / s as f64)
        .collect();
    let (wd, dd) = (w.clone().detach(), dinv.clone().detach());
    let (y, grads) = match on_host::<B>(v) {
        true => host_series(wd, dd, x0.clone(), &coefs, tracked),
        false => tensor_series(wd, dd, x0.clone(), &coefs, tracked),
    };
    let beta0 = (x0 * y)
        .sum_dim(2)
        .sum_dim(1)
        .reshape([gk])
        .div_scalar(v as f64);
    let Some((g_w, g_d)) = grads else {
        return beta0;
    };
    let inner = |a: Tensor<B, 3>, b: Tensor<B, 3>| (a * b).sum_dim(2).sum_dim(1).reshape([gk]);
    let surrogate = inner(w, g_w) + inner(dinv, g_d);
    beta0 + (surrogate.clone() - surrogate.detach())
}

/// Whether `B` is `flex` with its fast kernels, whose operations `fast_cpu::series` makes.
fn on_host<B: Backend>(v: usize) -> bool {
    let b = TypeId::of::<B>();
    (b == TypeId::of::<Autodiff<FastCpu>>() || b == TypeId::of::<FastCpu>())
        && fast_cpu::series::matches_ops(v)
}

/// The series by tensor operations: y `[GK,N,V]`, and the gradients when `tracked`.
fn tensor_series<B: Backend>(
    w: Tensor<B, 3>,
    dinv: Tensor<B, 3>,
    x0: Tensor<B, 3>,
    coefs: &[f64],
    tracked: bool,
) -> (Tensor<B, 3>, Option<Grads<B>>) {
    let [gk, n, v] = x0.dims();
    // Per step s: u_s, W·u_s and term_{s−1}, kept for the adjoint series.
    let mut kept = Vec::new();
    let mut term = x0.clone();
    let mut y = x0.clone();
    for &a in coefs {
        let u = dinv.clone() * term.clone();
        let m = w.clone().matmul(u.clone());
        let lx = term.clone() - dinv.clone() * m.clone();
        if tracked {
            kept.push((u, m, term));
        }
        term = lx.mul_scalar(a);
        y = y + term.clone();
    }
    if !tracked {
        return (y, None);
    }
    let y_bar = x0.div_scalar(v as f64);
    let wt = w.swap_dims(1, 2);
    let mut g = y_bar.clone();
    let mut g_d = Tensor::<B, 3>::zeros([gk, n, 1], &dinv.device());
    let (mut left, mut right) = (Vec::new(), Vec::new());
    for (s, (u, m, prev)) in kept.into_iter().enumerate().rev() {
        let h = g.mul_scalar(coefs[s]);
        let dh = dinv.clone() * h.clone();
        let back = wt.clone().matmul(dh.clone());
        g_d = g_d - (h.clone() * m + back.clone() * prev).sum_dim(2);
        left.push(dh);
        right.push(u);
        g = h - dinv.clone() * back + y_bar.clone();
    }
    let g_w = Tensor::cat(left, 2)
        .matmul(Tensor::cat(right, 2).swap_dims(1, 2))
        .neg();
    (y, Some((g_w, g_d)))
}

/// The series by `fast_cpu::series` (the values read once and written back once).
fn host_series<B: Backend>(
    w: Tensor<B, 3>,
    dinv: Tensor<B, 3>,
    x0: Tensor<B, 3>,
    coefs: &[f64],
    tracked: bool,
) -> (Tensor<B, 3>, Option<Grads<B>>) {
    let [gk, n, v] = x0.dims();
    let device = w.device();
    let values = |t: Tensor<B, 3>| t.into_data().into_vec::<f32>().expect("f32 values");
    // A scalar product rounds its factor to f32 first (FastCpu's mul_scalar).
    let coefs: Vec<f32> = coefs.iter().map(|&a| a as f32).collect();
    let series = fast_cpu::series::heat_series(
        &values(w),
        &values(dinv),
        &values(x0),
        (n, v),
        &coefs,
        tracked,
    );
    let tensor = |data: Vec<f32>, shape: [usize; 3]| {
        Tensor::<B, 3>::from_data(TensorData::new(data, shape), &device)
    };
    let y = tensor(series.y, [gk, n, v]);
    let grads = series.adjoint.map(|a| {
        let sv = coefs.len() * v;
        let left = tensor(a.left, [gk, n, sv]);
        let right = tensor(a.right, [gk, n, sv]);
        let g_w = left.matmul(right.swap_dims(1, 2)).neg();
        (g_w, tensor(a.g_d, [gk, n, 1]))
    });
    (y, grads)
}

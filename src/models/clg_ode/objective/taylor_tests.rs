//! The topology loss's Taylor series with its gradient by the adjoint series
//! (`series::taylor_beta0`) against the same series differentiated by the autodiff graph (the
//! loss as it was built before): the values bit for bit, the gradients within rounding.

use burn::backend::{Autodiff, Flex};
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::activation::sigmoid;
use burn::tensor::backend::AutodiffBackend;

use super::config::{ObjectiveConfig, TopologyConfig};
use super::{series, topology};
use fast_cpu::FastCpu;

/// The series as the graph ran it: β0 `[GK]` of `w` `[GK,N,N]`, `dinv` `[GK,N,1]`, `x0`
/// `[GK,N,V]`.
fn graph_beta0<B: Backend>(
    w: Tensor<B, 3>,
    dinv: Tensor<B, 3>,
    x0: Tensor<B, 3>,
    cfg: &TopologyConfig,
) -> Tensor<B, 1> {
    let [gk, _, v] = x0.dims();
    let mut term = x0.clone();
    let mut y = x0.clone();
    for step in 1..=cfg.taylor_order.max(1) {
        let lx = term.clone() - dinv.clone() * w.clone().matmul(dinv.clone() * term);
        term = lx.mul_scalar(-cfg.t / step as f64);
        y = y + term.clone();
    }
    (x0 * y)
        .sum_dim(2)
        .sum_dim(1)
        .reshape([gk])
        .div_scalar(v as f64)
}

/// A soft adjacency `[GK,N,N]` (symmetric, zero diagonal, some isolated nodes) from `log_p`,
/// its D^{-1/2} and the probes, as `raw_loss` builds them.
fn inputs<B: Backend>(
    log_p: Tensor<B, 3>,
    n: usize,
    cfg: &TopologyConfig,
) -> (Tensor<B, 3>, Tensor<B, 3>, Tensor<B, 3>) {
    let device = log_p.device();
    let gk = log_p.dims()[0];
    let off = crate::models::clg_ode::decoder::off_diagonal::<B>(n, &device).reshape([1, n, n]);
    let w = sigmoid(log_p.mul_scalar(cfg.sharpness).sub_scalar(2.0)) * off;
    let d = w.clone().sum_dim(2);
    let dinv = d.clone().greater_elem(0.0).float() * d.add_scalar(1e-8).powf_scalar(-0.5);
    let probes = topology::probes(9, cfg.probes, n);
    let x0 = Tensor::<B, 2>::from_data(TensorData::new(probes, [cfg.probes, n]), &device)
        .transpose()
        .unsqueeze::<3>()
        .repeat_dim(0, gk);
    (w, dinv, x0)
}

/// Log weights `[GK,N,N]`, symmetric; rows `isolated` of the first graph all −∞-like (their
/// soft edges 0 in f32, so D^{-1/2} = 0 there).
fn log_weights(gk: usize, n: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; gk * n * n];
    for g in 0..gk {
        for i in 0..n {
            for j in i + 1..n {
                let v = ((i * 13 + j * 7 + g * 5) as f32 * 0.61).sin() * 1.5 + 0.3;
                let v = if g == 0 && (i < 2 || j < 2) { -50.0 } else { v };
                out[g * n * n + i * n + j] = v;
                out[g * n * n + j * n + i] = v;
            }
        }
    }
    out
}

#[test]
fn adjoint_series_equals_the_graphs_series() {
    compare::<Autodiff<Flex>>();
    compare::<Autodiff<FastCpu>>();
}

fn compare<AB: AutodiffBackend>() {
    let (gk, n) = (3, 24);
    let cfg = ObjectiveConfig::default().topology;
    let dev = AB::Device::default();
    let data = log_weights(gk, n);
    // A loss that weighs each graph's β0 differently, so every upstream gradient differs.
    let weights = Tensor::<AB, 1>::from_data(TensorData::new(vec![1.0f32, -0.5, 2.0], [gk]), &dev);
    let run = |adjoint: bool| {
        let log_p = Tensor::<AB, 3>::from_data(TensorData::new(data.clone(), [gk, n, n]), &dev)
            .require_grad();
        let (w, dinv, x0) = inputs(log_p.clone(), n, &cfg);
        let beta0 = match adjoint {
            true => series::taylor_beta0(w, dinv, x0, &cfg),
            false => graph_beta0(w, dinv, x0, &cfg),
        };
        // Huber-like curvature: the upstream gradient depends on β0.
        let loss = (beta0.clone() * weights.clone()).sum()
            + beta0.clone().powf_scalar(2.0).sum().mul_scalar(1e-9);
        let grad = log_p.grad(&loss.backward()).expect("a gradient");
        let host = |t: Tensor<AB::InnerBackend, 3>| t.into_data().to_vec::<f32>().unwrap();
        let beta = beta0.into_data().to_vec::<f32>().unwrap();
        (beta, host(grad))
    };
    let (beta_a, grad_a) = run(true);
    let (beta_g, grad_g) = run(false);
    assert!(
        beta_g.iter().all(|b| b.is_finite() && b.abs() > 1.0),
        "{beta_g:?}"
    );
    assert_eq!(
        beta_a.iter().map(|b| b.to_bits()).collect::<Vec<_>>(),
        beta_g.iter().map(|b| b.to_bits()).collect::<Vec<_>>(),
        "β0 bit for bit"
    );
    // Tolerance: the two sum the same products in another order (S rank-V updates added one
    // by one against one product of inner size S·V), each about 1e-7 relative of the largest
    // term; the largest gradient sets the scale.
    let scale = grad_g.iter().fold(0.0f32, |m, g| m.max(g.abs()));
    assert!(scale > 0.0, "a gradient to compare");
    let worst = grad_a
        .iter()
        .zip(&grad_g)
        .map(|(a, g)| (a - g).abs() / scale)
        .fold(0.0f32, f32::max);
    eprintln!("adjoint vs graph: worst gradient error {worst:.1e} of the largest ({scale:.3e})");
    assert!(worst <= 1e-5, "worst {worst:.1e} of {scale:.3e}");
}

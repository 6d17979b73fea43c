//! The topology loss of several predictions in one call equals its calls one prediction at a
//! time (what `forward::topology_term` ran before it batched them), values and gradients.

use burn::backend::{Autodiff, Flex};
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;

use super::config::ObjectiveConfig;
use super::topology;
use fast_cpu::FastCpu;

/// A symmetric non-negative N×N matrix with zeros (raw weights), varied by `salt`.
fn weights(n: usize, salt: usize) -> Vec<f32> {
    let mut w = vec![0.0f32; n * n];
    for i in 0..n {
        for j in i + 1..n {
            let v = ((i * 31 + j * 17 + salt * 7) as f32 * 0.73).sin() * 4.0;
            (w[i * n + j], w[j * n + i]) = (v.max(0.0), v.max(0.0));
        }
    }
    w
}

/// `got` within `1e-6 · max(|want|, 1)` of `want`: the two compute every prediction by the
/// same element-wise operations and per-matrix products in the same order, so only a
/// batch-dependent kernel choice could move a value (by a few u); measured: equal bit for bit.
fn close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len());
    let mut worst = 0.0f32;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs() / w.abs().max(1.0);
        assert!(err <= 1e-6, "{what}[{i}]: {g} vs {w}");
        worst = worst.max(err);
    }
    eprintln!("{what}: worst relative error {worst:.1e}");
}

/// On Burn's Flex and on `flex` (`FastCpu`, its own matrix products and element-wise kernels).
#[test]
fn topology_loss_batched_over_predictions_equals_one_at_a_time() {
    batched_equals_looped::<Autodiff<Flex>>();
    batched_equals_looped::<Autodiff<FastCpu>>();
}

fn batched_equals_looped<AB: AutodiffBackend>() {
    let (n, g) = (20, 3);
    let cfg = ObjectiveConfig::default().topology;
    let k = cfg.loss_bins;
    let probes = topology::probes(5, cfg.probes, n);
    let probes64: Vec<f64> = probes.iter().map(|&v| v as f64).collect();
    let (mut taus, mut target) = (Vec::new(), Vec::new());
    for q in 0..g {
        let truth = weights(n, 100 + q);
        let t = topology::thresholds(&truth, n, k).expect("thresholds");
        let log_truth = topology::log_weights(&truth);
        target.extend(topology::target_betti(&log_truth, n, &t, &probes64, &cfg));
        taus.extend(t);
    }
    let pred: Vec<f32> = (0..g)
        .flat_map(|q| weights(n, q))
        .map(|v| (v * 0.9).ln_1p())
        .collect();
    let dev = AB::Device::default();
    let log_p = || {
        Tensor::<AB, 3>::from_data(TensorData::new(pred.clone(), [g, n, n]), &dev).require_grad()
    };
    let weight = [1.0f32, 0.5, 0.5];
    let values = |t: Tensor<AB, 1>| t.into_data().convert::<f32>().to_vec::<f32>().unwrap();

    let batched_in = log_p();
    let w = Tensor::<AB, 1>::from_data(TensorData::new(weight.to_vec(), [g]), &dev);
    let batched = topology::raw_loss(batched_in.clone(), &taus, &target, &probes, &cfg) * w;
    let batched_grad = batched_in.grad(&batched.clone().sum().backward()).unwrap();

    let looped_in = log_p();
    let looped: Vec<Tensor<AB, 1>> = (0..g)
        .map(|q| {
            let r = q * k..(q + 1) * k;
            let one = looped_in.clone().narrow(0, q, 1);
            topology::raw_loss(one, &taus[r.clone()], &target[r], &probes, &cfg)
                .mul_scalar(weight[q])
        })
        .collect();
    let looped = Tensor::cat(looped, 0);
    let looped_grad = looped_in.grad(&looped.clone().sum().backward()).unwrap();

    let (b, l) = (values(batched), values(looped));
    assert!(
        b.iter().all(|v| v.is_finite() && *v > 0.0),
        "a loss to compare: {b:?}"
    );
    close(&b, &l, "raw loss");
    let grad =
        |t: Tensor<AB::InnerBackend, 3>| t.into_data().convert::<f32>().to_vec::<f32>().unwrap();
    let (bg, lg) = (grad(batched_grad), grad(looped_grad));
    assert!(lg.iter().any(|v| *v != 0.0), "a gradient to compare");
    close(&bg, &lg, "gradient");
}

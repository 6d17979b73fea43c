//! Backend operations of the ODE solver (issue 74 item 3), counted on `flex` (`FastCpu`, the
//! wrapper that counts every operation; `fast_cpu::profile`): what an integration asks of a GPU
//! in launches, independent of the batch.

use burn::backend::Autodiff;
use burn::prelude::*;
use burn::tensor::TensorData;

use super::ClgOdeConfig;
use crate::host_reads::Counts;
use fast_cpu::FastCpu;

type AB = Autodiff<FastCpu>;

fn dev() -> burn_flex::FlexDevice {
    burn_flex::FlexDevice
}

/// Forward and backward operations of one integration of `steps` RK4 steps of a batch of `b`
/// trajectories of `n` nodes (setup included).
fn integration_ops(steps: usize, b: usize, n: usize) -> (u64, u64) {
    let mut c = ClgOdeConfig::new(4, 6);
    c.sizes.latent_dim = 8;
    c.sizes.hidden_dim = 16;
    c.sizes.solver_steps = steps;
    let model = c.init::<AB>(&dev());
    let values = |len: usize| -> Vec<f32> { (0..len).map(|k| (k as f32 * 0.37).sin()).collect() };
    let z0 = Tensor::<AB, 3>::from_data(TensorData::new(values(b * n * 16), [b, n, 16]), &dev())
        .require_grad();
    let cov = Tensor::<AB, 2>::from_data(
        TensorData::new(values(b * c.cov_dim()), [b, c.cov_dim()]),
        &dev(),
    );
    let dt = Tensor::<AB, 1>::from_data(TensorData::new(vec![0.7f32; b], [b]), &dev());
    let before = Counts::now();
    let z = model.integrate(z0, cov, dt);
    let forward = before.elapsed().ops;
    let before = Counts::now();
    let _grads = z.sum().backward();
    (forward, before.elapsed().ops)
}

#[test]
fn clg_ode_ops_per_rk4_step() {
    let (f1, b1) = integration_ops(1, 2, 30);
    let (f3, b3) = integration_ops(3, 2, 30);
    let (fw, bw) = ((f3 - f1) / 2, (b3 - b1) / 2);
    let (f3b, b3b) = integration_ops(3, 5, 30);
    eprintln!(
        "per RK4 step: {fw} forward ops ({} per evaluation and combination), {bw} backward; \
         setup {} forward, {} backward",
        fw as f64 / 4.0,
        f1 - fw,
        b1 - bw
    );
    // Measured: 38 forward (4 evaluations of 5: matmul, ReLU, two matmuls, cat; 2 first
    // layers of 3; 12 for the stages), 102 backward; 88 and 156 before issue 74.
    assert!(
        fw <= 38 && bw <= 102,
        "{fw} forward, {bw} backward ops per RK4 step"
    );
    assert_eq!((f3b, b3b), (f3, b3), "operations independent of the batch");
}

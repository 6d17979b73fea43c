//! Invariants of the model on small random inputs (flex backend): the predicted adjacency's
//! symmetry and range, the RK4 solver's limits and batching, the drift head at rest.

use burn::prelude::*;
use burn::tensor::TensorData;

use super::tests::{B, assert_all_close, dev, host};
use super::*;

fn small_model(steps: usize) -> ClgOde<B> {
    B::seed(&dev(), 7);
    let mut c = ClgOdeConfig::new(4, 6);
    c.sizes.latent_dim = 8;
    c.sizes.hidden_dim = 16;
    c.sizes.solver_steps = steps;
    c.init(&dev())
}

fn random(shape: [usize; 3], seed: u64) -> Tensor<B, 3> {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|k| (((k as u64 + 1) * (seed * 2654435761 + 11) % 1000) as f32 / 500.0) - 1.0)
        .collect();
    Tensor::from_data(TensorData::new(v, shape), &dev())
}

fn inputs(b: usize, n: usize) -> (Tensor<B, 3>, Tensor<B, 3>, Tensor<B, 2>) {
    let a = random([b, n, n], 3).abs();
    let a = (a.clone() + a.swap_dims(1, 2)).mul_scalar(0.5);
    let x = random([b, n, 4], 5);
    let cov = random([1, b, 35], 9).reshape([b, 35]);
    (a, x, cov)
}

fn ids(v: Vec<i64>) -> Tensor<B, 1, Int> {
    let n = v.len();
    Tensor::from_data(TensorData::new(v, [n]), &dev())
}

#[test]
fn clg_a_pred_invariants() {
    let model = small_model(3);
    let (a, x, cov) = inputs(2, 9);
    let dt = Tensor::<B, 1>::from_floats([0.7, 2.3], &dev());
    let out = model.forward(a, x, Some(dt), ids(vec![1, 2]), ids(vec![0, 5]), cov);
    for dec in &out.dec {
        let p = dec.conn.a_pred.clone();
        let n = p.dims()[1];
        let v = host(p.clone());
        let vt = host(p.swap_dims(1, 2));
        for b in 0..2 {
            for i in 0..n {
                assert_eq!(v[b * n * n + i * n + i], 0.0, "diagonal");
                for j in 0..n {
                    let k = b * n * n + i * n + j;
                    assert!(v[k] >= 0.0 && v[k].is_finite());
                    // (i, j) and (j, i) come from the same products summed in the same
                    // order (the decoder is symmetric by construction), so they are equal
                    // but for rounding at worst; one process, one machine.
                    assert!(
                        (v[k] - vt[k]).abs() <= 1e-6 * v[k].abs().max(1.0),
                        "symmetry"
                    );
                }
            }
        }
    }
}

#[test]
fn clg_rk4_limits_and_batching() {
    let model = small_model(5);
    let (a, x, cov) = inputs(3, 8);
    let enc = model.encode(a, x);
    let z0 = enc.z0();
    let cov_full = model.covariates(ids(vec![1, 2, 0]), ids(vec![3, 1, 2]), cov);
    // Δt → 0 returns z0.
    let tiny = Tensor::<B, 1>::from_floats([1e-7, 1e-7, 1e-7], &dev());
    let z = model.integrate(z0.clone(), cov_full.clone(), tiny);
    assert_all_close(&host(z), &host(z0.clone()), "dt→0");
    // T = 1 grid returns z0 and decodes it.
    let (a, x, _) = inputs(3, 8);
    let out = model.forward(
        a,
        x,
        None,
        ids(vec![1, 2, 0]),
        ids(vec![3, 1, 2]),
        random([1, 3, 35], 2).reshape([3, 35]),
    );
    assert_eq!(out.z.len(), 1);
    assert_all_close(&host(out.z[0].clone()), &host(out.enc.z0()), "T=1");
    // Batched integration with different Δt equals per-trajectory integration.
    let dts = [0.3f32, 1.9, 4.0];
    let dt = Tensor::<B, 1>::from_floats(dts, &dev());
    let batched = host(model.integrate(z0.clone(), cov_full.clone(), dt));
    let per = z0.dims()[1] * z0.dims()[2];
    for (b, d) in dts.iter().enumerate() {
        let zb = z0.clone().narrow(0, b, 1);
        let cb = cov_full.clone().narrow(0, b, 1);
        let single = host(model.integrate(zb, cb, Tensor::from_floats([*d], &dev())));
        assert_all_close(
            &batched[b * per..(b + 1) * per],
            &single,
            "batched vs single",
        );
    }
}

/// `--drift-head` with the residual started at ρ = 0 predicts exactly the linear-drift forecast
/// (`--drift-support all`): what `--preset drift-residual` keeps unless training beats it.
#[test]
fn drift_head_at_rest_is_the_linear_drift_forecast() {
    use crate::models::linear_drift::{DriftSupport, forecast};
    let n = 7;
    let cfg = DecoderConfig {
        residual_skip: true,
        fixed_support: true,
        residual_scale_init: 0.0,
        drift_head: true,
        ..DecoderConfig::default()
    };
    let decoder = ConnDecoder::<B>::with_residual_scale(0.0, &dev());
    // A sparse start scan: some absent edges, which a positive drift creates.
    let a0: Vec<f32> = host(random([1, n, n], 4))
        .iter()
        .map(|v| if *v < 0.0 { 0.0 } else { 3.0 * v })
        .collect();
    let a0 = ndarray::Array2::from_shape_vec((n, n), a0).unwrap();
    let a0 = (&a0 + &a0.t()).mapv(|v| v * 0.5);
    let drift: Vec<f32> = host(random([1, n, n], 6)).iter().map(|v| 0.3 * v).collect();
    let drift = {
        let d = ndarray::Array2::from_shape_vec((n, n), drift).unwrap();
        (&d + &d.t()).mapv(|v| v * 0.5)
    };
    let dt = 2.5f32;
    let start = Start {
        a0_log: Tensor::from_data(
            TensorData::new(a0.mapv(f32::ln_1p).iter().copied().collect(), [1, n, n]),
            &dev(),
        ),
        t: Tensor::from_floats([dt], &dev()),
        drift: Some(Tensor::from_data(
            TensorData::new(drift.iter().copied().collect(), [1, n, n]),
            &dev(),
        )),
        eb_base: None,
    };
    let z = random([1, n, 4], 8);
    let out = decoder.forward(z, &cfg, Some(&start));
    let want = forecast(
        &a0,
        &drift.iter().copied().collect::<Vec<_>>(),
        dt as f64,
        DriftSupport::All,
    );
    let mut want = want;
    for i in 0..n {
        want[(i, i)] = 0.0;
    }
    let created = (0..n * n)
        .filter(|&k| a0.as_slice().unwrap()[k] == 0.0 && want.as_slice().unwrap()[k] > 0.0)
        .count();
    assert!(created > 0, "the fixture has edges the drift creates");
    assert_all_close(
        &host(out.a_pred),
        want.as_slice().unwrap(),
        "drift head at rest vs linear drift",
    );
}

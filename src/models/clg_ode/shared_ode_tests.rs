//! The integration kept once and replayed in several graphs (`shared_ode`) against the
//! integration each graph runs itself: the result bit for bit, the gradients of z0, the
//! covariates and every weight of the ODE function within rounding, in two graphs replaying
//! the same integration; on `flex` (`FastCpu`) and on Burn's plain Flex.

use burn::backend::{Autodiff, Flex};
use burn::module::AutodiffModule;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use fast_cpu::FastCpu;

use super::{ClgOde, ClgOdeConfig, shared_ode};

fn random<T: Backend, const D: usize>(shape: [usize; D], seed: u64) -> Tensor<T, D> {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|k| (((k as u64 + 1) * (seed * 2654435761 + 11) % 1000) as f32 / 500.0) - 1.0)
        .collect();
    Tensor::from_data(TensorData::new(v, shape), &Default::default())
}

fn values<T: Backend, const D: usize>(t: Tensor<T, D>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().expect("f32")
}

/// `got` within 2e-5 of the largest magnitude of `want`: f32 sums of the same products in
/// another order through 3 RK4 steps (measured at most 1.2e-7 of the largest).
fn assert_close(got: Vec<f32>, want: Vec<f32>, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    assert!(scale > 0.0, "{what}: the graph's gradient is zero");
    let worst = got
        .iter()
        .zip(&want)
        .fold(0.0f32, |m, (g, w)| m.max((g - w).abs()));
    assert!(
        worst <= 2e-5 * scale,
        "{what}: off by {worst:e}, largest {scale:e}"
    );
}

#[test]
fn a_replayed_integration_is_the_graphs_bit_for_bit_with_its_gradients() {
    compare::<Autodiff<FastCpu>>();
    compare::<Autodiff<Flex>>();
}

fn compare<T: AutodiffBackend>() {
    let device = Default::default();
    T::seed(&device, 7);
    let mut c = ClgOdeConfig::new(4, 6);
    c.sizes.latent_dim = 8;
    c.sizes.hidden_dim = 16;
    c.sizes.solver_steps = 3;
    let model: ClgOde<T> = c.init(&device);
    let (b, n, d) = (3, 5, 16);
    let cov_dim = model.ode_func.morph_net.fc1.weight.dims()[0] - d - 1;
    let z0 = random::<T, 3>([b, n, d], 3);
    let cov = random::<T, 2>([b, cov_dim], 5);
    let dt = Tensor::<T, 1>::from_floats([0.7, 2.3, 1.1], &device);
    let cotangent = random::<T, 3>([b, n, d], 9);
    // Each backward on fresh leaves: a copy of the model and of the inputs (a second backward
    // through the same leaves can race another test's: `toolbox::host_parallel` says why).
    let fresh = || {
        (
            ClgOde::<T>::from_inner(model.valid()),
            Tensor::<T, 3>::from_inner(z0.clone().inner()).require_grad(),
            Tensor::<T, 2>::from_inner(cov.clone().inner()).require_grad(),
        )
    };

    let (m0, z0_0, cov_0) = fresh();
    let z = m0.integrate(z0_0.clone(), cov_0.clone(), dt.clone());
    let want_z = values(z.clone().inner());
    let want = (z * cotangent.clone()).sum().backward();

    let inner = model.valid();
    let kept = inner.integrate_kept(z0.clone().inner(), cov.clone().inner(), dt.clone().inner());
    for graph in 0..2 {
        let (m, z0_g, cov_g) = fresh();
        let prepared = m.ode_func.prepare(cov_g.clone(), dt.clone());
        let z = shared_ode::replay(&prepared, z0_g.clone(), &kept).expect("flex replays");
        assert_eq!(values(z.clone().inner()), want_z, "graph {graph}: z(Δt)");
        let got = (z * cotangent.clone()).sum().backward();
        let grad = |t: &Tensor<T, 3>, g| values(t.grad(g).expect("a gradient"));
        assert_close(grad(&z0_g, &got), grad(&z0_0, &want), "z0");
        let grad = |t: &Tensor<T, 2>, g| values(t.grad(g).expect("a gradient"));
        assert_close(grad(&cov_g, &got), grad(&cov_0, &want), "covariates");
        for (name, net, net0) in [
            ("morph", &m.ode_func.morph_net, &m0.ode_func.morph_net),
            ("conn", &m.ode_func.conn_net, &m0.ode_func.conn_net),
        ] {
            for (layer, l, l0) in [("fc1", &net.fc1, &net0.fc1), ("fc2", &net.fc2, &net0.fc2)] {
                let what = format!("{name}.{layer}.weight");
                assert_close(
                    grad(&l.weight.val(), &got),
                    grad(&l0.weight.val(), &want),
                    &what,
                );
                let bias = |l: &burn::nn::Linear<T>| l.bias.as_ref().expect("a bias").val();
                let g = |t: Tensor<T, 1>, g| values(t.grad(g).expect("a gradient"));
                assert_close(
                    g(bias(l), &got),
                    g(bias(l0), &want),
                    &format!("{name}.{layer}.bias"),
                );
            }
        }
    }
}

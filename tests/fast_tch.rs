//! The `tch` backend (`FastTch`: LibTorch with our convolution gradients) against burn-tch's
//! `LibTorch` unchanged (`--backend tch-plain`): outputs and gradients of a convolution agree to
//! a relative error of 1e-4 on the MNIST CNN's layer shapes and on odd ones (batch 1, padding,
//! stride 2, dilation, 1×1, no bias), the CPU kernel really ran, and relu's gradient is the same.
#![cfg(feature = "tch")]

use burn::backend::Autodiff;
use burn::backend::libtorch::LibTorch;
use burn::tensor::backend::AutodiffBackend;
use trainer::backend::fast_tch::{FastTch, cpu_kernel_calls};

mod common;

use common::numerics::{Conv, host, random, tensor};

type Fast = Autodiff<FastTch>;
type Plain = Autodiff<LibTorch>;

// One test: the kernel's call counter is process-wide.
#[test]
fn conv_gradients_match_burn_tch() {
    for (name, conv) in Conv::cnn_layers().into_iter().chain(Conv::odd_shapes()) {
        let calls = cpu_kernel_calls();
        let fast = conv.run::<Fast>(11);
        assert_eq!(
            cpu_kernel_calls(),
            calls + 1,
            "{name}: the CPU weight gradient did not run"
        );
        Conv::assert_same(name, &fast, &conv.run::<Plain>(11));
    }
}

/// The gradient of `sum(relu(x) · r)`, with some inputs exactly 0 (where both give 0).
fn relu_grad<B: AutodiffBackend>() -> Vec<f32> {
    let mut data = random(4 * 300, 5);
    data.iter_mut().step_by(7).for_each(|v| *v = 0.0);
    let x = tensor::<B, 2>(&data, [4, 300]).require_grad();
    let r = tensor::<B, 2>(&random(4 * 300, 6), [4, 300]);
    let grads = (burn::tensor::activation::relu(x.clone()) * r)
        .sum()
        .backward();
    host(x.grad(&grads).unwrap())
}

#[test]
fn relu_gradient_matches_burn_tch() {
    assert_eq!(relu_grad::<Fast>(), relu_grad::<Plain>());
}

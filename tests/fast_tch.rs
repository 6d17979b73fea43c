//! The `tch` backend (`FastTch`: LibTorch with our convolution gradients) against burn-tch's
//! `LibTorch` unchanged (`--backend tch-plain`): outputs and gradients of a convolution agree to
//! a relative error of 1e-4 on the MNIST CNN's layer shapes and on odd ones (batch 1, padding,
//! stride 2, dilation, 1×1, no bias), the CPU kernel really ran, and relu's gradient is the same.
#![cfg(feature = "tch")]

use burn::backend::Autodiff;
use burn::backend::libtorch::LibTorch;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use trainer::backend::fast_tch::{FastTch, cpu_kernel_calls};

type Fast = Autodiff<FastTch>;
type Plain = Autodiff<LibTorch>;

const TOLERANCE: f32 = 1e-4;

fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

fn tensor<B: Backend, const D: usize>(data: &[f32], shape: [usize; D]) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(data.to_vec(), shape), &Default::default())
}

fn host<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

/// max |a − b| / max |b|.
fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "different lengths");
    let diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    let scale = b.iter().map(|y| y.abs()).fold(0.0, f32::max);
    diff / scale.max(f32::MIN_POSITIVE)
}

struct Conv {
    x: [usize; 4],
    w: [usize; 4],
    bias: bool,
    stride: [usize; 2],
    padding: [usize; 2],
    dilation: [usize; 2],
}

impl Conv {
    fn new(x: [usize; 4], w: [usize; 4]) -> Self {
        Self {
            x,
            w,
            bias: true,
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
        }
    }

    /// Output, and gradients of `sum(output · r)` for input, weight and bias.
    fn run<B: AutodiffBackend>(&self, seed: u64) -> [Vec<f32>; 4] {
        let n = |s: [usize; 4]| s.iter().product::<usize>();
        let x = tensor::<B, 4>(&random(n(self.x), seed), self.x).require_grad();
        let w = tensor::<B, 4>(&random(n(self.w), seed + 1), self.w).require_grad();
        let b = self
            .bias
            .then(|| tensor::<B, 1>(&random(self.w[0], seed + 2), [self.w[0]]).require_grad());
        let options = ConvOptions::new(self.stride, self.padding, self.dilation, 1);
        let y = conv2d(x.clone(), w.clone(), b.clone(), options);
        let dims = y.dims();
        let r = tensor::<B, 4>(&random(dims.iter().product(), seed + 3), dims);
        let grads = (y.clone() * r).sum().backward();
        let db = b.map(|b| host(b.grad(&grads).unwrap())).unwrap_or_default();
        [
            host(y),
            host(x.grad(&grads).unwrap()),
            host(w.grad(&grads).unwrap()),
            db,
        ]
    }

    fn check(&self, name: &str) {
        let calls = cpu_kernel_calls();
        let fast = self.run::<Fast>(11);
        assert_eq!(
            cpu_kernel_calls(),
            calls + 1,
            "{name}: the CPU weight gradient did not run"
        );
        let plain = self.run::<Plain>(11);
        for (i, part) in ["output", "input grad", "weight grad", "bias grad"]
            .iter()
            .enumerate()
        {
            let e = rel_err(&fast[i], &plain[i]);
            eprintln!("{name}: {part}: relative error {e:.1e}");
            assert!(
                e <= TOLERANCE,
                "{name}: {part}: relative error {e:e} > {TOLERANCE:e}"
            );
        }
    }
}

// One test: the kernel's call counter is process-wide.
#[test]
fn conv_gradients_match_burn_tch() {
    Conv::new([16, 1, 28, 28], [32, 1, 3, 3]).check("conv1 of the CNN");
    Conv::new([16, 32, 26, 26], [64, 32, 3, 3]).check("conv2 of the CNN");
    Conv::new([1, 3, 9, 7], [5, 3, 3, 3]).check("batch 1");
    Conv {
        padding: [1, 1],
        ..Conv::new([2, 3, 8, 8], [4, 3, 3, 3])
    }
    .check("padding 1");
    Conv {
        stride: [2, 2],
        padding: [1, 0],
        ..Conv::new([3, 3, 9, 10], [4, 3, 3, 3])
    }
    .check("stride 2");
    Conv {
        stride: [2, 1],
        dilation: [2, 1],
        padding: [2, 1],
        ..Conv::new([2, 2, 11, 9], [3, 2, 2, 3])
    }
    .check("dilation 2, 2×3 kernel");
    Conv::new([2, 8, 5, 5], [4, 8, 1, 1]).check("1×1");
    Conv {
        bias: false,
        ..Conv::new([2, 3, 6, 6], [2, 3, 3, 3])
    }
    .check("no bias");
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

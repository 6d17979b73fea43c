//! Numerics checks shared by the wrapper-backend tests (tests/engine/fast_cpu.rs, tests/backends/fast_tch.rs):
//! seeded random inputs, host copies, the relative error, and the convolution cases (the MNIST
//! CNN's two layers and odd shapes) with their outputs and gradients.

use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::module::conv2d;
use burn::tensor::ops::ConvOptions;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The largest relative error (max |a − b| / max |b|, see [`rel_err`]) the fast paths may have
/// against the plain ones.
///
/// Both sides run in one process on one machine, but sum in different orders: im2col + one
/// gemm per image (and the weight gradient summed over a fixed partition of the batch)
/// against Flex's convolution and Burn's default backward passes; gemm's depth blocking (from
/// the L1 cache's geometry) and micro-kernels (AVX-512, FMA or SSE) and Flex's SIMD sums
/// (macerator: 8 lanes on AVX2, 16 on AVX-512) make both orders CPU-dependent; the thread
/// count does not change them (measured: identical errors with RAYON_NUM_THREADS=1 and 4).
/// The longest sums are the weight gradients and fc1's products, n = 9216 terms (16 images ×
/// 576 positions; k = 9216): the worst case n·u·Σ|x| is far too pessimistic for random
/// inputs, whose rounding errors add like a random walk: a sequential sum of n terms of
/// spread σ is off by ≈ u·σ·n/√6 against a result ≈ √n·σ, i.e. ≈ u·√(n/6) ≈ 2.3e-6
/// relative for n = 9216, and less against max |b|. Measured on this machine (AMD EPYC,
/// AVX2): ≤ 9.9e-7 (conv2's output), 7.4e-7 (conv1's weight gradient in the CNN step), 0 for
/// max-pool and the matrix products; 1e-4 is 40× the random-walk estimate and 100× the
/// measured worst, so another CPU's order (another draw of the same noise) stays inside,
/// while a wrong index or a missing term gives errors of order 1. (`tests/backends/fast_tch.rs` uses
/// the same bound for LibTorch's CPU kernels, whose errors are of the same kind; not measured
/// on this machine, which has no LibTorch.)
pub const TOLERANCE: f32 = 1e-4;

pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

pub fn tensor<B: Backend, const D: usize>(data: &[f32], shape: [usize; D]) -> Tensor<B, D> {
    Tensor::from_data(TensorData::new(data.to_vec(), shape), &Default::default())
}

pub fn host<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

/// max |a − b| / max |b|.
pub fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "different lengths");
    let diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    let scale = b.iter().map(|y| y.abs()).fold(0.0, f32::max);
    diff / scale.max(f32::MIN_POSITIVE)
}

pub fn assert_close(what: &str, fast: &[f32], plain: &[f32]) {
    let e = rel_err(fast, plain);
    eprintln!("{what}: relative error {e:.1e}");
    assert!(
        e <= TOLERANCE,
        "{what}: relative error {e:e} > {TOLERANCE:e}"
    );
}

/// One convolution: input and weight shapes, bias or not, stride, padding, dilation.
pub struct Conv {
    pub x: [usize; 4],
    pub w: [usize; 4],
    pub bias: bool,
    pub stride: [usize; 2],
    pub padding: [usize; 2],
    pub dilation: [usize; 2],
}

impl Conv {
    pub fn new(x: [usize; 4], w: [usize; 4]) -> Self {
        Self {
            x,
            w,
            bias: true,
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
        }
    }

    /// The MNIST CNN's two layers (batch 16).
    pub fn cnn_layers() -> Vec<(&'static str, Conv)> {
        vec![
            (
                "conv1 of the CNN",
                Conv::new([16, 1, 28, 28], [32, 1, 3, 3]),
            ),
            (
                "conv2 of the CNN",
                Conv::new([16, 32, 26, 26], [64, 32, 3, 3]),
            ),
        ]
    }

    /// Batch 1, padding, stride 2, dilation with a 2×3 kernel, 1×1, no bias, batches that the
    /// weight gradient cuts into parts of several images, many channels, one output row.
    pub fn odd_shapes() -> Vec<(&'static str, Conv)> {
        vec![
            ("batch 1", Conv::new([1, 3, 9, 7], [5, 3, 3, 3])),
            (
                "padding 1",
                Conv {
                    padding: [1, 1],
                    ..Conv::new([2, 3, 8, 8], [4, 3, 3, 3])
                },
            ),
            (
                "stride 2",
                Conv {
                    stride: [2, 2],
                    padding: [1, 0],
                    ..Conv::new([3, 3, 9, 10], [4, 3, 3, 3])
                },
            ),
            (
                "dilation 2, 2×3 kernel",
                Conv {
                    stride: [2, 1],
                    dilation: [2, 1],
                    padding: [2, 1],
                    ..Conv::new([2, 2, 11, 9], [3, 2, 2, 3])
                },
            ),
            ("1×1", Conv::new([2, 8, 5, 5], [4, 8, 1, 1])),
            (
                "no bias",
                Conv {
                    bias: false,
                    ..Conv::new([2, 3, 6, 6], [2, 3, 3, 3])
                },
            ),
            // More images than the weight gradient's 16 parts: several images per part, and
            // a last part that is short.
            ("batch 40", Conv::new([40, 3, 9, 7], [5, 3, 3, 3])),
            (
                "batch 35, padding 1, stride 2",
                Conv {
                    stride: [2, 2],
                    padding: [1, 1],
                    ..Conv::new([35, 2, 9, 8], [3, 2, 3, 3])
                },
            ),
            // More channels than the cases above, a single output row, a kernel as wide as the
            // image.
            (
                "16 channels, 2×3 kernel, batch 20",
                Conv::new([20, 16, 7, 9], [5, 16, 2, 3]),
            ),
            (
                "17 channels, one output row, no bias",
                Conv {
                    bias: false,
                    ..Conv::new([3, 17, 4, 6], [6, 17, 4, 2])
                },
            ),
            (
                "16 channels, full-width kernel",
                Conv::new([2, 16, 5, 3], [4, 16, 3, 3]),
            ),
        ]
    }

    pub fn options(&self) -> ConvOptions<2> {
        ConvOptions::new(self.stride, self.padding, self.dilation, 1)
    }

    /// Output, and gradients of `sum(output · r)` for input, weight and bias.
    pub fn run<B: AutodiffBackend>(&self, seed: u64) -> [Vec<f32>; 4] {
        let n = |s: [usize; 4]| s.iter().product::<usize>();
        let x = tensor::<B, 4>(&random(n(self.x), seed), self.x).require_grad();
        let w = tensor::<B, 4>(&random(n(self.w), seed + 1), self.w).require_grad();
        let b = self
            .bias
            .then(|| tensor::<B, 1>(&random(self.w[0], seed + 2), [self.w[0]]).require_grad());
        let y = conv2d(x.clone(), w.clone(), b.clone(), self.options());
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

    /// Asserts that `fast` (from [`Conv::run`]) is within [`TOLERANCE`] of `plain`, part by part.
    pub fn assert_same(name: &str, fast: &[Vec<f32>; 4], plain: &[Vec<f32>; 4]) {
        for (i, part) in ["output", "input grad", "weight grad", "bias grad"]
            .iter()
            .enumerate()
        {
            assert_close(&format!("{name}: {part}"), &fast[i], &plain[i]);
        }
    }
}

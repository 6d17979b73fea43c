//! The convolutions of `cuda` and `wgpu` by Burn's implicit GEMM (`backend::fast_cube`, reached
//! through `launch::BackendKernels`), run on wgpu (lavapipe here, whatever adapter `WgpuDevice::
//! Cpu` finds): forward pass and the three gradients against Burn's own convolution layer on the
//! same device, for the CNN's two layers. `tests/backends/backend_cuda.rs` runs the same check
//! on an NVIDIA GPU (`scripts/gpu-check.sh --cuda-tests`), where the implicit GEMM does run:
//! lavapipe has no matrix units, so here every pass falls back to the direct kernels.
#![cfg(any(feature = "wgpu", feature = "cuda"))]

use burn::backend::Autodiff;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::prelude::*;
use burn::tensor::Distribution;
use trainer::backend::fast_cube;
use trainer::launch::BackendKernels;
use trainer::models::cnn::{BurnKernels, LayerKernels};

fn host<P: Backend, const D: usize>(t: Tensor<P, D>) -> Vec<f32> {
    t.into_data().to_vec::<f32>().unwrap()
}

/// The output and the gradients of `Σ y·r` with respect to x, the weight and the bias, with the
/// layer run by `k`.
fn outputs<P: Backend, K: LayerKernels<Autodiff<P>>>(
    k: &K,
    layer: &Conv2d<Autodiff<P>>,
    x: &Tensor<P, 4>,
    r: &Tensor<Autodiff<P>, 4>,
) -> [Vec<f32>; 4] {
    let x = Tensor::<Autodiff<P>, 4>::from_inner(x.clone()).require_grad();
    let y = k.conv2d(x.clone(), layer);
    let grads = (y.clone() * r.clone()).sum().backward();
    let bias = layer.bias.as_ref().unwrap();
    [
        host(y.inner()),
        host(x.grad(&grads).unwrap()),
        host(layer.weight.grad(&grads).unwrap()),
        host(bias.grad(&grads).unwrap()),
    ]
}

/// Bit for bit Burn's where every pass ran direct (the same kernels Burn's layer runs); within
/// 5e-3 of each output's largest magnitude where a pass ran by implicit GEMM: on GPUs with TF32
/// the product reads its f32 inputs with a 10-bit mantissa (about 1e-3 relative per product,
/// summed with random signs over 9 to 288 terms), as PyTorch's cuDNN convolutions do by default.
pub fn implicit_gemm_agrees_with_burns_layer<P: Backend>(device: &P::Device) {
    type B<P> = Autodiff<P>;
    assert!(fast_cube::applies::<B<P>>() && fast_cube::applies::<P>());
    B::<P>::seed(device, 7);
    // The CNN's two layers (1 → 32 channels on 28 × 28, 32 → 64 on 26 × 26), batch 3.
    for (cin, cout, hw) in [(1, 32, 28), (32, 64, 26)] {
        let layer = Conv2dConfig::new([cin, cout], [3, 3]).init::<B<P>>(device);
        let normal = Distribution::Normal(0.0, 1.0);
        let x = Tensor::<P, 4>::random([3, cin, hw, hw], normal, device);
        let r = Tensor::<B<P>, 4>::random([3, cout, hw - 2, hw - 2], normal, device);
        let burns = outputs(&BurnKernels, &layer, &x, &r);
        let before = fast_cube::counts();
        let ours = outputs(&BackendKernels, &layer, &x, &r);
        let after = fast_cube::counts();
        let gemm = after.implicit_gemm - before.implicit_gemm;
        let direct = after.direct - before.direct;
        assert_eq!(
            gemm + direct,
            3,
            "forward, input and weight gradient counted"
        );
        eprintln!("{cin} -> {cout}: {gemm} of 3 passes by implicit GEMM, {direct} direct");
        let names = [
            "output",
            "input gradient",
            "weight gradient",
            "bias gradient",
        ];
        for ((a, b), name) in ours.iter().zip(&burns).zip(names) {
            assert_eq!(a.len(), b.len(), "{name}");
            if gemm == 0 {
                assert!(
                    a == b,
                    "{cin} -> {cout}: {name} differs from Burn's, all passes direct"
                );
                continue;
            }
            let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = a.iter().zip(b).fold(0f32, |m, (p, q)| m.max((p - q).abs()));
            assert!(
                worst <= 5e-3 * scale,
                "{cin} -> {cout}: {name} off by {worst} (largest magnitude {scale})"
            );
        }
    }
}

#[cfg(feature = "wgpu")]
#[test]
fn implicit_gemm_convolutions_agree_with_burns_layer_on_wgpu() {
    use trainer::backend::wgpu::{Fused, Plain};
    assert!(!fast_cube::applies::<Autodiff<Fused>>() && !fast_cube::applies::<Fused>());
    assert!(!fast_cube::applies::<trainer::backend::fast_cpu::FastCpu>());
    implicit_gemm_agrees_with_burns_layer::<Plain>(&burn_wgpu::WgpuDevice::Cpu);
}

//! The backends' hooks into the generic training loop, chosen by the launcher for the run's
//! backend: the one-pass Adam update of `flex` (`fast_cpu::adam`) and of `tch`
//! (`backend::fast_tch::adam`, LibTorch's fused kernel), which the loop
//! (`toolbox::optim`, through `RunContext::fused_adam`) calls without naming a backend; and
//! the cross-entropy and dropout of `tch` in LibTorch's own kernels (`backend::fast_tch::xent`,
//! `backend::fast_tch::dropout`); the convolutions of `cuda` and `wgpu` by implicit GEMM
//! (`backend::fast_cube`).

use burn::nn::Dropout;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use burn::nn::PaddingConfig2d;
use burn::nn::conv::Conv2d;
use burn::prelude::*;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
use burn_backend::ops::ConvOptions;

use crate::backend::fast_cpu::adam;
use crate::models::cnn::LayerKernels;
use crate::toolbox::optim::{AdamScalars, FusedAdam};

/// The mean cross-entropy of `logits` `[n, classes]` against class indices `target` `[n]`
/// (shape `[1]`), the way backend `B` computes it fastest: on `tch` (not `tch-plain`) with
/// LibTorch's own kernels, forward and backward (`backend::fast_tch::xent`, within f32 rounding
/// of Burn's); elsewhere Burn's `CrossEntropyLoss`, bit for bit what it was.
pub fn cross_entropy<B: Backend>(logits: Tensor<B, 2>, target: Tensor<B, 1, Int>) -> Tensor<B, 1> {
    #[cfg(feature = "tch")]
    if crate::backend::fast_tch::xent::applies::<B>() {
        return crate::backend::fast_tch::xent::cross_entropy(logits, target);
    }
    burn::nn::loss::CrossEntropyLoss::new(None, &logits.device()).forward(logits, target)
}

/// The CNN's convolution and dropout layers the way the backend runs them fastest: on `tch`
/// (not `tch-plain`) dropout in LibTorch's `native_dropout` and its backward, one operation
/// each (`backend::fast_tch::dropout`); on `cuda` and `wgpu` (not their `-fusion` variants)
/// convolutions by Burn's implicit GEMM, forward and both gradients, direct where it refuses
/// (`backend::fast_cube`); elsewhere Burn's layers, bit for bit what they were.
pub struct BackendKernels;

impl<B: Backend> LayerKernels<B> for BackendKernels {
    fn conv2d(&self, x: Tensor<B, 4>, layer: &Conv2d<B>) -> Tensor<B, 4> {
        #[cfg(any(feature = "cuda", feature = "wgpu"))]
        if crate::backend::fast_cube::applies::<B>()
            && let Some(options) = symmetric_options(layer)
            && let Some(bias) = &layer.bias
        {
            return crate::backend::fast_cube::conv2d(x, layer.weight.val(), bias.val(), options);
        }
        layer.forward(x)
    }

    fn dropout<const D: usize>(&self, x: Tensor<B, D>, layer: &Dropout) -> Tensor<B, D> {
        #[cfg(feature = "tch")]
        if layer.prob > 0.0 && crate::backend::fast_tch::dropout::applies::<B>() {
            return crate::backend::fast_tch::dropout::dropout(x, layer.prob);
        }
        layer.forward(x)
    }
}

/// The layer's options when its padding is the same on both sides of each axis (`Valid`, or
/// `Explicit` with matching values); `None` otherwise (`Same`, uneven: Burn pads first).
#[cfg(any(feature = "cuda", feature = "wgpu"))]
fn symmetric_options<B: Backend>(layer: &Conv2d<B>) -> Option<ConvOptions<2>> {
    let padding = match layer.padding {
        PaddingConfig2d::Valid => [0, 0],
        PaddingConfig2d::Explicit(top, left, bottom, right) if top == bottom && left == right => {
            [top, left]
        }
        _ => return None,
    };
    Some(ConvOptions::new(
        layer.stride,
        padding,
        layer.dilation,
        layer.groups,
    ))
}

/// Copies `src` into `dst`'s memory in place (`--cuda-graph`: a job's fixed input buffers);
/// `false` on a backend that cannot (only `tch` records graphs).
pub(crate) fn copy_into<B: Backend>(dst: &Tensor<B, 1, Int>, src: Tensor<B, 1, Int>) -> bool {
    #[cfg(feature = "tch")]
    if crate::backend::fast_tch::xent::applies::<B>() {
        crate::backend::fast_tch::graph::copy_into(dst, src);
        return true;
    }
    let _ = (dst, src);
    false
}

/// `fast_cpu::adam::fused_step` with the loop's scalars.
#[allow(clippy::type_complexity)]
fn flex_step<B: Backend>(
    param: Tensor<B, 1>,
    grad: Tensor<B, 1>,
    moments: Option<(Tensor<B, 1>, Tensor<B, 1>)>,
    s: AdamScalars,
) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1>) {
    adam::fused_step(param, grad, moments, scalars(s))
}

/// The one-pass Adam update of backend `B` (the inner backend of the run's autodiff one), if
/// it has one: the `flex` backend's fast kernels (not `flex-plain`, which runs the tensor
/// version as Burn's Adam would), bit for bit the tensor version; `tch`'s LibTorch fused kernel
/// (not `tch-plain`), within f32 rounding of it (`backend::fast_tch::adam`).
pub fn fused_adam<B: Backend>() -> Option<FusedAdam<B>> {
    if adam::fused_adam_for::<B>() {
        return Some(FusedAdam {
            applies: adam::fused_adam_for::<B>,
            step: flex_step::<B>,
        });
    }
    #[cfg(feature = "tch")]
    if crate::backend::fast_tch::adam::fused_adam_for::<B>() {
        return Some(FusedAdam {
            applies: crate::backend::fast_tch::adam::fused_adam_for::<B>,
            step: tch_step::<B>,
        });
    }
    None
}

/// `backend::fast_tch::adam::fused_step` with the loop's scalars.
#[cfg(feature = "tch")]
#[allow(clippy::type_complexity)]
fn tch_step<B: Backend>(
    param: Tensor<B, 1>,
    grad: Tensor<B, 1>,
    moments: Option<(Tensor<B, 1>, Tensor<B, 1>)>,
    s: AdamScalars,
) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1>) {
    crate::backend::fast_tch::adam::fused_step(param, grad, moments, scalars(s))
}

/// The loop's scalars as the backends' kernels take them.
fn scalars(s: AdamScalars) -> adam::AdamScalars {
    adam::AdamScalars {
        beta1: s.beta1,
        beta2: s.beta2,
        factor: s.factor,
        eps: s.eps,
        lr: s.lr,
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, Flex};
    use burn::module::Param;
    use burn::tensor::TensorData;
    use burn::tensor::backend::AutodiffBackend;

    use super::*;
    use crate::backend::fast_cpu::FastCpu;
    use crate::toolbox::checkpoint::Checkpoint;
    use crate::toolbox::optim::{Adam, Grads};
    use crate::toolbox::params;

    #[derive(Module, Debug)]
    struct Two<B: Backend> {
        big: Param<Tensor<B, 2>>,
        small: Param<Tensor<B, 1>>,
    }

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 500.0 - 1.0)
            .collect()
    }

    /// Three Adam steps from the same weights and gradients, with the backend's hook: the
    /// parameters and the saved moments.
    fn three_steps<AB: AutodiffBackend>() -> Checkpoint {
        let dev = Default::default();
        let tensor = |v: Vec<f32>, shape: &[usize]| TensorData::new(v, shape.to_vec());
        let mut model = Two::<AB> {
            big: Param::from_tensor(Tensor::from_data(
                tensor(values(90_000, 1), &[300, 300]),
                &dev,
            )),
            small: Param::from_tensor(Tensor::from_data(tensor(values(10, 2), &[10]), &dev)),
        };
        let mut adam = Adam::<AB::InnerBackend>::with_fused(fused_adam());
        for step in 0..3 {
            let grad = |n: usize, seed: usize| {
                Some(Tensor::from_data(tensor(values(n, seed), &[n]), &dev))
            };
            let grads = vec![grad(90_000, 3 + step), grad(10, 7 + step)];
            model = adam.step(1e-3, model, Grads::Flat(grads));
        }
        let mut ck = Checkpoint::default();
        adam.save_into(&params::names(&model), &mut ck);
        for (name, t) in params::collect(&model) {
            ck.floats.insert(name, t);
        }
        ck
    }

    /// The fused pass of the `flex` backend (large and small parameters, first and later steps)
    /// gives the tensor version's parameters and moments bit for bit: the same f32 operations in
    /// the same order, each rounded once. Only `flex`'s fast kernels have the hook.
    #[test]
    fn fused_adam_is_the_tensor_version_bit_for_bit() {
        assert!(fused_adam::<FastCpu>().is_some());
        assert!(fused_adam::<Flex>().is_none());
        let fused = three_steps::<Autodiff<FastCpu>>();
        let plain = three_steps::<Autodiff<Flex>>();
        assert_eq!(
            fused.floats.len(),
            6,
            "2 parameters and their 2 moments each"
        );
        assert!(fused == plain, "fused Adam differs from the tensor version");
    }
}

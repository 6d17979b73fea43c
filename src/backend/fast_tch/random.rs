//! Random tensors `FastTch` draws itself: dropout's Bernoulli masks.

use burn::backend::libtorch::{LibTorch, LibTorchDevice, TchTensor};
use burn_backend::ops::FloatTensorOps;
use burn_backend::{Distribution, FloatDType, Shape};

/// `LibTorch`'s random tensor, except Bernoulli(p) masks: uniform values in [0, 1) compared with
/// `p` in place (1 where below, 0 elsewhere: 1 with probability `p`), which LibTorch draws in
/// about half the time of its `bernoulli_` (6.5 → 2.9 ms for the CNN's 64 × 9216 mask, 2 cores).
pub(super) fn float(
    shape: Shape,
    distribution: Distribution,
    device: &LibTorchDevice,
    dtype: FloatDType,
) -> TchTensor {
    match distribution {
        Distribution::Bernoulli(p) => {
            let mut u = LibTorch::<f32>::float_random(shape, Distribution::Default, device, dtype);
            // A fresh tensor is its storage's only owner, so the in-place path is the one taken.
            match u.mut_ops(|t| t.lt_(p)) {
                Some(mask) => mask,
                None => TchTensor::new(u.tensor.lt(p).to_kind(u.tensor.kind())),
            }
        }
        other => LibTorch::<f32>::float_random(shape, other, device, dtype),
    }
}

//! Dropout on `tch` as PyTorch trains it: LibTorch's `native_dropout` (the mask and the scaled
//! output in one call) and `native_dropout_backward` (the gradient through the kept mask), as
//! one operation of Burn's autodiff graph each. Burn's `Dropout` draws a Bernoulli mask and
//! multiplies twice (by the mask, then by 1/(1 − p)), each a launch on a GPU with its own
//! backward. The masks come from LibTorch's generator, seeded per step as before (`B::seed`),
//! so a resumed run draws the same ones; they are not the masks of Burn's path (another
//! stream of the same generator). Reached from [`crate::launch::BackendKernels`] for
//! `Autodiff<FastTch>`.

use std::any::TypeId;

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind, unary};
use burn::backend::libtorch::TchTensor;
use burn::prelude::*;
use burn_backend::BackendTypes;

use super::FastTch;
use crate::backend::fast_cpu::cast;

type Trained = Autodiff<FastTch>;
type TrainedFloat = <Trained as BackendTypes>::FloatTensorPrimitive;

/// Whether [`dropout`] runs for backend `B`: `Autodiff<FastTch>` (training).
pub(crate) fn applies<B: Backend>() -> bool {
    TypeId::of::<B>() == TypeId::of::<Trained>()
}

/// `x` with each value zeroed with probability `p` (0 < p < 1) and the others scaled by
/// 1/(1 − p). `B` must pass [`applies`].
pub(crate) fn dropout<B: Backend, const D: usize>(x: Tensor<B, D>, p: f64) -> Tensor<B, D> {
    const WHAT: &str = "dropout runs on Autodiff<FastTch> only (applies)";
    let x: TrainedFloat = cast::float_primitive(x, WHAT);
    cast::float_tensor(tracked(x, p), WHAT)
}

#[derive(Debug)]
struct DropoutBackward;

impl Backward<FastTch, 1> for DropoutBackward {
    /// The kept mask and the scale 1/(1 − p).
    type State = (TchTensor, f64);

    fn backward(self, ops: Ops<(TchTensor, f64), 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (mask, scale) = ops.state;
        unary::<FastTch, _>(ops.parents, ops.node, grads, |grad| {
            TchTensor::new(crate::backend::profile::timed("dropout_backward", || {
                tch::Tensor::native_dropout_backward(&grad.tensor, &mask.tensor, scale)
            }))
        });
    }
}

fn tracked(x: TrainedFloat, p: f64) -> TrainedFloat {
    let (out, mask) =
        crate::backend::profile::timed("dropout", || x.primitive.tensor.native_dropout(p, true));
    let scale = 1.0 / (1.0 - p);
    match DropoutBackward
        .prepare::<NoCheckpointing>([x.node.clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish((TchTensor::new(mask), scale), TchTensor::new(out)),
        OpsKind::UnTracked(prep) => prep.finish(TchTensor::new(out)),
    }
}

//! Cross-entropy on `tch` as PyTorch computes it: the forward in LibTorch's two kernels
//! (`_log_softmax`, `nll_loss_forward`) and the backward in its two (`nll_loss_backward`,
//! `_log_softmax_backward_data`), as one operation of Burn's autodiff graph. Burn's
//! `CrossEntropyLoss` builds the loss from its generic `log_softmax` (max, subtract, exp, sum,
//! log, subtract), a gather, a mean and a negation, each a launch on a GPU and each with its own
//! backward: about twenty launches where PyTorch makes four. Reached through the shim
//! (`shim.cpp`: tch binds neither `nll_loss_forward` nor its total weight), from
//! [`crate::launch::cross_entropy`], for `Autodiff<FastTch>` (training) and `FastTch`
//! (evaluation); every other backend keeps Burn's loss.

use std::any::TypeId;
use std::ffi::c_char;

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind, unary};
use burn::backend::libtorch::TchTensor;
use burn::prelude::*;
use burn_backend::BackendTypes;

use super::FastTch;
use crate::backend::fast_cpu::cast;

unsafe extern "C" {
    fn trainer_cross_entropy(
        logits: *mut torch_sys::C_tensor,
        target: *mut torch_sys::C_tensor,
        loss: *mut *mut torch_sys::C_tensor,
        log_softmax: *mut *mut torch_sys::C_tensor,
        total_weight: *mut *mut torch_sys::C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
    fn trainer_cross_entropy_backward(
        grad: *mut torch_sys::C_tensor,
        log_softmax: *mut torch_sys::C_tensor,
        target: *mut torch_sys::C_tensor,
        total_weight: *mut torch_sys::C_tensor,
        out: *mut *mut torch_sys::C_tensor,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
}

type Trained = Autodiff<FastTch>;
type TrainedFloat = <Trained as BackendTypes>::FloatTensorPrimitive;

/// Whether [`cross_entropy`] runs for backend `B`: `Autodiff<FastTch>` or `FastTch`.
pub fn applies<B: Backend>() -> bool {
    let b = TypeId::of::<B>();
    b == TypeId::of::<Trained>() || b == TypeId::of::<FastTch>()
}

/// The mean cross-entropy of `logits` `[n, classes]` against class indices `target` `[n]`,
/// shape `[1]` (what Burn's `CrossEntropyLoss` returns). `B` must pass [`applies`].
pub(crate) fn cross_entropy<B: Backend>(
    logits: Tensor<B, 2>,
    target: Tensor<B, 1, Int>,
) -> Tensor<B, 1> {
    const WHAT: &str = "cross_entropy runs on FastTch only (applies)";
    let target: TchTensor = cast::int_primitive(target, WHAT);
    if TypeId::of::<B>() == TypeId::of::<Trained>() {
        let logits: TrainedFloat = cast::float_primitive(logits, WHAT);
        cast::float_tensor(tracked(logits, target), WHAT)
    } else {
        let logits: TchTensor = cast::float_primitive(logits, WHAT);
        cast::float_tensor(forward(&logits, &target).0, WHAT)
    }
}

/// What the backward keeps: the log-softmax, the targets and the total weight.
type Saved = (TchTensor, TchTensor, TchTensor);

#[derive(Debug)]
struct CrossEntropyBackward;

impl Backward<FastTch, 1> for CrossEntropyBackward {
    type State = Saved;

    fn backward(self, ops: Ops<Saved, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (log_softmax, target, total_weight) = ops.state;
        unary::<FastTch, _>(ops.parents, ops.node, grads, |grad| {
            backward(&grad, &log_softmax, &target, &total_weight)
        });
    }
}

fn tracked(logits: TrainedFloat, target: TchTensor) -> TrainedFloat {
    match CrossEntropyBackward
        .prepare::<burn::backend::autodiff::checkpoint::strategy::NoCheckpointing>([logits
            .node
            .clone()])
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let (loss, log_softmax, total_weight) = forward(&logits.primitive, &target);
            prep.finish((log_softmax, target, total_weight), loss)
        }
        OpsKind::UnTracked(prep) => prep.finish(forward(&logits.primitive, &target).0),
    }
}

/// The loss, the log-softmax and the total weight: two LibTorch kernels, one operation.
fn forward(logits: &TchTensor, target: &TchTensor) -> (TchTensor, TchTensor, TchTensor) {
    let (mut logits, mut target) = (logits.tensor.shallow_clone(), target.tensor.shallow_clone());
    let mut out = [std::ptr::null_mut(); 3];
    crate::backend::profile::timed("cross_entropy", || {
        let [loss, lsm, tw] = &mut out;
        // SAFETY: the tensor pointers are live tch handles (`at::Tensor *`) held here for the
        // call; on success the shim stores three new handles, which `from_ptr` below takes
        // ownership of; on failure it writes a NUL-terminated message of at most `n` bytes.
        super::kernel("LibTorch's cross-entropy failed", |e, n| unsafe {
            trainer_cross_entropy(
                logits.as_mut_ptr(),
                target.as_mut_ptr(),
                loss,
                lsm,
                tw,
                e,
                n,
            )
        })
    });
    assert!(
        out.iter().all(|p| !p.is_null()),
        "the shim returned no cross-entropy"
    );
    // SAFETY: three new `at::Tensor *` the shim allocated for us.
    let [loss, lsm, tw] = out.map(|p| TchTensor::new(unsafe { tch::Tensor::from_ptr(p) }));
    (loss, lsm, tw)
}

/// The logits' gradient for the loss's gradient `grad`: two LibTorch kernels, one operation.
fn backward(
    grad: &TchTensor,
    log_softmax: &TchTensor,
    target: &TchTensor,
    total_weight: &TchTensor,
) -> TchTensor {
    let [mut g, mut lsm, mut t, mut tw] =
        [grad, log_softmax, target, total_weight].map(|t| t.tensor.shallow_clone());
    let mut out = std::ptr::null_mut();
    crate::backend::profile::timed("cross_entropy_backward", || {
        // SAFETY: as in `forward`: live handles in, one new handle out, or a message.
        super::kernel(
            "LibTorch's cross-entropy's backward failed",
            |e, n| unsafe {
                trainer_cross_entropy_backward(
                    g.as_mut_ptr(),
                    lsm.as_mut_ptr(),
                    t.as_mut_ptr(),
                    tw.as_mut_ptr(),
                    &mut out,
                    e,
                    n,
                )
            },
        )
    });
    assert!(!out.is_null(), "the shim returned no gradient");
    // SAFETY: a new `at::Tensor *` the shim allocated for us.
    TchTensor::new(unsafe { tch::Tensor::from_ptr(out) })
}

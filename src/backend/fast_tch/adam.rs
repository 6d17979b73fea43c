//! Adam's update of one parameter in one LibTorch kernel: `at::_fused_adam_` (what
//! `torch.optim.Adam(fused=True)` runs; one launch on a GPU where the tensor version makes
//! thirteen), reached through our C++ shim (`shim.cpp`, compiled by build.rs: tch binds no
//! `_fused_adam_`).
//!
//! The tensor version (`toolbox::optim`) computes `p − lr·((m·f) / (√v + ε'))` with
//! `f = √(1 − β₂ᵗ)/(1 − β₁ᵗ)` and `ε' = ε·√(1 − β₂ᵗ)`; the kernel computes
//! `p − (lr/c₁)·m / (√v/√c₂ + ε)` with its own bias corrections `c₁ = 1 − β₁ˢ`,
//! `c₂ = 1 − β₂ˢ` of a step count `s`. Given `s` = 10³⁰ (so `c₁ = c₂ = 1` exactly: β¹⁰³⁰
//! underflows to 0), `lr·f` for the rate and `ε'` for ε, it computes the same update, with the
//! moments as `m + (1 − β₁)(g − m)` (a lerp) where the tensor version has `β₁m + (1 − β₁)g`: the
//! same value to within f32 rounding, not bit for bit (within 1e-6 relative over several steps,
//! tested in tests/backends/tch_fused.rs). Because the step count is a constant, one tensor per
//! device holds it for every parameter and every step: no upload in the step.
//!
//! A step that a CUDA graph replays (`graph.rs`, `--cuda-graph`) cannot carry per-step scalars
//! in its launch: while a [`super::graph::DeviceAdam`] is set, the update reads the real step
//! count and the rate from two device scalars and applies the kernel's own bias corrections
//! (`p − (lr/c₁)·m / (√v/√c₂ + ε)`, the same formula; within f32 rounding of both).

use std::cell::RefCell;
use std::ffi::c_char;

use burn::backend::libtorch::TchTensor;
use burn::prelude::*;

use super::FastTch;
use crate::backend::fast_cpu::adam::AdamScalars;

unsafe extern "C" {
    fn trainer_fused_adam(
        param: *mut torch_sys::C_tensor,
        grad: *mut torch_sys::C_tensor,
        exp_avg: *mut torch_sys::C_tensor,
        exp_avg_sq: *mut torch_sys::C_tensor,
        step: *mut torch_sys::C_tensor,
        lr: f64,
        beta1: f64,
        beta2: f64,
        eps: f64,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
    fn trainer_fused_adam_graph(
        param: *mut torch_sys::C_tensor,
        grad: *mut torch_sys::C_tensor,
        exp_avg: *mut torch_sys::C_tensor,
        exp_avg_sq: *mut torch_sys::C_tensor,
        step: *mut torch_sys::C_tensor,
        lr: *mut torch_sys::C_tensor,
        beta1: f64,
        beta2: f64,
        eps: f64,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
}

/// The step count the kernel's bias corrections see (they become exactly 1).
const STEP: f32 = 1e30;

thread_local! {
    static STEPS: RefCell<Vec<(tch::Device, tch::Tensor)>> = const { RefCell::new(Vec::new()) };
}

/// The tensor holding [`STEP`] on `device` (made once per device and thread).
fn step_tensor(device: tch::Device) -> tch::Tensor {
    STEPS.with(|s| {
        let mut s = s.borrow_mut();
        if let Some((_, t)) = s.iter().find(|(d, _)| *d == device) {
            return t.shallow_clone();
        }
        let t = tch::Tensor::from_slice(&[STEP]).to_device(device);
        s.push((device, t.shallow_clone()));
        t
    })
}

/// Whether [`fused_step`] runs for backend `B`: `FastTch`.
pub(crate) fn fused_adam_for<B: Backend>() -> bool {
    std::any::TypeId::of::<B>() == std::any::TypeId::of::<FastTch>()
}

const WHAT: &str = "the fused Adam of tch runs on FastTch only (fused_adam_for)";

fn tch_of<B: Backend>(t: Tensor<B, 1>) -> TchTensor {
    crate::backend::fast_cpu::cast::float_primitive(t, WHAT)
}

fn back<B: Backend>(t: TchTensor) -> Tensor<B, 1> {
    crate::backend::fast_cpu::cast::float_tensor(t, WHAT)
}

/// A tensor this update may write: `t` itself when nothing else holds its storage, else a copy.
fn writable(t: TchTensor) -> TchTensor {
    if t.can_mut() && t.tensor.is_contiguous() {
        t
    } else {
        TchTensor::new(t.tensor.copy())
    }
}

/// `(m, v, parameter)` after one step for flat tensors of `B` (which must pass
/// [`fused_adam_for`]); `moments` is `None` at the first step (zeros then).
pub(crate) fn fused_step<B: Backend>(
    param: Tensor<B, 1>,
    grad: Tensor<B, 1>,
    moments: Option<(Tensor<B, 1>, Tensor<B, 1>)>,
    s: AdamScalars,
) -> (Tensor<B, 1>, Tensor<B, 1>, Tensor<B, 1>) {
    let mut p = writable(tch_of(param));
    let mut g = tch_of(grad);
    let (mut m, mut v) = match moments {
        Some((m, v)) => (writable(tch_of(m)), writable(tch_of(v))),
        None => (
            TchTensor::new(p.tensor.zeros_like()),
            TchTensor::new(p.tensor.zeros_like()),
        ),
    };
    let device = p.tensor.device();
    // A step a CUDA graph replays reads its step count and rate from the device (graph.rs).
    let on_device = super::graph::device_adam(device, |scalars| {
        scalars.map(|d| {
            crate::backend::profile::timed("fused_adam", || {
                // SAFETY: as below; `d.step` and `d.lr` are live tensors of the same device.
                super::kernel("LibTorch's fused Adam (capturable) failed", |e, n| unsafe {
                    trainer_fused_adam_graph(
                        p.tensor.as_mut_ptr(),
                        g.tensor.as_mut_ptr(),
                        m.tensor.as_mut_ptr(),
                        v.tensor.as_mut_ptr(),
                        d.step.as_mut_ptr(),
                        d.lr.as_mut_ptr(),
                        f64::from(s.beta1),
                        f64::from(s.beta2),
                        d.eps,
                        e,
                        n,
                    )
                })
            })
        })
    });
    if on_device.is_some() {
        return (back(m), back(v), back(p));
    }
    let mut step = step_tensor(device);
    // One operation of the backend, timed and counted as such.
    crate::backend::profile::timed("fused_adam", || {
        // SAFETY: every pointer is a live tch tensor handle (`at::Tensor *`) owned here for the
        // call; the shim catches C++ exceptions and writes at most `n` bytes into `e`.
        super::kernel("LibTorch's fused Adam failed", |e, n| unsafe {
            trainer_fused_adam(
                p.tensor.as_mut_ptr(),
                g.tensor.as_mut_ptr(),
                m.tensor.as_mut_ptr(),
                v.tensor.as_mut_ptr(),
                step.as_mut_ptr(),
                f64::from(s.lr) * f64::from(s.factor),
                f64::from(s.beta1),
                f64::from(s.beta2),
                f64::from(s.eps),
                e,
                n,
            )
        })
    });
    (back(m), back(v), back(p))
}

//! The backward passes `FastTch` computes itself (see the module documentation of
//! [`fast_tch`](super)); any case they do not cover goes to burn-tch unchanged.

use burn::backend::libtorch::{LibTorch, TchTensor};
use burn_backend::ops::{ConvOptions, ModuleOps};
use tch::{Device, Kind, Tensor};

use crate::backend::fast_cpu::{ConvGeom, conv_bias_backward, conv_weight_backward};

/// The gradient of `conv2d(x, weight)` with respect to `weight`, for the output gradient `dy`.
pub(super) fn conv2d_weight(
    x: TchTensor,
    weight: TchTensor,
    dy: TchTensor,
    options: ConvOptions<2>,
) -> TchTensor {
    let forced = super::DEVICE_WAY_ON_CPU.with(std::cell::Cell::get);
    match cpu_geom(&x.tensor, &weight.tensor, &dy.tensor, &options).filter(|_| !forced) {
        Some(g) => {
            super::CPU_CALLS.count();
            let (x, dy) = (x.tensor.contiguous(), dy.tensor.contiguous());
            let (dw, _) = conv_weight_backward(f32_slice(&x), f32_slice(&dy), &g);
            cpu_tensor(&dw, &[g.o, g.c, g.kh, g.kw])
        }
        None if forced || off_cpu_f32(&[&x.tensor, &weight.tensor, &dy.tensor]) => {
            super::DEVICE_CALLS.count();
            TchTensor::new(device_weight(
                &x.tensor,
                &weight.tensor,
                &dy.tensor,
                &options,
            ))
        }
        None => <LibTorch as ModuleOps<LibTorch>>::conv2d_weight_backward(x, weight, dy, options),
    }
}

unsafe extern "C" {
    fn trainer_conv2d_weight_backward(
        dy: *mut torch_sys::C_tensor,
        x: *mut torch_sys::C_tensor,
        weight: *mut torch_sys::C_tensor,
        stride: *const i64,
        padding: *const i64,
        dilation: *const i64,
        groups: i64,
        out: *mut *mut torch_sys::C_tensor,
        err: *mut std::ffi::c_char,
        err_len: usize,
    ) -> i32;
}

/// Off the CPU (a GPU): LibTorch's own weight gradient, the kernel PyTorch's backward runs
/// (cuDNN's on an NVIDIA GPU): `at::convolution_backward` with only the weight's gradient asked,
/// through our C++ shim (`shim.cpp`; tch 0.22 binds no `convolution_backward`). It replaced a
/// detour through LibTorch's autograd, which recomputed the forward convolution for it, and
/// Burn's generic weight gradient (a convolution with the batch as channels and the output as
/// kernel: 24 × 24 on the CNN's second layer), which on an H200 left the CNN at 0.15× PyTorch's
/// speed at batch 512.
fn device_weight(x: &Tensor, w: &Tensor, dy: &Tensor, options: &ConvOptions<2>) -> Tensor {
    let [stride, padding, dilation] =
        [options.stride, options.padding, options.dilation].map(|v| v.map(|i| i as i64));
    let (mut x, mut w, mut dy) = (x.shallow_clone(), w.shallow_clone(), dy.shallow_clone());
    let mut out: *mut torch_sys::C_tensor = std::ptr::null_mut();
    // SAFETY: the tensor pointers are live tch handles (`at::Tensor *`) held here for the call;
    // the three arrays hold 2 values each, as the shim reads; on success the shim stores a new
    // handle in `out`, which `Tensor::from_ptr` takes ownership of; on failure it writes a
    // NUL-terminated message of at most `n` bytes into `e`. Shapes come from Burn's own
    // convolution, so a refusal is a defect, not user input (`kernel` panics).
    super::kernel(
        "LibTorch's convolution weight gradient failed",
        |e, n| unsafe {
            trainer_conv2d_weight_backward(
                dy.as_mut_ptr(),
                x.as_mut_ptr(),
                w.as_mut_ptr(),
                stride.as_ptr(),
                padding.as_ptr(),
                dilation.as_ptr(),
                options.groups as i64,
                &mut out,
                e,
                n,
            )
        },
    );
    assert!(!out.is_null(), "the shim returned no weight gradient");
    // SAFETY: `out` is a new `at::Tensor *` the shim allocated for us.
    unsafe { Tensor::from_ptr(out) }
}

/// Whether every tensor is an `f32` tensor off the CPU (on a GPU).
fn off_cpu_f32(tensors: &[&Tensor]) -> bool {
    tensors
        .iter()
        .all(|t| t.device() != Device::Cpu && t.kind() == Kind::Float)
}

/// The gradient with respect to the bias `[o]`: `dy` `[n, o, oh, ow]` summed over all but `o`.
pub(super) fn conv2d_bias(x: TchTensor, bias: TchTensor, dy: TchTensor) -> TchTensor {
    let (ds, bs) = (dy.tensor.size(), bias.tensor.size());
    if ds.len() != 4 || bs != [ds[1]] {
        return <LibTorch as ModuleOps<LibTorch>>::conv2d_bias_backward(x, bias, dy);
    }
    let [n, o, oh, ow] = [ds[0], ds[1], ds[2], ds[3]].map(|d| d as usize);
    if cpu_f32(&dy.tensor) {
        let dy = dy.tensor.contiguous();
        cpu_tensor(&conv_bias_backward(f32_slice(&dy), n, o, oh * ow), &[o])
    } else {
        let kind = dy.tensor.kind();
        TchTensor::new(
            dy.tensor
                .sum_dim_intlist([0i64, 2, 3].as_slice(), false, kind),
        )
    }
}

/// The gradient of `relu` from its output: `grad` where `output > 0`, else 0, in one LibTorch
/// kernel (`threshold_backward`, what PyTorch runs) instead of Burn's compare + masked fill.
pub(super) fn relu(output: TchTensor, grad: TchTensor) -> TchTensor {
    TchTensor::new(output.tensor.threshold_backward(&grad.tensor, 0.0))
}

fn cpu_f32(t: &Tensor) -> bool {
    t.device() == Device::Cpu && t.kind() == Kind::Float
}

/// The convolution's geometry when the CPU kernel handles it: `f32` tensors on the CPU, no
/// groups, and `dy` of the output's shape.
fn cpu_geom(x: &Tensor, w: &Tensor, dy: &Tensor, options: &ConvOptions<2>) -> Option<ConvGeom> {
    if !(cpu_f32(x) && cpu_f32(w) && cpu_f32(dy)) {
        return None;
    }
    let dims = |t: &Tensor| -> Option<Vec<usize>> {
        t.size()
            .into_iter()
            .map(|d| usize::try_from(d).ok())
            .collect()
    };
    let g = ConvGeom::new(&dims(x)?, &dims(w)?, options)?;
    (dims(dy)? == [g.n, g.o, g.oh, g.ow]).then_some(g)
}

/// A LibTorch CPU tensor holding a copy of `data`.
fn cpu_tensor(data: &[f32], dims: &[usize]) -> TchTensor {
    let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
    TchTensor::new(Tensor::from_slice(data).view(dims.as_slice()))
}

/// The elements of a contiguous `f32` CPU tensor.
fn f32_slice(t: &Tensor) -> &[f32] {
    let n = t.numel();
    if n == 0 {
        return &[];
    }
    debug_assert!(t.is_contiguous() && cpu_f32(t));
    // SAFETY: `t` is a contiguous CPU tensor of kind Float (checked by the callers) holding `n`
    // elements from `data_ptr` (which includes the storage offset); the slice borrows `t`, which
    // keeps the storage alive, and nothing writes to it meanwhile.
    unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, n) }
}

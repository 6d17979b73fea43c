//! Convolutions of the CubeCL backends (`cuda`, `wgpu`) by implicit GEMM, without autotune.
//!
//! Burn 0.21's CubeCL backends pick a convolution kernel by autotune (cargo feature `autotune`,
//! off in our builds: its first run of each shape costs minutes) or else run the *direct*
//! kernels: one thread per output value for the forward pass and the input gradient, and for
//! the weight gradient a fallback convolution with the batch as channels. On the MNIST CNN that
//! makes `cuda` 0.13× PyTorch at batch 64 and 0.016× at batch 512 on an H200
//! (`benches/gpu/gpu-check-h200-2026-11-30.json`). Burn also ships an implicit-GEMM
//! convolution (`cubek`'s tiled matrix product on the GPU's matrix units, `ConvStrategy::
//! ImplicitGemm`) for the forward pass and both gradients, which autotune would have chosen
//! among; this module calls it directly:
//!
//! * forward, input gradient and weight gradient each try `ImplicitGemm` first and fall back to
//!   Burn's direct kernel where it returns an error (no matrix units on the device, as on a V100
//!   for f32 or on Mesa's software Vulkan; a shape its tiling refuses; a stride above 1 for the
//!   input gradient). A refusal is remembered per operation and shape, said once on stderr, and
//!   counted ([`counts`]); the bias gradient is Burn's.
//! * On a GPU with TF32 (Ampere and later) the product reads its f32 inputs as TF32, as
//!   PyTorch's cuDNN convolutions do by default (`torch.backends.cudnn.allow_tf32 = True`): the
//!   result agrees with the direct kernel to about 1e-3 relative, not bit for bit.
//!
//! It applies to the plain backends (`--backend cuda`, `--backend wgpu`) in training
//! (`Autodiff<_>`, one operation of Burn's autodiff graph with its own backward) and in
//! evaluation; the `-fusion` variants keep Burn's convolution. Reached through
//! [`crate::launch::BackendKernels`].

use std::any::TypeId;
use std::collections::HashSet;
use std::marker::PhantomData;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use burn::backend::Autodiff;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::prelude::*;
use burn_backend::ops::{ConvOptions, ModuleOps};
use burn_backend::{BackendTypes, TensorMetadata};
use burn_cubecl::kernel::conv::{
    ConvStrategy, conv_data_backward, conv_forward, conv_weight_backward,
};
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{BoolElement, CubeBackend, CubeRuntime};

use crate::backend::fast_cpu::cast;

type Cube<R, BT> = CubeBackend<R, f32, i32, BT>;
type TrainedFloat<R, BT> = <Autodiff<Cube<R, BT>> as BackendTypes>::FloatTensorPrimitive;

/// How many convolution passes (forward, input gradient, weight gradient) ran by implicit GEMM
/// and how many by Burn's direct kernels, since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConvCounts {
    pub implicit_gemm: u64,
    pub direct: u64,
}

static GEMM: AtomicU64 = AtomicU64::new(0);
static DIRECT: AtomicU64 = AtomicU64::new(0);
/// Operation and shapes whose implicit GEMM returned an error: they go straight to direct.
static REFUSED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// The passes counted so far (see [`ConvCounts`]).
pub fn counts() -> ConvCounts {
    ConvCounts {
        implicit_gemm: GEMM.load(Ordering::Relaxed),
        direct: DIRECT.load(Ordering::Relaxed),
    }
}

/// Which of the plain CubeCL backends `B` is, if any: `Some(true)` under autodiff.
fn which<B: Backend, R: CubeRuntime, BT: BoolElement>() -> Option<bool> {
    let b = TypeId::of::<B>();
    if b == TypeId::of::<Autodiff<Cube<R, BT>>>() {
        Some(true)
    } else if b == TypeId::of::<Cube<R, BT>>() {
        Some(false)
    } else {
        None
    }
}

/// Whether [`conv2d`] runs for backend `B`: `cuda` or `wgpu` (plain, not `-fusion`), with or
/// without autodiff.
pub fn applies<B: Backend>() -> bool {
    #[cfg(feature = "cuda")]
    if which::<B, cubecl::cuda::CudaRuntime, u8>().is_some() {
        return true;
    }
    #[cfg(feature = "wgpu")]
    if which::<B, burn_wgpu::WgpuRuntime, u32>().is_some() {
        return true;
    }
    false
}

/// `conv2d(x, weight, bias, options)` by implicit GEMM where it runs (see the module
/// documentation). `B` must pass [`applies`].
pub(crate) fn conv2d<B: Backend>(
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Tensor<B, 1>,
    options: ConvOptions<2>,
) -> Tensor<B, 4> {
    #[cfg(feature = "cuda")]
    if let Some(trained) = which::<B, cubecl::cuda::CudaRuntime, u8>() {
        return typed::<B, cubecl::cuda::CudaRuntime, u8>(trained, x, weight, bias, options);
    }
    #[cfg(feature = "wgpu")]
    if let Some(trained) = which::<B, burn_wgpu::WgpuRuntime, u32>() {
        return typed::<B, burn_wgpu::WgpuRuntime, u32>(trained, x, weight, bias, options);
    }
    let _ = (x, weight, bias, options);
    panic!("fast_cube::conv2d on a backend it does not apply to (applies)")
}

fn typed<B: Backend, R: CubeRuntime, BT: BoolElement>(
    trained: bool,
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Tensor<B, 1>,
    options: ConvOptions<2>,
) -> Tensor<B, 4> {
    const WHAT: &str = "fast_cube::conv2d (applies)";
    if trained {
        let [x, w]: [TrainedFloat<R, BT>; 2] = [x, weight].map(|t| cast::float_primitive(t, WHAT));
        let b: TrainedFloat<R, BT> = cast::float_primitive(bias, WHAT);
        cast::float_tensor(tracked::<R, BT>(x, w, b, options), WHAT)
    } else {
        let [x, w]: [CubeTensor<R>; 2] = [x, weight].map(|t| cast::float_primitive(t, WHAT));
        let b: CubeTensor<R> = cast::float_primitive(bias, WHAT);
        cast::float_tensor(forward(x, w, b, options), WHAT)
    }
}

/// The convolution as one operation of the autodiff graph, keeping its inputs for the backward.
fn tracked<R: CubeRuntime, BT: BoolElement>(
    x: TrainedFloat<R, BT>,
    w: TrainedFloat<R, BT>,
    b: TrainedFloat<R, BT>,
    options: ConvOptions<2>,
) -> TrainedFloat<R, BT> {
    let nodes = [x.node.clone(), w.node.clone(), b.node.clone()];
    match ConvBackward::<R, BT>(PhantomData)
        .prepare::<NoCheckpointing>(nodes)
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => {
            let (x, w, b) = (x.primitive, w.primitive, b.primitive);
            let y = forward(x.clone(), w.clone(), b.clone(), options.clone());
            prep.finish((x, w, b, options), y)
        }
        OpsKind::UnTracked(prep) => {
            prep.finish(forward(x.primitive, w.primitive, b.primitive, options))
        }
    }
}

struct ConvBackward<R, BT>(PhantomData<fn() -> (R, BT)>);

impl<R, BT> std::fmt::Debug for ConvBackward<R, BT> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ImplicitGemmConv2dBackward")
    }
}

impl<R: CubeRuntime, BT: BoolElement> Backward<Cube<R, BT>, 3> for ConvBackward<R, BT> {
    type State = (CubeTensor<R>, CubeTensor<R>, CubeTensor<R>, ConvOptions<2>);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let [node_x, node_w, node_b] = ops.parents;
        let grad = grads.consume::<Cube<R, BT>>(&ops.node);
        let (x, w, b, options) = ops.state;
        if let Some(node) = node_x {
            let dx = input_grad(grad.clone(), w.clone(), &x, options.clone());
            grads.register::<Cube<R, BT>>(node.id, dx);
        }
        if let Some(node) = node_w {
            let dw = weight_grad(x.clone(), grad.clone(), &w, options);
            grads.register::<Cube<R, BT>>(node.id, dw);
        }
        if let Some(node) = node_b {
            let db = <Cube<R, BT> as ModuleOps<Cube<R, BT>>>::conv2d_bias_backward(x, b, grad);
            grads.register::<Cube<R, BT>>(node.id, db);
        }
    }
}

/// Runs `pass` by implicit GEMM if it is `eligible` (Burn's implicit GEMM would run direct
/// itself otherwise) and `key` was not refused before; on its error remembers and says so, then
/// runs it direct. Counts the pass either way.
fn gemm_or_direct<T, E: std::fmt::Debug>(
    key: String,
    eligible: bool,
    pass: impl Fn(ConvStrategy) -> Result<T, E>,
) -> T {
    let refused = |k: &str| {
        REFUSED
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(|s| s.contains(k))
    };
    if eligible && !refused(&key) {
        match pass(ConvStrategy::ImplicitGemm) {
            Ok(y) => {
                GEMM.fetch_add(1, Ordering::Relaxed);
                return y;
            }
            Err(e) => {
                let reason = format!("{e:?}");
                let reason = reason.split_whitespace().collect::<Vec<_>>().join(" ");
                eprintln!(
                    "note: implicit-GEMM convolution refused for {key} ({reason}); Burn's direct \
                     kernel runs it"
                );
                REFUSED
                    .lock()
                    .unwrap()
                    .get_or_insert_default()
                    .insert(key.clone());
            }
        }
    }
    DIRECT.fetch_add(1, Ordering::Relaxed);
    pass(ConvStrategy::Direct).unwrap_or_else(|e| {
        panic!("Burn's direct kernel refused {key}, which the model built: {e:?}")
    })
}

fn key<R: CubeRuntime>(
    op: &str,
    a: &CubeTensor<R>,
    b: &CubeTensor<R>,
    o: &ConvOptions<2>,
) -> String {
    format!(
        "{op} of {:?} by {:?} (stride {:?}, padding {:?}, dilation {:?})",
        a.shape().dims::<4>(),
        b.shape().dims::<4>(),
        o.stride,
        o.padding,
        o.dilation
    )
}

fn forward<R: CubeRuntime>(
    x: CubeTensor<R>,
    w: CubeTensor<R>,
    b: CubeTensor<R>,
    options: ConvOptions<2>,
) -> CubeTensor<R> {
    gemm_or_direct(
        key("the forward pass", &x, &w, &options),
        options.groups == 1,
        |how| conv_forward::<R, 2>(x.clone(), w.clone(), Some(b.clone()), options.clone(), how),
    )
}

fn input_grad<R: CubeRuntime>(
    grad: CubeTensor<R>,
    w: CubeTensor<R>,
    x: &CubeTensor<R>,
    options: ConvOptions<2>,
) -> CubeTensor<R> {
    // Burn's implicit GEMM of the input gradient takes stride 1 only (it runs direct otherwise).
    let eligible = options.groups == 1 && options.stride == [1, 1];
    gemm_or_direct(
        key("the input gradient", &grad, &w, &options),
        eligible,
        |how| conv_data_backward::<R, 2>(grad.clone(), w.clone(), x.shape(), options.clone(), how),
    )
}

fn weight_grad<R: CubeRuntime>(
    x: CubeTensor<R>,
    grad: CubeTensor<R>,
    w: &CubeTensor<R>,
    options: ConvOptions<2>,
) -> CubeTensor<R> {
    gemm_or_direct(
        key("the weight gradient", &x, &grad, &options),
        options.groups == 1,
        |how| {
            conv_weight_backward::<R, 2>(x.clone(), grad.clone(), w.shape(), options.clone(), how)
        },
    )
}

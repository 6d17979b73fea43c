//! `FastCpu`: Burn's Flex CPU backend with faster convolution and max-pool kernels (the
//! trainer's `flex` backend; a crate of its own, with its own tests, re-exported by the trainer
//! as `backend::fast_cpu`).
//!
//! Every tensor operation is Flex's own (same tensor type, [`FlexTensor`], same device), except
//! the few that dominate the MNIST CNN's training step, which Flex 0.21 routes through a 3-D
//! path with NHWC copies, per-tile allocations and, for the backward passes, Burn's generic
//! transposed convolution:
//!
//! * `conv2d` and its three backward passes (`conv2d_x_backward`, `conv2d_weight_backward`,
//!   `conv2d_bias_backward`): 2-D im2col of one image into a per-thread scratch buffer and one
//!   [`gemm`] call per image, images spread over the rayon pool (`conv.rs`); on x86-64 with
//!   AVX-512 or AVX2 + FMA, the forward pass and the weight gradient of a stride-1
//!   convolution (with AVX-512, its input gradient too) run direct instead, with register
//!   tiles of our own that read the padded image in place (`direct/`; `TRAINER_CONV_DIRECT=0`
//!   turns them off); 3×3 convolutions with many channels run as Winograd's F(2×2, 3×3)
//!   instead, 16 products per channel pair where the direct ones make 36 (`winograd/`: all
//!   three passes, on register tiles of our own, the transforms written for AVX-512 where it
//!   runs; `TRAINER_CONV_WINOGRAD=0` turns it off); the weight pass also sums the bias
//!   gradient and hands it to the bias pass (`bias_grad.rs`); both tile modules take their
//!   vector helpers from `lanes.rs`;
//! * `max_pool2d`, `max_pool2d_with_indices` and its backward: one pass per plane with the
//!   argmax indices Flex would return (`pool.rs`);
//! * element-wise arithmetic, relu, exp, ln_1p and sigmoid on large tensors, split over threads
//!   (`elementwise.rs`; the last three eight values at a time with AVX2 + FMA,
//!   `vector_math.rs`), 2-D matrix products by blocks of rows (`matmul.rs`), and batched
//!   products with a side of width 4 or less (CLG-ODE's topology loss: a matrix times two
//!   probe vectors, their outer products) in loops of their own (`thin.rs`), and that loss's
//!   whole Taylor series one graph per task, its matrix read while in cache, with the adjoint
//!   series of its gradient (`thin/series.rs`, called by the trainer's `objective/series.rs`);
//! * Bernoulli draws (dropout masks) from a ChaCha8 stream of its own, drawn in parallel chunks
//!   that each start at their own position in the stream (`random.rs`), its words sixteen
//!   blocks at a time with AVX-512 (`chacha.rs`);
//! * outside the backend's operations, Adam's update in one pass per parameter (`adam.rs`,
//!   called by `toolbox::optim`).
//!
//! Outputs are written into fresh memory without zeroing it first (`kernels::written_in`);
//! a convolution's, max-pool's or matrix product's output is initialised chunk by chunk, by
//! the task that computes it. A `flex` job runs on a thread of rayon's pool
//! (`backend::dispatch`), so that each of these operations starts on the calling thread.
//!
//! The GEMMs run `gemm`'s AVX-512 micro-kernels on CPUs with AVX-512F, its FMA ones elsewhere or
//! when `TRAINER_CPU_AVX512=0` ([`isa`]).
//!
//! `Autodiff<FastCpu>` calls these through the `ModuleOps` backward hooks, so the speed-up holds
//! for training as well as for inference. Only `f32` tensors take the fast path (and, for
//! convolutions, `groups == 1`); anything else is handed to Flex unchanged.
//!
//! The plain path stays one switch away: [`set_kernels`]`(Kernels::Plain)` (the hidden
//! `--backend flex-plain`) sends every operation to Flex, with Burn's default backward passes,
//! exactly as `Autodiff<Flex>` does; the numerics tests compare the fast path with
//! `Autodiff<Flex>` itself. [`profile`] times every operation when
//! `TRAINER_OP_PROFILE=1`.

use std::sync::atomic::{AtomicBool, Ordering};

use burn_backend::{Backend, BackendTypes, DType, DTypeUsageSet};
use burn_flex::{Flex, FlexDevice, FlexQTensor, FlexTensor};

use crate::profile::CallCounter;

pub mod adam;
mod batch_sums;
mod bias_grad;
pub mod cast;
mod chacha;
mod conv;
mod direct;
mod elementwise;
mod float_ops;
mod geom;
mod int_ops;
pub mod isa;
mod kernels;
mod lanes;
mod matmul;
mod module_ops;
mod other_ops;
mod pool;
pub mod profile;
mod random;
mod thin;
mod vector_math;
mod winograd;

/// The weight and bias gradients of a convolution, also used by the trainer's `tch` backend on
/// the CPU.
pub use batch_sums::bias_backward as conv_bias_backward;
pub use conv::weight_backward as conv_weight_backward;
pub use geom::Geom as ConvGeom;
pub use kernels::{gemm_kernels, sgemm_gflops_one_core};
pub use thin::series;

/// Flex with faster convolution and max-pool kernels (see the module documentation).
#[derive(Clone, Copy, Debug, Default)]
pub struct FastCpu;

/// Which kernels [`FastCpu`] runs for the operations it overrides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernels {
    /// im2col + GEMM convolutions and one-pass max-pool (the default).
    Fast,
    /// Flex's own operations and Burn's default backward passes, as `Autodiff<Flex>`.
    Plain,
}

static PLAIN: AtomicBool = AtomicBool::new(false);

/// Selects the kernels of every [`FastCpu`] operation from now on (process-wide).
pub fn set_kernels(kernels: Kernels) {
    PLAIN.store(kernels == Kernels::Plain, Ordering::Relaxed);
}

/// The kernels in use.
pub fn kernels() -> Kernels {
    if PLAIN.load(Ordering::Relaxed) {
        Kernels::Plain
    } else {
        Kernels::Fast
    }
}

fn fast() -> bool {
    !PLAIN.load(Ordering::Relaxed)
}

static FAST_CALLS: CallCounter = CallCounter::new();

/// How many operations the fast kernels ran so far (the others went to Flex): lets tests check
/// that they exercise the fast path rather than the fallback.
pub fn fast_calls() -> u64 {
    FAST_CALLS.get()
}

impl BackendTypes for FastCpu {
    type Device = FlexDevice;
    type FloatTensorPrimitive = FlexTensor;
    type FloatElem = f32;
    type IntTensorPrimitive = FlexTensor;
    type IntElem = i32;
    type BoolTensorPrimitive = FlexTensor;
    type BoolElem = bool;
    type QuantizedTensorPrimitive = FlexQTensor;
}

impl Backend for FastCpu {
    fn name(_device: &Self::Device) -> String {
        "flex-fast".into()
    }

    fn seed(device: &Self::Device, seed: u64) {
        Flex::seed(device, seed);
        random::seed(seed);
    }

    fn dtype_usage(device: &Self::Device, dtype: DType) -> DTypeUsageSet {
        Flex::dtype_usage(device, dtype)
    }

    fn device_count(type_id: u16) -> usize {
        Flex::device_count(type_id)
    }
}

impl burn_backend::ops::TransactionOps<Self> for FastCpu {}

/// Implements trait methods by calling Flex's implementation of the same trait, each call timed
/// by the [operation profile](profile). The lists follow the `impl … for Flex` blocks of
/// burn-flex 0.21.0 (`src/ops/{float,int,bool,qtensor,activation,module}.rs`); a method Flex
/// leaves to the trait's default is left to the default here too.
macro_rules! delegate {
    ($tr:ident { $($body:tt)* }) => {
        $crate::delegate_to!(burn_flex::Flex => $tr { $($body)* });
    };
}

/// Implements trait methods by calling `$inner`'s implementation of the same trait, each call
/// timed by the [operation profile](profile): the backends that wrap another one (this one, and
/// the trainer's LibTorch wrapper) override a few operations and hand every other one to the
/// backend they wrap.
#[macro_export]
macro_rules! delegate_to {
    ($inner:ty => $tr:ident { $(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)* }) => {
        $(
            fn $name($($arg: $ty),*) -> $ret {
                $crate::profile::timed(stringify!($name), move || {
                    <$inner as $tr<$inner>>::$name($($arg),*)
                })
            }
        )*
    };
}
use delegate;

#[cfg(test)]
mod tests;

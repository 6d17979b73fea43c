//! CUDA graphs on `tch` (`--cuda-graph`): a fixed-shape training step captured once with
//! LibTorch's `at::cuda::CUDAGraph` (what `torch.cuda.graph` runs) and replayed each step, one
//! launch where the eager step makes about forty.
//!
//! What a replay needs, and where it comes from:
//! * **Inputs at fixed addresses.** A replay reads the memory the capture read; a job fills its
//!   inputs into fixed device buffers before each replay ([`copy_into`]).
//! * **Parameters and moments updated in place.** The fused Adam writes them in place
//!   (`adam.rs`); the engine checks the addresses after the capture ([`address`]).
//! * **Nothing fixed at capture that changes per step.** The fused Adam's step count and
//!   learning rate are read from two device scalars ([`DeviceAdam`]), filled before each step,
//!   with the kernel's own bias corrections (`torch.optim.Adam(fused=True, capturable=True)`);
//!   dropout's random numbers come from the generator's seed and offset at replay time (LibTorch
//!   registers its generator with the graph), so the job's per-step seed applies as in an eager
//!   step.
//! * **A side stream**, on which the warm-up steps and the capture run ([`Capture::side_stream`]),
//!   as `torch.cuda.graph` does: what LibTorch creates lazily per stream exists before the
//!   capture.
//!
//! The shim (`shim.cpp`) has the CUDA part only when build.rs found CUDA's runtime headers and
//! the LibTorch has CUDA ([`available`]).

use std::cell::RefCell;
use std::ffi::{c_char, c_void};

use anyhow::{Result, anyhow};
use burn::backend::libtorch::{LibTorchDevice, TchTensor};
use burn::prelude::*;

use super::shim;
use crate::backend::fast_cpu::cast;

unsafe extern "C" {
    fn trainer_cuda_graphs() -> i32;
    fn trainer_side_stream(device: i64, on: i32, err: *mut c_char, err_len: usize) -> i32;
    fn trainer_graph_capture_begin(
        device: i64,
        graph: *mut *mut c_void,
        err: *mut c_char,
        err_len: usize,
    ) -> i32;
    fn trainer_graph_capture_end(graph: *mut c_void, err: *mut c_char, err_len: usize) -> i32;
    fn trainer_graph_replay(graph: *mut c_void, err: *mut c_char, err_len: usize) -> i32;
    fn trainer_graph_free(graph: *mut c_void);
}

/// Whether this binary's shim can capture CUDA graphs (LibTorch with CUDA, headers found at
/// build time).
pub(crate) fn available() -> bool {
    // SAFETY: a constant function of the shim.
    unsafe { trainer_cuda_graphs() == 1 }
}

/// The CUDA device index of `device`, or an error for the CPU.
fn cuda_index(device: &LibTorchDevice) -> Result<i64> {
    match device {
        LibTorchDevice::Cuda(i) => Ok(*i as i64),
        other => Err(anyhow!("CUDA graphs need a CUDA device, not {other:?}")),
    }
}

/// One training step's graph on one CUDA device: captured once, replayed each step.
pub struct Capture {
    device: i64,
    graph: Option<*mut c_void>,
    capturing: bool,
}

impl Capture {
    /// A capture session on `device` (no graph yet).
    pub fn new(device: &LibTorchDevice) -> Result<Self> {
        if !available() {
            return Err(anyhow!(
                "this binary's LibTorch has no CUDA (or it was built without CUDA's headers): no \
                 CUDA graphs"
            ));
        }
        Ok(Self {
            device: cuda_index(device)?,
            graph: None,
            capturing: false,
        })
    }

    /// Makes the side stream current (`true`) or the stream before it again (`false`).
    pub fn side_stream(&self, on: bool) -> Result<()> {
        // SAFETY: plain values and the error buffer `shim` owns.
        shim("the side stream", |e, n| unsafe {
            trainer_side_stream(self.device, i32::from(on), e, n)
        })
    }

    /// Starts capturing (on the side stream); a graph captured before is dropped.
    pub fn begin(&mut self) -> Result<()> {
        self.free();
        let mut graph: *mut c_void = std::ptr::null_mut();
        // SAFETY: `graph` is written by the shim on success only.
        shim("starting the CUDA graph's capture", |e, n| unsafe {
            trainer_graph_capture_begin(self.device, &mut graph, e, n)
        })?;
        self.graph = Some(graph);
        self.capturing = true;
        Ok(())
    }

    /// Ends the capture [`Capture::begin`] started. On failure the graph is dropped.
    pub fn end(&mut self) -> Result<()> {
        let Some(graph) = self.graph.filter(|_| self.capturing) else {
            return Err(anyhow!("no CUDA graph capture in progress"));
        };
        self.capturing = false;
        // SAFETY: `graph` is the live graph `begin` made.
        let ended = shim("ending the CUDA graph's capture", |e, n| unsafe {
            trainer_graph_capture_end(graph, e, n)
        });
        if ended.is_err() {
            self.free();
        }
        ended
    }

    /// Whether a captured graph is ready to replay.
    pub fn ready(&self) -> bool {
        self.graph.is_some() && !self.capturing
    }

    /// Replays the captured graph on the current stream.
    pub fn replay(&self) -> Result<()> {
        let Some(graph) = self.graph.filter(|_| !self.capturing) else {
            return Err(anyhow!("no captured CUDA graph to replay"));
        };
        // SAFETY: `graph` is a live, captured graph.
        shim("replaying the CUDA graph", |e, n| unsafe {
            trainer_graph_replay(graph, e, n)
        })
    }

    /// Drops the captured graph (its memory pool returns to LibTorch's allocator).
    pub fn free(&mut self) {
        if let Some(graph) = self.graph.take() {
            if self.capturing {
                // A capture left open (an error inside it): end it before freeing.
                // SAFETY: `graph` is the live graph `begin` made.
                let _ = shim("", |e, n| unsafe { trainer_graph_capture_end(graph, e, n) });
                self.capturing = false;
            }
            // SAFETY: `graph` came from `trainer_graph_capture_begin` and is freed once.
            unsafe { trainer_graph_free(graph) };
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.free();
    }
}

/// The fused Adam's step count and learning rate as device scalars, for a step that a CUDA
/// graph replays: while one is set (on this thread), `adam.rs` reads them instead of the
/// launch's scalars. Dropped: back to the launch's scalars.
pub struct DeviceAdam;

/// The scalars `adam.rs` reads: device, step count, learning rate, ε.
pub(super) struct AdamScalarsOnDevice {
    pub device: tch::Device,
    pub step: tch::Tensor,
    pub lr: tch::Tensor,
    pub eps: f64,
}

thread_local! {
    static DEVICE_ADAM: RefCell<Option<AdamScalarsOnDevice>> = const { RefCell::new(None) };
}

impl DeviceAdam {
    /// Device scalars on `device` for an Adam with ε `eps` (two small allocations and fills: do
    /// it before a capture).
    pub fn new(device: &LibTorchDevice, eps: f64) -> Self {
        let device: tch::Device = (*device).into();
        let scalar = || tch::Tensor::zeros([], (tch::Kind::Float, device));
        DEVICE_ADAM.with(|d| {
            *d.borrow_mut() = Some(AdamScalarsOnDevice {
                device,
                step: scalar(),
                lr: scalar(),
                eps,
            })
        });
        Self
    }

    /// The next update's step count (1 for the first) and learning rate: two fills on the
    /// device, no wait.
    pub fn set(&self, time: u64, lr: f64) {
        DEVICE_ADAM.with(|d| {
            if let Some(s) = d.borrow_mut().as_mut() {
                let _ = s.step.fill_(time as f64);
                let _ = s.lr.fill_(lr);
            }
        });
    }
}

impl Drop for DeviceAdam {
    fn drop(&mut self) {
        DEVICE_ADAM.with(|d| *d.borrow_mut() = None);
    }
}

/// The device scalars for an update on `device`, when a [`DeviceAdam`] is set for it.
pub(super) fn device_adam<R>(
    device: tch::Device,
    f: impl FnOnce(Option<&mut AdamScalarsOnDevice>) -> R,
) -> R {
    DEVICE_ADAM.with(|d| f(d.borrow_mut().as_mut().filter(|s| s.device == device)))
}

/// Copies `src` into `dst`'s memory (same shape and kind), in place: how a job fills the fixed
/// input buffers a replayed step reads. Any backend whose integer tensors are LibTorch's.
pub fn copy_into<B: Backend>(dst: &Tensor<B, 1, Int>, src: Tensor<B, 1, Int>) {
    const WHAT: &str = "copy_into runs on tch only";
    let mut to: TchTensor = cast::int_primitive(dst.clone(), WHAT);
    let from: TchTensor = cast::int_primitive(src, WHAT);
    crate::backend::profile::timed("copy_", || to.tensor.copy_(&from.tensor));
}

/// The device address of a float tensor's data (the engine compares the parameters' addresses
/// before and after a capture: a replay updates the memory it captured).
pub fn address<B: Backend>(t: Tensor<B, 1>) -> usize {
    const WHAT: &str = "address runs on tch only";
    let t: TchTensor = cast::float_primitive(t, WHAT);
    t.tensor.data_ptr() as usize
}

/// A copy of a float tensor into new memory (one copy on the device): what a replayed step's
/// output is read from after the next replay overwrote it.
pub fn snapshot<B: Backend>(t: Tensor<B, 1>) -> Tensor<B, 1> {
    const WHAT: &str = "snapshot runs on tch only";
    let t: TchTensor = cast::float_primitive(t, WHAT);
    cast::float_tensor(TchTensor::new(t.tensor.copy()), WHAT)
}

//! `--cuda-graph`: which runs may record their step as a CUDA graph (checked before anything
//! starts), and the backend's capture the engine drives (`engine::graph`): LibTorch's CUDA
//! graphs on `tch` (`backend::fast_tch::graph`).

use anyhow::Result;
use burn::prelude::*;

use crate::backend::{BackendKind, Placement};
use crate::engine::graph::CaptureFactory;
use crate::error::{Exit, ExitError};

/// Refuses `--cuda-graph` where it cannot apply, before data are loaded: a job whose steps
/// change shape (`job`: the factory's answer), a backend other than `tch`, a CPU device.
pub(crate) fn check(command: &str, job: Result<()>, placement: Placement) -> Result<()> {
    let refuse =
        |why: String| Err(ExitError::new(Exit::Usage, format!("--cuda-graph: {why}")).into());
    if let Err(e) = job {
        return refuse(format!("{command}: {e:#}"));
    }
    if placement.backend != BackendKind::Tch {
        return refuse(format!(
            "it records LibTorch's step: it needs --backend tch (this run has {}; `cuda` and \
             `wgpu` run CubeCL's kernels, which have no graph capture here)",
            placement.backend.name()
        ));
    }
    if !placement.device.is_cuda() {
        return refuse(format!(
            "it needs a CUDA device (--device cuda[:N]); on {} each step runs as it is",
            placement.device
        ));
    }
    Ok(())
}

/// Refuses `--cuda-graph` with several processes (each would record its own step; the gradient
/// all-reduce sits in the middle of the step).
pub(crate) fn check_world(size: usize) -> Result<()> {
    if size > 1 {
        return Err(ExitError::new(
            Exit::Usage,
            format!(
                "--cuda-graph: one process only (this run has {size} ranks: the gradients' \
                 all-reduce runs inside the step)"
            ),
        )
        .into());
    }
    Ok(())
}

/// Whether this binary can record CUDA graphs at all (`tch` with a CUDA LibTorch).
pub(crate) fn available() -> bool {
    #[cfg(feature = "tch")]
    return crate::backend::fast_tch::graph::available();
    #[cfg(not(feature = "tch"))]
    false
}

/// The backend's capture of a step for `B` (the inner backend of the run's autodiff one), if it
/// has one: LibTorch's CUDA graphs on `tch`.
pub(crate) fn step_capture<B: Backend>() -> Option<CaptureFactory<B>> {
    #[cfg(feature = "tch")]
    if crate::backend::fast_tch::adam::fused_adam_for::<B>() {
        return Some(tch::capture::<B>);
    }
    None
}

#[cfg(feature = "tch")]
mod tch {
    use anyhow::{Result, anyhow};
    use burn::backend::libtorch::LibTorchDevice;
    use burn::prelude::*;

    use crate::backend::fast_tch::graph::{self, Capture, DeviceAdam};
    use crate::backend::profile::timed;
    use crate::engine::graph::StepCapture;

    /// LibTorch's CUDA graph and the fused Adam's device scalars, for one epoch.
    struct TchCapture {
        capture: Capture,
        adam: DeviceAdam,
    }

    pub(super) fn capture<B: Backend>(
        device: &B::Device,
        eps: f64,
    ) -> Result<Box<dyn StepCapture<B>>> {
        let device = (device as &dyn std::any::Any)
            .downcast_ref::<LibTorchDevice>()
            .ok_or_else(|| anyhow!("--cuda-graph: not a LibTorch device"))?;
        Ok(Box::new(TchCapture {
            capture: Capture::new(device)?,
            adam: DeviceAdam::new(device, eps),
        }))
    }

    impl<B: Backend> StepCapture<B> for TchCapture {
        fn side_stream(&mut self, on: bool) -> Result<()> {
            self.capture.side_stream(on)
        }
        fn begin(&mut self) -> Result<()> {
            self.capture.begin()
        }
        fn end(&mut self) -> Result<()> {
            self.capture.end()
        }
        fn replay(&mut self) -> Result<()> {
            // One launch of the backend, counted and timed as an operation.
            timed("cuda_graph_replay", || self.capture.replay())
        }
        fn adam(&mut self, time: u64, lr: f64) {
            timed("adam_scalars", || self.adam.set(time, lr));
        }
        fn address(&self, t: Tensor<B, 1>) -> usize {
            graph::address(t)
        }
        fn snapshot(&self, t: Tensor<B, 1>) -> Tensor<B, 1> {
            timed("copy", || graph::snapshot(t))
        }
    }
}

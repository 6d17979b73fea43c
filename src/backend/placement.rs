//! Where a job runs: `--backend` and `--device` resolved into a [`Placement`] among what this
//! binary was built with, the device defaulting to the job's GPU when the scheduler allocated
//! one (GPU or fail).

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{BackendKind, DeviceSpec, unavailable};

/// Where a job runs: backend and device, chosen at run time among what was compiled in.
#[derive(clap::Args, Debug, Clone)]
#[command(next_help_heading = crate::settings::CLUSTER)]
pub(crate) struct DeviceSettings {
    /// Tensor backend: flex (pure-Rust CPU, always built), tch (LibTorch, cargo feature `tch`),
    /// cuda (CubeCL CUDA, cargo feature `cuda`), wgpu (CubeCL on Vulkan/Metal/DX12, cargo
    /// feature `wgpu`). Default: flex on CPU; tch (LibTorch's cuDNN and cuBLAS kernels), else
    /// cuda, else wgpu on a GPU (benches/README.md, "The default GPU backend").
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Device: `cpu`, `cuda`/`gpu` (= `cuda:0`) or `cuda:N`/`gpu:N` (index among
    /// CUDA_VISIBLE_DEVICES; for wgpu, among the GPU adapters `trainer doctor` lists; `--backend
    /// wgpu --device cpu` is the software adapter). Default: `cuda:0` when the scheduler
    /// allocated GPUs to the job (Slurm's GPU variables, LSF's, or CUDA_VISIBLE_DEVICES inside a
    /// Slurm/LSF/gflow job) — the run then uses the GPU or fails with `trainer doctor`'s code,
    /// never trains on the CPU unasked — else `cpu`. `--device cpu` opts out.
    #[arg(long)]
    pub device: Option<DeviceSpec>,
}

impl DeviceSettings {
    /// The backend and device, checked against what this binary was built with.
    pub(crate) fn placement(&self) -> Result<Placement> {
        let device = match self.device {
            Some(d) => d,
            None => default_device(
                self.backend,
                &crate::cluster::scheduler::gpu_allocation(
                    &crate::cluster::vars::Vars::from_process(),
                ),
            ),
        };
        resolve(self.backend, device)
    }
}

/// The device when `--device` was not given: the job's GPU when the scheduler allocated GPUs
/// (said on stderr), unless the backend runs on the CPU only; else the CPU.
pub(crate) fn default_device(
    backend: Option<BackendKind>,
    allocated: &[crate::cluster::scheduler::AllocationVar],
) -> DeviceSpec {
    let cpu_only = matches!(backend, Some(BackendKind::Flex | BackendKind::FlexPlain));
    if allocated.is_empty() || cpu_only {
        return DeviceSpec::Cpu;
    }
    let vars: Vec<String> = allocated
        .iter()
        .map(|a| format!("{}={}", a.var, a.value))
        .collect();
    eprintln!(
        "[trainer] the scheduler allocated GPUs to this job ({}) and no --device was given: \
         using cuda:0 (--device cpu trains on the CPU instead)",
        vars.join(", ")
    );
    DeviceSpec::Cuda(0)
}

/// Backend and device resolved from the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Placement {
    pub backend: BackendKind,
    pub device: DeviceSpec,
}

/// The GPU backends in the order a run without `--backend` takes them, the first compiled one
/// winning: tch runs LibTorch's cuDNN and cuBLAS kernels (PyTorch's own, so PyTorch's speed),
/// cuda CubeCL's (0.10x PyTorch on the MNIST CNN on an H100, benches/README.md), wgpu last.
pub(super) const GPU_ORDER: [BackendKind; 3] =
    [BackendKind::Tch, BackendKind::Cuda, BackendKind::Wgpu];

/// The default GPU backend among those `compiled` says this binary has.
pub(super) fn default_gpu_backend(compiled: impl Fn(BackendKind) -> bool) -> Option<BackendKind> {
    GPU_ORDER.into_iter().find(|&b| compiled(b))
}

/// Picks the backend when `--backend` was left out, and rejects impossible pairs.
pub(crate) fn resolve(backend: Option<BackendKind>, device: DeviceSpec) -> Result<Placement> {
    let backend = match backend {
        Some(b) => b,
        None if !device.is_cuda() => BackendKind::Flex,
        None => default_gpu_backend(BackendKind::compiled).ok_or_else(|| {
            unavailable(format!(
                "--device {device} needs a GPU backend, and this binary has none: rebuild with \
                 `cargo build --release --features tch,cuda` (or one of them, or `--features wgpu`)"
            ))
        })?,
    };
    if !backend.compiled() {
        return Err(unavailable(format!(
            "backend `{}` was not compiled into this binary: rebuild with \
             `cargo build --release --features {}`",
            backend.name(),
            backend.feature()
        )));
    }
    match (backend, device) {
        (BackendKind::Flex | BackendKind::FlexPlain, DeviceSpec::Cuda(_)) => Err(unavailable(
            "the flex backend runs on the CPU only: use --backend cuda or --backend tch with \
             --device cuda",
        )),
        (BackendKind::Cuda | BackendKind::CudaFusion, DeviceSpec::Cpu) => Err(unavailable(
            "the cuda backend needs a GPU: pass --device cuda[:N], or use --backend flex on CPU",
        )),
        _ => Ok(Placement { backend, device }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use BackendKind::*;

    #[test]
    fn a_gpu_run_without_backend_takes_tch_then_cuda_then_wgpu() {
        let with = |have: &'static [BackendKind]| default_gpu_backend(move |b| have.contains(&b));
        assert_eq!(with(&[Tch, Cuda, Wgpu]), Some(Tch));
        assert_eq!(with(&[Cuda, Wgpu]), Some(Cuda));
        assert_eq!(with(&[Wgpu]), Some(Wgpu));
        assert_eq!(with(&[Flex]), None);
    }
}

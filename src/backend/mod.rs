//! Turns `--backend/--device` into a concrete Burn backend, once, at the top of a job.
//!
//! Every job is written once, generic over `B: AutodiffBackend`, as a [`BackendJob`];
//! [`dispatch`] picks the backend type among those compiled in and runs it. Asking for a backend
//! that was not compiled in, or for a CUDA device on a machine without an NVIDIA driver, is an
//! [`ExitError`] with code [`BACKEND_UNAVAILABLE`], never a panic (Burn's CUDA device panics in a
//! worker thread when libcuda is missing, so the driver is checked before any device is made).
//!
//! On the CPU, `flex` is [`fast_cpu::FastCpu`]: Flex with faster convolution and max-pool
//! kernels; the hidden `flex-plain` runs the same type with Flex's own kernels (for comparison).
//! `tch` is `fast_tch::FastTch`: LibTorch with the convolution gradients PyTorch itself would run
//! (the hidden `tch-plain` is burn-tch's `LibTorch` unchanged). `wgpu` is CubeCL on Vulkan, Metal
//! or DX12 ([`wgpu`](mod@wgpu): adapters, fusion).

use anyhow::Result;
use burn::backend::Autodiff;
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};

use crate::error::{BACKEND_UNAVAILABLE, ExitError};

pub(crate) mod autotune;
pub mod cuda;
mod device;
/// The fast CPU kernels (`crates/fast-cpu`): the `flex` backend.
pub use ::fast_cpu;
#[cfg(any(feature = "cuda", feature = "wgpu"))]
pub mod fast_cube;
#[cfg(feature = "tch")]
pub mod fast_tch;
pub mod host_memory;
mod placement;
pub(crate) use ::fast_cpu::profile;
#[cfg(feature = "tch")]
pub mod tch_threads;
pub mod wgpu;

/// See `fast_cpu::delegate_to` (used by the LibTorch wrapper, `fast_tch`).
#[cfg(feature = "tch")]
pub(crate) use ::fast_cpu::delegate_to;

pub use device::DeviceSpec;
use fast_cpu::{FastCpu, Kernels};
pub(crate) use placement::{DeviceSettings, Placement};
#[cfg(test)]
use placement::{default_device, resolve};

/// The exact answer of [`outer_sum_probe`]: `d_i + d_j` for `d = [1, 2, 3, 4]`, row-major.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub fn outer_sum_expected() -> Vec<f32> {
    (1..=4)
        .flat_map(|i| (1..=4).map(move |j| (i + j) as f32))
        .collect()
}

/// `d + dᵀ` for the column `d = [1, 2, 3, 4]ᵀ` (`[4, 1]`): the smallest op chain on which Burn
/// 0.21's fusion is wrong (docs/burn-fusion-report.md). Small integers, so any correct backend
/// gives [`outer_sum_expected`] exactly. Instantiated here, once per backend, by
/// `backend::wgpu::outer_sum_probe` and `backend::cuda::outer_sum_probe`: a test crate that
/// instantiated it itself would compile CubeCL's host code again (minutes per test binary).
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn outer_sum_probe<B: burn::tensor::backend::Backend>(device: &B::Device) -> Vec<f32> {
    use burn::tensor::{Tensor, TensorData};
    let d = Tensor::<B, 2>::from_data(TensorData::new(vec![1.0f32, 2.0, 3.0, 4.0], [4, 1]), device);
    (d.clone() + d.transpose())
        .into_data()
        .to_vec()
        .expect("f32 data")
}

/// The tensor backends this binary knows about.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum BackendKind {
    /// Pure-Rust CPU backend (always compiled): Flex with fast convolution and pooling.
    Flex,
    /// Flex with its own convolution and pooling kernels (for comparisons and tests).
    #[value(hide = true)]
    FlexPlain,
    /// LibTorch through tch (cargo feature `tch`).
    Tch,
    /// burn-tch's LibTorch backend without our convolution gradients (for comparisons and tests).
    #[value(hide = true)]
    TchPlain,
    /// CubeCL CUDA (cargo feature `cuda`).
    Cuda,
    /// The cuda backend under Burn's fusion (for comparisons and tests: see `backend::cuda`).
    #[value(hide = true)]
    CudaFusion,
    /// CubeCL on Vulkan/Metal/DX12 through wgpu (cargo feature `wgpu`): `--device gpu[:N]` for
    /// a GPU adapter, `--device cpu` for a software one (Mesa's lavapipe).
    Wgpu,
    /// The wgpu backend under Burn's fusion (for comparisons and tests: see `backend::wgpu`).
    #[value(hide = true)]
    WgpuFusion,
}

impl BackendKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            BackendKind::Flex => "flex",
            BackendKind::FlexPlain => "flex-plain",
            BackendKind::Tch => "tch",
            BackendKind::TchPlain => "tch-plain",
            BackendKind::Cuda => "cuda",
            BackendKind::CudaFusion => "cuda-fusion",
            BackendKind::Wgpu => "wgpu",
            BackendKind::WgpuFusion => "wgpu-fusion",
        }
    }

    /// Whether this binary was built with the backend.
    pub(crate) fn compiled(self) -> bool {
        match self {
            BackendKind::Flex | BackendKind::FlexPlain => true,
            BackendKind::Tch | BackendKind::TchPlain => cfg!(feature = "tch"),
            BackendKind::Cuda | BackendKind::CudaFusion => cfg!(feature = "cuda"),
            BackendKind::Wgpu | BackendKind::WgpuFusion => cfg!(feature = "wgpu"),
        }
    }

    /// The cargo feature that builds it.
    pub(crate) fn feature(self) -> &'static str {
        match self {
            BackendKind::Flex | BackendKind::FlexPlain => "(always built)",
            BackendKind::Tch | BackendKind::TchPlain => "tch",
            BackendKind::Cuda | BackendKind::CudaFusion => "cuda",
            BackendKind::Wgpu | BackendKind::WgpuFusion => "wgpu",
        }
    }

    /// Burn's fusion and autotune as this backend runs them (recorded in `run_meta.json`).
    pub(crate) fn cubecl_settings(self) -> Option<serde_json::Value> {
        match self {
            BackendKind::Cuda
            | BackendKind::CudaFusion
            | BackendKind::Wgpu
            | BackendKind::WgpuFusion => Some(serde_json::json!({
                "fusion": self.fused(),
                "autotune": wgpu::AUTOTUNE,
            })),
            _ => None,
        }
    }

    /// Whether it runs under Burn's fusion.
    pub(crate) fn fused(self) -> bool {
        match self {
            BackendKind::WgpuFusion | BackendKind::CudaFusion => true,
            BackendKind::Wgpu => wgpu::FUSION_DEFAULT,
            BackendKind::Cuda => cuda::FUSION_DEFAULT,
            _ => false,
        }
    }

    /// Whether a job should share a batch's items out over the host's threads itself (one
    /// autodiff graph per item, see `toolbox::host_parallel`): the pure-Rust CPU backend,
    /// whose operations on small items are too short to split. GPUs and LibTorch (OpenMP)
    /// parallelise each operation.
    pub(crate) fn host_parallel(self) -> bool {
        matches!(self, BackendKind::Flex | BackendKind::FlexPlain)
    }

    /// Whether a sort runs on the device: LibTorch's does; Burn 0.21's CubeCL backends (cuda,
    /// wgpu) read the tensor back and sort on the host, and flex shares its subjects out over
    /// the cores, where the host's selection per prediction is the faster way. The CLG-ODE
    /// objective computes its keep masks on the device where this holds
    /// (`Objective::targets_on_device`).
    pub(crate) fn sorts_on_device(self) -> bool {
        matches!(self, BackendKind::Tch | BackendKind::TchPlain)
    }

    pub(crate) fn is_wgpu(self) -> bool {
        matches!(self, BackendKind::Wgpu | BackendKind::WgpuFusion)
    }
}

pub(crate) fn unavailable(msg: impl Into<String>) -> anyhow::Error {
    ExitError::new(BACKEND_UNAVAILABLE, msg).into()
}

/// Fails with a clear message when no NVIDIA driver (libcuda) can be loaded.
pub(crate) fn ensure_cuda_driver() -> Result<()> {
    // SAFETY: loading the driver library runs its initialisers only; nothing is called here.
    match unsafe { libloading::Library::new("libcuda.so.1") } {
        Ok(_) => Ok(()),
        Err(e) => Err(unavailable(format!(
            "a CUDA device was requested but no NVIDIA driver could be loaded ({e}); inside \
             Singularity/Apptainer add --nv, otherwise run on a GPU node or use --device cpu \
             (run `trainer doctor` for details)"
        ))),
    }
}

/// A job written once, generic over the backend (sent to a thread of rayon's pool on the CPU).
pub(crate) trait BackendJob: Send {
    type Output: Send;
    fn run<B: AutodiffBackend>(
        self,
        device: B::Device,
        placement: Placement,
    ) -> Result<Self::Output>;
}

/// What a placement needs checked before it trains: the NVIDIA preflight for `cuda` and `tch`
/// on a GPU, the adapter for `wgpu` (logged, and recorded in `run_meta.json` as `preflight`).
pub(crate) fn preflight_for(
    placement: Placement,
    log_prefix: &str,
) -> Result<Option<serde_json::Value>> {
    if placement.backend.is_wgpu() {
        return wgpu_preflight(placement, log_prefix).map(Some);
    }
    if placement.device.is_cuda() {
        return preflight(placement.backend, log_prefix).map(Some);
    }
    Ok(None)
}

#[cfg(feature = "wgpu")]
fn wgpu_preflight(placement: Placement, log_prefix: &str) -> Result<serde_json::Value> {
    let (_, adapter) = wgpu::select(placement.device)?;
    let note = if adapter.is_gpu() {
        ""
    } else {
        ": a software adapter, the kernels run on the CPU"
    };
    eprintln!(
        "{log_prefix} wgpu adapter {}{note} (fusion {})",
        adapter.describe(),
        if placement.backend.fused() {
            "on"
        } else {
            "off"
        }
    );
    Ok(serde_json::json!({ "wgpu_adapter": adapter }))
}

#[cfg(not(feature = "wgpu"))]
fn wgpu_preflight(_: Placement, _: &str) -> Result<serde_json::Value> {
    Err(unavailable(
        "backend `wgpu` was not compiled into this binary: rebuild with `cargo build --release \
         --features wgpu`",
    ))
}

/// Runs the GPU preflight of `trainer doctor --require-gpu` for the run's backend (its CUDA
/// compatibility rules: `cluster::compat`) and returns its report; its failure carries the
/// doctor's documented exit code. A run under CUDA's minor version compatibility says so.
pub(crate) fn preflight(backend: BackendKind, log_prefix: &str) -> Result<serde_json::Value> {
    use crate::cluster::compat::{GpuBackend, Rule};
    let gpu_backend = match backend {
        BackendKind::Cuda | BackendKind::CudaFusion => GpuBackend::Cuda,
        _ => GpuBackend::Tch,
    };
    match crate::cluster::preflight_cuda(gpu_backend) {
        Ok(report) => {
            ensure_cuda_driver()?;
            if let Some(c) = report.backends.first()
                && c.rule == Some(Rule::MinorVersionCompatibility)
                && let Some(line) = report
                    .findings
                    .iter()
                    .find(|f| f.message.contains("minor version compatibility"))
            {
                eprintln!("{log_prefix} {}", line.message);
            }
            Ok(serde_json::to_value(&report).unwrap_or_default())
        }
        Err(e) => Err(ExitError::new(e.code, e.to_string()).into()),
    }
}

/// [`dispatch`] after the GPU [`preflight`] of a CUDA device (for commands that do not keep
/// its report).
pub(crate) fn dispatch_checked<J: BackendJob>(placement: Placement, job: J) -> Result<J::Output> {
    preflight_for(placement, "[trainer]")?;
    dispatch(placement, job)
}

/// Runs `job` on the backend and device of `placement` (training preflights a CUDA device
/// first: [`preflight`], called by the launcher).
pub(crate) fn dispatch<J: BackendJob>(placement: Placement, job: J) -> Result<J::Output> {
    match (placement.backend, placement.device) {
        (BackendKind::Flex | BackendKind::FlexPlain, _) => {
            fast_cpu::set_kernels(match placement.backend {
                BackendKind::FlexPlain => Kernels::Plain,
                _ => Kernels::Fast,
            });
            on_rayon_pool(|| job.run::<Autodiff<FastCpu>>(burn_flex::FlexDevice, placement))
        }
        #[cfg(feature = "tch")]
        (BackendKind::Tch | BackendKind::TchPlain, device) => {
            use burn::backend::libtorch::{LibTorch, LibTorchDevice};
            let dev = match device {
                DeviceSpec::Cpu => LibTorchDevice::Cpu,
                DeviceSpec::Cuda(i) => LibTorchDevice::Cuda(i),
            };
            let _threads = tch_threads::IntraOpThreads::for_device(device);
            match placement.backend {
                BackendKind::TchPlain => job.run::<Autodiff<LibTorch>>(dev, placement),
                _ => job.run::<Autodiff<fast_tch::FastTch>>(dev, placement),
            }
        }
        #[cfg(feature = "cuda")]
        (BackendKind::Cuda | BackendKind::CudaFusion, DeviceSpec::Cuda(i)) => {
            let dev = burn_cuda::CudaDevice::new(i);
            if placement.backend.fused() {
                job.run::<Autodiff<cuda::Fused>>(dev, placement)
            } else {
                job.run::<Autodiff<cuda::Plain>>(dev, placement)
            }
        }
        #[cfg(feature = "wgpu")]
        (BackendKind::Wgpu | BackendKind::WgpuFusion, device) => {
            let (dev, _) = wgpu::select(device)?;
            if placement.backend.fused() {
                job.run::<Autodiff<wgpu::Fused>>(dev, placement)
            } else {
                job.run::<Autodiff<wgpu::Plain>>(dev, placement)
            }
        }
        #[allow(unreachable_patterns)]
        _ => Err(unavailable(format!(
            "backend {} on device {} is not available in this binary",
            placement.backend.name(),
            placement.device
        ))),
    }
}

/// Runs `f` on a thread of rayon's global pool, the pool the CPU kernels split their work on.
/// From any other thread, every parallel operation would hand its work to the pool and sleep
/// until it is done: two thread wake-ups per operation, about 0.5 ms of a 17 ms MNIST step on
/// 2 cores. From a pool thread, the operation's first part runs at once on that thread.
fn on_rayon_pool<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if rayon::current_thread_index().is_some() {
        return f();
    }
    rayon::scope(|_| f())
}

/// Every (backend, device) pair this binary could use here, for benchmarks.
pub(crate) fn available_placements() -> Vec<Placement> {
    let gpu = ensure_cuda_driver().is_ok();
    let mut out = vec![Placement {
        backend: BackendKind::Flex,
        device: DeviceSpec::Cpu,
    }];
    if BackendKind::Tch.compiled() {
        out.push(Placement {
            backend: BackendKind::Tch,
            device: DeviceSpec::Cpu,
        });
        if gpu {
            out.push(Placement {
                backend: BackendKind::Tch,
                device: DeviceSpec::Cuda(0),
            });
        }
    }
    if BackendKind::Cuda.compiled() && gpu {
        out.push(Placement {
            backend: BackendKind::Cuda,
            device: DeviceSpec::Cuda(0),
        });
    }
    // wgpu: the first GPU adapter if there is one, else the software one (kernels on the CPU).
    let adapters = wgpu::adapters();
    if let Some(device) = if adapters.iter().any(|a| a.is_gpu()) {
        Some(DeviceSpec::Cuda(0))
    } else {
        adapters
            .iter()
            .any(|a| a.kind == "cpu")
            .then_some(DeviceSpec::Cpu)
    } {
        out.push(Placement {
            backend: BackendKind::Wgpu,
            device,
        });
    }
    out
}

#[cfg(test)]
mod tests;

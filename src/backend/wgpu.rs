//! The `wgpu` backend: Burn's CubeCL kernels (the family `cuda` runs) on Vulkan, Metal or DX12
//! through wgpu. For users it is the GPU path on AMD, Intel and Apple hardware; for us it is the
//! CubeCL code path executed without an NVIDIA GPU, on Mesa's software Vulkan driver (lavapipe,
//! Debian `mesa-vulkan-drivers`).
//!
//! Devices: `--device gpu[:N]` (`cuda[:N]` is read the same) is the N-th hardware adapter
//! (discrete GPUs first, then integrated, then virtual, each in the driver's order); `--device
//! cpu` is a software adapter (lavapipe/llvmpipe), i.e. the kernels run on the CPU, and the log
//! says so. A device that is not there is a clear error listing the adapters that are: CubeCL
//! itself panics in that case, so the adapter is chosen here first.
//!
//! Fusion: Burn's fusion (`burn-fusion`) is compiled in so that both backends exist in one
//! binary: `--backend wgpu` is the plain CubeCL backend ([`FUSION_DEFAULT`]), the hidden
//! `--backend wgpu-fusion` the same under `Fusion<_>`. The choice rests on
//! `tests/backends/backend_wgpu.rs`: the plain backend follows `flex` on every model; the fused one does
//! on every training step compared, but scores a `--model gcn` checkpoint wrongly
//! (docs/burn-fusion-report.md).
//! Autotune is the cargo feature `autotune`, off by default (as for `cuda`): its kernels are
//! chosen by timing, so its results depend on the machine's load, and a run would not repeat
//! itself.

use serde::Serialize;

/// Whether `--backend wgpu` runs under Burn's fusion: off. Fused, the GCN baseline's forward
/// pass (no autotune involved) gives other predictions than flex and the plain backend
/// (sc_log_mse 1.05 instead of 0.67 on one checkpoint: docs/burn-fusion-report.md,
/// `tests/backends/backend_wgpu.rs`); the plain backend agrees with flex on every model. `cuda` stays
/// without fusion too: its fused kernels go through the same fusion planner.
pub(crate) const FUSION_DEFAULT: bool = false;

/// Whether Burn's autotune is compiled into the CubeCL backends (cuda, wgpu) of this binary
/// (cargo feature `autotune`).
pub(crate) const AUTOTUNE: bool = cfg!(feature = "autotune");

/// One adapter wgpu sees, as `trainer doctor` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Adapter {
    /// Position in `trainer doctor`'s list.
    pub index: usize,
    pub name: String,
    /// `discrete-gpu`, `integrated-gpu`, `virtual-gpu`, `cpu` (software) or `other`.
    pub kind: &'static str,
    /// Graphics API (`vulkan`, `metal`, `dx12`, `gl`).
    pub api: String,
    pub driver: String,
    pub driver_info: String,
}

impl Adapter {
    /// Hardware (a GPU), as opposed to a software rasterizer on the CPU.
    pub(crate) fn is_gpu(&self) -> bool {
        matches!(self.kind, "discrete-gpu" | "integrated-gpu" | "virtual-gpu")
    }

    /// One line for logs: `llvmpipe (LLVM 15.0.6, 256 bits) [cpu, vulkan, llvmpipe]`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} [{}, {}, {}{}]",
            self.name,
            self.kind,
            self.api,
            self.driver,
            if self.driver_info.is_empty() {
                String::new()
            } else {
                format!(" {}", self.driver_info)
            }
        )
    }
}

#[cfg(feature = "wgpu")]
pub use enabled::*;

#[cfg(feature = "wgpu")]
mod enabled {
    use anyhow::Result;
    use burn_wgpu::graphics::{AutoGraphicsApi, GraphicsApi};
    use burn_wgpu::{CubeBackend, WgpuDevice, WgpuRuntime};

    use super::Adapter;
    use crate::backend::{DeviceSpec, unavailable};

    /// The plain CubeCL backend on wgpu (the types `burn_wgpu::Wgpu` has without fusion).
    pub type Plain = CubeBackend<WgpuRuntime, f32, i32, u32>;
    /// The same under Burn's fusion (`--backend wgpu-fusion`).
    pub type Fused = burn_fusion::Fusion<Plain>;

    /// [`crate::backend::outer_sum_expected`]'s op chain on the first software adapter
    /// (lavapipe), fused or plain (`tests/backends/backend_wgpu.rs` pins both answers).
    pub fn outer_sum_probe(fused: bool) -> Vec<f32> {
        let device = WgpuDevice::Cpu;
        if fused {
            crate::backend::outer_sum_probe::<Fused>(&device)
        } else {
            crate::backend::outer_sum_probe::<Plain>(&device)
        }
    }

    const KIND_ORDER: [wgpu::DeviceType; 4] = [
        wgpu::DeviceType::DiscreteGpu,
        wgpu::DeviceType::IntegratedGpu,
        wgpu::DeviceType::VirtualGpu,
        wgpu::DeviceType::Cpu,
    ];

    fn kind_name(t: wgpu::DeviceType) -> &'static str {
        match t {
            wgpu::DeviceType::DiscreteGpu => "discrete-gpu",
            wgpu::DeviceType::IntegratedGpu => "integrated-gpu",
            wgpu::DeviceType::VirtualGpu => "virtual-gpu",
            wgpu::DeviceType::Cpu => "cpu",
            wgpu::DeviceType::Other => "other",
        }
    }

    fn raw_adapters() -> Vec<wgpu::AdapterInfo> {
        // The graphics API CubeCL itself uses on this platform (Vulkan on Linux), so that the
        // order here is the order CubeCL's own adapter selection sees.
        let backend = AutoGraphicsApi::backend();
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: backend.into(),
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapters = cubecl_common::future::block_on(instance.enumerate_adapters(backend.into()));
        adapters.iter().map(|a| a.get_info()).collect()
    }

    /// Every adapter wgpu sees, hardware first (the order `--device gpu:N` counts in).
    pub(crate) fn adapters() -> Vec<Adapter> {
        let raw = raw_adapters();
        let mut out = Vec::new();
        for kind in KIND_ORDER.iter().chain([&wgpu::DeviceType::Other]) {
            for info in raw.iter().filter(|i| i.device_type == *kind) {
                out.push(Adapter {
                    index: out.len(),
                    name: info.name.clone(),
                    kind: kind_name(info.device_type),
                    api: format!("{:?}", info.backend).to_lowercase(),
                    driver: info.driver.clone(),
                    driver_info: info.driver_info.clone(),
                });
            }
        }
        out
    }

    /// The wgpu device for `--device`, and its adapter; an error naming what is there when the
    /// adapter is not.
    pub(crate) fn select(device: DeviceSpec) -> Result<(WgpuDevice, Adapter)> {
        let all = adapters();
        let listing = if all.is_empty() {
            "wgpu sees no adapter at all (no Vulkan driver: on Debian/Ubuntu `apt-get install \
             mesa-vulkan-drivers` gives the software one; inside Apptainer add --nv or bind the \
             Vulkan ICD)"
                .to_string()
        } else {
            format!(
                "adapters seen: {}",
                all.iter()
                    .map(|a| format!("{}: {}", a.index, a.describe()))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        };
        match device {
            DeviceSpec::Cpu => {
                let Some(a) = all.iter().find(|a| a.kind == "cpu") else {
                    return Err(unavailable(format!(
                        "--backend wgpu --device cpu needs a software Vulkan adapter (Mesa's \
                         lavapipe: `apt-get install mesa-vulkan-drivers`); {listing}"
                    )));
                };
                Ok((WgpuDevice::Cpu, a.clone()))
            }
            DeviceSpec::Cuda(n) => {
                let gpus: Vec<&Adapter> = all.iter().filter(|a| a.is_gpu()).collect();
                let Some(a) = gpus.get(n) else {
                    return Err(unavailable(format!(
                        "--backend wgpu --device gpu:{n}: this machine has {} GPU adapter(s) \
                         (`--device cpu` runs the software adapter, on the CPU); {listing}",
                        gpus.len()
                    )));
                };
                let same_kind = gpus[..n].iter().filter(|g| g.kind == a.kind).count();
                let dev = match a.kind {
                    "discrete-gpu" => WgpuDevice::DiscreteGpu(same_kind),
                    "integrated-gpu" => WgpuDevice::IntegratedGpu(same_kind),
                    _ => WgpuDevice::VirtualGpu(same_kind),
                };
                Ok((dev, (*a).clone()))
            }
        }
    }
}

/// Without the `wgpu` feature: no adapter is listed.
#[cfg(not(feature = "wgpu"))]
pub(crate) fn adapters() -> Vec<Adapter> {
    Vec::new()
}

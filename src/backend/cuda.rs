//! The `cuda` backend: Burn's CubeCL kernels compiled by NVRTC for NVIDIA GPUs (the family
//! `wgpu` runs on Vulkan/Metal, the same `burn-cubecl` ops; only the runtime and the kernel
//! compiler differ).
//!
//! Fusion: Burn's fusion is compiled in so that both backends exist in one binary: `--backend
//! cuda` is the plain CubeCL backend ([`FUSION_DEFAULT`]), the hidden `--backend cuda-fusion`
//! the same under `Fusion<_>`. Both run the step-by-step comparison against `flex`
//! (`tests/backends/backend_cuda.rs`) on a machine with an NVIDIA GPU; the choice of the default rests on
//! it (docs/burn-fusion-report.md, measured on an H100). Autotune is the cargo feature
//! `autotune`, off by default ([`super::wgpu::AUTOTUNE`]).

/// Whether `--backend cuda` runs under Burn's fusion: off. Burn 0.21's fusion computes `d + dᵀ`
/// of a column wrongly, on lavapipe and on an H100 alike (`tests/backends/backend_wgpu.rs`,
/// `tests/backends/backend_cuda.rs`), which the GCN baseline's normalisation does.
pub(crate) const FUSION_DEFAULT: bool = false;

#[cfg(feature = "cuda")]
pub use enabled::*;

#[cfg(feature = "cuda")]
mod enabled {
    /// The plain CubeCL CUDA backend (what `burn_cuda::Cuda` is without its `fusion` feature).
    pub type Plain = burn_cubecl::CubeBackend<cubecl::cuda::CudaRuntime, f32, i32, u8>;
    /// The same under Burn's fusion (`--backend cuda-fusion`).
    pub type Fused = burn_fusion::Fusion<Plain>;

    /// [`crate::backend::outer_sum_expected`]'s op chain on CUDA device `index`, fused or plain
    /// (`tests/backends/backend_cuda.rs` pins both answers on a machine with an NVIDIA GPU).
    pub fn outer_sum_probe(index: usize, fused: bool) -> Vec<f32> {
        let device = burn_cuda::CudaDevice::new(index);
        if fused {
            crate::backend::outer_sum_probe::<Fused>(&device)
        } else {
            crate::backend::outer_sum_probe::<Plain>(&device)
        }
    }
}

//! `trainer bench`: throughput and cost benchmarks, every compiled backend side by side.

pub(crate) mod gnn;
mod limits;
pub(crate) mod mnist;
mod mnist_job;
mod plan;
pub(crate) mod profile;
pub(crate) mod pytorch;
pub(crate) mod report;
mod settings;

pub(crate) use settings::{BenchSettings, BenchTarget};

use crate::backend::{self, BackendKind, DeviceSpec, Placement};

/// The placements `--backends` asks for (`Err(kind)` for one this binary cannot run here), or
/// every compiled backend on every usable device when it is empty.
pub(crate) fn selected_placements(wanted: &[BackendKind]) -> Vec<Result<Placement, BackendKind>> {
    let mut candidates = backend::available_placements();
    if wanted.is_empty() {
        return candidates.into_iter().map(Ok).collect();
    }
    for backend in [BackendKind::FlexPlain, BackendKind::TchPlain] {
        if backend.compiled() {
            candidates.push(Placement {
                backend,
                device: DeviceSpec::Cpu,
            });
        }
    }
    // wgpu and cuda under Burn's fusion, on the device the plain backend uses.
    for (plain, fused) in [
        (BackendKind::Wgpu, BackendKind::WgpuFusion),
        (BackendKind::Cuda, BackendKind::CudaFusion),
    ] {
        if let Some(p) = candidates.iter().find(|p| p.backend == plain) {
            candidates.push(Placement {
                backend: fused,
                device: p.device,
            });
        }
    }
    let mut out = Vec::new();
    for kind in wanted {
        let before = out.len();
        out.extend(
            candidates
                .iter()
                .filter(|p| p.backend == *kind)
                .map(|p| Ok(*p)),
        );
        if out.len() == before {
            out.push(Err(*kind));
        }
    }
    out
}

//! `trainer doctor`: is this process set up to train on a GPU, and if not, why and how to fix it.
//!
//! [`diagnose`] is pure: it takes the variables, a [`DriverProbe`], the NVRTC probe and what a
//! container shows of `--nv` ([`NvEvidence`]), so every diagnosis (missing `--nv`, `--nv` on a
//! node without a driver, runtime newer than the driver, V100 under CUDA 13, ...) is unit-tested
//! without a GPU. Only [`DoctorReport::collect`] probes the real machine.
//!
//! One concern per file: [`diagnose`](fn@diagnose) (the decision tree), `checks` (runtime, GPU
//! and container findings), `render` (the text report).

mod checks;
mod crossover;
mod diagnose;
pub(crate) use crossover::small_model_hint;
mod render;

use std::path::Path;

use serde::Serialize;

use super::compat::{BackendNeeds, GpuBackend, Rule};
use super::container::{Container, NvEvidence, detect_container};
use super::cuda::{CudaVersion, RuntimeTarget};
use super::gpu::{DriverProbe, probe_driver};
use super::nvrtc::{NvrtcInfo, cudarc_major, probe_nvrtc};
use super::scheduler::{AllocationVar, ClusterEnv};
use super::vars::Vars;
use super::visible_devices::VisibleDevices;
use crate::exit::Exit;

pub use diagnose::{diagnose, diagnose_with};
pub(crate) use diagnose::{diagnose_for, visible_gpus};

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// A check that passed.
    Ok,
    /// Something worth knowing.
    Info,
    /// Likely a problem, but training can go on.
    Warn,
    /// Training on the GPU will not work; carries an exit code.
    Fail,
}

/// One line of the diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Severity.
    pub level: Level,
    /// Exit code for failures ([`crate::exit::Exit::code`]).
    pub code: Option<u8>,
    /// What was found.
    pub message: String,
    /// One-line fix.
    pub fix: Option<String>,
}

/// A GPU that this process can see through `CUDA_VISIBLE_DEVICES`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VisibleGpu {
    /// NVML index of the physical GPU.
    pub index: u32,
    /// The `CUDA_VISIBLE_DEVICES` entry that selects it (`None` when the variable is unset).
    pub selected_by: Option<String>,
}

/// The CUDA runtime check: runtime ≤ driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RuntimeCheck {
    /// The version this build targets (constant, build-time `CUDARC_CUDA_VERSION`, or override).
    pub build_target: RuntimeTarget,
    /// The NVRTC library found at run time.
    pub nvrtc: Option<NvrtcInfo>,
    /// The version compared with the driver: NVRTC's if found, else the build target.
    pub effective: CudaVersion,
    /// Newest CUDA the driver supports.
    pub driver_supports: Option<CudaVersion>,
}

/// One GPU backend checked against the driver and the GPUs: what it needs and the rule that
/// decided (in `doctor --json` and a GPU run's `run_meta.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BackendCheck {
    #[serde(flatten)]
    pub needs: BackendNeeds,
    /// The run's backend (or the default on a GPU): its refusal is the report's exit code.
    pub primary: bool,
    /// Built into this binary (else the GPU image's, checked for information).
    pub in_binary: bool,
    /// The rule that decided (`None`: no driver, or no GPU wanted).
    pub rule: Option<Rule>,
    /// Whether it runs on this driver and every visible GPU (`None`: not checked).
    pub runs: Option<bool>,
}

/// Everything doctor found, serialisable for `--json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DoctorReport {
    /// The scheduler environment, when it could be read.
    pub cluster: Option<ClusterEnv>,
    /// Why it could not be read.
    pub cluster_error: Option<String>,
    /// Singularity/Apptainer, if inside one.
    pub container: Option<Container>,
    /// Inside a container: what `--nv` left there (driver libraries, `/dev/nvidia*`).
    pub nv: Option<NvEvidence>,
    /// The driver probe.
    pub driver: DriverProbe,
    /// `CUDA_VISIBLE_DEVICES` as read.
    pub visible_devices: VisibleDevices,
    /// GPUs visible to this process.
    pub visible_gpus: Vec<VisibleGpu>,
    /// Scheduler variables showing GPUs were allocated.
    pub gpu_allocation: Vec<AllocationVar>,
    /// Runtime against driver.
    pub runtime: RuntimeCheck,
    /// Each GPU backend against the driver and the GPUs (the run's or the default first).
    pub backends: Vec<BackendCheck>,
    /// A GPU was required (`--require-gpu`, or a train command with `--device cuda`).
    pub require_gpu: bool,
    /// Findings in order.
    pub findings: Vec<Finding>,
    /// Exit code ([`crate::exit::Exit::code`]): the first failure's, or 0.
    pub exit_code: u8,
}

/// The findings a diagnosis collects, in order (`checks.rs` adds them, `diagnose.rs` returns
/// them in a [`DoctorReport`]).
pub(crate) struct Findings(Vec<Finding>);

impl Findings {
    pub(crate) fn push(
        &mut self,
        level: Level,
        code: Option<u8>,
        message: String,
        fix: Option<&str>,
    ) {
        self.0.push(Finding {
            level,
            code,
            message,
            fix: fix.map(str::to_string),
        });
    }
    pub(crate) fn fail(&mut self, code: Exit, message: String, fix: &str) {
        self.push(Level::Fail, Some(code.code()), message, Some(fix));
    }
}

/// Which backend to train with on an NVIDIA GPU, said by doctor when the binary has `cuda` beside
/// `tch`. Measured on an H200 (benches/README.md, "The second GPU check"): the MNIST CNN trained
/// at 1.29× PyTorch's eager speed under `tch` and 0.19× under `cuda` (implicit-GEMM convolutions).
pub(crate) const GPU_BACKEND_HINT: &str = "on an NVIDIA GPU, train with --backend tch (the default: LibTorch's cuDNN and cuBLAS kernels, PyTorch's own); --backend cuda (Burn's CubeCL kernels) trained the MNIST CNN at a seventh of tch's speed on an H200 (5,951 img/s against 40,642 at batch 64, benches/gpu/gpu-check-h200-2026-12-04.json): use it to compare, or where LibTorch cannot start";

impl DoctorReport {
    /// Probes this machine (process environment, NVML, NVRTC, and inside a container what
    /// `--nv` bound) and diagnoses.
    pub fn collect(require_gpu: bool) -> Self {
        let (backends, in_binary) = GpuBackend::for_doctor();
        Self::collect_for(require_gpu, &backends, in_binary)
    }

    /// [`Self::collect`] for the given GPU backends, the run's first (see [`diagnose_for`]).
    pub fn collect_for(require_gpu: bool, backends: &[GpuBackend], in_binary: bool) -> Self {
        let vars = Vars::from_process();
        let driver = probe_driver(&vars);
        // Probed with or without a driver: an image checked on a build host (no GPU) shows
        // which NVRTC its cuda backend will load.
        let nvrtc = probe_nvrtc(cudarc_major());
        let nv = detect_container(&vars).map(|_| NvEvidence::probe(Path::new("/")));
        diagnose_for(&vars, driver, nvrtc, nv, require_gpu, backends, in_binary)
    }

    /// The rule that decided for the primary backend, e.g. `tch: minor-version-compatibility`.
    pub fn deciding_rule(&self) -> Option<String> {
        let c = self.backends.iter().find(|c| c.primary)?;
        Some(format!("{}: {}", c.needs.backend.name(), c.rule?.name()))
    }

    /// Adds the outcome of an NCCL all-reduce check; a failure exits with 1.
    pub fn check_nccl(&mut self, outcome: anyhow::Result<String>) {
        let finding = match outcome {
            Ok(msg) => Finding {
                level: Level::Ok,
                code: None,
                message: msg,
                fix: None,
            },
            Err(e) => Finding {
                level: Level::Fail,
                code: Some(crate::exit::Exit::General.code()),
                message: format!("NCCL all-reduce: {e:#}"),
                fix: Some("check libnccl.so (NCCL 2.x) on LD_LIBRARY_PATH".into()),
            },
        };
        if finding.level == Level::Fail && self.exit_code == crate::exit::Exit::Ok.code() {
            self.exit_code = crate::exit::Exit::General.code();
        }
        self.findings.push(finding);
    }

    /// The failures.
    pub fn failures(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.level == Level::Fail)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_matrix;

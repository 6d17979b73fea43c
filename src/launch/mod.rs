//! One launcher for every training command: the backend and device, the scheduler environment
//! (read once), the communicator, the GPU preflight report and the run directory are resolved
//! here into a [`RunContext`]; the job is built from it and handed to the engine.
//!
//! Order: preflight (NVIDIA driver for CUDA devices, the adapter for wgpu) → backend dispatch
//! (and the backend's hooks into the loop, `hooks.rs`) → scheduler environment → communicator →
//! run directory name and resume source (rank 0 decides) → the job (which loads its data: a
//! data error leaves no run directory behind) → [`crate::engine::train`], which creates the
//! directory.

pub(crate) mod capture;
mod hooks;
pub(crate) use hooks::copy_into;
pub use hooks::{BackendKernels, cross_entropy, fused_adam};

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;
use serde_json::Value;

use crate::backend::autotune::{self, Autotune};
use crate::backend::{self, BackendJob, Placement};
use crate::cluster::{self, ClusterEnv};
use crate::dist;
use crate::engine::{self, Job, RunContext, RunSettings};
use crate::outputs::rundir::{self, Naming};

/// Where and how a run is launched: backend and device, and the run's own settings.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub placement: Placement,
    pub run: RunSettings,
    /// The autotune cache and warm-up (CubeCL backends).
    pub autotune: Autotune,
}

/// A training command's job, built for whichever backend the launcher dispatches to.
pub(crate) trait JobFactory: Send {
    type Job<B: AutodiffBackend>: Job<B>;
    /// Command name for logs (`train-mnist`).
    fn name(&self) -> &'static str;
    /// Default root of run directories (`runs/`, or `<results-dir>/runs/`).
    fn runs_root(&self) -> PathBuf;
    /// The job, from the run's context (loads its data).
    fn build<B: AutodiffBackend>(self, ctx: &RunContext<B>) -> Result<Self::Job<B>>;
    /// Whether the job's step can be recorded as a CUDA graph with these settings
    /// (`--cuda-graph`; [`Job::fill_graph_inputs`]), else why not.
    fn graph_capturable(&self) -> Result<()> {
        anyhow::bail!(
            "its steps change shape from batch to batch, which a recorded graph cannot; it \
             applies to train-mnist"
        )
    }
}

/// Launches the job `factory` builds, as `launch` says; returns the process exit code.
pub(crate) fn run<F: JobFactory>(mut launch: Launch, factory: F) -> Result<ExitCode> {
    let tag = format!("[{}]", factory.name());
    if launch.run.cuda_graph {
        capture::check(factory.name(), factory.graph_capturable(), launch.placement)?;
    }
    let preflight = backend::preflight_for(launch.placement, &tag)?;
    // Before the backend starts: CubeCL reads its configuration once, at its first client.
    let tuning = autotune::configure(&launch.autotune, launch.placement, preflight.as_ref(), &tag);
    let warm = launch.autotune.warm;
    let scratch =
        std::env::temp_dir().join(format!("trainer-autotune-warm-{}", std::process::id()));
    if warm {
        // A warm-up writes no run: a scratch directory, removed after.
        let _ = std::fs::remove_dir_all(&scratch);
        launch.run.out = Some(scratch.clone());
        launch.run.run_name = None;
        launch.run.resume = None;
    }
    let code = backend::dispatch(
        launch.placement,
        Dispatched {
            launch,
            factory,
            preflight,
        },
    );
    if let Some(t) = &tuning {
        eprintln!("{tag} {}", t.summary());
    }
    if !warm {
        return code;
    }
    let _ = std::fs::remove_dir_all(&scratch);
    // The warm-up's training stops after its steps on purpose (the requeue code otherwise).
    code?;
    eprintln!("{tag} autotune warm-up done: runs with the same shapes read these choices");
    Ok(ExitCode::SUCCESS)
}

struct Dispatched<F> {
    launch: Launch,
    factory: F,
    preflight: Option<Value>,
}

impl<F: JobFactory> BackendJob for Dispatched<F> {
    type Output = ExitCode;
    fn run<B: AutodiffBackend>(self, device: B::Device, placement: Placement) -> Result<ExitCode> {
        let Dispatched {
            launch,
            factory,
            preflight,
        } = self;
        let cluster = cluster::detect_env()?;
        let comm = dist::init(&cluster)?;
        if comm.rank() == 0 {
            eprintln!(
                "[{}] {}",
                factory.name(),
                placement_line(placement, preflight.as_ref())
            );
        }
        if comm.size() > 1 && placement.device.is_cuda() {
            // One GPU per rank: `cuda` means this rank's device (CUDA_VISIBLE_DEVICES per task).
            eprintln!(
                "[{}] rank {}/{} on {}",
                factory.name(),
                comm.rank(),
                comm.size(),
                placement.device
            );
        }
        if launch.run.cuda_graph {
            capture::check_world(comm.size())?;
        }
        let job_id = job_id(&cluster);
        let mut run = launch.run;
        run.requeue.job = job_id
            .as_deref()
            .and_then(|job| cluster::scheduler::requeue_for(&cluster::Vars::from_process(), job));
        let naming = Naming {
            out: run.out.as_deref(),
            run_name: run.run_name.as_deref(),
            resume: run.resume.as_deref(),
            job_id: job_id.as_deref(),
        };
        let run_dir = rundir::shared(comm.as_ref(), &naming, &factory.runs_root())?;
        let resume = rundir::resume_source(run.resume.as_deref(), &run_dir)?;
        let step_capture = match run.cuda_graph {
            true => Some(capture::step_capture::<B::InnerBackend>().ok_or_else(|| {
                anyhow::anyhow!(
                    "--cuda-graph: backend {} has no graph capture",
                    placement.backend.name()
                )
            })?),
            false => None,
        };
        let ctx = RunContext::<B> {
            device,
            placement,
            comm,
            cluster,
            job_id,
            preflight,
            run,
            run_dir,
            resume,
            fused_adam: hooks::fused_adam::<B::InnerBackend>(),
            step_capture,
        };
        let job = factory.build(&ctx)?;
        engine::train(job, &ctx)
    }
}

/// The first line of a run's log: backend and device; on a GPU which one (name, UUID), the
/// driver and the CUDA versions from the preflight report; the adapter on wgpu; the CPU
/// threads otherwise.
pub(crate) fn placement_line(placement: Placement, preflight: Option<&Value>) -> String {
    let mut line = format!(
        "backend {}, device {}",
        placement.backend.name(),
        placement.device
    );
    let text = |v: &Value| v.as_str().map(str::to_string);
    let version = |v: &Value| Some(format!("{}.{}", v["major"].as_u64()?, v["minor"].as_u64()?));
    match preflight {
        Some(p) if p.get("wgpu_adapter").is_some() => {
            if let Some(name) = text(&p["wgpu_adapter"]["name"]) {
                line.push_str(&format!(": adapter {name}"));
            }
        }
        Some(p) => {
            let index = p["visible_gpus"][0]["index"].as_u64();
            let gpus = p["driver"]["gpus"].as_array().cloned().unwrap_or_default();
            let gpu = gpus
                .iter()
                .find(|g| g["index"].as_u64() == index)
                .or(gpus.first());
            let mut parts = Vec::new();
            if let Some(g) = gpu {
                parts.push(format!(
                    "{} ({})",
                    text(&g["name"]).unwrap_or_else(|| "GPU".into()),
                    text(&g["uuid"]).unwrap_or_else(|| "no UUID".into())
                ));
            }
            if let Some(d) = text(&p["driver"]["driver_version"]) {
                parts.push(format!("driver {d}"));
            }
            if let Some(v) = version(&p["driver"]["cuda_driver_version"]) {
                parts.push(format!("driver CUDA {v}"));
            }
            if let Some(v) = version(&p["runtime"]["build_target"]["version"]) {
                parts.push(format!("built for CUDA {v}"));
            }
            if let Some(v) = version(&p["runtime"]["nvrtc"]["version"]) {
                parts.push(format!("NVRTC {v}"));
            }
            if !parts.is_empty() {
                line.push_str(&format!(": {}", parts.join(", ")));
            }
        }
        None => line.push_str(&format!(" ({} threads)", rayon::current_num_threads())),
    }
    line
}

/// The scheduler's job id (`<array job>_<task>` for array tasks), if any.
pub(crate) fn job_id(env: &ClusterEnv) -> Option<String> {
    match (&env.array_job_id, env.array_task_id) {
        (Some(a), Some(t)) => Some(format!("{a}_{t}")),
        _ => env.job_id.clone(),
    }
}

/// `runs/` under `base`.
pub(crate) fn runs_under(base: &Path) -> PathBuf {
    base.join("runs")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{BackendKind, DeviceSpec};

    /// From `trainer doctor --require-gpu --json` on an H100 (a GPU session, 2026-11-26).
    #[test]
    fn the_first_log_line_names_the_gpu_its_driver_and_cuda() {
        let report: Value =
            serde_json::from_str(include_str!("../../tests/fixtures/doctor-h100.json")).unwrap();
        let placement = Placement {
            backend: BackendKind::Cuda,
            device: DeviceSpec::Cuda(0),
        };
        assert_eq!(
            placement_line(placement, Some(&report)),
            "backend cuda, device cuda:0: NVIDIA H100 80GB HBM3 \
             (GPU-c213c15a-2546-95d7-1559-908fda51ba18), driver 580.159.04, driver CUDA 13.0, \
             built for CUDA 12.8, NVRTC 13.0"
        );
        let cpu = Placement {
            backend: BackendKind::Flex,
            device: DeviceSpec::Cpu,
        };
        assert!(placement_line(cpu, None).starts_with("backend flex, device cpu ("));
    }
}

//! One launcher for every training command: the backend and device, the scheduler environment
//! (read once), the communicator, the GPU preflight report and the run directory are resolved
//! here into a [`RunContext`]; the job is built from it and handed to the engine.
//!
//! Order: preflight (NVIDIA driver for CUDA devices, the adapter for wgpu) → backend dispatch → scheduler environment → communicator →
//! run directory name and resume source (rank 0 decides) → the job (which loads its data: a
//! data error leaves no run directory behind) → [`crate::engine::train`], which creates the
//! directory.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;
use serde_json::Value;

use crate::backend::{self, BackendJob, Placement};
use crate::cluster::{self, ClusterEnv};
use crate::dist;
use crate::engine::{self, Job, RunContext, RunSettings};
use crate::outputs::rundir::{self, Naming};

/// Where and how a run is launched: backend and device, and the run's own settings.
#[derive(Debug, Clone)]
pub struct Launch {
    pub placement: Placement,
    pub run: RunSettings,
}

/// A training command's job, built for whichever backend the launcher dispatches to.
pub trait JobFactory {
    type Job<B: AutodiffBackend>: Job<B>;
    /// Command name for logs (`train-mnist`).
    fn name(&self) -> &'static str;
    /// Default root of run directories (`runs/`, or `<results-dir>/runs/`).
    fn runs_root(&self) -> PathBuf;
    /// The job, from the run's context (loads its data).
    fn build<B: AutodiffBackend>(self, ctx: &RunContext<B>) -> Result<Self::Job<B>>;
}

/// Launches the job `factory` builds, as `launch` says; returns the process exit code.
pub fn run<F: JobFactory>(launch: Launch, factory: F) -> Result<ExitCode> {
    let preflight = backend::preflight_for(launch.placement, &format!("[{}]", factory.name()))?;
    backend::dispatch(
        launch.placement,
        Dispatched {
            launch,
            factory,
            preflight,
        },
    )
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
        let job_id = job_id(&cluster);
        let mut run = launch.run;
        run.requeue.slurm_job = job_id
            .clone()
            .filter(|_| std::env::var_os("SLURM_JOB_ID").is_some());
        let naming = Naming {
            out: run.out.as_deref(),
            run_name: run.run_name.as_deref(),
            resume: run.resume.as_deref(),
            job_id: job_id.as_deref(),
        };
        let run_dir = rundir::shared(comm.as_ref(), &naming, &factory.runs_root())?;
        let resume = rundir::resume_source(run.resume.as_deref(), &run_dir)?;
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
        };
        let job = factory.build(&ctx)?;
        engine::train(job, &ctx)
    }
}

/// The scheduler's job id (`<array job>_<task>` for array tasks), if any.
pub fn job_id(env: &ClusterEnv) -> Option<String> {
    match (&env.array_job_id, env.array_task_id) {
        (Some(a), Some(t)) => Some(format!("{a}_{t}")),
        _ => env.job_id.clone(),
    }
}

/// `runs/` under `base`.
pub fn runs_under(base: &Path) -> PathBuf {
    base.join("runs")
}

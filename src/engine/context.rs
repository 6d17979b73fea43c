//! The run's context: everything about a run that is not the job's, resolved once by the
//! launcher (`src/launch/`), read by the job when it is built and by the engine.

use std::path::PathBuf;

use burn::tensor::backend::AutodiffBackend;
use serde_json::Value;

use super::RunSettings;
use crate::backend::Placement;
use crate::cluster::{ClusterEnv, RunCluster, Vars};
use crate::dist::Collective;
use crate::toolbox::optim::FusedAdam;

/// Everything about the run that is not the job's: resolved once, read by the job (when it is
/// built) and by the engine.
pub(crate) struct RunContext<B: AutodiffBackend> {
    pub device: B::Device,
    pub placement: Placement,
    pub comm: Box<dyn Collective>,
    /// The scheduler environment of this process.
    pub cluster: ClusterEnv,
    /// The scheduler's job id (`<array job>_<task>` for array tasks).
    pub job_id: Option<String>,
    /// The CUDA preflight report, when a CUDA device was requested.
    pub preflight: Option<Value>,
    pub run: RunSettings,
    /// The run directory (created by the engine when the run starts).
    pub run_dir: PathBuf,
    /// The checkpoint to resume from.
    pub resume: Option<PathBuf>,
    /// The backend's one-pass Adam update, if it has one (`launch::hooks`).
    pub fused_adam: Option<FusedAdam<B::InnerBackend>>,
    /// `--cuda-graph`: the backend's capture of a training step (`launch::hooks::step_capture`).
    pub step_capture: Option<super::graph::CaptureFactory<B::InnerBackend>>,
}

impl<B: AutodiffBackend> RunContext<B> {
    pub(crate) fn world_size(&self) -> usize {
        self.comm.size()
    }

    pub(crate) fn is_main(&self) -> bool {
        self.comm.rank() == 0
    }

    /// The scheduler environment as `run_meta.json` records it.
    pub(crate) fn cluster_record(&self) -> Value {
        serde_json::to_value(RunCluster::new(&self.cluster, &Vars::from_process(), None))
            .unwrap_or_default()
    }
}

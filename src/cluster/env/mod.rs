//! Scheduler environments behind one small interface.
//!
//! Each scheduler is a [`SchedulerEnv`]: it says whether it applies ([`SchedulerEnv::detect`])
//! and turns the variables into a [`ClusterEnv`] ([`SchedulerEnv::resolve`]). [`detect`] asks
//! them in priority order:
//!
//! 1. torchrun-style variables (`RANK`, `WORLD_SIZE`, ...): a launcher inside any scheduler
//!    (e.g. `srun torchrun ...`) knows the real ranks;
//! 2. Slurm (`SLURM_JOB_ID`): an `srun` step is multi-rank; a batch script or a `salloc`
//!    shell (no `SLURM_STEP_ID`) is a single rank;
//! 3. LSF (`LSB_JOBID`);
//! 4. gflow (`GFLOW_ARRAY_TASK_ID`);
//! 5. plain local run.

mod common;
mod gflow;
mod local;
mod lsf;
mod slurm;
mod torchrun;

use serde::Serialize;

use super::error::EnvError;
use super::vars::Vars;
use super::visible_devices::{DeviceAssignment, VisibleDevices};

pub use common::{DEFAULT_PORT, PORT_BASE, Requeue, gpu_allocation, port_from_job_id};
pub use gflow::Gflow;
pub use local::Local;
pub use lsf::Lsf;
pub use slurm::{Slurm, parse_tasks_per_node};
pub use torchrun::Torchrun;

/// Which scheduler or launcher set the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerKind {
    /// Slurm (`srun` step, batch script or `salloc` shell).
    Slurm,
    /// torchrun-style `RANK`/`WORLD_SIZE` variables.
    Torchrun,
    /// IBM Spectrum LSF.
    Lsf,
    /// gflow, the single-node GPU queue.
    Gflow,
    /// No scheduler.
    Local,
}

impl std::fmt::Display for SchedulerKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SchedulerKind::Slurm => "slurm",
            SchedulerKind::Torchrun => "torchrun",
            SchedulerKind::Lsf => "lsf",
            SchedulerKind::Gflow => "gflow",
            SchedulerKind::Local => "local",
        })
    }
}

/// A scheduler variable that shows GPUs were allocated to the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AllocationVar {
    /// Variable name, e.g. `SLURM_JOB_GPUS`.
    pub var: String,
    /// Its value.
    pub value: String,
}

/// Everything this process needs to know about where it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClusterEnv {
    /// Scheduler or launcher that was detected.
    pub scheduler: SchedulerKind,
    /// How it was launched, e.g. "srun step", "batch script", "salloc shell (no srun step)".
    pub mode: String,
    /// Global rank.
    pub rank: u32,
    /// Number of ranks.
    pub world_size: u32,
    /// Rank on this node.
    pub local_rank: u32,
    /// Ranks on this node.
    pub local_world_size: u32,
    /// Index of this node.
    pub node_rank: u32,
    /// Number of nodes.
    pub num_nodes: u32,
    /// Rendezvous host (first host of the node list, or `MASTER_ADDR`).
    pub main_address: String,
    /// Rendezvous port, derived alike on every rank (from the job id) unless `MASTER_PORT` is set.
    pub main_port: u16,
    /// Hosts of the job or step, expanded.
    pub hosts: Vec<String>,
    /// Job id.
    pub job_id: Option<String>,
    /// Array job id (the id shared by all tasks of an array).
    pub array_job_id: Option<String>,
    /// Array task id.
    pub array_task_id: Option<u32>,
    /// How often the job was requeued or restarted.
    pub restart_count: Option<u32>,
    /// Partition or queue.
    pub partition: Option<String>,
    /// `CUDA_VISIBLE_DEVICES` as read.
    pub visible_devices: VisibleDevices,
    /// The GPU this rank should use (`None`: every GPU hidden, run on the CPU).
    pub device: Option<DeviceAssignment>,
    /// Scheduler variables showing GPUs were allocated (empty when none).
    pub gpu_allocation: Vec<AllocationVar>,
    /// Remarks worth printing (defaults taken, overrides applied).
    pub notes: Vec<String>,
}

impl ClusterEnv {
    /// Rank 0 writes files and logs.
    pub fn is_main_process(&self) -> bool {
        self.rank == 0
    }
}

/// One scheduler environment.
pub trait SchedulerEnv {
    /// Which scheduler this is.
    fn kind(&self) -> SchedulerKind;
    /// Whether the variables say this scheduler launched us.
    fn detect(&self, vars: &Vars) -> bool;
    /// Reads ranks, hosts, port, job ids and devices; errors name the variables at fault.
    fn resolve(&self, vars: &Vars) -> Result<ClusterEnv, EnvError>;
    /// The job's identity (ids, restarts, partition) when this is a scheduler that has jobs
    /// (`None`: a launcher or no scheduler).
    fn job_info(&self, _vars: &Vars) -> Option<Result<common::JobInfo, EnvError>> {
        None
    }
    /// `--requeue`: how this scheduler requeues job `job` from inside it (`None`: it does not).
    fn requeue(&self, _job: &str) -> Option<Requeue> {
        None
    }
}

/// All schedulers in detection order; [`Local`] comes last and always applies.
pub fn schedulers() -> [&'static dyn SchedulerEnv; 5] {
    [&Torchrun, &Slurm, &Lsf, &Gflow, &Local]
}

/// Detects the scheduler from `vars` and resolves it.
pub fn detect(vars: &Vars) -> Result<ClusterEnv, EnvError> {
    for s in schedulers() {
        if s.detect(vars) {
            return s.resolve(vars);
        }
    }
    Local.resolve(vars)
}

/// Job identity from the first scheduler with jobs that the variables name, in [`schedulers`]
/// order (Slurm, then LSF, then gflow), so a torchrun launch inside a Slurm job still records
/// the job.
pub(crate) fn job_info_from_any(vars: &Vars) -> Result<common::JobInfo, EnvError> {
    job_scheduler(vars).map_or(Ok(common::JobInfo::default()), |(_, info)| info)
}

/// The first scheduler, in [`schedulers`] order, with jobs that the variables name, and its job.
fn job_scheduler(
    vars: &Vars,
) -> Option<(&'static dyn SchedulerEnv, Result<common::JobInfo, EnvError>)> {
    schedulers()
        .into_iter()
        .filter(|s| s.detect(vars))
        .find_map(|s| s.job_info(vars).map(|info| (s, info)))
}

/// `--requeue`: how job `job` is requeued, by the first scheduler with jobs that the variables
/// name (the order of [`job_info_from_any`]); `None` when that one cannot, or there is none.
pub fn requeue_for(vars: &Vars, job: &str) -> Option<Requeue> {
    job_scheduler(vars)?.0.requeue(job)
}

#[cfg(test)]
mod launcher_tests;
#[cfg(test)]
mod tests;

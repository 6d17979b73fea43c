//! Every scheduler behind one trait, [`Scheduler`], one file each (`slurm.rs`, `lsf.rs`,
//! `gflow.rs`, `torchrun.rs`, `local.rs`), one enum naming them ([`SchedulerKind`], whose
//! [`SchedulerKind::get`] is the one registration line per scheduler). A scheduler answers for
//! both sides of a job:
//!
//! - **inside the job**: whether it launched us ([`Scheduler::detect`]), the ranks, hosts, port,
//!   job ids and devices ([`Scheduler::resolve`]), the job's identity ([`Scheduler::job_info`]),
//!   how it requeues a job ([`Scheduler::requeue`]) and which of its variables show allocated
//!   GPUs ([`Scheduler::allocation`]);
//! - **submitting a sweep**: its directives for the `[resources]` of a spec
//!   ([`Scheduler::directives`], `resources.rs`) and the scripts of a submission with the
//!   command that submits them ([`Scheduler::scripts`]; what the scripts share is `array.rs`,
//!   user data in them is quoted by `quote.rs`).
//!
//! `common.rs` holds what the schedulers share (rank checks, ports, job info) and calls none of
//! them. [`detect`] asks them in priority order ([`schedulers`]):
//!
//! 1. torchrun-style variables (`RANK`, `WORLD_SIZE`, ...): a launcher inside any scheduler
//!    (e.g. `srun torchrun ...`) knows the real ranks;
//! 2. Slurm (`SLURM_JOB_ID`): an `srun` step is multi-rank; a batch script or a `salloc`
//!    shell (no `SLURM_STEP_ID`) is a single rank;
//! 3. LSF (`LSB_JOBID`);
//! 4. gflow (`GFLOW_ARRAY_TASK_ID`);
//! 5. plain local run.

pub(crate) mod array;
mod common;
mod gflow;
mod local;
mod lsf;
pub(crate) mod quote;
pub mod resources;
mod slurm;
mod torchrun;

use serde::{Deserialize, Serialize};

use self::array::{Scripts, Submission};
use self::resources::{ResourceKey, Resources};
use super::error::EnvError;
use super::vars::Vars;
use super::visible_devices::{DeviceAssignment, VisibleDevices, VisibleForm};

#[cfg(test)]
pub(crate) use common::{DEFAULT_PORT, PORT_BASE, port_from_job_id};
pub(crate) use common::{JobInfo, Requeue};
pub(crate) use gflow::Gflow;
pub(crate) use local::Local;
pub(crate) use lsf::Lsf;
pub(crate) use slurm::Slurm;
#[cfg(test)]
pub(crate) use slurm::parse_tasks_per_node;
pub(crate) use torchrun::Torchrun;

/// Which scheduler or launcher set the environment, or which one a sweep is written for
/// (`sweep plan --scheduler`, `sweep.json`: every one but torchrun, a launcher without jobs).
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerKind {
    /// A Slurm array (`--array=…%N`), requeued from its checkpoint before the time limit.
    Slurm,
    /// torchrun-style `RANK`/`WORLD_SIZE` variables (a launcher: no sweep is written for it).
    #[value(skip)]
    #[serde(skip_deserializing)]
    Torchrun,
    /// An LSF array (`-J name[1-K]%N`), requeued on exit 75 (`-Q "75"`).
    Lsf,
    /// gflow submissions on one machine (`gbatch --param task=… --max-concurrent N`).
    Gflow,
    /// `sweep run` on this machine.
    Local,
}

impl SchedulerKind {
    /// The scheduler of this kind: one line each (a new scheduler: its file implementing
    /// [`Scheduler`], its variant, its line here, its place in [`schedulers`]).
    pub fn get(self) -> &'static dyn Scheduler {
        match self {
            SchedulerKind::Slurm => &Slurm,
            SchedulerKind::Torchrun => &Torchrun,
            SchedulerKind::Lsf => &Lsf,
            SchedulerKind::Gflow => &Gflow,
            SchedulerKind::Local => &Local,
        }
    }

    /// The keys set in `r` that this scheduler has no directive for (left out, with a warning).
    pub fn ignored(self, r: &Resources) -> Vec<&'static str> {
        ResourceKey::ALL
            .into_iter()
            .filter(|&k| k.is_optional() && r.value(k).is_some() && !self.get().has_directive(k))
            .map(ResourceKey::name)
            .collect()
    }
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

impl AllocationVar {
    /// `var` with its value in `vars` (empty when unset).
    pub fn of(vars: &Vars, var: &str) -> AllocationVar {
        AllocationVar {
            var: var.to_string(),
            value: vars.get(var).unwrap_or_default().to_string(),
        }
    }

    /// Those of `names` set in `vars`, in that order.
    pub fn set(vars: &Vars, names: &[&str]) -> Vec<AllocationVar> {
        names
            .iter()
            .filter(|v| vars.has(v))
            .map(|v| AllocationVar::of(vars, v))
            .collect()
    }
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

/// One scheduler: the job's side (detection, ranks, identity, requeue, GPU variables) and the
/// sweep's (directives, scripts). A launcher without jobs (torchrun) keeps the defaults.
pub trait Scheduler: Sync {
    /// Which scheduler this is.
    fn kind(&self) -> SchedulerKind;
    /// Whether the variables say this scheduler launched us.
    fn detect(&self, vars: &Vars) -> bool;
    /// Reads ranks, hosts, port, job ids and devices; errors name the variables at fault.
    fn resolve(&self, vars: &Vars) -> Result<ClusterEnv, EnvError>;
    /// The job's identity (ids, restarts, partition) when this is a scheduler that has jobs
    /// (`None`: a launcher or no scheduler).
    fn job_info(&self, _vars: &Vars) -> Option<Result<JobInfo, EnvError>> {
        None
    }
    /// `--requeue`: how this scheduler requeues job `job` from inside it (`None`: it does not).
    fn requeue(&self, _job: &str) -> Option<Requeue> {
        None
    }
    /// Its variables set in `vars` that show GPUs were allocated to the job or step (a
    /// scheduler announcing GPUs through `CUDA_VISIBLE_DEVICES` alone has none).
    fn allocation(&self, _vars: &Vars) -> Vec<AllocationVar> {
        Vec::new()
    }
    /// Whether it has a directive for `[resources]` key `key` (asked of the keys
    /// [`ResourceKey::is_optional`]).
    fn has_directive(&self, _key: ResourceKey) -> bool {
        false
    }
    /// The directive lines of `r` (without the warning-signal lines of the script).
    fn directives(&self, _r: &Resources) -> Vec<String> {
        Vec::new()
    }
    /// The scripts of `s` and the command that submits them (`None`: no sweep is written for
    /// this one; `sweep plan` and `sweep.json` refuse it before).
    fn scripts(&self, _s: &Submission<'_>) -> Option<Scripts> {
        None
    }
}

/// All schedulers in detection order; [`Local`] comes last and always applies.
pub(crate) fn schedulers() -> [&'static dyn Scheduler; 5] {
    [
        SchedulerKind::Torchrun,
        SchedulerKind::Slurm,
        SchedulerKind::Lsf,
        SchedulerKind::Gflow,
        SchedulerKind::Local,
    ]
    .map(SchedulerKind::get)
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
pub(crate) fn job_info_from_any(vars: &Vars) -> Result<JobInfo, EnvError> {
    job_scheduler(vars).map_or(Ok(JobInfo::default()), |(_, info)| info)
}

/// The first scheduler, in [`schedulers`] order, with jobs that the variables name, and its job.
fn job_scheduler(vars: &Vars) -> Option<(&'static dyn Scheduler, Result<JobInfo, EnvError>)> {
    schedulers()
        .into_iter()
        .filter(|s| s.detect(vars))
        .find_map(|s| s.job_info(vars).map(|info| (s, info)))
}

/// Scheduler variables that show GPUs were allocated to this job or step: each scheduler's
/// own ([`Scheduler::allocation`]), then `CUDA_VISIBLE_DEVICES` inside a scheduler's job (LSF
/// and gflow announce their GPUs through it alone).
pub(crate) fn gpu_allocation(vars: &Vars) -> Vec<AllocationVar> {
    let mut out: Vec<AllocationVar> = schedulers()
        .into_iter()
        .flat_map(|s| s.allocation(vars))
        .collect();
    let visible = VisibleDevices::from_vars(vars);
    if job_scheduler(vars).is_some()
        && !matches!(visible.form, VisibleForm::Unset | VisibleForm::Hidden)
    {
        out.extend(AllocationVar::set(vars, &["CUDA_VISIBLE_DEVICES"]));
    }
    out
}

/// `--requeue`: how job `job` is requeued, by the first scheduler with jobs that the variables
/// name (the order of [`job_info_from_any`]); `None` when that one cannot, or there is none.
pub(crate) fn requeue_for(vars: &Vars, job: &str) -> Option<Requeue> {
    job_scheduler(vars)?.0.requeue(job)
}

#[cfg(test)]
mod launcher_tests;
#[cfg(test)]
mod tests;

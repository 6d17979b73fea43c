//! Pieces the schedulers share: rank checks, ports, job info, the assembled environment. It
//! calls none of them.

use super::{ClusterEnv, SchedulerKind, gpu_allocation};
use crate::cluster::error::EnvError;
use crate::cluster::vars::Vars;
use crate::cluster::visible_devices::{VisibleDevices, assign_device};

/// Base of the port derived from a job id: `PORT_BASE + last four digits of the job id`, so
/// every rank of a job agrees without talking, and jobs sharing a node rarely collide.
pub(crate) const PORT_BASE: u16 = 15_000;
/// Port when there is no job id (torch's default rendezvous port).
pub(crate) const DEFAULT_PORT: u16 = 29_500;

/// `PORT_BASE` plus the last four digits of the job id (a hash of it when it has no digits).
pub(crate) fn port_from_job_id(job_id: &str) -> u16 {
    let digits: String = job_id.chars().filter(char::is_ascii_digit).collect();
    let tail = &digits[digits.len().saturating_sub(4)..];
    let n: u16 = match tail.parse::<u16>() {
        Ok(n) => n,
        Err(_) => {
            // FNV-1a, stable across builds and platforms.
            let mut h: u32 = 0x811c_9dc5;
            for b in job_id.bytes() {
                h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
            }
            u16::try_from(h % 10_000).unwrap_or(0)
        }
    };
    PORT_BASE + n
}

/// Ranks as read from a scheduler, checked for consistency before use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ranks {
    pub rank: u32,
    pub world_size: u32,
    pub local_rank: u32,
    pub local_world_size: u32,
    pub node_rank: u32,
    pub num_nodes: u32,
}

impl Ranks {
    /// The single-process world.
    pub(super) fn single() -> Self {
        Self {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            local_world_size: 1,
            node_rank: 0,
            num_nodes: 1,
        }
    }

    /// Rejects contradictions; `names` are the variables each field came from:
    /// `[rank, world_size, local_rank, local_world_size, node_rank, num_nodes]`.
    pub(super) fn check(&self, names: [&str; 6]) -> Result<(), EnvError> {
        let [rank, world, local, local_world, node, nodes] = names;
        let contra = |msg: String| Err(EnvError::Contradiction(msg));
        if self.world_size == 0 {
            return contra(format!("{world}=0: the world needs at least one rank"));
        }
        if self.local_world_size == 0 {
            return contra(format!("{local_world}=0: a node needs at least one rank"));
        }
        if self.num_nodes == 0 {
            return contra(format!("{nodes}=0: the job needs at least one node"));
        }
        if self.rank >= self.world_size {
            return contra(format!(
                "{rank}={} is not below {world}={}",
                self.rank, self.world_size
            ));
        }
        if self.local_rank >= self.local_world_size {
            return contra(format!(
                "{local}={} is not below {local_world}={}",
                self.local_rank, self.local_world_size
            ));
        }
        if self.local_world_size > self.world_size {
            return contra(format!(
                "{local_world}={} exceeds {world}={}",
                self.local_world_size, self.world_size
            ));
        }
        if self.node_rank >= self.num_nodes {
            return contra(format!(
                "{node}={} is not below {nodes}={}",
                self.node_rank, self.num_nodes
            ));
        }
        if self.local_rank > self.rank {
            return contra(format!(
                "{local}={} exceeds {rank}={}",
                self.local_rank, self.rank
            ));
        }
        Ok(())
    }
}

/// Job identity common to all schedulers.
#[derive(Debug, Clone, Default)]
pub struct JobInfo {
    pub job_id: Option<String>,
    pub array_job_id: Option<String>,
    pub array_task_id: Option<u32>,
    pub restart_count: Option<u32>,
    pub partition: Option<String>,
}

/// How a scheduler requeues one of its jobs from inside it (`--requeue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requeue {
    /// The scheduler's name in messages (`Slurm`).
    pub scheduler: &'static str,
    /// The job (`<array job>_<task>` for an array task).
    pub job: String,
    /// The command (`scontrol`) and its arguments (`requeue <job>`).
    pub program: &'static str,
    pub args: Vec<String>,
    /// The batch script's line that requeues the job when the command cannot run here (inside
    /// a container): `scontrol requeue $SLURM_JOB_ID`.
    pub in_script: &'static str,
}

/// `MASTER_PORT` if set and valid, else `derived`.
pub(crate) fn port_override(
    vars: &Vars,
    derived: u16,
    notes: &mut Vec<String>,
) -> Result<u16, EnvError> {
    match vars.parse::<u16>("MASTER_PORT", "a port number (0-65535)")? {
        Some(p) => {
            notes.push(format!(
                "MASTER_PORT={p} overrides the derived port {derived}"
            ));
            Ok(p)
        }
        None => Ok(derived),
    }
}

/// `MASTER_ADDR` if set, else `derived`.
pub(crate) fn address_override(vars: &Vars, derived: String, notes: &mut Vec<String>) -> String {
    match vars.get("MASTER_ADDR") {
        Some(a) if a != derived => {
            notes.push(format!(
                "MASTER_ADDR={a} overrides the derived address {derived}"
            ));
            a.to_string()
        }
        _ => derived,
    }
}

/// Assembles a [`ClusterEnv`] from checked parts, adding devices and GPU allocation.
#[allow(clippy::too_many_arguments)]
pub(crate) fn build(
    vars: &Vars,
    scheduler: SchedulerKind,
    mode: &str,
    ranks: Ranks,
    hosts: Vec<String>,
    main_address: String,
    main_port: u16,
    job: JobInfo,
    mut notes: Vec<String>,
) -> ClusterEnv {
    let visible = VisibleDevices::from_vars(vars);
    let device = assign_device(&visible, ranks.local_rank, ranks.local_world_size);
    if let Some(note) = device.as_ref().and_then(|d| d.note.clone()) {
        notes.push(note);
    }
    if !visible.invalid.is_empty() {
        notes.push(format!("CUDA_VISIBLE_DEVICES: {}", visible.describe()));
    }
    ClusterEnv {
        scheduler,
        mode: mode.to_string(),
        rank: ranks.rank,
        world_size: ranks.world_size,
        local_rank: ranks.local_rank,
        local_world_size: ranks.local_world_size,
        node_rank: ranks.node_rank,
        num_nodes: ranks.num_nodes,
        main_address,
        main_port,
        hosts,
        job_id: job.job_id,
        array_job_id: job.array_job_id,
        array_task_id: job.array_task_id,
        restart_count: job.restart_count,
        partition: job.partition,
        gpu_allocation: gpu_allocation(vars),
        visible_devices: visible,
        device,
        notes,
    }
}

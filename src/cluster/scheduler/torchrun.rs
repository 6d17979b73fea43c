//! torchrun-style variables: `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`,
//! `GROUP_RANK` (node rank), `MASTER_ADDR`, `MASTER_PORT`, `TORCHELASTIC_RESTART_COUNT`.
//!
//! Set by torchrun or by hand; they win over the scheduler underneath (e.g. `srun torchrun`),
//! whose job ids are still recorded.

use super::common::{DEFAULT_PORT, Ranks, build};
use super::{ClusterEnv, Scheduler, SchedulerKind};
use crate::cluster::error::EnvError;
use crate::cluster::vars::Vars;

const NAME: &str = "torchrun";

/// The torchrun-style environment.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Torchrun;

impl Scheduler for Torchrun {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Torchrun
    }

    fn detect(&self, vars: &Vars) -> bool {
        vars.has("RANK") || vars.has("WORLD_SIZE")
    }

    fn resolve(&self, vars: &Vars) -> Result<ClusterEnv, EnvError> {
        let mut notes = Vec::new();
        let rank = vars.require_u32("RANK", NAME, "WORLD_SIZE is set, so RANK must be too")?;
        let world_size =
            vars.require_u32("WORLD_SIZE", NAME, "RANK is set, so WORLD_SIZE must be too")?;
        if rank >= world_size {
            return Err(EnvError::Contradiction(format!(
                "RANK={rank} is not below WORLD_SIZE={world_size}"
            )));
        }
        let multi = world_size > 1;
        let local_rank = match vars.parse_u32("LOCAL_RANK")? {
            Some(n) => n,
            None if !multi => 0,
            None => vars.require_u32("LOCAL_RANK", NAME, "needed to pick this rank's GPU")?,
        };
        let (lw_var, local_world_size) = match vars.parse_u32("LOCAL_WORLD_SIZE")? {
            Some(n) => ("LOCAL_WORLD_SIZE", n),
            None => {
                if multi {
                    notes.push("LOCAL_WORLD_SIZE unset: assuming all ranks on one node".into());
                }
                ("WORLD_SIZE", world_size)
            }
        };
        let num_nodes = if local_world_size == 0 {
            0
        } else {
            world_size.div_ceil(local_world_size)
        };
        let (node_var, node_rank) = match vars.first_of(&["GROUP_RANK", "NODE_RANK"]) {
            Some((var, _)) => (var, vars.parse_u32(var)?.unwrap_or(0)),
            None => (
                "RANK/LOCAL_WORLD_SIZE",
                rank.checked_div(local_world_size).unwrap_or(0),
            ),
        };
        let ranks = Ranks {
            rank,
            world_size,
            local_rank,
            local_world_size,
            node_rank,
            num_nodes,
        };
        ranks.check([
            "RANK",
            "WORLD_SIZE",
            "LOCAL_RANK",
            lw_var,
            node_var,
            "WORLD_SIZE/LOCAL_WORLD_SIZE",
        ])?;

        let main_address = match vars.get("MASTER_ADDR") {
            Some(a) => a.to_string(),
            None if multi => {
                return Err(EnvError::Missing {
                    var: "MASTER_ADDR".into(),
                    scheduler: NAME,
                    why: "every rank must know the rendezvous host".into(),
                });
            }
            None => "127.0.0.1".into(),
        };
        let main_port = match vars.parse::<u16>("MASTER_PORT", "a port number (0-65535)")? {
            Some(p) => p,
            None if multi => {
                return Err(EnvError::Missing {
                    var: "MASTER_PORT".into(),
                    scheduler: NAME,
                    why: "every rank must know the rendezvous port".into(),
                });
            }
            None => DEFAULT_PORT,
        };
        let mut job = super::job_info_from_any(vars)?;
        if let Some(n) = vars.parse_u32("TORCHELASTIC_RESTART_COUNT")? {
            job.restart_count = Some(n);
        }
        if job.job_id.is_none() {
            job.job_id = vars.get("TORCHELASTIC_RUN_ID").map(str::to_string);
        }
        let hosts = vec![main_address.clone()];
        Ok(build(
            vars,
            SchedulerKind::Torchrun,
            "torchrun-style variables",
            ranks,
            hosts,
            main_address,
            main_port,
            job,
            notes,
        ))
    }
}

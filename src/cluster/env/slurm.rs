//! Slurm: an `srun` step (multi-rank), a batch script or a `salloc` shell (single rank).
//!
//! A batch script sees `SLURM_PROCID=0` and `SLURM_NTASKS=N` but is one process; a `salloc`
//! shell sees `SLURM_NTASKS` but no `SLURM_PROCID`. Only `SLURM_STEP_ID` (set inside
//! `srun`) marks a multi-rank launch.

use super::common::{
    JobInfo, Ranks, Requeue, address_override, build, port_from_job_id, port_override,
};
use super::{ClusterEnv, SchedulerEnv, SchedulerKind};
use crate::cluster::error::EnvError;
use crate::cluster::hostlist;
use crate::cluster::vars::Vars;

const NAME: &str = "slurm";

/// The Slurm environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Slurm;

impl SchedulerEnv for Slurm {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Slurm
    }

    fn detect(&self, vars: &Vars) -> bool {
        vars.has("SLURM_JOB_ID") || vars.has("SLURM_JOBID")
    }

    fn job_info(&self, vars: &Vars) -> Option<Result<JobInfo, EnvError>> {
        Some(job_info(vars))
    }

    fn requeue(&self, job: &str) -> Option<Requeue> {
        Some(Requeue {
            scheduler: "Slurm",
            job: job.to_string(),
            program: "scontrol",
            args: vec!["requeue".into(), job.to_string()],
            in_script: "scontrol requeue $SLURM_JOB_ID",
        })
    }

    fn resolve(&self, vars: &Vars) -> Result<ClusterEnv, EnvError> {
        let job = job_info(vars)?;
        let job_id = job.job_id.clone().unwrap_or_default();
        let mut notes = Vec::new();

        let step = vars.has("SLURM_STEP_ID") || vars.has("SLURM_STEPID");
        let (nodelist_var, nodelist) = if step {
            vars.first_of(&[
                "SLURM_STEP_NODELIST",
                "SLURM_JOB_NODELIST",
                "SLURM_NODELIST",
            ])
        } else {
            vars.first_of(&["SLURM_JOB_NODELIST", "SLURM_NODELIST"])
        }
        .unzip();
        let hosts = match (nodelist_var, nodelist) {
            (Some(var), Some(list)) => {
                hostlist::expand(list).map_err(|source| EnvError::Hostlist {
                    var: var.to_string(),
                    source,
                })?
            }
            _ => Vec::new(),
        };

        let (mode, ranks, names) = if step {
            step_ranks(vars, hosts.len())?
        } else {
            let mode = if vars.get("ENVIRONMENT") == Some("BATCH") || vars.has("SLURM_PROCID") {
                "batch script"
            } else {
                "salloc shell (no srun step)"
            };
            if let Some(n) = vars.parse_u32("SLURM_NTASKS")?.filter(|&n| n > 1) {
                notes.push(format!(
                    "{mode} with SLURM_NTASKS={n} is one process: start the ranks with `srun trainer ...`"
                ));
            }
            (mode, Ranks::single(), ["", "", "", "", "", ""])
        };
        if step {
            ranks.check(names)?;
            if !hosts.is_empty() && u32::try_from(hosts.len()).ok() != Some(ranks.num_nodes) {
                return Err(EnvError::Contradiction(format!(
                    "{} lists {} hosts but {}={}",
                    nodelist_var.unwrap_or("SLURM_JOB_NODELIST"),
                    hosts.len(),
                    names[5],
                    ranks.num_nodes
                )));
            }
        }

        let first = match hosts.first() {
            Some(h) => h.clone(),
            None if ranks.world_size > 1 => {
                let var = "SLURM_STEP_NODELIST";
                let why = "the first host is the rendezvous address of a multi-rank step";
                return Err(match vars.get_raw(var) {
                    Some(v) => EnvError::Invalid {
                        var: var.into(),
                        value: v.into(),
                        expected: "a host list (it is empty)",
                    },
                    None => EnvError::Missing {
                        var: var.into(),
                        scheduler: NAME,
                        why: why.into(),
                    },
                });
            }
            None => {
                notes.push("no SLURM_JOB_NODELIST: rendezvous on 127.0.0.1".into());
                "127.0.0.1".into()
            }
        };
        let main_address = address_override(vars, first, &mut notes);
        let main_port = port_override(vars, port_from_job_id(&job_id), &mut notes)?;
        Ok(build(
            vars,
            SchedulerKind::Slurm,
            mode,
            ranks,
            hosts,
            main_address,
            main_port,
            job,
            notes,
        ))
    }
}

/// Ranks of an `srun` step, with the variable each came from.
fn step_ranks(
    vars: &Vars,
    n_hosts: usize,
) -> Result<(&'static str, Ranks, [&'static str; 6]), EnvError> {
    let why = "srun sets it in every step";
    let rank = vars.require_u32("SLURM_PROCID", NAME, why)?;
    let (world_var, world_size) = match vars.parse_u32("SLURM_STEP_NUM_TASKS")? {
        Some(n) => ("SLURM_STEP_NUM_TASKS", n),
        None => ("SLURM_NTASKS", vars.require_u32("SLURM_NTASKS", NAME, why)?),
    };
    let local_rank = vars.require_u32("SLURM_LOCALID", NAME, why)?;
    let (nodes_var, num_nodes) = match vars.parse_u32("SLURM_STEP_NUM_NODES")? {
        Some(n) => ("SLURM_STEP_NUM_NODES", n),
        None => match vars.parse_u32("SLURM_NNODES")? {
            Some(n) => ("SLURM_NNODES", n),
            None => match vars.parse_u32("SLURM_JOB_NUM_NODES")? {
                Some(n) => ("SLURM_JOB_NUM_NODES", n),
                None => (
                    "SLURM_STEP_NODELIST",
                    u32::try_from(n_hosts.max(1)).unwrap_or(u32::MAX),
                ),
            },
        },
    };
    let node_rank = match vars.parse_u32("SLURM_NODEID")? {
        Some(n) => n,
        None if num_nodes == 1 => 0,
        None => vars.require_u32("SLURM_NODEID", NAME, "needed to find this node's rank")?,
    };
    let (lw_var, local_world_size) = local_world(vars, node_rank, world_size, num_nodes)?;
    let ranks = Ranks {
        rank,
        world_size,
        local_rank,
        local_world_size,
        node_rank,
        num_nodes,
    };
    Ok((
        "srun step",
        ranks,
        [
            "SLURM_PROCID",
            world_var,
            "SLURM_LOCALID",
            lw_var,
            "SLURM_NODEID",
            nodes_var,
        ],
    ))
}

/// Ranks on this node: from `SLURM_STEP_TASKS_PER_NODE`/`SLURM_TASKS_PER_NODE` (`2(x3),1`),
/// else `SLURM_NTASKS_PER_NODE`, else an even split of the world.
fn local_world(
    vars: &Vars,
    node_rank: u32,
    world: u32,
    nodes: u32,
) -> Result<(&'static str, u32), EnvError> {
    for var in ["SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"] {
        if let Some(v) = vars.get(var) {
            let per_node = parse_tasks_per_node(v).ok_or_else(|| EnvError::Invalid {
                var: var.to_string(),
                value: v.to_string(),
                expected: "a Slurm task count list such as `2(x3),1`",
            })?;
            let idx = usize::try_from(node_rank).unwrap_or(usize::MAX);
            return per_node.get(idx).map(|&n| (var, n)).ok_or_else(|| {
                EnvError::Contradiction(format!(
                    "{var}={v} covers {} nodes but SLURM_NODEID={node_rank}",
                    per_node.len()
                ))
            });
        }
    }
    if let Some(n) = vars.parse_u32("SLURM_NTASKS_PER_NODE")? {
        return Ok(("SLURM_NTASKS_PER_NODE", n));
    }
    if nodes > 0 && world.is_multiple_of(nodes) {
        return Ok(("SLURM_NTASKS/SLURM_NNODES", world / nodes));
    }
    Err(EnvError::Missing {
        var: "SLURM_STEP_TASKS_PER_NODE".into(),
        scheduler: NAME,
        why: format!("{world} tasks do not split evenly over {nodes} nodes"),
    })
}

/// Parses Slurm's compressed task counts: `2(x3),1` → `[2, 2, 2, 1]`. `None` when malformed.
pub fn parse_tasks_per_node(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        let (count, times) = match part.split_once('(') {
            Some((c, rest)) => {
                let reps = rest.strip_suffix(')')?.strip_prefix('x')?;
                (c.parse::<u32>().ok()?, reps.parse::<usize>().ok()?)
            }
            None => (part.parse::<u32>().ok()?, 1),
        };
        if times > 1 << 20 || out.len() + times > 1 << 20 {
            return None;
        }
        out.extend(std::iter::repeat_n(count, times));
    }
    (!out.is_empty()).then_some(out)
}

/// Job id, array ids, restart count and partition from Slurm variables.
fn job_info(vars: &Vars) -> Result<JobInfo, EnvError> {
    let job_id = match (vars.get("SLURM_JOB_ID"), vars.get("SLURM_JOBID")) {
        (Some(a), Some(b)) if a != b => {
            return Err(EnvError::Contradiction(format!(
                "SLURM_JOB_ID={a} and SLURM_JOBID={b} disagree"
            )));
        }
        (a, b) => a.or(b).map(str::to_string),
    };
    let array_task_id = vars.parse_u32("SLURM_ARRAY_TASK_ID")?;
    let array_job_id = vars.get("SLURM_ARRAY_JOB_ID").map(str::to_string);
    if array_task_id.is_some() != array_job_id.is_some() {
        let (set, unset) = if array_task_id.is_some() {
            ("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_JOB_ID")
        } else {
            ("SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID")
        };
        return Err(EnvError::Contradiction(format!(
            "{set} is set but {unset} is not: an array task has both"
        )));
    }
    Ok(JobInfo {
        job_id,
        array_job_id,
        array_task_id,
        restart_count: vars.parse_u32("SLURM_RESTART_COUNT")?,
        partition: vars.get("SLURM_JOB_PARTITION").map(str::to_string),
    })
}

//! The ranks of an `srun` step from Slurm's variables: rank, world, local rank, ranks on this
//! node (`SLURM_STEP_TASKS_PER_NODE`'s compressed counts such as `2(x3),1`), node rank and
//! nodes, each with the variable it came from.

use super::super::common::Ranks;
use crate::cluster::error::EnvError;
use crate::cluster::vars::Vars;

/// The scheduler's name in errors.
pub(super) const NAME: &str = "slurm";

/// Ranks of an `srun` step, with the variable each came from.
pub(super) fn step_ranks(
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
pub(crate) fn parse_tasks_per_node(s: &str) -> Option<Vec<u32>> {
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

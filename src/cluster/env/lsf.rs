//! IBM Spectrum LSF: `LSB_JOBID`, `LSB_JOBINDEX` (0 outside arrays), `LSB_QUEUE`,
//! `LSB_MCPU_HOSTS` (`host1 4 host2 4`) or `LSB_HOSTS` (one name per slot).
//!
//! A `bsub` job script is one process. Ranks started by `jsrun` carry `JSM_NAMESPACE_RANK`,
//! `JSM_NAMESPACE_SIZE`, `JSM_NAMESPACE_LOCAL_RANK` and `JSM_NAMESPACE_LOCAL_SIZE`.

use super::common::{JobInfo, Ranks, address_override, build, port_from_job_id, port_override};
use super::{ClusterEnv, SchedulerEnv, SchedulerKind};
use crate::cluster::error::EnvError;
use crate::cluster::vars::Vars;

const NAME: &str = "lsf";

/// The LSF environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Lsf;

impl SchedulerEnv for Lsf {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Lsf
    }

    fn detect(&self, vars: &Vars) -> bool {
        vars.has("LSB_JOBID")
    }

    fn job_info(&self, vars: &Vars) -> Option<Result<JobInfo, EnvError>> {
        Some(job_info(vars))
    }

    fn resolve(&self, vars: &Vars) -> Result<ClusterEnv, EnvError> {
        let job = job_info(vars)?;
        let mut notes = Vec::new();
        let hosts = hosts(vars)?;
        let (mode, ranks) = if vars.has("JSM_NAMESPACE_SIZE") || vars.has("JSM_NAMESPACE_RANK") {
            let why = "jsrun sets it for every rank";
            let rank = vars.require_u32("JSM_NAMESPACE_RANK", NAME, why)?;
            let world_size = vars.require_u32("JSM_NAMESPACE_SIZE", NAME, why)?;
            let local_rank = vars.require_u32("JSM_NAMESPACE_LOCAL_RANK", NAME, why)?;
            let local_world_size = match vars.parse_u32("JSM_NAMESPACE_LOCAL_SIZE")? {
                Some(n) => n,
                None => vars.require_u32("JSM_NAMESPACE_LOCAL_SIZE", NAME, why)?,
            };
            let num_nodes = world_size.div_ceil(local_world_size.max(1));
            let ranks = Ranks {
                rank,
                world_size,
                local_rank,
                local_world_size,
                node_rank: rank / local_world_size.max(1),
                num_nodes,
            };
            ranks.check([
                "JSM_NAMESPACE_RANK",
                "JSM_NAMESPACE_SIZE",
                "JSM_NAMESPACE_LOCAL_RANK",
                "JSM_NAMESPACE_LOCAL_SIZE",
                "JSM_NAMESPACE_RANK/JSM_NAMESPACE_LOCAL_SIZE",
                "JSM_NAMESPACE_SIZE/JSM_NAMESPACE_LOCAL_SIZE",
            ])?;
            ("jsrun rank", ranks)
        } else {
            ("bsub job", Ranks::single())
        };
        let first = match hosts.first() {
            Some(h) => h.clone(),
            None if ranks.world_size > 1 => {
                return Err(EnvError::Missing {
                    var: "LSB_MCPU_HOSTS".into(),
                    scheduler: NAME,
                    why: "the first host is the rendezvous address".into(),
                });
            }
            None => "127.0.0.1".into(),
        };
        let main_address = address_override(vars, first, &mut notes);
        let derived = port_from_job_id(job.job_id.as_deref().unwrap_or(""));
        let main_port = port_override(vars, derived, &mut notes)?;
        Ok(build(
            vars,
            SchedulerKind::Lsf,
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

/// Distinct hosts in order, from `LSB_MCPU_HOSTS` (`h1 4 h2 4`) or else `LSB_HOSTS`.
fn hosts(vars: &Vars) -> Result<Vec<String>, EnvError> {
    let mut hosts: Vec<String> = Vec::new();
    if let Some(v) = vars.get("LSB_MCPU_HOSTS") {
        let tokens: Vec<&str> = v.split_whitespace().collect();
        let bad = || EnvError::Invalid {
            var: "LSB_MCPU_HOSTS".into(),
            value: v.to_string(),
            expected: "pairs of host name and slot count, `host1 4 host2 4`",
        };
        if !tokens.len().is_multiple_of(2) {
            return Err(bad());
        }
        for pair in tokens.chunks(2) {
            if let [host, slots] = pair {
                slots.parse::<u32>().map_err(|_| bad())?;
                if !hosts.iter().any(|h| h == host) {
                    hosts.push((*host).to_string());
                }
            }
        }
    } else if let Some(v) = vars.get("LSB_HOSTS") {
        for host in v.split_whitespace() {
            if !hosts.iter().any(|h| h == host) {
                hosts.push(host.to_string());
            }
        }
    }
    Ok(hosts)
}

/// Job id, array index and queue from LSF variables (`LSB_JOBINDEX=0` means no array).
fn job_info(vars: &Vars) -> Result<JobInfo, EnvError> {
    let job_id = vars.get("LSB_JOBID").map(str::to_string);
    let index = vars.parse_u32("LSB_JOBINDEX")?.filter(|&i| i > 0);
    Ok(JobInfo {
        array_job_id: index.and(job_id.clone()),
        array_task_id: index,
        job_id,
        restart_count: None,
        partition: vars.get("LSB_QUEUE").map(str::to_string),
    })
}

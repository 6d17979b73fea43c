//! gflow, the single-node GPU queue: it sets `CUDA_VISIBLE_DEVICES` for the job's GPUs and
//! `GFLOW_ARRAY_TASK_ID` (0 when the job is not part of an array). A gflow job is one process.

use super::common::{DEFAULT_PORT, JobInfo, Ranks, build, port_from_job_id, port_override};
use super::{ClusterEnv, SchedulerEnv, SchedulerKind};
use crate::cluster::error::EnvError;
use crate::cluster::vars::Vars;

/// The gflow environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gflow;

impl SchedulerEnv for Gflow {
    fn kind(&self) -> SchedulerKind {
        SchedulerKind::Gflow
    }

    fn detect(&self, vars: &Vars) -> bool {
        vars.has("GFLOW_ARRAY_TASK_ID")
    }

    fn job_info(&self, vars: &Vars) -> Option<Result<JobInfo, EnvError>> {
        Some(job_info(vars))
    }

    fn resolve(&self, vars: &Vars) -> Result<ClusterEnv, EnvError> {
        let job = job_info(vars)?;
        let mut notes = Vec::new();
        // No shared job id: spread array tasks over ports so parallel tasks do not collide.
        let derived = match &job.job_id {
            Some(id) => port_from_job_id(id),
            None => {
                DEFAULT_PORT + u16::try_from(job.array_task_id.unwrap_or(0) % 1000).unwrap_or(0)
            }
        };
        let main_port = port_override(vars, derived, &mut notes)?;
        Ok(build(
            vars,
            SchedulerKind::Gflow,
            "gflow job",
            Ranks::single(),
            vec!["127.0.0.1".into()],
            "127.0.0.1".into(),
            main_port,
            job,
            notes,
        ))
    }
}

/// Array task (0 = none) and, where gflow provides it, the job id (`GFLOW_JOB_ID`).
fn job_info(vars: &Vars) -> Result<JobInfo, EnvError> {
    let task = vars.parse_u32("GFLOW_ARRAY_TASK_ID")?.filter(|&t| t > 0);
    let job_id = vars.get("GFLOW_JOB_ID").map(str::to_string);
    Ok(JobInfo {
        array_job_id: task.and(job_id.clone()),
        array_task_id: task,
        job_id,
        restart_count: None,
        partition: None,
    })
}

//! gflow, the single-node GPU queue: it sets `CUDA_VISIBLE_DEVICES` for the job's GPUs and
//! `GFLOW_ARRAY_TASK_ID` (0 when the job is not part of an array). A gflow job is one process.
//!
//! A sweep on gflow (`gflowd`, `gbatch`): `task.gflow INDEX` runs one task, and
//! `submit.gflow.sh` submits them with `gbatch --param task=… --max-concurrent N` (gflow's arrays
//! take only one range). gflow has no requeue: a task interrupted at its time limit checkpoints
//! and fails, and `--max-retries` starts it again, resuming the checkpoint. In a two-stage sweep
//! each phase-2 task is its own submission depending on its phase-1 task's job.

use std::path::Path;

use super::array::{Scripts, Submission, choose_trainer, job_name, ranges_list, run_task, stem};

use super::common::{DEFAULT_PORT, JobInfo, Ranks, build, port_from_job_id, port_override};
use super::quote::{comment, sh, sh_path};
use super::resources::{ResourceKey, Resources, format_time};
use super::{ClusterEnv, Scheduler, SchedulerKind};
use crate::cluster::error::EnvError;
use crate::cluster::vars::Vars;

/// How often gflow starts a failed or timed-out task again (each start resumes its checkpoint).
const RETRIES: usize = 3;

/// gflow: its environment, and its submissions (`# GFLOW` lines in the task script: GPUs, time,
/// memory, project; one GPU when none is asked for, as before resources existed, `--gpus 0` on
/// the submit command line wins; of the optional keys only `extra`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Gflow;

impl Scheduler for Gflow {
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

    fn has_directive(&self, key: ResourceKey) -> bool {
        key == ResourceKey::Extra
    }

    fn directives(&self, r: &Resources) -> Vec<String> {
        let mut out = vec![format!("# GFLOW --gpus {}", r.gpus.unwrap_or(1))];
        if let Some(t) = r.time_secs {
            out.push(format!("# GFLOW --time {}", format_time(t)));
        }
        if let Some(m) = r.mem_mb {
            out.push(format!("# GFLOW --memory {m}M"));
        }
        if let Some(a) = &r.account {
            out.push(format!("# GFLOW --project {a}"));
        }
        for e in &r.extra {
            out.push(format!("# GFLOW {e}"));
        }
        out
    }

    fn scripts(&self, s: &Submission<'_>) -> Option<Scripts> {
        let task = s.dir.join("task.gflow");
        let sh = s
            .dir
            .join(format!("{}.gflow.sh", stem(s.which, &s.arrays[0])));
        let files = vec![
            (task.clone(), task_script(s)),
            (sh.clone(), submit_script(s, &task)),
        ];
        Some((files, vec!["bash".into(), sh.display().to_string()]))
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

/// `task.gflow`: runs the task given as its argument.
pub(super) fn task_script(s: &Submission<'_>) -> String {
    format!(
        r#"#!/bin/bash
# trainer sweep: one task of `trainer {command}` from {spec}: `task.gflow INDEX`, submitted by
# submit.gflow.sh. gflow interrupts a job at its time limit (INT or TERM): forwarded, the trainer
# checkpoints, and gbatch --max-retries starts the task again from its checkpoint.
# Resources: the spec's [resources] and `sweep plan`'s flags, one GPU by default (a CPU machine:
# `bash submit.gflow.sh --gpus 0`, the command line wins).
{resources}

set -uo pipefail
{choose}TASK="${{1:?usage: task.gflow INDEX}}"
echo "=== $(date '+%F %T') task $TASK on $(hostname), GPUs ${{CUDA_VISIBLE_DEVICES:-none}}"
trap 'forward INT' INT
{run}echo "=== $(date '+%T') task $TASK exit code $rc"
exit "$rc"
"#,
        resources = Gflow.directives(s.resources).join("\n"),
        command = s.command,
        spec = comment(&s.spec.display().to_string()),
        choose = choose_trainer(s.resources),
        run = run_task(s.dir, "USR1", s.resources),
    )
}

/// `submit.gflow.sh`: every array as gbatch submissions; options given to it go to every gbatch.
pub(super) fn submit_script(s: &Submission<'_>, task: &Path) -> String {
    let (dir, arrays) = (s.dir, s.arrays);
    let name = job_name(dir);
    let limit = if s.throttle > 0 {
        format!(" --max-concurrent {}", s.throttle)
    } else {
        String::new()
    };
    let task = sh_path(task);
    let mut out = format!(
        r#"#!/bin/bash
# trainer sweep on gflow: submits the tasks of {dir} (gflowd must be up: `gflowd up`).
# Options given to this script go to every gbatch (`bash {dir}/submit.gflow.sh --gpus 0`).
set -euo pipefail
declare -A job=()
re='^Submitted batch job ([0-9]+) \(.*-t([0-9]+)\)$'
# gbatch with its lines shown; remembers task -> job id.
submit() {{
  local line
  while IFS= read -r line; do
    echo "$line"
    if [[ $line =~ $re ]]; then job[${{BASH_REMATCH[2]}}]=${{BASH_REMATCH[1]}}; fi
  done < <(gbatch "$@")
}}
"#,
        dir = comment(&dir.display().to_string())
    );
    for a in arrays {
        if a.chained {
            out.push_str(&format!(
                "# Phase 2: task i + {off} after phase-1 task i's job.\nfor i in {list}; do\n  \
                 submit --depends-on \"${{job[$i]:?no job for phase-1 task $i}}\" --max-retries \
                 {RETRIES} --name {name}-phase2-t\"$i\" \"$@\" {task} $(( i + {off} ))\ndone\n",
                name = sh(&name),
                off = a.offset,
                list = ranges_list(&a.tasks, a.offset),
            ));
        } else {
            let list: Vec<String> = a.tasks.iter().map(|i| i.to_string()).collect();
            out.push_str(&format!(
                "submit --param task={list} --name-template {template}{limit} \
                 --max-retries {RETRIES} \"$@\" {task} '{{task}}'\n",
                list = list.join(","),
                template = sh(&format!("{name}-t{{task}}")),
            ));
        }
    }
    out
}

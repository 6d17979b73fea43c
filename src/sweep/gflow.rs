//! A sweep on gflow (a single machine's scheduler: `gflowd`, `gbatch`): `task.gflow INDEX` runs
//! one task, and `submit.gflow.sh` submits them with `gbatch --param task=… --max-concurrent N`
//! (gflow's arrays take only one range). gflow has no requeue: a task interrupted at its time
//! limit checkpoints and fails, and `--max-retries` starts it again, resuming the checkpoint. In a
//! two-stage sweep each phase-2 task is its own submission depending on its phase-1 task's job.

use std::path::Path;

use super::Manifest;
use super::quote::{comment, sh, sh_path};
use super::resources::{Resources, format_time};
use super::scheduler::{Scripts, Submission, SweepScheduler, stem};
use super::script_parts::{Array, choose_trainer, job_name, ranges_list, run_task};

/// How often gflow starts a failed or timed-out task again (each start resumes its checkpoint).
const RETRIES: usize = 3;

/// gflow submissions (`# GFLOW` lines in the task script: GPUs, time, memory, project; one GPU when none is asked for, as before resources existed, `--gpus 0` on the submit command line wins; of the optional keys only `extra`).
pub struct Gflow;

impl SweepScheduler for Gflow {
    fn has_directive(&self, key: &str) -> bool {
        key == "extra"
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

    fn scripts(&self, s: &Submission<'_>) -> Scripts {
        let task = s.dir.join("task.gflow");
        let sh = s
            .dir
            .join(format!("{}.gflow.sh", stem(s.which, &s.arrays[0])));
        let files = vec![
            (task.clone(), task_script(s.dir, s.manifest)),
            (
                sh.clone(),
                submit_script(s.dir, s.manifest, s.arrays, &task),
            ),
        ];
        (files, vec!["bash".into(), sh.display().to_string()])
    }
}

/// `task.gflow`: runs the task given as its argument.
pub fn task_script(dir: &Path, m: &Manifest) -> String {
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
        resources = Gflow.directives(&m.resources).join("\n"),
        command = m.command,
        spec = comment(&m.spec.display().to_string()),
        choose = choose_trainer(m),
        run = run_task(dir, "USR1", m),
    )
}

/// `submit.gflow.sh`: every array as gbatch submissions; options given to it go to every gbatch.
pub fn submit_script(dir: &Path, m: &Manifest, arrays: &[Array], task: &Path) -> String {
    let name = job_name(dir);
    let limit = if m.throttle > 0 {
        format!(" --max-concurrent {}", m.throttle)
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

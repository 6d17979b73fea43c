//! Slurm: an `srun` step (multi-rank), a batch script or a `salloc` shell (single rank).
//!
//! A batch script sees `SLURM_PROCID=0` and `SLURM_NTASKS=N` but is one process; a `salloc`
//! shell sees `SLURM_NTASKS` but no `SLURM_PROCID`. Only `SLURM_STEP_ID` (set inside
//! `srun`) marks a multi-rank launch.
//!
//! A sweep is Slurm arrays: `--array=0-7%2`, each array task `trainer sweep task DIR
//! $SLURM_ARRAY_TASK_ID`; a two-stage sweep's phase-2 array chained task by task (`aftercorr`)
//! by `submit.sh`.

use std::path::PathBuf;

use super::array::{
    Array, Scripts, Submission, array_job, choose_trainer, lines, ranges, run_task, stem,
    task_line, throttle,
};
use super::common::{
    JobInfo, Ranks, Requeue, address_override, build, port_from_job_id, port_override,
};
use super::quote::{comment, directive, sh_path};
use super::resources::{ResourceKey, Resources, format_time};
use super::{AllocationVar, ClusterEnv, Scheduler, SchedulerKind};
use crate::cluster::error::EnvError;
use crate::cluster::hostlist;
use crate::cluster::vars::Vars;
#[cfg(test)]
pub(crate) use ranks::parse_tasks_per_node;
use ranks::{NAME, step_ranks};

mod ranks;

/// Slurm: its environment, and its arrays (`#SBATCH` directives; every `[resources]` key but
/// `mig`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Slurm;

impl Scheduler for Slurm {
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

    fn allocation(&self, vars: &Vars) -> Vec<AllocationVar> {
        let mut out = AllocationVar::set(
            vars,
            &[
                "SLURM_STEP_GPUS",
                "SLURM_JOB_GPUS",
                "SLURM_GPUS",
                "SLURM_GPUS_PER_TASK",
                "SLURM_GPUS_PER_NODE",
                "SLURM_SHARDS_ON_NODE",
                "GPU_DEVICE_ORDINAL",
            ],
        );
        if vars
            .parse_u32("SLURM_GPUS_ON_NODE")
            .ok()
            .flatten()
            .unwrap_or(0)
            > 0
        {
            out.extend(AllocationVar::set(vars, &["SLURM_GPUS_ON_NODE"]));
        }
        out
    }

    fn has_directive(&self, key: ResourceKey) -> bool {
        key != ResourceKey::Mig
    }

    fn directives(&self, r: &Resources) -> Vec<String> {
        let mut out = Vec::new();
        let mut push = |s: String| out.push(format!("#SBATCH {s}"));
        if let Some(p) = &r.partition {
            push(format!("--partition={p}"));
        }
        if r.gpus() > 0 {
            match &r.gpu_type {
                Some(t) => push(format!("--gres=gpu:{t}:{}", r.gpus())),
                None => push(format!("--gres=gpu:{}", r.gpus())),
            }
        }
        if let Some(c) = r.cpus {
            push(format!("--cpus-per-task={c}"));
        }
        if let Some(m) = r.mem_mb {
            push(format!("--mem={m}M"));
        }
        if let Some(t) = r.time_secs {
            push(format!("--time={}", format_time(t)));
        }
        for (flag, v) in [
            ("account", &r.account),
            ("qos", &r.qos),
            ("constraint", &r.constraint),
        ] {
            if let Some(v) = v {
                push(format!("--{flag}={v}"));
            }
        }
        for e in &r.extra {
            push(e.clone());
        }
        out
    }

    fn scripts(&self, s: &Submission<'_>) -> Option<Scripts> {
        let mut files = Vec::new();
        for a in s.arrays {
            files.push((
                s.dir.join(format!("{}.slurm", stem(s.which, a))),
                script(s, a, &array_job(s.name, a)),
            ));
        }
        let submit = if let [(only, _)] = files.as_slice() {
            vec!["sbatch".into(), only.display().to_string()]
        } else {
            let sh = s.dir.join(format!("{}.sh", stem(s.which, &s.arrays[0])));
            files.push((sh.clone(), chain(s.arrays, &files)));
            vec!["bash".into(), sh.display().to_string()]
        };
        Some((files, submit))
    }
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

/// The array script of `a`, job name `name`: each array task runs `trainer sweep task DIR
/// $TASK` with the queue rules of `jobs/` (signal before the limit, forward it, requeue on 75,
/// one appended log per task).
pub(super) fn script(s: &Submission<'_>, a: &Array, name: &str) -> String {
    let (dir, r) = (s.dir, s.resources);
    let throttle = throttle(s);
    let indices = &a.tasks;
    let array: Vec<usize> = indices.iter().map(|i| i - a.offset).collect();
    let logs = dir.join("logs").join("slurm_%A_%a.out");
    format!(
        r#"#!/bin/bash
# trainer sweep: {n} task(s) of `trainer {command}` from {spec}, one array task each.
# Submit from anywhere; the queue resources are the spec's [resources] and `sweep plan`'s
# flags (options on the sbatch command line win over these lines).
#SBATCH --job-name={name}
# Array index + {offset} = task index of the sweep; %N = at most N at once.
#SBATCH --array={array}{throttle}
{resources}# SIGUSR1 to this batch shell {margin} s before the limit{why}: forwarded, the trainer
# checkpoints, exits 75.
#SBATCH --signal=B:USR1@{margin}
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output={logs}

set -uo pipefail
# The trainer: $TRAINER, else `singularity exec --nv $IMAGE trainer` when IMAGE is set, else
# `trainer` on the PATH.
{choose}{task_line}
echo "=== $(date '+%F %T') task $TASK on $(hostname), restart ${{SLURM_RESTART_COUNT:-0}}"
{run}echo "=== $(date '+%T') task $TASK exit code $rc"
if [[ $rc -eq 75 ]]; then
  # The array task (its index is the task's minus the array's offset).
  echo "=== requeueing ${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}} (task $TASK); it resumes from its checkpoint"
  scontrol requeue "${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}"
fi
exit "$rc"
"#,
        resources = lines(Slurm.directives(r)),
        margin = r.margin_secs().unwrap_or(120),
        why = if r.time_secs.is_some() {
            " (a tenth of the limit, 1 to 10 min)"
        } else {
            ""
        },
        n = indices.len(),
        name = directive(name),
        logs = directive(&logs.display().to_string()),
        command = s.command,
        spec = comment(&s.spec.display().to_string()),
        array = ranges(&array),
        offset = a.offset,
        choose = choose_trainer(r),
        task_line = task_line("SLURM_ARRAY_TASK_ID", a.offset as isize),
        run = run_task(dir, "USR1", r),
    )
}

/// `submit.sh` of a two-stage Slurm sweep: the phase-1 array, then each phase-2 array; a
/// chained one waits task by task (`aftercorr`: array index i after index i of phase 1).
pub(super) fn chain(arrays: &[Array], files: &[(PathBuf, String)]) -> String {
    let mut out = String::from(
        "#!/bin/bash\n# Submits the sweep's arrays; options given to this script go to every \
         sbatch\n# (bash submit.sh --partition=q_ai4 --gres=gpu:1).\nset -euo pipefail\n",
    );
    let mut first = false;
    for (a, (file, _)) in arrays.iter().zip(files) {
        let f = sh_path(file);
        if a.offset == 0 {
            first = true;
            out.push_str(&format!(
                "first=$(sbatch --parsable \"$@\" {f}); first=${{first%%;*}}\n\
                 echo \"phase 1: array job $first\"\n"
            ));
        } else if a.chained && first {
            out.push_str(&format!(
                "second=$(sbatch --parsable --dependency=aftercorr:\"$first\" \"$@\" {f})\n\
                 echo \"phase 2: array job ${{second%%;*}}, task i after phase-1 task i \
                 (aftercorr:$first)\"\n"
            ));
        } else {
            out.push_str(&format!(
                "now=$(sbatch --parsable \"$@\" {f})\n\
                 echo \"phase 2 (phase 1 already done): array job ${{now%%;*}}\"\n"
            ));
        }
    }
    out
}

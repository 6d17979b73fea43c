//! A sweep as Slurm arrays: `--array=0-7%2`, each array task `trainer sweep task DIR
//! $SLURM_ARRAY_TASK_ID`; a two-stage sweep's phase-2 array chained task by task (`aftercorr`)
//! by `submit.sh`.

use std::path::{Path, PathBuf};

use super::Manifest;
use super::quote::{comment, directive, sh_path};
use super::resources::{Resources, format_time};
use super::scheduler::{Scripts, Submission, SweepScheduler, array_job, stem};
use super::script_parts::{Array, choose_trainer, lines, ranges, run_task, task_line, throttle};

/// Slurm arrays (`#SBATCH` directives; every `[resources]` key but `mig`).
pub struct Slurm;

impl SweepScheduler for Slurm {
    fn has_directive(&self, key: &str) -> bool {
        key != "mig"
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

    fn scripts(&self, s: &Submission<'_>) -> Scripts {
        let mut files = Vec::new();
        for a in s.arrays {
            files.push((
                s.dir.join(format!("{}.slurm", stem(s.which, a))),
                script(s.dir, s.manifest, a, &array_job(s.name, a)),
            ));
        }
        let submit = if let [(only, _)] = files.as_slice() {
            vec!["sbatch".into(), only.display().to_string()]
        } else {
            let sh = s.dir.join(format!("{}.sh", stem(s.which, &s.arrays[0])));
            files.push((sh.clone(), chain(s.arrays, &files)));
            vec!["bash".into(), sh.display().to_string()]
        };
        (files, submit)
    }
}

/// The array script of `a`, job name `name`: each array task runs `trainer sweep task DIR
/// $TASK` with the queue rules of `jobs/` (signal before the limit, forward it, requeue on 75,
/// one appended log per task).
pub fn script(dir: &Path, m: &Manifest, a: &Array, name: &str) -> String {
    let throttle = throttle(m);
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
        resources = lines(Slurm.directives(&m.resources)),
        margin = m.resources.margin_secs().unwrap_or(120),
        why = if m.resources.time_secs.is_some() {
            " (a tenth of the limit, 1 to 10 min)"
        } else {
            ""
        },
        n = indices.len(),
        name = directive(name),
        logs = directive(&logs.display().to_string()),
        command = m.command,
        spec = comment(&m.spec.display().to_string()),
        array = ranges(&array),
        offset = a.offset,
        choose = choose_trainer(m),
        task_line = task_line("SLURM_ARRAY_TASK_ID", a.offset as isize),
        run = run_task(dir, "USR1", m),
    )
}

/// `submit.sh` of a two-stage Slurm sweep: the phase-1 array, then each phase-2 array; a
/// chained one waits task by task (`aftercorr`: array index i after index i of phase 1).
pub fn chain(arrays: &[Array], files: &[(PathBuf, String)]) -> String {
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

//! A sweep as Slurm arrays: `--array=0-7%2`, each array task `trainer sweep task DIR
//! $SLURM_ARRAY_TASK_ID`; a two-stage sweep's phase-2 array chained task by task (`aftercorr`)
//! by `submit.sh`.

use std::path::{Path, PathBuf};

use super::Manifest;
use super::quote::{comment, directive, sh_path};
use super::script_parts::{Array, choose_trainer, lines, ranges, run_task, task_line, throttle};

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
        resources = lines(m.resources.slurm_lines()),
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

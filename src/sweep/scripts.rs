//! The scheduler's script of a sweep: a Slurm array over the task indices with a throttle
//! (`--array=0-7%2`), each task `trainer sweep task DIR $SLURM_ARRAY_TASK_ID` with the queue
//! rules of `jobs/` (signal before the limit, forward it, requeue on 75, one appended log per
//! task, the trainer from `$TRAINER` or a container with `--nv`); or the local plan
//! (`trainer sweep run DIR --jobs N`).

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::{Manifest, Scheduler};
use crate::files::write_atomic;

/// A written script and the command that submits it.
pub struct Script {
    pub path: PathBuf,
    pub submit: Vec<String>,
}

/// `0-3,5,7-9` from sorted indices.
pub fn ranges(indices: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < indices.len() {
        let mut j = i;
        while j + 1 < indices.len() && indices[j + 1] == indices[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", indices[i], indices[j])
        } else {
            indices[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// The array job's name: the sweep directory's.
fn job_name(dir: &Path) -> String {
    dir.file_name()
        .map_or("sweep".into(), |n| n.to_string_lossy().into_owned())
}

/// `%N` of an array's throttle (empty without one).
fn throttle(m: &Manifest) -> String {
    if m.throttle > 0 {
        format!("%{}", m.throttle)
    } else {
        String::new()
    }
}

/// The trainer command of an array task: `$TRAINER`, else the container with `--nv` when
/// `IMAGE` is set, else `trainer` on the PATH.
const CHOOSE_TRAINER: &str = r#"if [[ -n "${TRAINER:-}" ]]; then
  RUN=("$TRAINER")
elif [[ -n "${IMAGE:-}" ]]; then
  RUN=(singularity exec --nv ${BIND_MOUNTS:+--bind "$BIND_MOUNTS"} "$IMAGE" trainer)
else
  RUN=(trainer)
fi
"#;

/// `sweep task DIR $TASK` in the background, the scheduler's warning `signal` and TERM
/// forwarded to it, its exit code in `rc`.
fn run_task(dir: &str, signal: &str) -> String {
    format!(
        r#"pid=""
forward() {{ [[ -n "$pid" ]] && kill -s "$1" "$pid" 2>/dev/null; }}
trap 'forward {signal}' {signal}
trap 'forward TERM' TERM
"${{RUN[@]}}" sweep task {dir} "$TASK" &
pid=$!
wait "$pid"; rc=$?
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done
"#
    )
}

fn slurm(dir: &Path, m: &Manifest, indices: &[usize]) -> String {
    let (name, throttle) = (job_name(dir), throttle(m));
    let dir = dir.display();
    format!(
        r#"#!/bin/bash
# trainer sweep: {n} task(s) of `trainer {command}` from {spec}, one array task each.
# Submit from anywhere; add the queue's own options on the command line, e.g.
#   sbatch --partition=q_ai4 --gres=gpu:1 --time=12:00:00 {dir}/submit.slurm
# (GPU queues ask only --gres; CPUs and memory come with the GPU).
#SBATCH --job-name={name}
# Task indices of the sweep; %N = at most N at once.
#SBATCH --array={array}{throttle}
# SIGUSR1 to this batch shell 120 s before the limit: forwarded, the trainer checkpoints, exits 75.
#SBATCH --signal=B:USR1@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output={dir}/logs/slurm_%A_%a.out

set -uo pipefail
# The trainer: $TRAINER, else `singularity exec --nv $IMAGE trainer` when IMAGE is set, else
# `trainer` on the PATH.
{choose}TASK="${{SLURM_ARRAY_TASK_ID:?an array task}}"
echo "=== $(date '+%F %T') task $TASK on $(hostname), restart ${{SLURM_RESTART_COUNT:-0}}"
{run}echo "=== $(date '+%T') task $TASK exit code $rc"
if [[ $rc -eq 75 ]]; then
  echo "=== requeueing ${{SLURM_ARRAY_JOB_ID}}_$TASK; it resumes from its checkpoint"
  scontrol requeue "${{SLURM_ARRAY_JOB_ID}}_$TASK"
fi
exit "$rc"
"#,
        n = indices.len(),
        command = m.command,
        spec = m.spec.display(),
        array = ranges(indices),
        choose = CHOOSE_TRAINER,
        run = run_task(&dir.to_string(), "USR1"),
    )
}

fn lsf(dir: &Path, m: &Manifest, indices: &[usize]) -> String {
    let (name, throttle) = (job_name(dir), throttle(m));
    // LSF array indices start at 1: element i + 1 is task i.
    let one_based: Vec<usize> = indices.iter().map(|i| i + 1).collect();
    let dir = dir.display();
    format!(
        r#"#!/bin/bash
# trainer sweep: {n} task(s) of `trainer {command}` from {spec}, one LSF array element each
# (element i + 1 = task i). Submit with `bsub < {dir}/submit.lsf`; add the queue's options on
# the command line (bsub -q gpu_a100 -gpu "num=1" < …).
#BSUB -J "{name}[{array}]{throttle}"
# SIGUSR2 five minutes before the run limit: forwarded, the trainer checkpoints and exits 75.
#BSUB -wa USR2
#BSUB -wt 5
# Exit 75 = checkpoint written: LSF requeues the element, which resumes its checkpoint.
#BSUB -Q "75"
#BSUB -o {dir}/logs/lsf_%J_%I.out
#BSUB -e {dir}/logs/lsf_%J_%I.out

set -uo pipefail
{choose}TASK=$(( ${{LSB_JOBINDEX:?an array element}} - 1 ))
echo "=== $(date '+%F %T') task $TASK on $(hostname)"
{run}echo "=== $(date '+%T') task $TASK exit code $rc"
exit "$rc"
"#,
        n = indices.len(),
        command = m.command,
        spec = m.spec.display(),
        array = ranges(&one_based),
        choose = CHOOSE_TRAINER,
        run = run_task(&dir.to_string(), "USR2"),
    )
}

/// Writes the script of `indices` (`which`: `all` or `missing`) into the sweep directory.
pub fn write(dir: &Path, m: &Manifest, indices: &[usize], which: &str) -> Result<Script> {
    // Absolute paths: the script runs from wherever it is submitted; Slurm does not create the
    // log directory.
    let dir = &std::path::absolute(dir).unwrap_or(dir.to_path_buf());
    std::fs::create_dir_all(dir.join("logs"))?;
    let (path, text, submit) = match m.scheduler {
        Scheduler::Slurm => {
            let file = if which == "all" {
                "submit.slurm".to_string()
            } else {
                format!("submit-{which}.slurm")
            };
            let path = dir.join(file);
            let submit = vec!["sbatch".into(), path.display().to_string()];
            (path, slurm(dir, m, indices), submit)
        }
        Scheduler::Lsf => {
            let file = if which == "all" {
                "submit.lsf".to_string()
            } else {
                format!("submit-{which}.lsf")
            };
            let path = dir.join(file);
            let submit = vec![
                "bash".into(),
                "-c".into(),
                format!("bsub < {}", path.display()),
            ];
            (path, lsf(dir, m, indices), submit)
        }
        Scheduler::Local => {
            let path = dir.join("run-local.sh");
            let jobs = if m.throttle > 0 { m.throttle } else { 1 };
            let text = format!(
                "#!/bin/bash\n# trainer sweep: the pending tasks of {} on this machine, {jobs} at \
                 a time.\nexec \"${{TRAINER:-trainer}}\" sweep run {} --jobs {jobs}\n",
                dir.display(),
                dir.display()
            );
            (
                path.clone(),
                text,
                vec!["bash".into(), path.display().to_string()],
            )
        }
    };
    write_atomic(&path, |w| Ok(w.write_all(text.as_bytes())?))?;
    Ok(Script { path, submit })
}

use std::io::Write as _;

#[cfg(test)]
mod tests {
    use super::ranges;

    #[test]
    fn index_lists_become_slurm_ranges() {
        assert_eq!(ranges(&[0, 1, 2, 3]), "0-3");
        assert_eq!(ranges(&[1, 3, 4, 5, 9]), "1,3-5,9");
        assert_eq!(ranges(&[7]), "7");
    }
}

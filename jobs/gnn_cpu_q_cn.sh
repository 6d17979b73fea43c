#!/bin/bash
# CLG-ODE on small connectomes (a few hundred nodes) on the CPU queue q_cn: no GPU is needed for
# models this size, and the GPU queues stay free for work that needs them. Runs all five CV
# folds in turn (--cv-fold -1) in one job; checkpoint + requeue before the time limit.
#
#   mkdir -p outputs/logs
#   sbatch jobs/gnn_cpu_q_cn.sh
#   CV_FOLD=3 sbatch jobs/gnn_cpu_q_cn.sh      # one fold only
#
# CPU smoke test (what CI submits: host binary instead of the image, a tiny model):
#   TRAINER_CPU_TEST=1 TRAINER_BIN=$PWD/target/release/trainer COHORT_DIR=/tmp/cohort \
#     RESULTS_DIR=$PWD/outputs sbatch jobs/gnn_cpu_q_cn.sh
#
# --- Slurm directives -------------------------------------------------------------------------
# Job name: %x in the log file name.
#SBATCH --job-name=gnn_cpu_q_cn
# CPU partition (no GPUs there).
#SBATCH --partition=q_cn
# One process, several threads: on CPU queues ask for cores and memory explicitly.
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=4
#SBATCH --mem=8G
# Wall-clock limit.
#SBATCH --time=24:00:00
# SIGUSR1 to this batch shell 120 s before the limit; forwarded to the trainer (checkpoint,
# exit 75). Without "B:" it would go to srun steps, and there are none here.
#SBATCH --signal=B:USR1@120
# Allow requeueing (done below on exit code 75).
#SBATCH --requeue
# One log across requeues.
#SBATCH --open-mode=append
# %x = job name, %j = job id.
#SBATCH --output=outputs/logs/%x_%j.out

set -uo pipefail
USER="${USER:-$(id -un)}" # sbatch may start the script without USER

# --- site-specific settings (override in the environment at submit time) ----------------------
# The image runs on CPU nodes too (no --nv there); the CPU image containers/trainer-cpu.def is
# smaller.
IMAGE="${IMAGE:-/ibmgpfs/$USER/containers/trainer-cpu.sif}"
BIND_MOUNTS="${BIND_MOUNTS:-/ibmgpfs,/GPFS}"
COHORT_DIR="${COHORT_DIR:-/ibmgpfs/$USER/data/connectomes}"
SC_DIR="${SC_DIR:-$COHORT_DIR/sc}"
MORPH_ROOT="${MORPH_ROOT:-$COHORT_DIR/morph}"
SUBJECT_INFO_CSV="${SUBJECT_INFO_CSV:-$COHORT_DIR/subject_info_sc.csv}"
RESULTS_DIR="${RESULTS_DIR:-/GPFS/$USER/results/clg_ode_cpu}"
# -1: all five folds in turn; 0-4: one fold.
CV_FOLD="${CV_FOLD:--1}"
SINGULARITY_MODULE="${SINGULARITY_MODULE:-singularity}"

# --- the one switch: TRAINER_CPU_TEST=1 = no container, a tiny job ---------------------------
TRAINER_CPU_TEST="${TRAINER_CPU_TEST:-0}"
if [[ "$TRAINER_CPU_TEST" == 1 ]]; then
  RUN=("${TRAINER_BIN:?TRAINER_CPU_TEST=1 needs TRAINER_BIN=/path/to/trainer}")
  read -r -a EXTRA <<<"${TRAINER_CPU_TEST_ARGS:---max-epochs 2 --latent-dim 8 --hidden-dim 16 --solver-steps 2 --log-every-secs 2}"
  CV_FOLD="${TRAINER_CPU_TEST_FOLD:-0}"
else
  if ! command -v singularity >/dev/null && [[ -n "$SINGULARITY_MODULE" ]]; then
    module load "$SINGULARITY_MODULE" 2>/dev/null || true
  fi
  command -v singularity >/dev/null || { echo "error: singularity not found (module load singularity?)"; exit 1; }
  # No --nv: CPU node.
  RUN=(singularity exec --bind "$BIND_MOUNTS" "$IMAGE" trainer)
  EXTRA=()
fi

RUN_NAME="${SLURM_JOB_NAME:-gnn_cpu}_${SLURM_JOB_ID:-local}"
echo "=== $(date '+%F %T') start: job ${SLURM_JOB_ID:-local} on $(hostname), restart ${SLURM_RESTART_COUNT:-0}, folds $CV_FOLD, run $RUN_NAME"

mkdir -p "$RESULTS_DIR"
trainer_pid=""
forward() {
  echo "=== $(date '+%T') batch shell got SIG$1, forwarding to the trainer (pid ${trainer_pid:-none})"
  [[ -n "$trainer_pid" ]] && kill -s "$1" "$trainer_pid" 2>/dev/null
}
trap 'forward USR1' USR1
trap 'forward TERM' TERM

"${RUN[@]}" train-gnn --sc-dir "$SC_DIR" --morph-root "$MORPH_ROOT" \
  --subject-info-csv "$SUBJECT_INFO_CSV" --results-dir "$RESULTS_DIR" --run-name "$RUN_NAME" \
  --cv-fold "$CV_FOLD" --device cpu "${EXTRA[@]}" --resume auto &
trainer_pid=$!
wait "$trainer_pid"
rc=$?
while kill -0 "$trainer_pid" 2>/dev/null; do
  wait "$trainer_pid"
  rc=$?
done
echo "=== $(date '+%T') trainer exit code $rc"

# 75 = checkpoint written, requeue me.
if [[ $rc -eq 75 && -n "${SLURM_JOB_ID:-}" ]]; then
  echo "=== requeueing Slurm job $SLURM_JOB_ID; it resumes from the checkpoint"
  scontrol requeue "$SLURM_JOB_ID"
fi
exit "$rc"

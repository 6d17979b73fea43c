#!/bin/bash
# CLG-ODE (coupled latent graph ODE) on structural connectomes: one Slurm array task per
# cross-validation fold (5 folds = 5 tasks), each on one V100 of q_ai4, inside the trainer image,
# GPU preflight first, checkpoint + requeue before the time limit.
#
#   mkdir -p outputs/logs
#   sbatch jobs/gnn_q_ai4.sh                   # all five folds
#   sbatch --array=2 jobs/gnn_q_ai4.sh         # only fold 2 (command-line options beat #SBATCH)
#   squeue -u $USER -r                         # one line per task; PD (Resources) = q_ai4 full
#
# A 400-node connectome is small for a V100: if the doctor prints "CPU is enough", consider
# jobs/gnn_cpu_q_cn.sh, which leaves the GPUs to others.
#
# CPU smoke test of this script (what CI submits; no container, no GPU, a tiny model):
#   trainer synth-connectome --subjects 20 --nodes 400 --out /tmp/cohort --seed 1
#   TRAINER_CPU_TEST=1 TRAINER_BIN=$PWD/target/release/trainer COHORT_DIR=/tmp/cohort \
#     RESULTS_DIR=$PWD/outputs sbatch jobs/gnn_q_ai4.sh
#
# --- Slurm directives -------------------------------------------------------------------------
# Job name: %x in the log file name.
#SBATCH --job-name=gnn_q_ai4
# The 4×V100 partition.
#SBATCH --partition=q_ai4
# One array task per CV fold; the fold is $SLURM_ARRAY_TASK_ID. `%2` after the range would run
# at most two folds at once (be kind to the queue).
#SBATCH --array=0-4
# One GPU per task; CPUs and memory come with it (no -c / --mem on this cluster).
#SBATCH --gres=gpu:1
# Wall-clock limit per task.
#SBATCH --time=12:00:00
# SIGUSR1 to this batch shell ("B:") 120 s before the limit; forwarded to the trainer, which
# checkpoints and exits 75. (`--signal=USR1@120` without B: would signal srun steps instead.)
#SBATCH --signal=B:USR1@120
# Allow requeueing (done below on exit code 75).
#SBATCH --requeue
# Keep appending to the same log across requeues.
#SBATCH --open-mode=append
# %x = job name, %A = array job id, %a = task id (= fold).
#SBATCH --output=outputs/logs/%x_%A_%a.out

set -uo pipefail
USER="${USER:-$(id -un)}" # sbatch may start the script without USER

# --- site-specific settings (override in the environment at submit time) ----------------------
IMAGE="${IMAGE:-/ibmgpfs/$USER/containers/trainer-gpu.sif}"
BIND_MOUNTS="${BIND_MOUNTS:-/ibmgpfs,/GPFS}"
# The cohort: SC matrices, morphology tree, subject table (trainer synth-connectome writes the
# same layout under one directory).
COHORT_DIR="${COHORT_DIR:-/ibmgpfs/$USER/data/connectomes}"
SC_DIR="${SC_DIR:-$COHORT_DIR/sc}"
MORPH_ROOT="${MORPH_ROOT:-$COHORT_DIR/morph}"
SUBJECT_INFO_CSV="${SUBJECT_INFO_CSV:-$COHORT_DIR/subject_info_sc.csv}"
# Run directories: $RESULTS_DIR/runs/<job name>_<array job id>_fold<F>/.
RESULTS_DIR="${RESULTS_DIR:-/GPFS/$USER/results/clg_ode}"
SINGULARITY_MODULE="${SINGULARITY_MODULE:-singularity}"

# --- the one switch: TRAINER_CPU_TEST=1 = no container, no GPU, a tiny CPU job ---------------
TRAINER_CPU_TEST="${TRAINER_CPU_TEST:-0}"
if [[ "$TRAINER_CPU_TEST" == 1 ]]; then
  RUN=("${TRAINER_BIN:?TRAINER_CPU_TEST=1 needs TRAINER_BIN=/path/to/trainer}")
  DEVICE=(--device cpu)
  PREFLIGHT=(doctor)
  # The test Slurm's GPUs are fake device files without a driver: forget them.
  unset CUDA_VISIBLE_DEVICES GPU_DEVICE_ORDINAL SLURM_JOB_GPUS SLURM_STEP_GPUS SLURM_GPUS_ON_NODE
  read -r -a EXTRA <<<"${TRAINER_CPU_TEST_ARGS:---max-epochs 2 --latent-dim 8 --hidden-dim 16 --solver-steps 2 --log-every-secs 2}"
else
  if ! command -v singularity >/dev/null && [[ -n "$SINGULARITY_MODULE" ]]; then
    module load "$SINGULARITY_MODULE" 2>/dev/null || true
  fi
  command -v singularity >/dev/null || { echo "error: singularity not found (module load singularity?)"; exit 1; }
  RUN=(singularity exec --nv --bind "$BIND_MOUNTS" "$IMAGE" trainer)
  DEVICE=(--device cuda)
  PREFLIGHT=(doctor --require-gpu)
  EXTRA=()
fi

FOLD="${SLURM_ARRAY_TASK_ID:-${CV_FOLD:-0}}"
RUN_NAME="${SLURM_JOB_NAME:-gnn}_${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-local}}_fold${FOLD}"
echo "=== $(date '+%F %T') start: task ${SLURM_ARRAY_JOB_ID:-}_${SLURM_ARRAY_TASK_ID:-} (job ${SLURM_JOB_ID:-local}) fold $FOLD on $(hostname), restart ${SLURM_RESTART_COUNT:-0}, run $RUN_NAME"

# --- preflight ----------------------------------------------------------------------------------
"${RUN[@]}" "${PREFLIGHT[@]}"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "=== preflight failed with exit code $rc: not training"
  exit "$rc"
fi

# --- training in the background, signals forwarded ----------------------------------------------
mkdir -p "$RESULTS_DIR"
trainer_pid=""
forward() {
  echo "=== $(date '+%T') batch shell got SIG$1, forwarding to the trainer (pid ${trainer_pid:-none})"
  [[ -n "$trainer_pid" ]] && kill -s "$1" "$trainer_pid" 2>/dev/null
}
trap 'forward USR1' USR1
trap 'forward TERM' TERM

# --run-name is the same on every start of this task, so --resume auto finds its checkpoint.
"${RUN[@]}" train-gnn --sc-dir "$SC_DIR" --morph-root "$MORPH_ROOT" \
  --subject-info-csv "$SUBJECT_INFO_CSV" --results-dir "$RESULTS_DIR" --run-name "$RUN_NAME" \
  --cv-fold "$FOLD" "${DEVICE[@]}" "${EXTRA[@]}" --resume auto &
trainer_pid=$!
wait "$trainer_pid"
rc=$?
while kill -0 "$trainer_pid" 2>/dev/null; do
  wait "$trainer_pid"
  rc=$?
done
echo "=== $(date '+%T') trainer exit code $rc"

# --- 75 = checkpoint written, requeue me (outside the container, where scontrol is) -----------
if [[ $rc -eq 75 && -n "${SLURM_JOB_ID:-}" ]]; then
  if [[ -n "${SLURM_ARRAY_JOB_ID:-}" ]]; then
    target="${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"
  else
    target="$SLURM_JOB_ID"
  fi
  echo "=== requeueing Slurm job $target; it resumes from the checkpoint"
  scontrol requeue "$target"
fi
exit "$rc"

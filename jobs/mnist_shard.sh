#!/bin/bash
# MNIST on a shared GPU of the teaching/lab Slurm: 16 of the 64 shards of one Quadro RTX GPU.
# Shards only steer placement (up to four such jobs share a GPU); nothing limits how much of the
# GPU this job uses, so keep it small. For a whole GPU use `--gres=gpu:1` instead.
#
#   trainer data fetch fashion-mnist --out ~/data/fashion-mnist   # before submitting (login node)
#   mkdir -p outputs/logs && sbatch jobs/mnist_shard.sh
#   squeue -u $USER   # PD (Resources): every GPU's 64 shards are taken; shard:N > 64 never starts
#
# CPU smoke test (what CI submits):
#   TRAINER_CPU_TEST=1 TRAINER_BIN=$PWD/target/release/trainer \
#     DATA_DIR=/usr/share/datasets/fashion-mnist RESULTS_DIR=$PWD/outputs sbatch jobs/mnist_shard.sh
#
# --- Slurm directives -------------------------------------------------------------------------
# Job name: %x in the log file name.
#SBATCH --job-name=mnist_shard
# 16 of a GPU's 64 shards (at most 64: a job never spans GPUs with shards).
#SBATCH --gres=shard:16
# Wall-clock limit.
#SBATCH --time=01:00:00
# SIGUSR1 to this batch shell 120 s before the limit; forwarded to the trainer (checkpoint,
# exit 75). `--signal=USR1@120` without B: is the form for srun steps.
#SBATCH --signal=B:USR1@120
# Allow requeueing (done below on exit code 75).
#SBATCH --requeue
# One log across requeues.
#SBATCH --open-mode=append
# %x = job name, %j = job id.
#SBATCH --output=outputs/logs/%x_%j.out

set -uo pipefail
USER="${USER:-$(id -un)}" # sbatch may start the script without USER

# sbatch does not run your login set-up: load PATH / conda / modules from ~/.bashrc.
# shellcheck disable=SC1090
[[ -f ~/.bashrc ]] && . ~/.bashrc

# --- site-specific settings (override in the environment at submit time) ----------------------
# Empty IMAGE: the `trainer` binary on PATH (a static-ish Rust binary, no conda env needed);
# else `apptainer exec --nv IMAGE trainer`.
IMAGE="${IMAGE:-}"
TRAINER="${TRAINER:-trainer}"
BIND_MOUNTS="${BIND_MOUNTS:-$HOME}"
DATA_DIR="${DATA_DIR:-$HOME/data/fashion-mnist}"
RESULTS_DIR="${RESULTS_DIR:-$HOME/results/mnist}"
EPOCHS="${EPOCHS:-5}"

# --- the one switch: TRAINER_CPU_TEST=1 = no container, no GPU, a tiny CPU job ---------------
TRAINER_CPU_TEST="${TRAINER_CPU_TEST:-0}"
if [[ "$TRAINER_CPU_TEST" == 1 ]]; then
  RUN=("${TRAINER_BIN:?TRAINER_CPU_TEST=1 needs TRAINER_BIN=/path/to/trainer}")
  DEVICE=(--device cpu)
  PREFLIGHT=(doctor)
  # The test Slurm's GPUs are fake device files without a driver: forget them.
  unset CUDA_VISIBLE_DEVICES GPU_DEVICE_ORDINAL SLURM_JOB_GPUS SLURM_STEP_GPUS SLURM_GPUS_ON_NODE SLURM_SHARDS_ON_NODE
  read -r -a LIMITS <<<"${TRAINER_CPU_TEST_ARGS:---limit-train 640 --limit-test 200 --epochs 1}"
else
  if [[ -n "$IMAGE" ]]; then
    RUN=(apptainer exec --nv --bind "$BIND_MOUNTS" "$IMAGE" trainer)
  else
    RUN=("$TRAINER")
  fi
  # With shards CUDA_VISIBLE_DEVICES holds the index of the shared GPU: cuda = its first GPU.
  DEVICE=(--device cuda)
  PREFLIGHT=(doctor --require-gpu)
  LIMITS=(--epochs "$EPOCHS")
fi

RUN_DIR="$RESULTS_DIR/${SLURM_JOB_NAME:-mnist}_${SLURM_JOB_ID:-local}"
echo "=== $(date '+%F %T') start: job ${SLURM_JOB_ID:-local} on $(hostname), shards ${SLURM_SHARDS_ON_NODE:-?} of GPU ${CUDA_VISIBLE_DEVICES:-?}, restart ${SLURM_RESTART_COUNT:-0}"

"${RUN[@]}" "${PREFLIGHT[@]}"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "=== preflight failed with exit code $rc: not training"
  exit "$rc"
fi

mkdir -p "$RESULTS_DIR"
trainer_pid=""
forward() {
  echo "=== $(date '+%T') batch shell got SIG$1, forwarding to the trainer (pid ${trainer_pid:-none})"
  [[ -n "$trainer_pid" ]] && kill -s "$1" "$trainer_pid" 2>/dev/null
}
trap 'forward USR1' USR1
trap 'forward TERM' TERM

"${RUN[@]}" train-mnist --data-dir "$DATA_DIR" "${DEVICE[@]}" "${LIMITS[@]}" \
  --out "$RUN_DIR" --resume auto &
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

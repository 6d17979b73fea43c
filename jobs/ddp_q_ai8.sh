#!/bin/bash
# Data-parallel MNIST on several V100s of one q_ai8 node: one task (MPI rank) per GPU, launched
# by `srun --mpi=pmix`; each rank trains on its shard of every batch and the gradients are
# averaged (NCCL on GPUs). Needs a trainer built with the cargo feature `mpi` (the image
# containers/trainer-gpu.def has it (and NCCL) when the site's MPI is OpenMPI 4, libmpi.so.40).
#
#   mkdir -p outputs/logs
#   sbatch jobs/ddp_q_ai8.sh                       # 4 GPUs
#   sbatch --gres=gpu:8 --ntasks=8 jobs/ddp_q_ai8.sh
#   srun --mpi=list                                # what the site supports (pmix needed)
#
# CPU smoke test (what CI submits: 2 CPU ranks, host binary, tiny job):
#   TRAINER_CPU_TEST=1 TRAINER_BIN=$PWD/target/release/trainer \
#     DATA_DIR=/usr/share/datasets/fashion-mnist RESULTS_DIR=$PWD/outputs \
#     sbatch --gres=gpu:2 --ntasks=2 jobs/ddp_q_ai8.sh
#
# --- Slurm directives -------------------------------------------------------------------------
# Job name: %x in the log file name.
#SBATCH --job-name=ddp_q_ai8
# The 8×V100 partition.
#SBATCH --partition=q_ai8
# Everything on one node (the ranks talk over shared memory / NVLink).
#SBATCH --nodes=1
# GPUs for the job; CPUs (4) and memory (108 GB) per GPU come with them: no -c / --mem.
#SBATCH --gres=gpu:4
# One task per GPU: keep --ntasks equal to the gpu count above.
#SBATCH --ntasks=4
# Wall-clock limit.
#SBATCH --time=08:00:00
# SIGUSR1 to the batch shell ("B:") 120 s before the limit; it forwards it to srun, which passes
# it to every rank; all ranks stop at the same step, rank 0 writes the checkpoint, all exit 75.
# The step form `--signal=USR1@120` (no B:) would signal the srun step directly; this script
# needs the batch shell to see the exit code anyway, so it uses B: and forwards.
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
IMAGE="${IMAGE:-/ibmgpfs/$USER/containers/trainer-gpu.sif}"
BIND_MOUNTS="${BIND_MOUNTS:-/ibmgpfs,/GPFS}"
DATA_DIR="${DATA_DIR:-/ibmgpfs/$USER/data/fashion-mnist}"
RESULTS_DIR="${RESULTS_DIR:-/GPFS/$USER/results/mnist_ddp}"
EPOCHS="${EPOCHS:-14}"
# Per-rank batch size: the global batch is this times the number of ranks.
BATCH_SIZE="${BATCH_SIZE:-64}"
SINGULARITY_MODULE="${SINGULARITY_MODULE:-singularity}"

# --- the one switch: TRAINER_CPU_TEST=1 = no container, CPU ranks, a tiny job -----------------
TRAINER_CPU_TEST="${TRAINER_CPU_TEST:-0}"
if [[ "$TRAINER_CPU_TEST" == 1 ]]; then
  RUN=("${TRAINER_BIN:?TRAINER_CPU_TEST=1 needs TRAINER_BIN=/path/to/trainer}")
  DEVICE=(--device cpu)
  PREFLIGHT=(doctor)
  # The test Slurm's GPUs are fake device files without a driver: forget them.
  unset CUDA_VISIBLE_DEVICES GPU_DEVICE_ORDINAL SLURM_JOB_GPUS SLURM_STEP_GPUS SLURM_GPUS_ON_NODE
  read -r -a LIMITS <<<"${TRAINER_CPU_TEST_ARGS:---limit-train 640 --limit-test 200 --epochs 1}"
else
  if ! command -v singularity >/dev/null && [[ -n "$SINGULARITY_MODULE" ]]; then
    module load "$SINGULARITY_MODULE" 2>/dev/null || true
  fi
  command -v singularity >/dev/null || { echo "error: singularity not found (module load singularity?)"; exit 1; }
  RUN=(singularity exec --nv --bind "$BIND_MOUNTS" "$IMAGE" trainer)
  # Each rank takes the GPU of its local rank among CUDA_VISIBLE_DEVICES (see `trainer env`).
  DEVICE=(--device cuda)
  PREFLIGHT=(doctor --require-gpu)
  LIMITS=(--epochs "$EPOCHS")
fi

RUN_DIR="$RESULTS_DIR/${SLURM_JOB_NAME:-ddp}_${SLURM_JOB_ID:-local}"
echo "=== $(date '+%F %T') start: job ${SLURM_JOB_ID:-local} on $(hostname), ${SLURM_NTASKS:-1} ranks, restart ${SLURM_RESTART_COUNT:-0}, run dir $RUN_DIR"

# --- preflight, once, in the batch shell (it sees every GPU of the job) ------------------------
"${RUN[@]}" "${PREFLIGHT[@]}"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "=== preflight failed with exit code $rc: not training"
  exit "$rc"
fi

# --- the ranks: one srun step, PMIx wires up MPI ----------------------------------------------
mkdir -p "$RESULTS_DIR"
srun_pid=""
forward() {
  echo "=== $(date '+%T') batch shell got SIG$1, forwarding to srun (pid ${srun_pid:-none})"
  [[ -n "$srun_pid" ]] && kill -s "$1" "$srun_pid" 2>/dev/null
}
trap 'forward USR1' USR1
trap 'forward TERM' TERM

# --kill-on-bad-exit=1: if one rank dies, stop the others instead of letting them hang.
srun --mpi=pmix --kill-on-bad-exit=1 "${RUN[@]}" train-mnist --data-dir "$DATA_DIR" \
  "${DEVICE[@]}" "${LIMITS[@]}" --batch-size "$BATCH_SIZE" --out "$RUN_DIR" --resume auto &
srun_pid=$!
wait "$srun_pid"
rc=$?
while kill -0 "$srun_pid" 2>/dev/null; do
  wait "$srun_pid"
  rc=$?
done
echo "=== $(date '+%T') srun exit code $rc"

# 75 = checkpoint written, requeue me (srun returns the highest exit code of the ranks).
if [[ $rc -eq 75 && -n "${SLURM_JOB_ID:-}" ]]; then
  echo "=== requeueing Slurm job $SLURM_JOB_ID; it resumes from the checkpoint"
  scontrol requeue "$SLURM_JOB_ID"
fi
exit "$rc"

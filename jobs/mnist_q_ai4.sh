#!/bin/bash
# MNIST / Fashion-MNIST CNN on one V100 of the brain-imaging cluster's q_ai4 partition, inside the
# trainer's Singularity/Apptainer image, with a GPU preflight first and checkpoint + requeue before
# the time limit.
#
#   mkdir -p outputs/logs              # Slurm does not create the log directory: do it once
#   sbatch jobs/mnist_q_ai4.sh         # from the directory that should hold outputs/
#   squeue -u $USER                    # PD with reason (Resources) = q_ai4 full; (Priority) = others first
#   tail -f outputs/logs/mnist_q_ai4_<jobid>.out
#
# CPU smoke test of this very script (no container, no GPU, tiny job; what CI submits):
#   TRAINER_CPU_TEST=1 TRAINER_BIN=$PWD/target/release/trainer \
#     DATA_DIR=/usr/share/datasets/fashion-mnist RESULTS_DIR=$PWD/outputs sbatch jobs/mnist_q_ai4.sh
#
# Data must already be on the shared filesystem: compute nodes never download. Fetch it once on
# a login node: `trainer data fetch fashion-mnist --out /ibmgpfs/$USER/data/fashion-mnist`.
#
# --- Slurm directives (sbatch reads the #SBATCH lines up to the first command) --------------
# Job name: %x in the log file name below.
#SBATCH --job-name=mnist_q_ai4
# The 4×V100 32 GB partition; prefer it over q_ai8 for single-GPU work.
#SBATCH --partition=q_ai4
# One GPU, and nothing else: on this cluster CPUs (9) and memory (126 GB) come with each GPU,
# so no -c / --mem (asking for them makes the job wait for resources it cannot get).
#SBATCH --gres=gpu:1
# Wall-clock limit (HH:MM:SS). Longer runs are split: see --signal and --requeue.
#SBATCH --time=04:00:00
# 120 s before the time limit Slurm sends SIGUSR1 to this batch shell only ("B:"); the shell
# forwards it to the trainer, which writes a checkpoint at the next step and exits 75.
# (The step form `--signal=USR1@120`, without B:, signals `srun` steps instead; this script
# starts the trainer without srun, so it needs B:.)
#SBATCH --signal=B:USR1@120
# Allow `scontrol requeue` of this job (the shell below does it on exit code 75).
#SBATCH --requeue
# Append to the log on every start, so one file holds the whole history of a requeued job.
#SBATCH --open-mode=append
# stdout and stderr, relative to the submit directory: %x = job name, %j = job id.
#SBATCH --output=outputs/logs/%x_%j.out

set -uo pipefail
USER="${USER:-$(id -un)}" # sbatch may start the script without USER

# --- site-specific settings (override any of them in the environment at submit time) --------
# The GPU trainer image (containers/trainer-gpu.def, built off the cluster by
# scripts/build-gpu-image.sh: LibTorch + CubeCL CUDA + MPI), on the shared filesystem.
IMAGE="${IMAGE:-/ibmgpfs/$USER/containers/trainer-gpu.sif}"
# Host directories visible inside the container (data and results live there).
BIND_MOUNTS="${BIND_MOUNTS:-/ibmgpfs,/GPFS}"
# Four MNIST-format IDX files (raw or .gz).
DATA_DIR="${DATA_DIR:-/ibmgpfs/$USER/data/fashion-mnist}"
# Run directories go under here: $RESULTS_DIR/<job name>_<job id>/.
RESULTS_DIR="${RESULTS_DIR:-/GPFS/$USER/results/mnist}"
# Training length.
EPOCHS="${EPOCHS:-14}"
# Module that provides `singularity` on the compute nodes (empty: already on PATH).
SINGULARITY_MODULE="${SINGULARITY_MODULE:-singularity}"

# --- the one switch: TRAINER_CPU_TEST=1 = no container, no GPU, a tiny CPU job ---------------
# (binary from $TRAINER_BIN; used by CI to submit this script to a test Slurm.)
TRAINER_CPU_TEST="${TRAINER_CPU_TEST:-0}"
if [[ "$TRAINER_CPU_TEST" == 1 ]]; then
  RUN=("${TRAINER_BIN:?TRAINER_CPU_TEST=1 needs TRAINER_BIN=/path/to/trainer}")
  DEVICE=(--device cpu)
  PREFLIGHT=(doctor)
  # The test Slurm's GPUs are fake device files without a driver: forget them, train on the CPU.
  unset CUDA_VISIBLE_DEVICES GPU_DEVICE_ORDINAL SLURM_JOB_GPUS SLURM_STEP_GPUS SLURM_GPUS_ON_NODE
  # Tiny limits; TRAINER_CPU_TEST_ARGS replaces them (e.g. a longer run for the requeue test).
  read -r -a LIMITS <<<"${TRAINER_CPU_TEST_ARGS:---limit-train 640 --limit-test 200 --epochs 1}"
else
  if ! command -v singularity >/dev/null && [[ -n "$SINGULARITY_MODULE" ]]; then
    module load "$SINGULARITY_MODULE" 2>/dev/null || true
  fi
  command -v singularity >/dev/null || { echo "error: singularity not found (module load singularity?)"; exit 1; }
  # --nv binds the host's NVIDIA driver into the container; without it CUDA is unusable.
  RUN=(singularity exec --nv --bind "$BIND_MOUNTS" "$IMAGE" trainer)
  DEVICE=(--device cuda)
  PREFLIGHT=(doctor --require-gpu)
  LIMITS=(--epochs "$EPOCHS")
fi

RUN_DIR="$RESULTS_DIR/${SLURM_JOB_NAME:-mnist}_${SLURM_JOB_ID:-local}"
echo "=== $(date '+%F %T') start: job ${SLURM_JOB_ID:-local} on $(hostname), restart ${SLURM_RESTART_COUNT:-0}, run dir $RUN_DIR"

# --- preflight: is the GPU usable (driver, --nv, CUDA version, compute capability)? -----------
# Exit codes 10-16 say what is wrong (docs/reference/exit-codes.md); fail now, not after the
# data load.
"${RUN[@]}" "${PREFLIGHT[@]}"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "=== preflight failed with exit code $rc: not training"
  exit "$rc"
fi

# --- training, in the background so that this shell can forward signals ---------------------
mkdir -p "$RESULTS_DIR"
trainer_pid=""
forward() {
  echo "=== $(date '+%T') batch shell got SIG$1, forwarding to the trainer (pid ${trainer_pid:-none})"
  [[ -n "$trainer_pid" ]] && kill -s "$1" "$trainer_pid" 2>/dev/null
}
trap 'forward USR1' USR1
trap 'forward TERM' TERM

# --resume auto: continue from $RUN_DIR/checkpoints/last.safetensors after a requeue (same job
# id, so the same run directory); starts fresh on the first start.
"${RUN[@]}" train-mnist --data-dir "$DATA_DIR" "${DEVICE[@]}" "${LIMITS[@]}" \
  --out "$RUN_DIR" --resume auto &
trainer_pid=$!
# `wait` returns early when a trapped signal arrives: wait again until the trainer has exited.
wait "$trainer_pid"
rc=$?
while kill -0 "$trainer_pid" 2>/dev/null; do
  wait "$trainer_pid"
  rc=$?
done
echo "=== $(date '+%T') trainer exit code $rc"

# --- 75 = checkpoint written, requeue me: done here, outside the container, where scontrol is --
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

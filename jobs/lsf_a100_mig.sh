#!/bin/bash
# MNIST on one MIG slice (1g.10gb) of an A100 under LSF. LSF cannot schedule MIG instances on
# that node, so the job asks for a shared GPU and picks a free MIG instance itself at run time
# with `trainer mig-pick`. Checkpoint + requeue on the run-limit warning.
#
#   mkdir -p outputs/logs
#   bsub < jobs/lsf_a100_mig.sh        # bsub reads the #BSUB lines from standard input
#   bjobs -l <jobid>                   # PEND reasons; bpeek <jobid> for the live output
#
# Whole card instead of a slice: `-gpu "num=1:mode=shared:mps=no:j_exclusive=yes"` and drop the
# mig-pick block (set USE_MIG=0).
#
# CPU smoke test, no LSF needed (what CI runs locally: no container, no MIG, a tiny job):
#   TRAINER_CPU_TEST=1 TRAINER_BIN=$PWD/target/release/trainer \
#     DATA_DIR=/usr/share/datasets/fashion-mnist RESULTS_DIR=$PWD/outputs bash jobs/lsf_a100_mig.sh
#
# --- LSF directives (bsub reads the #BSUB lines) ---------------------------------------------
# Job name.
#BSUB -J mnist_mig
# Queue of the A100 node (site-specific).
#BSUB -q gpu_a100
# One CPU slot: MIG jobs get one core each.
#BSUB -n 1
# One GPU, shared with other jobs (j_exclusive=no): several MIG jobs land on the same card, each
# then uses only its own MIG instance through CUDA_VISIBLE_DEVICES=<MIG UUID>.
#BSUB -gpu "num=1:mode=shared:mps=no:j_exclusive=no"
# Run limit (hours:minutes).
#BSUB -W 4:00
# Warning action and time: SIGUSR2 five minutes before the run limit; forwarded to the trainer,
# which checkpoints and exits 75.
#BSUB -wa USR2
#BSUB -wt 5
# Exit code 75 ("checkpoint written, requeue me") makes LSF requeue the job (REQUEUE_EXIT_VALUES);
# it keeps its job id, so --resume auto finds the checkpoint.
#BSUB -Q "75"
# Output and errors (%J = job id); the directory must exist.
#BSUB -o outputs/logs/mnist_mig_%J.out
#BSUB -e outputs/logs/mnist_mig_%J.out

set -uo pipefail
USER="${USER:-$(id -un)}"

# --- site-specific settings (override in the environment at submit time) ----------------------
IMAGE="${IMAGE:-/ibmgpfs/$USER/containers/trainer-gpu.sif}"
BIND_MOUNTS="${BIND_MOUNTS:-/ibmgpfs,/GPFS}"
DATA_DIR="${DATA_DIR:-/ibmgpfs/$USER/data/fashion-mnist}"
RESULTS_DIR="${RESULTS_DIR:-/GPFS/$USER/results/mnist_mig}"
EPOCHS="${EPOCHS:-14}"
# 1: pick a free MIG instance; 0: use the whole card LSF gave us.
USE_MIG="${USE_MIG:-1}"

# --- the one switch: TRAINER_CPU_TEST=1 = no container, no GPU, no MIG, a tiny CPU job --------
TRAINER_CPU_TEST="${TRAINER_CPU_TEST:-0}"
if [[ "$TRAINER_CPU_TEST" == 1 ]]; then
  RUN=("${TRAINER_BIN:?TRAINER_CPU_TEST=1 needs TRAINER_BIN=/path/to/trainer}")
  DEVICE=(--device cpu)
  PREFLIGHT=(doctor)
  USE_MIG=0
  unset CUDA_VISIBLE_DEVICES
  read -r -a LIMITS <<<"${TRAINER_CPU_TEST_ARGS:---limit-train 640 --limit-test 200 --epochs 1}"
else
  command -v singularity >/dev/null || module load singularity 2>/dev/null || true
  command -v singularity >/dev/null || { echo "error: singularity not found (module load singularity?)"; exit 1; }
  RUN=(singularity exec --nv --bind "$BIND_MOUNTS" "$IMAGE" trainer)
  DEVICE=(--device cuda)
  PREFLIGHT=(doctor --require-gpu)
  LIMITS=(--epochs "$EPOCHS")
fi

RUN_DIR="$RESULTS_DIR/mnist_mig_${LSB_JOBID:-local}"
echo "=== $(date '+%F %T') start: LSF job ${LSB_JOBID:-local} on $(hostname) (${LSB_HOSTS:-no LSB_HOSTS}), run dir $RUN_DIR"

# --- a free MIG instance: CUDA_VISIBLE_DEVICES=<MIG UUID> -------------------------------------
if [[ "$USE_MIG" == 1 ]]; then
  mig="$("${RUN[@]}" mig-pick)"
  rc=$?
  case $rc in
  0) export CUDA_VISIBLE_DEVICES="$mig" ;;
  20) echo "=== MIG is off on this GPU: use the whole card (USE_MIG=0, j_exclusive=yes)"; exit 20 ;;
  21) echo "=== no free MIG instance right now: exit 75 so that LSF requeues the job"; exit 75 ;;
  *) echo "=== mig-pick failed with exit code $rc"; exit "$rc" ;;
  esac
  echo "=== MIG instance $CUDA_VISIBLE_DEVICES"
fi

# --- preflight ----------------------------------------------------------------------------------
"${RUN[@]}" "${PREFLIGHT[@]}"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "=== preflight failed with exit code $rc: not training"
  exit "$rc"
fi

# --- training, signals forwarded ---------------------------------------------------------------
mkdir -p "$RESULTS_DIR"
trainer_pid=""
forward() {
  echo "=== $(date '+%T') job shell got SIG$1, forwarding to the trainer (pid ${trainer_pid:-none})"
  [[ -n "$trainer_pid" ]] && kill -s "$1" "$trainer_pid" 2>/dev/null
}
trap 'forward USR2' USR2
trap 'forward USR1' USR1
trap 'forward TERM' TERM
trap 'forward INT' INT

CMD=("${RUN[@]}" train-mnist --data-dir "$DATA_DIR" "${DEVICE[@]}" "${LIMITS[@]}" --out "$RUN_DIR" --resume auto)
echo "=== running: ${CMD[*]}"
"${CMD[@]}" &
trainer_pid=$!
wait "$trainer_pid"
rc=$?
while kill -0 "$trainer_pid" 2>/dev/null; do
  wait "$trainer_pid"
  rc=$?
done
echo "=== $(date '+%T') trainer exit code $rc"
# 75: LSF requeues the job itself (#BSUB -Q "75"); nothing to run here.
exit "$rc"

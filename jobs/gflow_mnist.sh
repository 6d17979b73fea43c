#!/bin/bash
# MNIST on a single workstation managed by gflow (gflowd + gbatch). gflow sets
# CUDA_VISIBLE_DEVICES to the GPUs it gave the job. At the time limit gflow interrupts the job
# (SIGINT in its tmux executor, SIGTERM in its process executor); the trainer checkpoints and
# exits 75, and this script submits itself again (gflow has no requeue), so the next piece
# resumes from the checkpoint with --resume auto.
#
#   gflowd up                          # once (cargo install gflow, or pip install runqd)
#   gbatch jobs/gflow_mnist.sh         # directives below; command-line options override them
#   gqueue -a                          # jobs and states; gjob log <id> for the output
#   logs: ~/.local/share/gflow/logs/<job id>.log
#
# CPU smoke test (what CI submits to a real gflowd without GPUs):
#   TRAINER_CPU_TEST=1 TRAINER_BIN=$PWD/target/release/trainer DATA_DIR=... RESULTS_DIR=... \
#     gbatch --gpus 0 jobs/gflow_mnist.sh   # (these variables must be in gflowd's environment)
#
# --- gflow directives: lines that start with "# GFLOW" (no comment after them on the line) ---
# One GPU.
# GFLOW --gpus 1
# Time limit (HH:MM:SS); at the limit the job is interrupted and resubmits itself (see above).
# GFLOW --time 02:00:00
# Priority among this machine's jobs (higher runs first).
# GFLOW --priority 10

set -uo pipefail
USER="${USER:-$(id -un)}"

# --- site-specific settings (override in gflowd's environment) --------------------------------
# The trainer image; empty: the `trainer` binary on PATH.
IMAGE="${IMAGE:-}"
TRAINER="${TRAINER:-trainer}"
BIND_MOUNTS="${BIND_MOUNTS:-$HOME}"
DATA_DIR="${DATA_DIR:-$HOME/data/fashion-mnist}"
RESULTS_DIR="${RESULTS_DIR:-$HOME/results/mnist}"
# A fixed run name: every resubmitted piece continues the same run directory.
RUN_NAME="${RUN_NAME:-gflow_mnist}"
EPOCHS="${EPOCHS:-14}"
# Resubmit on exit 75, at most MAX_STARTS starts in all (a guard against loops).
RESUBMIT="${RESUBMIT:-1}"
MAX_STARTS="${MAX_STARTS:-20}"

# --- the one switch: TRAINER_CPU_TEST=1 = no container, no GPU, a tiny CPU job ---------------
TRAINER_CPU_TEST="${TRAINER_CPU_TEST:-0}"
if [[ "$TRAINER_CPU_TEST" == 1 ]]; then
  RUN=("${TRAINER_BIN:?TRAINER_CPU_TEST=1 needs TRAINER_BIN=/path/to/trainer}")
  DEVICE=(--device cpu)
  PREFLIGHT=(doctor)
  unset CUDA_VISIBLE_DEVICES
  # The resubmitted piece must not wait for a GPU either.
  RESUBMIT_ARGS=(--gpus 0)
  read -r -a LIMITS <<<"${TRAINER_CPU_TEST_ARGS:---limit-train 640 --limit-test 200 --epochs 1}"
else
  if [[ -n "$IMAGE" ]]; then
    RUN=(apptainer exec --nv --bind "$BIND_MOUNTS" "$IMAGE" trainer)
  else
    RUN=("$TRAINER")
  fi
  DEVICE=(--device cuda)
  PREFLIGHT=(doctor --require-gpu)
  RESUBMIT_ARGS=()
  LIMITS=(--epochs "$EPOCHS")
fi

RUN_DIR="$RESULTS_DIR/$RUN_NAME"
mkdir -p "$RUN_DIR"
starts=$(($(cat "$RUN_DIR/gflow_starts" 2>/dev/null || echo 0) + 1))
echo "$starts" >"$RUN_DIR/gflow_starts"
echo "=== $(date '+%F %T') start $starts: gflow task ${GFLOW_ARRAY_TASK_ID:-0} on $(hostname), GPUs ${CUDA_VISIBLE_DEVICES:-none}, run dir $RUN_DIR"

"${RUN[@]}" "${PREFLIGHT[@]}"
rc=$?
if [[ $rc -ne 0 ]]; then
  echo "=== preflight failed with exit code $rc: not training"
  exit "$rc"
fi

trainer_pid=""
forward() {
  echo "=== $(date '+%T') job shell got SIG$1, forwarding to the trainer (pid ${trainer_pid:-none})"
  [[ -n "$trainer_pid" ]] && kill -s "$1" "$trainer_pid" 2>/dev/null
}
trap 'forward INT' INT
trap 'forward TERM' TERM
trap 'forward USR1' USR1

# gflow's time limit arrives as INT or TERM: treat both as "checkpoint and requeue" (exit 75).
"${RUN[@]}" train-mnist --data-dir "$DATA_DIR" "${DEVICE[@]}" "${LIMITS[@]}" \
  --out "$RUN_DIR" --resume auto --requeue-signal USR1,USR2,INT,TERM &
trainer_pid=$!
wait "$trainer_pid"
rc=$?
while kill -0 "$trainer_pid" 2>/dev/null; do
  wait "$trainer_pid"
  rc=$?
done
echo "=== $(date '+%T') trainer exit code $rc"

if [[ $rc -eq 75 && "$RESUBMIT" == 1 ]]; then
  if ((starts >= MAX_STARTS)); then
    echo "=== $starts starts already (MAX_STARTS): not resubmitting; run gbatch $0 by hand"
    exit 75
  fi
  script="$(readlink -f "${BASH_SOURCE[0]}")"
  # gbatch prints "Submitted batch job N (...)".
  if gbatch "${RESUBMIT_ARGS[@]}" "$script"; then
    echo "=== checkpoint written; resubmitted $script to continue from it"
    exit 0
  fi
  echo "=== gbatch failed: resubmit by hand (gbatch $script); the checkpoint is in $RUN_DIR"
fi
exit "$rc"

#!/usr/bin/env bash
# One-shot GPU check: everything CUDA the trainer does, on one GPU machine, in one go.
#
#   scripts/gpu-check.sh [--bin PATH] [--features-bin PATH] [--libtorch DIR] [--data-dir DIR]
#                        [--out FILE] [--work DIR] [--no-tch] [--no-nccl] [--cuda-tests BIN]
#                        [--pytorch PYTHON]
#
#   --bin           the default release binary (target/release/trainer)
#   --features-bin  a `--features tch,cuda,mpi` release binary (target/features/release/trainer:
#                   `CARGO_TARGET_DIR=target/features cargo build --release --features
#                   tch,cuda,mpi`; scripts/test.sh builds its own in the quicker `ci-features`
#                   profile, not one to benchmark)
#   --libtorch DIR  LibTorch's lib/ of PyTorch 2.9.0 (default: from LD_LIBRARY_PATH)
#   --data-dir DIR  MNIST-format IDX files (default: Debian's Fashion-MNIST if installed, else
#                   a small synthetic set written here)
#   --out FILE      the JSON report (default gpu-check.json)
#   --no-tch        the features binary has no tch (a `--features cuda` build: a GPU machine
#                   without PyTorch 2.9.0's LibTorch): skip mnist-tch
#   --no-nccl       the features binary has no mpi: skip the NCCL all-reduce
#   --cuda-tests BIN  also run tests/backends/backend_cuda.rs from this binary (`cargo test --release
#                   --features cuda --test backends --no-run` prints it): cuda and
#                   cuda-fusion against flex, step by step (TRAINER_REQUIRE_GPU=1)
#   --pytorch PYTHON  bench with PyTorch on the CPU and on the GPU in the same run
#
# Steps, in order; the first failure stops the script with that step's exit code and names it.
# The report is rewritten after every step ("exit_code": null until the script ends):
#   nvrtc            find libnvrtc as cudarc will: the binary's CUDA 12.8 bindings look for
#                    libnvrtc.so / .so.12 / .so.11 …, never .so.13; a node with only CUDA 13's
#                    libnvrtc.so.13 (driver 580) gets a directory with a libnvrtc.so symlink
#                    first on LD_LIBRARY_PATH (the report says which file was used)
#   doctor           `trainer doctor --require-gpu --json` (default binary): no GPU stops here
#                    with doctor's exit code (10 no driver, 11 missing --nv, …)
#   doctor-features  the same with the features binary, plus one rank's NCCL all-reduce
#                    (TRAINER_CHECK_NCCL=1); its NVRTC finding says which library loaded
#   synth-cohort     a 20-subject, 100-node synthetic cohort for the CLG-ODE steps
#   mnist-tch        train-mnist, 1 epoch, --backend tch --device cuda (the default GPU path)
#   gnn-tch          train-gnn, 2 epochs of fold 0 on that cohort, --backend tch --device cuda
#                    (its log says the batch it settled and that the cohort's scans are held on
#                    the GPU; bench-gnn's tch rows hold them too)
#   mnist-graph      (figure-like: recorded, the script goes on) train-mnist with --cuda-graph
#                    against the eager run, every step's loss within 1e-3 relative (Adam's bias
#                    corrections in its kernel; dropout's masks the same), and a graph run without
#                    --log-steps giving the same epoch row
#   (figures: a failure is recorded in the report and the script goes on; each has a timeout;
#   the ones a run cut short needs most come first)
#   bench-gnn        trainer bench gnn, 1000 subjects x 400 nodes, batch 64 (a GPU run's own batch
#                    grows to what the memory holds; gnn-tch above prints the batch it settled):
#                    CLG-ODE seconds per epoch, flex on all cores and tch on the CPU and the GPU,
#                    2 timed steps after 1 warm-up (at batch 2 and 16 with 6 steps the CPU rows
#                    alone ran past 150 s on the H200's 16 cores, 2026-12-04)
#   bench-gnn-2cores bench-gnn's flex on 2 cores at batch 2 (RAYON_NUM_THREADS=2: a CPU-queue job)
#   bench-mnist-64   trainer bench mnist at batch 64: flex on all the host's cores, tch, cuda,
#                    cuda-fusion on the GPU (PyTorch on CPU and GPU with --pytorch: on the GPU
#                    with its data on the device, the reference, host-fed per step, and its
#                    step replayed as a CUDA graph: the ceiling, reported), same
#                    data and steps, 3 interleaved rounds; ops/uploads/reads per step per row
#   mnist-cuda       train-mnist, 1 epoch, --backend cuda --device cuda
#   gnn-cuda         train-gnn, 2 epochs, --backend cuda --device cuda
#   cuda-tests       (with --cuda-tests) the agreement tests on the GPU
#   bench-gnn-cuda   bench-gnn on the cuda backend
#   bench-mnist-512  the same as bench-mnist-64 at batch 512
#   mig-pick         trainer mig-pick, a dry run: 0 (a free slice), 20 (MIG off) or 21 (all busy)
#
# Commit the report under benches/gpu/ (gpu-check-<gpu>-<date>.json) and name it in
# src/cluster/doctor/crossover.rs: doctor's CPU-or-GPU advice is computed from its bench-gnn rows.
set -uo pipefail

BIN=target/release/trainer
FBIN=target/features/release/trainer
LIBTORCH=""
DATA=""
OUT=gpu-check.json
WORK=""
TCH=1
NCCL=1
CUDA_TESTS=""
PYTORCH=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --features-bin) FBIN=$2; shift 2 ;;
    --libtorch) LIBTORCH=$2; shift 2 ;;
    --data-dir) DATA=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --no-tch) TCH=0; shift ;;
    --no-nccl) NCCL=0; shift ;;
    --cuda-tests) CUDA_TESTS=$2; shift 2 ;;
    --pytorch) PYTORCH=$2; shift 2 ;;
    -h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$WORK" ] || WORK=$(mktemp -d -t gpu-check.XXXXXX)
mkdir -p "$WORK"
T0=$(date +%s)
STEPS=""    # JSON objects of the steps run, comma separated
EXTRA=""    # further top-level JSON members, each ending in a comma

# JSON string of $1.
jstr() {
  printf '"%s"' "$(printf '%s' "$1" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/\t/\\t/g' \
    | tr -d '\000-\010\013-\037' | awk 'NR > 1 { printf "\\n" } { printf "%s", $0 }')"
}

# The report so far; $1 = the failed step or empty, $2 = exit code ("null" while the script
# runs: the report is rewritten after every step, so a run cut short by a time limit still leaves
# the steps it finished).
write_report() {
  local failed=null
  [ -n "$1" ] && failed=$(jstr "$1")
  printf '{%s"failed":%s,"exit_code":%s,"seconds":%s,"work_dir":%s,"steps":[%s]}\n' \
    "$EXTRA" "$failed" "$2" "$(( $(date +%s) - T0 ))" "$(jstr "$WORK")" "$STEPS" >"$OUT"
}

# judge NAME "OK_CODES" RC COMMAND LOG: records a step that ran; stops the script on failure.
judge() {
  local name=$1 ok=$2 rc=$3 cmd=$4 log=$5 passed=false
  case " $ok " in *" $rc "*) passed=true ;; esac
  [ -n "$STEPS" ] && STEPS="$STEPS,"
  STEPS="$STEPS{\"name\":$(jstr "$name"),\"command\":$(jstr "$cmd"),\"exit_code\":$rc,\"ok\":$passed,\"seconds\":$(( $(date +%s) - STEP_T0 )),\"log_tail\":$(jstr "$(tail -n 15 "$log")")}"
  if [ "$passed" != true ]; then
    local code=$rc
    [ "$code" -eq 0 ] && code=1
    write_report "$name" "$code"
    tail -n 15 "$log" >&2
    echo "gpu-check: FAILED at step '$name' (exit $rc); report in $OUT, logs in $WORK" >&2
    exit "$code"
  fi
  write_report "" null
}

# step NAME "OK_CODES" CMD...: runs CMD (output in $WORK/NAME.log) and judges it.
step() {
  local name=$1 ok=$2
  shift 2
  echo "gpu-check: $name: $*" >&2
  STEP_T0=$(date +%s)
  "$@" >"$WORK/$name.log" 2>&1
  judge "$name" "$ok" $? "$*" "$WORK/$name.log"
}

# soft_step NAME CMD...: as step, but a failure is recorded (ok: false) and the script goes on.
SOFT_FAILED=""
soft_step() {
  local name=$1 rc
  shift
  echo "gpu-check: $name: $*" >&2
  STEP_T0=$(date +%s)
  "$@" >"$WORK/$name.log" 2>&1
  rc=$?
  [ -n "$STEPS" ] && STEPS="$STEPS,"
  STEPS="$STEPS{\"name\":$(jstr "$name"),\"command\":$(jstr "$*"),\"exit_code\":$rc,\"ok\":$([ $rc = 0 ] && echo true || echo false),\"seconds\":$(( $(date +%s) - STEP_T0 )),\"log_tail\":$(jstr "$(tail -n 15 "$WORK/$name.log")")}"
  [ $rc = 0 ] || { SOFT_FAILED="$SOFT_FAILED $name"; echo "gpu-check: $name failed (exit $rc), going on" >&2; }
  write_report "" null
}

# --- nvrtc: what cudarc (CUDA 12.8 bindings) will load ----------------------------------------
find_lib() { # the first file named $1 in LD_LIBRARY_PATH, the CUDA dirs or ldconfig's cache
  local d
  for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/local/cuda/lib64 /usr/local/cuda-*/lib64 \
    /usr/local/cuda-*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
    [ -e "$d/$1" ] && { readlink -f "$d/$1"; return 0; }
  done
  ldconfig -p 2>/dev/null | awk -v n="$1" '$1 == n { print $NF; exit }'
}
NVRTC_USED="" NVRTC_NOTE=""
for name in libnvrtc.so libnvrtc.so.12 libnvrtc.so.11; do
  f=$(find_lib "$name")
  if [ -n "$f" ]; then NVRTC_USED=$f; NVRTC_NOTE="found as $name, a name cudarc looks for"; break; fi
done
if [ -z "$NVRTC_USED" ]; then
  f=$(find_lib libnvrtc.so.13)
  if [ -n "$f" ]; then
    mkdir -p "$WORK/nvrtc"
    ln -sf "$f" "$WORK/nvrtc/libnvrtc.so"
    export LD_LIBRARY_PATH="$WORK/nvrtc:$(dirname "$f")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    NVRTC_USED=$f
    NVRTC_NOTE="only CUDA 13's libnvrtc.so.13: linked as $WORK/nvrtc/libnvrtc.so, first on LD_LIBRARY_PATH (CUDA 13 does not compile for V100)"
  else
    NVRTC_NOTE="no libnvrtc.so, .so.12, .so.11 or .so.13 found: the cuda backend cannot compile kernels"
  fi
fi
echo "gpu-check: nvrtc: ${NVRTC_USED:-none} ($NVRTC_NOTE)" >&2
EXTRA="\"nvrtc\":{\"file\":$(jstr "$NVRTC_USED"),\"note\":$(jstr "$NVRTC_NOTE")},"
[ -n "$LIBTORCH" ] && export LD_LIBRARY_PATH="$LIBTORCH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# --- doctor (default binary): without a GPU the script stops here with doctor's code --------
echo "gpu-check: doctor: $BIN doctor --require-gpu --json" >&2
STEP_T0=$(date +%s)
"$BIN" doctor --require-gpu --json >"$WORK/doctor.json" 2>"$WORK/doctor.log"
rc=$?
if [ -s "$WORK/doctor.json" ]; then
  EXTRA="$EXTRA\"doctor\":$(tr -d '\n' <"$WORK/doctor.json"),"
  grep -o '"message": "[^"]*"' "$WORK/doctor.json" | sed 's/"message": //' >>"$WORK/doctor.log"
fi
judge doctor 0 "$rc" "$BIN doctor --require-gpu --json" "$WORK/doctor.log"

# --- the features binary: tch + cuda (+ mpi for NCCL) ----------------------------------------
[ -x "$FBIN" ] || { STEPS="${STEPS:+$STEPS,}{\"name\":\"features-bin\",\"ok\":false,\"command\":$(jstr "$FBIN")}"; write_report features-bin 1; echo "gpu-check: FAILED at step 'features-bin': $FBIN is not an executable" >&2; exit 1; }
step doctor-features 0 env TRAINER_CHECK_NCCL=$NCCL "$FBIN" doctor --require-gpu
# The driver, and for each GPU backend of the features binary the CUDA compatibility rule that
# decided and whether it runs (src/cluster/compat.rs): the report's "doctor_features".
if "$FBIN" doctor --require-gpu --json >"$WORK/doctor-features.json" 2>/dev/null ||
  [ -s "$WORK/doctor-features.json" ]; then
  EXTRA="$EXTRA\"doctor_features\":$(tr -d '\n' <"$WORK/doctor-features.json"),"
  write_report "" null
fi

if [ -z "$DATA" ]; then
  if [ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    DATA=/usr/share/datasets/fashion-mnist
  else # a small synthetic MNIST-format set: random pixels, labels 0..9
    DATA=$WORK/mnist
    mkdir -p "$DATA"
    be32() { printf "\\x$(printf %02x $(($1 >> 24 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 & 255)))"; }
    for split in train:2000 t10k:500; do
      p=${split%%:*} n=${split##*:}
      { printf '\x00\x00\x08\x03'; be32 "$n"; be32 28; be32 28; head -c $((n * 784)) /dev/urandom; } >"$DATA/$p-images-idx3-ubyte"
      { printf '\x00\x00\x08\x01'; be32 "$n"; for _ in $(seq $((n / 10))); do printf '\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09'; done; } >"$DATA/$p-labels-idx1-ubyte"
    done
  fi
fi
EXTRA="$EXTRA\"data_dir\":$(jstr "$DATA"),"

MNIST=(train-mnist --data-dir "$DATA" --epochs 1 --limit-train 2000 --limit-test 500)
GNN_DATA=(--sc-dir "$WORK/cohort/sc" --morph-root "$WORK/cohort/morph"
  --subject-info-csv "$WORK/cohort/subject_info_sc.csv" --cv-fold 0 --max-epochs 2)
step synth-cohort 0 "$FBIN" synth-connectome --subjects 20 --nodes 100 --seed 1 --out "$WORK/cohort"
if [ "$TCH" = 1 ]; then
  step mnist-tch 0 "$FBIN" "${MNIST[@]}" --backend tch --device cuda --out "$WORK/mnist-tch"
  step gnn-tch 0 "$FBIN" train-gnn "${GNN_DATA[@]}" --results-dir "$WORK/gnn-tch" --backend tch \
    --device cuda
  # --cuda-graph: the recorded step against the eager one, loss by loss (steps.csv), and the
  # deferred reads of a graph run without --log-steps giving the same epoch row.
  soft_step mnist-graph bash -c '
    "$1" "${@:3}" --backend tch --device cuda --log-steps --out "$2/mnist-eager-steps" &&
    "$1" "${@:3}" --backend tch --device cuda --log-steps --cuda-graph --out "$2/mnist-graph-steps" &&
    "$1" "${@:3}" --backend tch --device cuda --cuda-graph --out "$2/mnist-graph" &&
    awk -F, -v tol=1e-3 "FNR == 1 { next } NR == FNR { a[\$1] = \$3; next }
      { d = \$3 - a[\$1]; if (d < 0) d = -d; r = d / (a[\$1] < 0 ? -a[\$1] : a[\$1]);
        if (r > worst) worst = r; n++ }
      END { printf \"%d steps compared, worst relative difference %g (tolerance %g)\\n\", n, worst, tol;
            exit !(n > 0 && worst <= tol) }" \
      "$2/mnist-eager-steps/steps.csv" "$2/mnist-graph-steps/steps.csv" &&
    cmp <(cut -d, -f1-4 "$2/mnist-graph-steps/metrics.csv") <(cut -d, -f1-4 "$2/mnist-graph/metrics.csv") &&
    echo "graph run with and without --log-steps: same epoch row"
  ' _ "$FBIN" "$WORK" "${MNIST[@]}"
fi
# --- the figures (a failure is recorded and the next one runs: every figure counts) --------------
# The ones a run cut short should still have come first: CLG-ODE at 1000 x 400 (tch at batch 2, 16
# and 64, flex on all cores and on 2), MNIST at batch 64, then the cuda backend's own training
# steps and bench, then MNIST at batch 512.
# MNIST, same run, side by side: PyTorch (CPU and GPU, with --pytorch), flex on all the host's
# cores, tch, cuda and cuda-fusion on the GPU.
GPU_BACKENDS=cuda,cuda-fusion
[ "$TCH" = 1 ] && GPU_BACKENDS=tch,$GPU_BACKENDS
BENCH=""
bench_mnist() {
  soft_step "bench-mnist-$1" timeout 240 "$FBIN" bench mnist --data-dir "$DATA" --batch-size "$1" \
    --steps 20 --rounds 3 --backends "flex,$GPU_BACKENDS" ${PYTORCH:+--pytorch "$PYTORCH"} \
    --json "$WORK/bench-$1.json"
  [ -s "$WORK/bench-$1.json" ] && BENCH="${BENCH:+$BENCH,}\"$1\":$(tr -d '\n' <"$WORK/bench-$1.json")"
  EXTRA_MNIST="\"bench_mnist\":{$BENCH},"
}
# CLG-ODE on a 1000-subject, 400-node cohort at the reference's batch of 2 and at 16 (a GPU runs
# a batch's subjects as one computation): 6 timed steps after 2 warm-up steps (the GPU compiles
# there), extrapolated to an epoch; $1 = step name, $2 = its timeout, then env and flags. One
# run per backend, so that a slow one cannot take the others' figures with it.
GNN=(bench gnn --subjects 1000 --nodes 400 --batch-size 2,16 --steps 6 --warmup 2)
GNN64=(bench gnn --subjects 1000 --nodes 400 --batch-size 64 --steps 2 --warmup 1)
EXTRA_MNIST="" EXTRA_GNN=""
bench_gnn() {
  local name=$1 limit=$2
  shift 2
  soft_step "$name" timeout "$limit" env "$@" --json "$WORK/$name.json"
  [ -s "$WORK/$name.json" ] && EXTRA_GNN="$EXTRA_GNN\"${name//-/_}\":$(tr -d '\n' <"$WORK/$name.json"),"
}
EXTRA_BASE=$EXTRA
figures() { EXTRA="$EXTRA_BASE$EXTRA_MNIST$EXTRA_GNN"; write_report "" null; }
GNN_BACKENDS=flex
[ "$TCH" = 1 ] && GNN_BACKENDS=flex,tch
bench_gnn bench-gnn 200 "$FBIN" "${GNN64[@]}" --backends "$GNN_BACKENDS"
figures
# flex on 2 cores: a CPU-queue job
# (batch 2 only: on a CPU the cost per subject hardly depends on the batch)
bench_gnn bench-gnn-2cores 150 RAYON_NUM_THREADS=2 "$FBIN" bench gnn --subjects 1000 --nodes 400 \
  --steps 6 --warmup 1 --backends flex
figures
bench_mnist 64
figures
# --- the cuda backend trains (the tch steps above are the default GPU path) ----------------------
step mnist-cuda 0 "$FBIN" "${MNIST[@]}" --backend cuda --device cuda --out "$WORK/mnist-cuda"
step gnn-cuda 0 "$FBIN" train-gnn "${GNN_DATA[@]}" --results-dir "$WORK/gnn-cuda" --backend cuda \
  --device cuda
if [ -n "$CUDA_TESTS" ]; then
  step cuda-tests 0 env TRAINER_REQUIRE_GPU=1 "$CUDA_TESTS" backend_cuda:: --test-threads 1 --nocapture
fi
bench_gnn bench-gnn-cuda 150 "$FBIN" "${GNN[@]}" --backends cuda
figures
bench_mnist 512
figures
step mig-pick "0 20 21" "$FBIN" mig-pick

EXTRA="$EXTRA\"failed_figures\":$(jstr "${SOFT_FAILED# }"),"
write_report "" 0
echo "gpu-check: all checks passed in $(( $(date +%s) - T0 )) s${SOFT_FAILED:+ (figures that failed:$SOFT_FAILED)}; report in $OUT" >&2

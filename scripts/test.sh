#!/usr/bin/env bash
# The README's second command, and what CI runs (.ci/run): installs what the tests need, then
#   1. the default build (flex CPU backend + MPI data-parallel) and every test but stage 2's,
#      against a real one-node Slurm and OpenMPI started here;
#   2. the job templates and container images (scripts/test-jobs.sh; scripts/test-lists.sh
#      names the tests each stage runs);
#   3. the `tch` + `cuda` + `wgpu` (+ `mpi`) build against PyTorch 2.9.0, with the tests of those
#      backends (CUDA itself cannot run without a GPU: that build is compiled and its no-driver
#      path tested; wgpu runs the same CubeCL kernels on Mesa's software Vulkan, lavapipe,
#      installed by scripts/setup-vulkan.sh), and tests/backends/pt_checkpoint.rs
#      (scripts/pt2safetensors.py: needs torch in python3).
# Stage 3's downloads (PyTorch, Mesa) run in the background from the end of the set-up on, and
# its build (at nice 19) from the end of the default build on, beside the default tests.
# Each stage prints its wall time. TRAINER_SKIP_FEATURES=1 skips stage 3.
set -euo pipefail
cd "$(dirname "$0")/.."
stage() { echo; echo "=== $* ($(date +%T))"; STAGE_T0=$(date +%s); }
done_stage() { echo "=== done in $(( $(date +%s) - STAGE_T0 )) s"; }
T_ALL=$(date +%s)
# Which CPU ran the suite (the GEMM kernels, hence float summation orders, follow it).
echo "=== CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) cores," \
  "SIMD: $(grep -m1 '^flags' /proc/cpuinfo | grep -o -w -E 'avx2|avx512f|fma' | sort -u | xargs)"

stage "setup (packages, data, MPI, Slurm)"
scripts/setup.sh
if ! command -v mpirun >/dev/null || [ ! -e /usr/include/x86_64-linux-gnu/openmpi ] && [ ! -e /usr/lib/x86_64-linux-gnu/openmpi/include ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenmpi-dev openmpi-bin libclang-dev >/dev/null
fi
eval "$(scripts/slurm-up.sh)"
trap 'scripts/slurm-down.sh || true' EXIT
export TRAINER_REQUIRE_SLURM=1
# Stage 3's downloads (PyTorch's CUDA wheel, ~3 GB, and Mesa's lavapipe: about 5 minutes each
# on a fresh machine) wait on the network, not the CPU: they run in the background from here,
# beside the default build and tests, and stage 3 waits for them. Mesa comes from apt, so it
# starts after this stage's apt work and is waited for before scripts/test-jobs.sh's
# (scripts/apptainer-up.sh) can take apt's lock.
BG_PIDS=()
mkdir -p target
if [ "${TRAINER_SKIP_FEATURES:-0}" != 1 ]; then
  scripts/setup-vulkan.sh >target/ci-setup-vulkan.log 2>&1 &
  VULKAN_PID=$!
  scripts/setup-torch.sh >target/ci-torch-env.sh 2>target/ci-setup-torch.log &
  TORCH_PID=$!
  BG_PIDS=("$VULKAN_PID" "$TORCH_PID")
  trap 'kill "${BG_PIDS[@]}" 2>/dev/null || true; scripts/slurm-down.sh || true' EXIT
fi
# Waits for one of those background set-ups: its log on failure, and the script's status.
wait_setup() {
  local pid=$1 log=$2 t0
  t0=$(date +%s)
  if ! wait "$pid"; then
    echo "=== $log: the set-up failed:" >&2
    cat "$log" >&2
    return 1
  fi
  echo "=== $log: set up in the background (waited $(( $(date +%s) - t0 )) s for it here)"
}
done_stage

stage "build (default backend + mpi)"
# --workspace: the fast CPU kernels' crate (crates/fast-cpu) and its unit tests too, in the same
# build graph (a `-p fast-cpu` of its own would resolve other features and build Burn again).
cargo build --release --features mpi --workspace --all-targets
done_stage

# Stage 3's build starts here, in the background at the lowest priority (nice 19): the default
# tests below often leave a core idle (waiting on Slurm, on processes they start, on images), and
# the build takes that time instead of running after them. Its own environment (PyTorch's
# variables) stays in its subshell, so the default tests run as before.
if [ "${TRAINER_SKIP_FEATURES:-0}" != 1 ]; then
  wait_setup "$TORCH_PID" target/ci-setup-torch.log
  FEATURES_T0=$(date +%s)
  # The binary and the backend tests only: the library's unit tests and the other integration
  # tests run in the default build (a second compile of the library with five backends in test
  # mode, and forty more test binaries, would add about ten minutes). A session of its own
  # (setsid), so that a failed run stops the whole build (kill -- -PID).
  setsid nice -n 19 bash -c 'eval "$(cat target/ci-torch-env.sh)"
    CARGO_TARGET_DIR=target/features exec cargo build --profile ci-features \
      --features tch,cuda,wgpu,mpi --bins --test backends' >target/ci-features-build.log 2>&1 &
  FEATURES_PID=$!
  BG_PIDS+=("-$FEATURES_PID")
  trap 'kill -- "${BG_PIDS[@]}" 2>/dev/null || true; scripts/slurm-down.sh || true' EXIT
fi

stage "tests (default backend + mpi)"
# Case budgets of the fuzz properties (tests/fuzz_*.rs, ~30 s at 2000 per parser) and of the
# hostlist property test against scontrol (tests/cluster/cluster_hostlist_slurm.rs, ~20 s at 2500).
export TRAINER_FUZZ_CASES="${TRAINER_FUZZ_CASES:-2000}" TRAINER_HOSTLIST_CASES="${TRAINER_HOSTLIST_CASES:-2500}"
# Every test binary but the one scripts/test-jobs.sh runs below; each test file that mostly
# waits on Slurm's clock in a cargo run of its own, beside the others (scripts/test-lists.sh).
source scripts/test-lists.sh
mapfile -t others < <(test_flags "${OTHER_TEST_BINARIES[@]}")
mapfile -t skipped < <(skip_flags "${SLURM_WAITING_TESTS[@]}")
CARGO_TEST_ARGS=(--release --features mpi)
start_beside "${SLURM_WAITING_TESTS[@]}"
trap 'kill -- "${BESIDE_PIDS[@]}" "${BG_PIDS[@]}" 2>/dev/null || true; scripts/slurm-down.sh || true' EXIT
# (host_memory has no libtest harness: it ignores the --skip filters and runs whole.)
cargo test "${CARGO_TEST_ARGS[@]}" --workspace --lib --bins "${others[@]}" -- "${skipped[@]}"
cargo test "${CARGO_TEST_ARGS[@]}" --doc
wait_beside
done_stage

stage "thread counts (RAYON_NUM_THREADS=1 and 4: the cross-process, cross-thread comparisons)"
# The comparisons across processes and ranks, and the fixtures, must not depend on the thread
# count (the fast kernels cut work by shape): run them again with one thread and oversubscribed.
for threads in 1 4; do
  RAYON_NUM_THREADS=$threads cargo test "${CARGO_TEST_ARGS[@]}" --test engine --test gnn -- \
    ddp:: ddp_gnn:: fast_cpu:: engine_regression::
done
done_stage

if [ -n "${VULKAN_PID:-}" ]; then
  wait_setup "$VULKAN_PID" target/ci-setup-vulkan.log
fi

if [ -x scripts/test-jobs.sh ]; then
  stage "job templates and containers"
  scripts/test-jobs.sh
  done_stage
fi

if [ "${TRAINER_SKIP_FEATURES:-0}" != 1 ]; then
  stage "build (tch + cuda + wgpu + mpi), started in the background after the default build"
  # A separate target dir keeps the default build's artefacts (Burn's features differ). One
  # build for the three backends: cuda and wgpu share Burn's CubeCL crates (one compile).
  # Cargo.toml's `ci-features` profile: release with LLVM's quick optimisations and no debug
  # info, built in 18 minutes instead of 25 on the 2-core CI machine; its tests run as fast.
  if ! wait "$FEATURES_PID"; then
    cat target/ci-features-build.log >&2
    echo "=== the tch + cuda + wgpu build failed" >&2
    exit 1
  fi
  grep -E '^ *(Finished|warning|error)' target/ci-features-build.log || true
  echo "=== the build took $(( $(date +%s) - FEATURES_T0 )) s from its start (waited $(( $(date +%s) - STAGE_T0 )) s for it here)"
  eval "$(cat target/ci-torch-env.sh)"
  export CARGO_TARGET_DIR=target/features
  profile=(--profile ci-features)
  done_stage
  stage "tests (tch + cuda + mpi)"
  # tests/backends/pt_checkpoint.rs needs python3 with torch (on PATH since setup-torch.sh): required here.
  export TRAINER_REQUIRE_TORCH=1
  # tests/backends/backend_cuda.rs says SKIP without an NVIDIA driver (it runs in GPU sessions:
  # scripts/gpu-check.sh --cuda-tests); here it is compiled and its skip path runs.
  cargo test "${profile[@]}" --features tch,cuda,wgpu,mpi --test backends -- --skip backend_wgpu::
  # The GPU image's definition against this binary, in seconds (no image: the full build,
  # scripts/build-gpu-image.sh, takes minutes and 7 GB; see containers/README.md).
  scripts/build-gpu-image.sh --check-only --bin target/features/ci-features/trainer
  done_stage
  stage "wgpu on lavapipe (CubeCL kernels on Mesa's software Vulkan, against flex)"
  cargo test "${profile[@]}" --features tch,cuda,wgpu,mpi --test backends -- backend_wgpu:: --nocapture
  done_stage
fi
echo "=== all stages done in $(( $(date +%s) - T_ALL )) s"

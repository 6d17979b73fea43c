#!/usr/bin/env bash
# The README's second command, and what CI runs (.ci/run): installs what the tests need, then
#   1. the default build (flex only) and every test;
#   2. the `tch` + `cuda` build against PyTorch 2.9.0, with the tests that need those backends
#      (CUDA itself cannot run here: that build is compiled and its no-driver path tested).
# Each stage prints its wall time. Set TRAINER_SKIP_FEATURES=1 to run stage 1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
stage() { echo; echo "=== $* ($(date +%T))"; STAGE_T0=$(date +%s); }
done_stage() { echo "=== done in $(( $(date +%s) - STAGE_T0 )) s"; }

stage "setup (packages, data, Slurm)"
scripts/setup.sh
eval "$(scripts/slurm-up.sh)"
trap 'scripts/slurm-down.sh || true' EXIT
export TRAINER_REQUIRE_SLURM=1
done_stage

stage "default build + tests"
cargo build --release --all-targets
cargo test --release
done_stage

if [ "${TRAINER_SKIP_FEATURES:-0}" != 1 ]; then
  stage "PyTorch 2.9.0 for the tch backend"
  eval "$(scripts/setup-torch.sh)"
  done_stage
  stage "tch + cuda build + backend tests"
  # A separate target dir keeps the default build's artefacts (Burn features differ).
  export CARGO_TARGET_DIR=target/features
  cargo build --release --features tch,cuda --all-targets
  cargo test --release --features tch,cuda --test backend_errors --test backend_tch --lib
  done_stage
fi

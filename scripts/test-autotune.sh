#!/usr/bin/env bash
# The autotune cache against CubeCL itself, on Mesa's software Vulkan (lavapipe): a warm-up
# (`--autotune-warm`) fills `--autotune-cache DIR`, the run after it reads the choices and tunes
# nothing, a torn cache file is named in one warning (tests/backends/backend_wgpu.rs,
# `an_autotune_warm_up_fills_the_cache_and_the_run_after_it_tunes_nothing`, about 2 minutes).
#
# Not part of .ci/run: it needs a build of its own (`--features wgpu,autotune`), and a binary with
# autotune tunes every new shape cold, which would make the other wgpu tests of the CI's features
# build take over 12 minutes instead of a few. What the trainer does with the cache (created when
# missing, read from a private copy when read-only, torn entries counted and named, the summary
# line) is unit-tested in the default build (src/backend/autotune.rs), which CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-vulkan.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/autotune}"
cargo test --profile ci-features --features wgpu,autotune --test backends -- \
  backend_wgpu::an_autotune_warm_up_fills_the_cache_and_the_run_after_it_tunes_nothing --nocapture

#!/usr/bin/env bash
# CI part for jobs/ and containers/ (scripts/test.sh calls it; it also runs on its own):
#   1. set-up: Fashion-MNIST (scripts/setup.sh), the one-node Slurm (scripts/slurm-up.sh, reused
#      when it is already up), gflow from PyPI (`runqd`, into a virtual environment; the test
#      starts and stops its own gflowd by pid), and Apptainer 1.4.5 (scripts/apptainer-up.sh);
#   2. the tests that submit jobs/ to Slurm and gflow, run the LSF template locally, check the
#      container definitions, and build + run containers/trainer-cpu.def with Apptainer.
# Each stage prints its wall time. Daemons this script starts are stopped by their pid files.
set -euo pipefail
cd "$(dirname "$0")/.."
stage() { echo; echo "=== $* ($(date +%T))"; STAGE_T0=$(date +%s); }
done_stage() { echo "=== done in $(( $(date +%s) - STAGE_T0 )) s"; }

stage "jobs/containers set-up: data, Slurm"
scripts/setup.sh
export SLURM_CONF="${SLURM_CONF:-${TRAINER_SLURM_DIR:-/tmp/trainer-slurm}/slurm.conf}"
if ! { [ -f "$SLURM_CONF" ] && sinfo -h >/dev/null 2>&1; }; then
  eval "$(scripts/slurm-up.sh)"
  trap 'scripts/slurm-down.sh || true' EXIT
fi
export TRAINER_REQUIRE_SLURM=1
done_stage

stage "jobs/containers set-up: gflow (pip install runqd)"
GFLOW_VENV="${TRAINER_GFLOW_VENV:-/var/tmp/trainer-gflow-venv}"
if [ ! -x "$GFLOW_VENV/bin/gflowd" ]; then
  python3 -m venv "$GFLOW_VENV"
  "$GFLOW_VENV/bin/pip" install -q --disable-pip-version-check runqd==0.4.18
fi
export TRAINER_GFLOW_BIN="$GFLOW_VENV/bin" TRAINER_REQUIRE_GFLOW=1
"$TRAINER_GFLOW_BIN/gflowd" --version | head -n1
done_stage

stage "jobs/containers set-up: Apptainer (Debian sid rootfs)"
eval "$(scripts/apptainer-up.sh)"
export TRAINER_REQUIRE_APPTAINER=1
done_stage

stage "jobs/containers tests"
# jobs/ddp_q_ai8.sh needs a binary built with the `mpi` feature (else its submission test prints
# SKIP). TRAINER_JOBS_FEATURES=auto (default) builds with it when OpenMPI's and libclang's
# development files are installed (cluster.md: libopenmpi-dev openmpi-bin libclang-dev); set it
# to "" for the default build or to a feature list.
features=()
case "${TRAINER_JOBS_FEATURES-auto}" in
auto)
  if ldconfig -p | grep -q 'libmpi\.so ' && ldconfig -p | grep -q 'libclang' && command -v mpirun >/dev/null; then
    features=(--features mpi)
    # jobs/ddp_q_ai8.sh's submission then runs, never skips.
    export TRAINER_REQUIRE_MPI=1
  fi
  ;;
"") ;;
*) features=(--features "$TRAINER_JOBS_FEATURES") ;;
esac
echo "cargo features for the jobs tests: ${features[*]:-(default)}"
source scripts/test-lists.sh
CARGO_TEST_ARGS=(--release "${features[@]}")
start_beside "${JOBS_TESTS[@]}"
wait_beside
done_stage

#!/usr/bin/env bash
# Installs what building, the README demo and the tests need on a Debian 12 machine (idempotent):
#   * dataset-fashion-mnist: real Fashion-MNIST (gzipped IDX) under /usr/share/datasets/;
#   * Python's safetensors + numpy: the tests read checkpoints back from Python; scipy: the
#     paired statistics of `trainer compare --against` are checked against it; statsmodels: its
#     Holm-adjusted p-values likewise (multipletests); tensorboard: its
#     event reader checks the event files every run writes (tests/engine/tensorboard_events.rs).
# Slurm (scripts/slurm-up.sh) and PyTorch for the tch build (scripts/setup-torch.sh) are
# installed by their own scripts, which scripts/test.sh calls.
set -euo pipefail
need=()
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >&2
fi
python3 -c 'import safetensors, numpy, scipy, statsmodels, tensorboard' 2>/dev/null ||
  python3 -m pip install -q --disable-pip-version-check safetensors numpy scipy statsmodels tensorboard >&2
command -v cargo >/dev/null || { echo "setup: cargo not found: install Rust (rustup)" >&2; exit 1; }

#!/usr/bin/env bash
# Installs PyTorch 2.9.0 (what tch 0.22 / burn-tch 0.21 expect) into a virtual environment and
# prints the variables a `--features tch` build and run need. Idempotent.
#   eval "$(scripts/setup-torch.sh)"
set -euo pipefail
venv="${TRAINER_TORCH_VENV:-$HOME/.cache/trainer/torch-2.9.0}"
# numpy too: torch does not depend on it, and scripts/pt2safetensors.py (tests/backends/pt_checkpoint.rs,
# run with this venv's python) needs it.
# nvidia-cuda-nvcc-cu12 too, for its headers only: CUDA's runtime headers (which the wheel's
# nvidia/cuda_runtime brings) include `crt/*.h` from it; build.rs compiles the shim's CUDA graphs
# (`--cuda-graph`) against them. Same CUDA version as the wheel's runtime (12.8).
if ! "$venv/bin/python" -c 'import numpy, torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.9.0")' 2>/dev/null; then
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check torch==2.9.0 numpy >&2
fi
if ! "$venv/bin/python" -c 'import importlib.metadata as m; m.version("nvidia-cuda-nvcc-cu12")' 2>/dev/null; then
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps nvidia-cuda-nvcc-cu12==12.8.93 >&2
fi
lib="$("$venv/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')"
echo "export LIBTORCH_USE_PYTORCH=1"
echo "export PATH=\"$venv/bin:\$PATH\""
echo "export LD_LIBRARY_PATH=\"$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
# The wheel's NVRTC (CUDA 12.8): tests/backends/cuda_cubin.rs compiles kernels with it.
nvrtc="$("$venv/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(os.path.dirname(torch.__file__)), "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.12"))')"
echo "export TRAINER_NVRTC_LIB=\"$nvrtc\""

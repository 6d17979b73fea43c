#!/usr/bin/env bash
# Builds a `--features tch,cuda` trainer for a GPU machine whose PyTorch is not ours (2.9.0), e.g.
# a lent H200 with PyTorch 2.11.0+cu130 and no network: against PyTorch's own wheel of that
# version (the same build of LibTorch as there), stripped and xz-compressed to carry.
#
#   scripts/build-for-torch.sh [VERSION] [OUT]      # default 2.11.0, gpubin/trainer.xz
#
# There (VERSION's torch installed in python3; benches/README.md, "The first full
# scripts/gpu-check.sh run"):
#   python3 -c "import lzma,shutil; shutil.copyfileobj(lzma.open('gpubin/trainer.xz'), open('/tmp/trainer','wb'))"
#   chmod +x /tmp/trainer
#   scripts/gpu-check.sh --bin /tmp/trainer --features-bin /tmp/trainer --no-nccl --pytorch python3 \
#     --libtorch "$(python3 -c 'import os,torch; print(os.path.dirname(torch.__file__)+"/lib")')"
#
# The wheel's CUDA libraries (cuDNN, cuBLAS, …) are not downloaded: the binary links against
# LibTorch's own libraries only, and finds the rest there through LibTorch's RPATH. No `mpi`
# (an image without OpenMPI could not start it). tch 0.22 is built for 2.9.0: its C++ glue is
# compiled against VERSION's headers (LIBTORCH_BYPASS_VERSION_CHECK); 2.11.0's compiled unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
version=${1:-2.11.0}
out=${2:-gpubin/trainer.xz}
dir=target/torch-$version
if [ ! -e "$dir/torch/lib/libtorch_cpu.so" ]; then
  mkdir -p "$dir"
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 -d "$dir" "torch==$version"
  unzip -q -o "$dir"/torch-"$version"-*.whl 'torch/lib/*' 'torch/include/*' 'torch/share/*' -d "$dir"
  rm -f "$dir"/torch-"$version"-*.whl
fi
export LIBTORCH="$PWD/$dir/torch" LIBTORCH_BYPASS_VERSION_CHECK=1 LIBTORCH_CXX11_ABI=1
export RUSTFLAGS="-C link-arg=-Wl,--allow-shlib-undefined"
export CARGO_PROFILE_RELEASE_STRIP=symbols
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target/device}
cargo build --release --features tch,cuda --bin trainer
mkdir -p "$(dirname "$out")"
xz -T0 -6 -c "$CARGO_TARGET_DIR/release/trainer" >"$out.tmp"
mv "$out.tmp" "$out"
echo "build-for-torch: $out ($(du -h "$out" | cut -f1)) for PyTorch $version" >&2

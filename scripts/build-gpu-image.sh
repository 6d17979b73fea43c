#!/usr/bin/env bash
# Builds the GPU image (containers/trainer-gpu.def) here, off the cluster, from Debian's mirror
# and PyPI only, then checks it without a GPU. Copy the .sif to the cluster's shared filesystem
# once (e.g. /ibmgpfs/$USER/containers/trainer-gpu.sif, where jobs/*.sh look for it).
#
#   scripts/build-gpu-image.sh [--bin PATH] [--out FILE] [--profile NAME] [--check-only]
#
#   --bin PATH     a `--features tch,cuda,mpi,autotune` trainer binary (default: build one with
#                  `CARGO_TARGET_DIR=target/features cargo build --profile <profile>`)
#   --profile NAME the cargo profile of that build (default release; CI's binary is ci-features)
#   --out FILE     the image (default target/gpu-image/trainer-gpu.sif)
#   --check-only   no image: check, in seconds, what would break the definition (CI runs this):
#                  the binary needs libtorch_cuda.so (readelf), and every library of the binary
#                  and of LibTorch's CUDA part resolves with exactly the image's LD_LIBRARY_PATH
#                  (from the definition's %environment) mapped onto the virtual environment the
#                  image copies from, and the files the definition names exist there
#
# Needs: root (Apptainer from scripts/apptainer-up.sh when none is on PATH; debootstrap), about
# 7 GB of disk for the build. PyTorch 2.9.0 comes from scripts/setup-torch.sh's virtual
# environment (the same LibTorch the binary links). Prints the image's size and build time.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=""
PROFILE=release
OUT=target/gpu-image/trainer-gpu.sif
CHECK_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --profile) PROFILE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --check-only) CHECK_ONLY=1; shift ;;
    -h | --help) sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-gpu-image: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
die() { echo "build-gpu-image: error: $*" >&2; exit 1; }
DEF=containers/trainer-gpu.def

eval "$(scripts/setup-torch.sh)"
SITE=$(python3 -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
[ -d "$SITE/torch/lib" ] && [ -d "$SITE/nvidia" ] || die "no torch/lib and nvidia/ under $SITE"

if [ -z "$BIN" ]; then
  dir=$PROFILE; [ "$PROFILE" = dev ] && dir=debug
  CARGO_TARGET_DIR=target/features cargo build --profile "$PROFILE" --features tch,cuda,mpi,autotune --bin trainer
  BIN=target/features/$dir/trainer
fi
[ -x "$BIN" ] || die "$BIN is not an executable"

# --- the checks that need no image ---------------------------------------------------------------
readelf -d "$BIN" | grep -q 'NEEDED.*\[libtorch_cuda.so\]' \
  || die "$BIN does not need libtorch_cuda.so (readelf -d): --backend tch --device cuda would be CPU-only; build with --features tch (tch-rs issue 980: --as-needed)"
# Every path under /opt/torch the definition names, mapped onto the virtual environment.
env_line=$(grep -m1 'export LD_LIBRARY_PATH=' <(sed -n '/^%environment/,/^%/p' "$DEF")) \
  || die "$DEF: no LD_LIBRARY_PATH in %environment"
image_path=$(sed -e 's/.*LD_LIBRARY_PATH=//' -e 's/\${LD_LIBRARY_PATH.*//' <<<"$env_line")
host_path=${image_path//\/opt\/torch/$SITE}
IFS=: read -r -a dirs <<<"$host_path"
for d in "${dirs[@]}"; do [ -d "$d" ] || die "$DEF: %environment names ${d/#$SITE//opt/torch}, which the wheel does not have"; done
for f in torch/lib/libtorch_cuda.so nvidia/nccl/lib/libnccl.so.2 nvidia/cuda_nvrtc/lib/libnvrtc.so.12; do
  [ -e "$SITE/$f" ] || die "$DEF relies on /opt/torch/$f, which the wheel does not have"
done
for f in "$BIN" "$SITE/torch/lib/libtorch_cuda.so"; do
  missing=$(env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="$host_path" ldd "$f" | grep 'not found' | grep -v 'libmpi.so.40' || true)
  [ -z "$missing" ] || die "with the image's library path, $f lacks: $missing"
done
echo "build-gpu-image: checks passed: $BIN needs libtorch_cuda.so; every library resolves with the image's LD_LIBRARY_PATH"
[ "$CHECK_ONLY" = 1 ] && exit 0

# --- the image -------------------------------------------------------------------------------------
if [ -n "${TRAINER_APPTAINER:-}" ]; then APPTAINER=$TRAINER_APPTAINER
elif command -v apptainer >/dev/null; then APPTAINER=apptainer
else eval "$(scripts/apptainer-up.sh)"; APPTAINER=$TRAINER_APPTAINER
fi
version=$("$BIN" --version | cut -d' ' -f2)
mkdir -p "$(dirname "$OUT")"
t0=$(date +%s)
"$APPTAINER" build --force --build-arg "VERSION=$version" --build-arg "TRAINER_BIN=$(realpath "$BIN")" \
  --build-arg "TORCH_SITE=$SITE" "$OUT" "$DEF"
secs=$(( $(date +%s) - t0 ))

# --- checked without a GPU -------------------------------------------------------------------------
fail() { echo "build-gpu-image: image check failed: $*" >&2; exit 1; }
"$APPTAINER" exec "$OUT" sh -c 'ldd /usr/local/bin/trainer' | grep 'not found' && fail "libraries missing inside the image"
"$APPTAINER" exec "$OUT" sh -c 'ldd /usr/local/bin/trainer' | grep -q 'libtorch_cuda.so => /opt/torch/torch/lib/' \
  || fail "libtorch_cuda.so does not resolve inside the image"
set +e
"$APPTAINER" exec --nv "$OUT" trainer doctor --require-gpu >"$OUT.doctor.txt" 2>&1
rc=$?
set -e
[ "$rc" = 10 ] || [ "$rc" = 0 ] || { cat "$OUT.doctor.txt"; fail "doctor --require-gpu exited $rc (10: no driver, 0: a GPU)"; }
grep -E 'no NVIDIA driver|GPU' "$OUT.doctor.txt" | head -3
# The cuda backend's kernel compiler: the wheel's NVRTC 12.8, found by the name cudarc asks for.
grep -q 'NVRTC libnvrtc.so.12 12\.' "$OUT.doctor.txt" \
  || { cat "$OUT.doctor.txt"; fail "doctor does not find the image's NVRTC 12.x"; }
# LibTorch loads and trains inside the image (on the CPU here): CLG-ODE on a tiny synthetic cohort.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$APPTAINER" exec "$OUT" sh -c "trainer synth-connectome --subjects 12 --nodes 16 --seed 1 --out '$work/cohort' \
  && trainer train-gnn --sc-dir '$work/cohort/sc' --morph-root '$work/cohort/morph' \
     --subject-info-csv '$work/cohort/subject_info_sc.csv' --results-dir '$work/gnn' --cv-fold 0 \
     --max-epochs 1 --backend tch --device cpu" >"$work/train.log" 2>&1 \
  || { tail -20 "$work/train.log"; fail "train-gnn --backend tch inside the image"; }
size=$(du -h "$OUT" | cut -f1)
echo "build-gpu-image: $OUT: $size, built in $secs s; doctor --require-gpu: exit $rc; tch trains inside"

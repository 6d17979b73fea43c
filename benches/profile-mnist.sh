#!/usr/bin/env bash
# Where one training step of the MNIST CNN goes, on the default CPU backend:
#
#   1. per operation (`TRAINER_OP_PROFILE=1 trainer bench mnist`): wall and CPU time of every
#      tensor operation of the step, by phase (forward, backward, optimizer), grouped into conv
#      forward / backward, max-pool, dropout, linear, Adam, framework overhead; for Flex with its
#      own kernels (`flex-plain`, before) and for the fast kernels (`flex`, after);
#   2. per machine-code symbol (`perf record`, if perf is installed and allowed): GEMM
#      micro-kernel, GEMM packing, im2col, memory copies and fills, page faults, allocator,
#      thread pool, grouped the same way for both backends.
#
#   benches/profile-mnist.sh [DATA_DIR] [STEPS]        # default: Debian's Fashion-MNIST, 20
#   BACKENDS="flex tch" benches/profile-mnist.sh       # other backends (tch: a --features tch build)
#
# Needs a release build (`cargo build --release`); TRAINER=path overrides the binary. The
# machine's load average is printed first: on a shared machine, compare the two backends of
# the same run only.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
trainer="${TRAINER:-$here/target/release/trainer}"
data="${1:-/usr/share/datasets/fashion-mnist}"
steps="${2:-20}"
backends="${BACKENDS:-flex-plain flex}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "## load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo
echo "## 1. Per operation"
for backend in $backends; do
  TRAINER_OP_PROFILE=1 "$trainer" bench mnist --data-dir "$data" --steps "$steps" \
    --backends "$backend" 2>"$work/ops.txt" >/dev/null
  grep -v '^\[bench\]' "$work/ops.txt"
done

echo
echo "## 2. Per symbol (perf, self time of the whole bench: training and inference)"
if ! command -v perf >/dev/null || ! perf record -o "$work/probe" -- true >/dev/null 2>&1; then
  echo "perf is not available here (Debian: apt-get install linux-perf); skipped"
  exit 0
fi
for backend in $backends; do
  perf record -F 999 -o "$work/$backend.data" -- \
    "$trainer" bench mnist --data-dir "$data" --steps "$steps" --backends "$backend" \
    >/dev/null 2>&1
  perf report -i "$work/$backend.data" --no-children --sort sym --stdio -g none 2>/dev/null |
    python3 -c '
import re, sys
groups = [
    ("GEMM micro-kernel", r"gemm_f32::microkernel"),
    ("GEMM packing and driver", r"gemm_common|gemm_f32::gemm"),
    ("im2col / col2im (fast path)", r"fast_cpu::conv::(im2col|col2im|x_backward|forward|weight_backward)"),
    ("Flex conv (3-D path, NHWC, transposed conv)", r"burn_flex::ops::(conv|conv_transpose)"),
    ("thread pool (rayon)", r"rayon|crossbeam|sched_yield"),
    ("max-pool", r"max_pool|pool_plane|pool::"),
    ("strided copies (to_contiguous, StridedIter)", r"to_contiguous|StridedIter|strided"),
    ("memcpy / memset", r"memmove|memcpy|memset"),
    ("page faults and other kernel time", r"^\[k\]"),
    ("allocator", r"malloc|calloc|cfree|_int_free|_int_malloc|realloc"),
    ("random numbers (dropout)", r"rand|chacha|Distribution|sample"),
    ("element-wise ops (Flex, macerator, closures)", r"binary|unary|scalar_op|macerator|call_mut|elementwise"),
    ("data loading (gunzip)", r"miniz|inflate"),
]
totals = {}
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+(\[[.k]\])\s+(.*)", line)
    if not m:
        continue
    share, kind, sym = float(m.group(1)), m.group(2), m.group(3)
    name = next((g for g, pat in groups if re.search(pat, "[k]" if kind == "[k]" else sym)), "other")
    totals[name] = totals.get(name, 0.0) + share
print(f"\n### {sys.argv[1]}\n\n| symbols | share of samples |\n| --- | ---: |")
for name, share in sorted(totals.items(), key=lambda kv: -kv[1]):
    print(f"| {name} | {share:.1f} % |")
' "$backend"
done

#!/usr/bin/env bash
# Where one CLG-ODE training step (2 subjects: encoders, RK4 over 400 nodes, decoders, losses,
# backward, Adam) goes on the default CPU backend: wall and CPU time of every tensor operation
# (`TRAINER_OP_PROFILE=1 trainer bench gnn`) for Flex's own kernels (`flex-plain`) and the fast
# path (`flex`), then the hottest machine-code symbols of the `flex` run (`perf`, if installed).
#
#   benches/profile-gnn.sh [SUBJECTS] [NODES]        # default: 20 synthetic subjects, 400 nodes
#
# Needs a release build (`cargo build --release`); TRAINER=path overrides the binary.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
trainer="${TRAINER:-$here/target/release/trainer}"
subjects="${1:-20}"
nodes="${2:-400}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "## load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
for backend in flex-plain flex; do
  TRAINER_OP_PROFILE=1 "$trainer" bench gnn --subjects "$subjects" --nodes "$nodes" \
    --backends "$backend" 2>"$work/ops.txt" | grep -v '^{'
  grep -v '^\[bench\]' "$work/ops.txt"
done

if ! command -v perf >/dev/null || ! perf record -o "$work/probe" -- true >/dev/null 2>&1; then
  echo "perf is not available here (Debian: apt-get install linux-perf); skipped"
  exit 0
fi
perf record -F 999 -o "$work/flex.data" -- \
  "$trainer" bench gnn --subjects "$subjects" --nodes "$nodes" --backends flex >/dev/null 2>&1
echo
echo "### flex: hottest symbols (self time, whole bench including the synthetic cohort)"
echo
perf report -i "$work/flex.data" --no-children --sort sym --stdio -g none 2>/dev/null |
  grep -E '^\s+[0-9]' | head -20 | cut -c1-120

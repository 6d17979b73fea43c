#!/usr/bin/env bash
# Data-parallel cost on this machine: MNIST CNN step time with 1 rank vs 2 ranks (mpirun,
# per-rank batch 64) and the all-reduce's share of the step time and bytes per step.
# Needs a `--features mpi` build: cargo build --release --features mpi
#   benches/ddp.sh [DATA_DIR] [LIMIT_TRAIN]
set -euo pipefail
cd "$(dirname "$0")/.."
data="${1:-/usr/share/datasets/fashion-mnist}"
limit="${2:-6400}"
bin=target/release/trainer
out=$(mktemp -d)
common=(train-mnist --data-dir "$data" --limit-train "$limit" --limit-test 100 --batch-size 64 --log-every-secs 1000)
"$bin" "${common[@]}" --out "$out/r1" 2>/dev/null
mpirun --allow-run-as-root --oversubscribe -n 2 "$bin" "${common[@]}" --out "$out/r2" 2>"$out/r2.log"
python3 - "$out" "$limit" <<'PY'
import csv, sys, re
out, limit = sys.argv[1], int(sys.argv[2])
for name, world in (("r1", 1), ("r2", 2)):
    row = list(csv.DictReader(open(f"{out}/{name}/metrics.csv")))[-1]
    steps = -(-limit // (64 * world))
    step = float(row["seconds"]) / steps
    ar = float(row["allreduce_seconds"]) / steps
    print(f"{world} rank(s): {steps} steps, {step*1000:.1f} ms/step, all-reduce {ar*1000:.1f} ms/step "
          f"({100*ar/step:.1f} %), {float(row['img_per_s']):.0f} img/s")
log = open(f"{out}/r2.log").read()
m = re.search(r"all-reduces of (\d+) bytes", log)
if m: print(f"all-reduce payload: {int(m.group(1))/1e6:.2f} MB per step")
PY
rm -rf "$out"

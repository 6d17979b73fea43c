#!/usr/bin/env bash
# Data-parallel cost on this machine, 1 rank vs 2 ranks under mpirun, in one run:
#   * MNIST CNN: per-rank batch 64 (Fashion-MNIST subset);
#   * CLG-ODE: a synthetic cohort (default 60 subjects x 400 nodes), one epoch of fold 0,
#     per-rank batch 4 vs 2 x 2 (the same global batch).
# For each: training step time, the gradient all-reduce's share of it, bytes per step.
# The cores are shared out: 1 rank uses all of them, 2 ranks half each (RAYON_NUM_THREADS).
# Needs a `--features mpi` build: cargo build --release --features mpi (TRAINER=path: another binary)
#   benches/ddp.sh [mnist|gnn|all] [FASHION_DIR] [MNIST_LIMIT] [GNN_SUBJECTS] [GNN_NODES]
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
data="${2:-/usr/share/datasets/fashion-mnist}"
limit="${3:-6400}"
subjects="${4:-60}"
nodes="${5:-400}"
bin="${TRAINER:-$PWD/target/release/trainer}"
cores=$(nproc)
half=$(( cores / 2 > 0 ? cores / 2 : 1 ))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mpi=(mpirun --allow-run-as-root --oversubscribe -n 2 -x RAYON_NUM_THREADS="$half")

report() { # name kind: reads $out/<name>1 and $out/<name>2
  python3 - "$out" "$1" "$2" <<'PY'
import csv, glob, re, sys
out, name, kind = sys.argv[1:]
for world in (1, 2):
    if kind == "mnist":
        row = list(csv.DictReader(open(f"{out}/{name}{world}/metrics.csv")))[-1]
        steps, secs = int(row["steps"]), float(row["seconds"])
    else:
        path = glob.glob(f"{out}/{name}{world}/runs/*/metrics.csv")[0]
        row = list(csv.DictReader(open(path)))[0]
        steps, secs = int(row["epoch_steps"]), float(row["seconds"])
    step = secs / steps
    ar = float(row["allreduce_seconds"]) / steps
    line = (f"{kind} {world} rank(s): {steps} steps, {step*1000:.1f} ms/step, "
            f"all-reduce {ar*1000:.1f} ms/step ({100*ar/step:.1f} %)")
    if world == 2:
        m = re.search(r"all-reduces of (\d+) bytes", open(f"{out}/{name}2.log").read())
        if m:
            line += f", {int(m.group(1))/1e6:.3f} MB per all-reduce"
    print(line)
PY
}

if [[ $what == mnist || $what == all ]]; then
  common=(train-mnist --data-dir "$data" --limit-train "$limit" --limit-test 100 --batch-size 64
          --log-every-secs 1000)
  RAYON_NUM_THREADS=$cores "$bin" "${common[@]}" --out "$out/mnist1" 2>"$out/mnist1.log"
  "${mpi[@]}" "$bin" "${common[@]}" --out "$out/mnist2" 2>"$out/mnist2.log"
  report mnist mnist
fi

if [[ $what == gnn || $what == all ]]; then
  "$bin" synth-connectome --subjects "$subjects" --nodes "$nodes" --seed 1 --out "$out/cohort" >/dev/null
  gnn() {
    echo train-gnn --sc_dir "$out/cohort/sc" --morph_root "$out/cohort/morph" \
      --subject_info_csv "$out/cohort/subject_info_sc.csv" --cv_fold 0 --max_epochs 1 \
      --log-every-secs 1000 --results_dir "$out/$1" --run_name r --batch-size "$2"
  }
  RAYON_NUM_THREADS=$cores "$bin" $(gnn gnn1 4) 2>"$out/gnn1.log"
  "${mpi[@]}" "$bin" $(gnn gnn2 2) 2>"$out/gnn2.log"
  report gnn gnn
fi

#!/usr/bin/env bash
# Issue 75, item 2 for the CLG-ODE presets: each shipped `train-gnn --preset` against the
# one-factor global-shrinkage EB fitted on the same split (scripts/frontier.py), on the five
# generators, paired by test subject (95 % bootstrap interval over subjects).
#
#   scripts/presets_vs_global.sh [--subjects 60] [--seeds "1"] [--presets "residual drift-residual eb-residual"]
#                                [--bin target/release/trainer] [--work DIR] [--out TABLE.md]
#
# Per generator and seed: the cohort (60 nodes; the streamline counts at 100 nodes, seed 500 + K,
# as docs/frontier.md's count tables), `train-gnn --preset P --cv_fold 0` per preset, then
# `frontier.py --cohort C --run RUN`: its "global-shrink EB" row minus the run's skill and the
# interval, and which forecasts the run wrote (`--eb-fallback`: the network's or eb-drift's, with
# both validation skills and the network's own test skill). A row per (generator, seed, preset)
# is appended to the Markdown table.
set -euo pipefail
SUBJECTS=60 SEEDS="1" PRESETS="residual drift-residual eb-residual"
BIN=target/release/trainer WORK=$(mktemp -d) OUT=presets_vs_global.md
while [ $# -gt 0 ]; do
  case $1 in
    --subjects) SUBJECTS=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --presets) PRESETS=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "presets_vs_global.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
[ -s "$OUT" ] || {
  echo "| generator | subjects (test forecasts) | seed | preset | preset skill | global-shrink EB | global-shrink − preset [95% CI] | best epoch | forecasts written (network's test skill) | train s |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
} >"$OUT"
cohort() { # generator seed dir
  case $1 in
    noisy) python3 "$HERE/synth_noisy_cohort.py" --subjects "$SUBJECTS" --nodes 60 --seed "$2" --out "$3" ;;
    drift) python3 "$HERE/synth_drift_cohort.py" --subjects "$SUBJECTS" --nodes 60 --seed "$2" --out "$3" ;;
    smooth) python3 "$HERE/synth_cohort.py" --subjects "$SUBJECTS" --nodes 60 --seed "$2" --out "$3" ;;
    trainer) "$BIN" synth-connectome --subjects "$SUBJECTS" --nodes 60 --seed "$2" --out "$3" ;;
    counts) python3 "$HERE/synth_count_cohort.py" --subjects "$SUBJECTS" --nodes 100 --seed $((500 + $2)) --out "$3" ;;
  esac >/dev/null
}
name() {
  case $1 in
    noisy) echo synth_noisy_cohort.py ;; drift) echo synth_drift_cohort.py ;;
    smooth) echo synth_cohort.py ;; trainer) echo "trainer synth-connectome" ;;
    counts) echo synth_count_cohort.py ;;
  esac
}
for gen in noisy drift smooth trainer counts; do
  for seed in $SEEDS; do
    C=$WORK/$gen-$SUBJECTS-$seed
    cohort "$gen" "$seed" "$C"
    for preset in $PRESETS; do
      T0=$(date +%s.%N)
      "$BIN" train-gnn --preset "$preset" --sc_dir "$C/sc" --morph_root "$C/morph" \
        --subject_info_csv "$C/subject_info_sc.csv" --cv_fold 0 --results_dir "$C/results" \
        --run_name "$preset" >"$C/$preset.log" 2>&1 || { echo "$gen $seed $preset: train-gnn failed (see $C/$preset.log)" >&2; continue; }
      SECS=$(echo "$(date +%s.%N) - $T0" | bc)
      RUN=$C/results/runs/$preset
      python3 "$HERE/frontier.py" --cohort "$C" --run "$RUN" --boot 2000 --json "$C/$preset.json" >/dev/null
      python3 - "$C/$preset.json" "$RUN" "$(name "$gen")" "$SUBJECTS" "$seed" "$preset" "$SECS" >>"$OUT" <<'EOF'
import json, sys
from pathlib import Path
f, run, gen, subjects, seed, preset, secs = sys.argv[1:]
d = json.load(open(f))
rows = {r["forecaster"]: r for r in d["rows"]}
me, g = rows["eb-drift (the run)"], rows["global-shrink EB"]
res = json.load(open(Path(run) / "clg_ode_results.json"))
best = res["cv_folds"][0].get("best_epoch")
fb = json.load(open(Path(run) / "test_metrics.json")).get("eb_fallback")
written = "CLG-ODE" if fb is None else (
    f"{'eb-drift' if fb['used'] else 'CLG-ODE'} (val {fb['clg_ode_val_skill']:+.3f} vs eb-drift "
    f"{fb['eb_drift_val_skill']:+.3f}; network {fb['clg_ode_test_skill']:+.3f})")
print(f"| {gen} | {subjects} ({d['n_test']}) | {seed} | {preset} | {me['skill']:+.3f} | "
      f"{g['skill']:+.3f} | {g['minus_eb_drift']:+.4f} [{g['ci_low']:+.4f}, {g['ci_high']:+.4f}] | "
      f"{best} | {written} | {float(secs):.1f} |")
EOF
      tail -1 "$OUT"
    done
  done
done

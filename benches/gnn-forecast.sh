#!/usr/bin/env bash
# Does a CLG-ODE preset beat the baselines on data it was not tuned on? For each of the three
# generators (trainer synth-connectome; scripts/synth_cohort.py, another dynamic;
# scripts/synth_drift_cohort.py, 2-year change a few times smaller than the scan noise with
# per-edge drift and edges that flicker at a threshold) and each seed: the identity, the
# closed-form linear drift and the preset, fold 0, one table (OUT/table.md; "≥ drift" allows
# 1e-6 of float rounding: the preset at rest decodes the drift in f32).
# Usage:
#   benches/gnn-forecast.sh [SUBJECTS=60] [NODES=400] [SEEDS="1 2 3"] [PRESET=drift-residual] [OUT=gnn-forecast]
set -euo pipefail
cd "$(dirname "$0")/.."
subjects="${1:-60}"
nodes="${2:-400}"
seeds="${3:-1 2 3}"
preset="${4:-drift-residual}"
out="$(realpath -m "${5:-gnn-forecast}")"
bin=$PWD/target/release/trainer
[ -x "$bin" ] || cargo build --release
mkdir -p "$out"
runs=()
for seed in $seeds; do
  for gen in rust python drift; do
    cohort="$out/cohorts/$gen$seed"
    if [ ! -d "$cohort/sc" ]; then
      case $gen in
        rust) "$bin" synth-connectome --subjects "$subjects" --nodes "$nodes" --seed "$seed" \
                --out "$cohort" > /dev/null ;;
        python) python3 scripts/synth_cohort.py --subjects "$subjects" --nodes "$nodes" \
                  --seed "$seed" --out "$cohort" > /dev/null ;;
        drift) python3 scripts/synth_drift_cohort.py --subjects "$subjects" --nodes "$nodes" \
                 --seed "$seed" --out "$cohort" > /dev/null ;;
      esac
    fi
    common=(--sc_dir "$cohort/sc" --morph_root "$cohort/morph"
      --subject_info_csv "$cohort/subject_info_sc.csv" --results_dir "$out" --cv_fold 0)
    for model in linear-drift "$preset"; do
      name="$gen$seed-$model"
      rm -rf "$out/runs/$name"
      if [ "$model" = linear-drift ]; then flags=(--model linear-drift); else flags=(--preset "$model"); fi
      echo "== $name" >&2
      "$bin" train-gnn "${common[@]}" "${flags[@]}" --run_name "$name" 2> "$out/$name.log" ||
        { echo "$name failed; see $out/$name.log" >&2; exit 1; }
      grep -h "test (" "$out/$name.log" >&2
      runs+=("$out/runs/$name")
    done
  done
done
python3 - "$preset" "${runs[@]}" > "$out/table.md" <<'PY'
import json, os, sys
preset, runs = sys.argv[1], sys.argv[2:]
print(f"| cohort | identity mse | linear drift skill | {preset} skill | ≥ drift | Pearson gain (drift / {preset}) | best epoch | CPU min |")
print("| --- | ---: | ---: | ---: | :-: | ---: | ---: | ---: |")
for drift, model in zip(runs[::2], runs[1::2]):
    d = json.load(open(os.path.join(drift, "test_metrics.json")))
    m = json.load(open(os.path.join(model, "test_metrics.json")))
    r = json.load(open(os.path.join(model, "clg_ode_results.json")))
    ds, ms = d["skill"]["skill"], m["skill"]["skill"]
    cohort = os.path.basename(drift).rsplit("-linear-drift", 1)[0]
    print(f"| {cohort} | {d['identity_baseline']['sc_log_mse']:.3e} | {ds:+.4f} | {ms:+.4f} | "
          f"{'yes' if ms >= ds - 1e-6 else 'no'} | {d['skill']['pearson_gain']:+.5f} / "
          f"{m['skill']['pearson_gain']:+.5f} | {r['cv_folds'][0]['best_epoch']} | "
          f"{r.get('cpu_seconds', 0) / 60:.1f} |")
PY
cat "$out/table.md"

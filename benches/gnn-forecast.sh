#!/usr/bin/env bash
# Do the forecasters beat the baselines on data they were not tuned on? For each of the four
# generators (trainer synth-connectome; scripts/synth_cohort.py, another dynamic;
# scripts/synth_drift_cohort.py, 2-year change a few times smaller than the scan noise with
# per-edge drift and edges that flicker at a threshold; scripts/synth_noisy_cohort.py, visit
# noise at the literature's test-retest ICC, subject offsets and slopes, 40 % single-visit
# subjects) and each seed: the identity and every model of MODELS (a `--model` value, or a
# `--preset`), fold 0, one table (OUT/table.md). "≥ X" allows 1e-6 of float rounding.
# Usage:
#   benches/gnn-forecast.sh [SUBJECTS=60] [NODES=400] [SEEDS="1 2 3"] [MODELS="linear-drift eb-drift eb-residual"] [OUT=gnn-forecast]
#   GENERATORS="noisy drift" benches/gnn-forecast.sh …   (a subset of rust python drift noisy)
#   TRAINER_BIN=/path/to/trainer benches/gnn-forecast.sh …   (another binary than target/release)
set -euo pipefail
cd "$(dirname "$0")/.."
subjects="${1:-60}"
nodes="${2:-400}"
seeds="${3:-1 2 3}"
models="${4:-linear-drift eb-drift eb-residual}"
out="$(realpath -m "${5:-gnn-forecast}")"
generators="${GENERATORS:-rust python drift noisy}"
bin=${TRAINER_BIN:-$PWD/target/release/trainer}
[ -x "$bin" ] || cargo build --release
mkdir -p "$out"
runs=()
for seed in $seeds; do
  for gen in $generators; do
    cohort="$out/cohorts/$gen$seed"
    if [ ! -d "$cohort/sc" ]; then
      case $gen in
        rust) "$bin" synth-connectome --subjects "$subjects" --nodes "$nodes" --seed "$seed" \
                --out "$cohort" > /dev/null ;;
        python) python3 scripts/synth_cohort.py --subjects "$subjects" --nodes "$nodes" \
                  --seed "$seed" --out "$cohort" > /dev/null ;;
        drift) python3 scripts/synth_drift_cohort.py --subjects "$subjects" --nodes "$nodes" \
                 --seed "$seed" --out "$cohort" > /dev/null ;;
        noisy) python3 scripts/synth_noisy_cohort.py --subjects "$subjects" --nodes "$nodes" \
                 --seed "$seed" --out "$cohort" > /dev/null ;;
      esac
    fi
    common=(--sc_dir "$cohort/sc" --morph_root "$cohort/morph"
      --subject_info_csv "$cohort/subject_info_sc.csv" --results_dir "$out" --cv_fold 0)
    for model in $models; do
      name="$gen$seed-$model"
      rm -rf "$out/runs/$name"
      case $model in
        linear-drift | eb-drift | clg-ode | gcn | vector-lstm) flags=(--model "$model") ;;
        *) flags=(--preset "$model") ;;
      esac
      echo "== $name" >&2
      "$bin" train-gnn "${common[@]}" "${flags[@]}" --run_name "$name" 2> "$out/$name.log" ||
        { echo "$name failed; see $out/$name.log" >&2; exit 1; }
      grep -h "test (" "$out/$name.log" >&2
      runs+=("$out/runs/$name")
    done
  done
done
python3 - "$models" "${runs[@]}" > "$out/table.md" <<'PY'
import json, os, sys
models, runs = sys.argv[1].split(), sys.argv[2:]
k = len(models)
head = " | ".join(f"{m} skill" for m in models)
beats = " | ".join(f"{b} ≥ {a}" for a, b in zip(models, models[1:]))
print(f"| cohort | identity mse | {head} | {beats} | CPU min ({' / '.join(models)}) |")
print("| --- | ---: | " + "---: | " * k + ":-: | " * (k - 1) + "---: |")
for i in range(0, len(runs), k):
    group = runs[i:i + k]
    tests = [json.load(open(os.path.join(r, "test_metrics.json"))) for r in group]
    res = [json.load(open(os.path.join(r, "clg_ode_results.json"))) for r in group]
    skills = [t["skill"]["skill"] for t in tests]
    cohort = os.path.basename(group[0]).rsplit("-" + models[0], 1)[0]
    cells = " | ".join(f"{s:+.4f}" for s in skills)
    wins = " | ".join("yes" if b >= a - 1e-6 else "no" for a, b in zip(skills, skills[1:]))
    cpu = " / ".join(f"{r.get('cpu_seconds', 0) / 60:.2f}" for r in res)
    print(f"| {cohort} | {tests[0]['identity_baseline']['sc_log_mse']:.3e} | {cells} | {wins} | {cpu} |")
PY
cat "$out/table.md"

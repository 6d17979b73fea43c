#!/usr/bin/env bash
# The authors' comparison in one command: every forecaster on one cohort and split (fold 0),
# each against the identity forecast ("the next scan equals this one") of the same test subjects:
#   linear-drift    start scan + per-edge population drift × Δt (closed form)
#   eb-drift        empirical Bayes: population trajectory + the subject's deviation shrunk by
#                   its visit-to-visit persistence, × edge existence (closed form)
#   vector-lstm     the reference's VectorLSTM baseline (its submit script's flags; --latent_dim H)
#   gcn             the reference's GCN baseline (its submit script's flags)
#   clg-ode         the reference's CLG-ODE defaults (original decoder, topology loss, GradNorm)
#   drift-residual  `--preset drift-residual` (the shipped forecast preset)
# then one Markdown table (identity first), also written to OUT/table.md, and `trainer compare`.
# Usage:
#   benches/gnn-baselines.sh [SUBJECTS=60] [NODES=60] [SEED=1] [EPOCHS=40] [OUT=gnn-baselines]
#   COHORT=DIR benches/gnn-baselines.sh …   (an existing cohort, e.g. scripts/synth_drift_cohort.py's)
#   LSTM_H=512 GCN_H=64 …                  (the baselines' sizes; the reference's defaults)
set -euo pipefail
cd "$(dirname "$0")/.."
subjects="${1:-60}"
nodes="${2:-60}"
seed="${3:-1}"
epochs="${4:-40}"
out="$(realpath -m "${5:-gnn-baselines}")"
bin=${TRAINER_BIN:-$PWD/target/release/trainer}
[ -x "$bin" ] || cargo build --release
mkdir -p "$out"
cohort="${COHORT:-$out/cohort}"
[ -d "$cohort/sc" ] || "$bin" synth-connectome --subjects "$subjects" --nodes "$nodes" \
  --seed "$seed" --out "$cohort" > "$out/synth_summary.json"
common=(--sc_dir "$cohort/sc" --morph_root "$cohort/morph"
  --subject_info_csv "$cohort/subject_info_sc.csv" --results_dir "$out" --cv_fold 0)
declare -A flags=(
  [linear-drift]="--model linear-drift"
  [eb-drift]="--model eb-drift"
  [vector-lstm]="--model vector-lstm --latent_dim ${LSTM_H:-512} --batch_size 4 --max_epochs $epochs --patience 10 --learning_rate 1e-4"
  [gcn]="--model gcn --hidden_dim ${GCN_H:-64} --batch_size 2 --max_epochs $epochs --patience 8 --learning_rate 1e-4"
  [clg-ode]="--max_epochs $epochs"
  [drift-residual]="--preset drift-residual --max_epochs $epochs"
)
order=(linear-drift eb-drift vector-lstm gcn clg-ode drift-residual)
runs=()
for v in "${order[@]}"; do
  name="baseline-$v"
  echo "== $v: ${flags[$v]}" >&2
  rm -rf "$out/runs/$name"
  # shellcheck disable=SC2086
  "$bin" train-gnn "${common[@]}" ${flags[$v]} --run_name "$name" 2> "$out/$name.log" ||
    { echo "$v failed; see $out/$name.log" >&2; exit 1; }
  grep -h "test (" "$out/$name.log" >&2
  runs+=("$out/runs/$name")
done
python3 - "${runs[@]}" > "$out/table.md" <<'PY'
import json, os, sys
rows = []
for run in sys.argv[1:]:
    t = json.load(open(os.path.join(run, "test_metrics.json")))
    r = json.load(open(os.path.join(run, "clg_ode_results.json")))
    rows.append((os.path.basename(run).removeprefix("baseline-"), t, r))
print("| model | test sc_log_mse | skill | sc_log_pearson | Pearson gain | epochs | CPU min |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
t0 = rows[0][1]["identity_baseline"]
print(f"| identity | {t0['sc_log_mse']:.5f} | 0 | {t0['sc_log_pearson']:.4f} | 0 | – | – |")
for name, t, r in rows:
    m, s = t["model"], t["skill"]
    epochs = max((f.get("epochs_run", 0) for f in r.get("cv_folds", [])), default=0)
    print(f"| {name} | {m['sc_log_mse']:.5f} | {s['skill']:+.3f} | {m['sc_log_pearson']:.4f} | "
          f"{s['pearson_gain']:+.4f} | {epochs} | {r.get('cpu_seconds', 0) / 60:.1f} |")
PY
cat "$out/table.md"
"$bin" compare "${runs[@]}" | tee "$out/compare.txt"

#!/usr/bin/env bash
# The authors' comparison of CLG-ODE variants, each against the identity forecast, in one run:
#   original        the reference's default model (existence × weight decoder), no topology loss
#   fixed           fixed support (predict on the start visit's edges), no residual
#   fixed+residual  fixed support + log-space residual skip (the reference's ρ = 1 start)
#   residual-preset `--preset residual` (ρ = 0 start, SC weight loss up-weighted, lr 1e-3)
#   +innovation     the preset + the innovation module (new edges)
# on one synthetic cohort (fold 0, same epochs), then `trainer compare` prints the table and
# writes val_skill.svg. Usage:
#   benches/gnn-variants.sh [SUBJECTS=60] [NODES=400] [SEED=1] [EPOCHS=40] [OUT=gnn-variants]
#   COHORT=DIR benches/gnn-variants.sh …   (use an existing cohort, e.g. scripts/synth_cohort.py's)
set -euo pipefail
cd "$(dirname "$0")/.."
subjects="${1:-60}"
nodes="${2:-400}"
seed="${3:-1}"
epochs="${4:-40}"
out="$(realpath -m "${5:-gnn-variants}")"
bin=$PWD/target/release/trainer
[ -x "$bin" ] || cargo build --release
mkdir -p "$out"
cohort="${COHORT:-$out/cohort}"
[ -d "$cohort/sc" ] || "$bin" synth-connectome --subjects "$subjects" --nodes "$nodes" \
  --seed "$seed" --out "$cohort" > "$out/synth_summary.json"
common=(--sc_dir "$cohort/sc" --morph_root "$cohort/morph"
  --subject_info_csv "$cohort/subject_info_sc.csv" --results_dir "$out" --cv_fold 0
  --max_epochs "$epochs" --early_stop_metric val_skill --val_sc_eval_every 1 --patience 10)
declare -A flags=(
  [original]="--lambda_topo 0 --gradnorm_scope none --learning_rate 1e-3"
  [fixed]="--fixed_support --lambda_topo 0 --gradnorm_scope none --learning_rate 1e-3"
  [fixed+residual]="--fixed_support --residual_skip --lambda_topo 0 --gradnorm_scope none --learning_rate 1e-3"
  [residual-preset]="--preset residual"
  [+innovation]="--preset residual --innovation_enabled"
)
runs=()
for v in original fixed fixed+residual residual-preset +innovation; do
  name="variant-${v//+/plus-}"
  echo "== $v: ${flags[$v]}" >&2
  # shellcheck disable=SC2086
  "$bin" train-gnn "${common[@]}" ${flags[$v]} --run_name "$name" 2> "$out/$name.log" ||
    { echo "$v failed; see $out/$name.log" >&2; exit 1; }
  grep -h "test (" "$out/$name.log" >&2
  runs+=("$out/runs/$name")
done
"$bin" compare "${runs[@]}" --plot "$out/val_skill.svg" | tee "$out/compare.txt"

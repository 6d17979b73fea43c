#!/usr/bin/env bash
# Behaviour kept across a refactor, checked file by file: the same commands with two binaries
# (BEFORE, AFTER) at RAYON_NUM_THREADS 1 and 4, every file they write compared.
#
#   scripts/identity-check.sh BEFORE_BIN AFTER_BIN [WORKDIR]
#
# The commands: a synthetic cohort; train-gnn with the default objective (checkpoints: all),
# `--preset residual`, edge dropout, `--model eb-drift`, `linear-drift`, `gcn` and
# `vector-lstm`; eval-gnn; plot-sc (heatmaps, new edges, trajectories as SVG); compare (table, --against, CSV);
# train-mnist on Fashion-MNIST (640 images, `--keep-checkpoints all`); eval; `sweep plan` of a
# spec with every `[resources]` key for Slurm, LSF and gflow, and with the flags over it.
# Compared (scripts/identity_compare.py): JSON and JSON lines with the timing keys removed
# (seconds, throughput, dates, hosts), CSV without timing columns, safetensors by tensor
# (names, dtypes, shapes, bytes) and metadata (timings removed), every other file byte for
# byte; left out: run_meta.json (host, dates, version), TensorBoard event files (wall times) and
# logs. Each command's stdout and exit code are compared too, and the messages (stderr) of those
# that time nothing. Exit 1 on any difference.
set -euo pipefail
work=${3:-$(mktemp -d)}
# Each binary called `trainer` (its name is in help texts and scripts).
mkdir -p "$work/bin-before" "$work/bin-after"
ln -sf "$(realpath "$1")" "$work/bin-before/trainer"
ln -sf "$(realpath "$2")" "$work/bin-after/trainer"
before=$work/bin-before/trainer
after=$work/bin-after/trainer
fashion=${FASHION_DIR:-/usr/share/datasets/fashion-mnist}
here=$(dirname "$(realpath "$0")")

run_all() { # BIN DIR
    local bin=$1 dir=$2
    rm -rf "$dir" && mkdir -p "$dir" && cd "$dir"
    local n=0
    step() { # NAME ARGS...: stdout to out/NAME.stdout, exit code to out/NAME.rc; stderr kept
        # (out/NAME.stderr) for the commands that time nothing (sweep plan, compare, eval-gnn)
        local name=$1
        shift
        mkdir -p out
        set +e
        "$bin" "$@" > "out/$name.stdout" 2> "out/$name.stderr"
        echo $? > "out/$name.rc"
        set -e
        case $name in
            plan* | compare* | help*) ;;
            *) rm -f "out/$name.stderr" ;;
        esac
        n=$((n + 1))
    }
    step synth synth-connectome --subjects 24 --nodes 16 --out cohort --seed 3
    local data=(--sc_dir cohort/sc --morph_root cohort/morph
        --subject_info_csv cohort/subject_info_sc.csv --results_dir res --cv_fold 0)
    local small=(--max_epochs 2 --batch_size 4 --latent_dim 8 --hidden_dim 16 --solver_steps 4
        --val_sc_eval_every 1 --seed 1)
    step gnn-default train-gnn "${data[@]}" "${small[@]}" --run-name def --keep-checkpoints all
    step gnn-residual train-gnn "${data[@]}" "${small[@]}" --preset residual --run-name resid
    step gnn-eb train-gnn "${data[@]}" --model eb-drift --seed 1 --run-name eb
    step gnn-drop train-gnn "${data[@]}" "${small[@]}" --sc_pos_edge_drop_prob 0.2 --run-name drop
    step gnn-linear train-gnn "${data[@]}" --model linear-drift --seed 1 --run-name lin
    step gnn-gcn train-gnn "${data[@]}" --model gcn --hidden_dim 8 --max_epochs 2 --seed 1 \
        --run-name gcn
    step gnn-lstm train-gnn "${data[@]}" --model vector-lstm --latent_dim 8 --max_epochs 2 \
        --seed 1 --run-name lstm
    step eval-gnn eval-gnn res/runs/def --out evals/def
    step plot-sc plot-sc res/runs/eb --out figs/eb.svg
    step plot-new plot-sc res/runs/eb res/runs/lin --new-edges --out figs/new.svg
    step plot-traj plot-sc res/runs/eb --trajectories --out figs/traj.svg
    step compare compare res/runs/def res/runs/resid res/runs/eb
    step compare-against compare res/runs/def res/runs/resid res/runs/eb --against eb-drift \
        --label eb=res/runs/eb
    step compare-csv compare res/runs/def res/runs/eb --format csv
    if [[ -d $fashion ]]; then
        step mnist train-mnist --data-dir "$fashion" --limit-train 640 --limit-test 200 \
            --epochs 2 --batch-size 32 --seed 3 --out mnist --keep-checkpoints all
        step mnist-eval eval --checkpoint mnist/checkpoints/last.safetensors --data-dir "$fashion" \
            --limit-test 200
    fi
    cat > spec.toml <<'TOML'
command = "train-gnn"
folds = [0, 1]

[base]
sc_dir = "cohort/sc"
morph_root = "cohort/morph"
subject_info_csv = "cohort/subject_info_sc.csv"
max_epochs = 1

[grid]
learning_rate = [1e-3, 1e-4]

[resources]
partition = "q_ai4"
gpus = 1
gpu_type = "v100"
mig = "3g.20gb"
cpus = 4
mem = "16G"
time = "2-00:00:00"
account = "lab"
qos = "normal"
constraint = "v100|a100"
image = "/ibmgpfs/images/trainer gpu.sif"
binds = ["/ibmgpfs", "/scratch"]
modules = ["singularity/3.8"]
extra = ["--exclusive"]
TOML
    for s in slurm lsf gflow local; do
        step "plan-$s" sweep plan spec.toml --scheduler "$s" --out "sweep-$s"
        step "plan-flags-$s" sweep plan spec.toml --scheduler "$s" --out "sweep-flags-$s" \
            --gpus 2 --time 90 --mem 500M --bind /data,/more --module cuda/12 --extra=--hint=nomultithread
    done
    step plan-gpus0 sweep plan spec.toml --scheduler slurm --out sweep-gpus0 --gpus 0 --gpu-type a100
    step plan-bad sweep plan spec.toml --scheduler lsf --out sweep-bad --cpus 0
    step help-plan sweep plan --help
    echo "$n commands in $dir" >&2
}

status=0
for threads in 1 4; do
    export RAYON_NUM_THREADS=$threads
    run_all "$before" "$work/before-$threads"
    run_all "$after" "$work/after-$threads"
    if python3 "$here/identity_compare.py" "$work/before-$threads" "$work/after-$threads"; then
        echo "RAYON_NUM_THREADS=$threads: identical" >&2
    else
        echo "RAYON_NUM_THREADS=$threads: DIFFERENT" >&2
        status=1
    fi
done
exit $status

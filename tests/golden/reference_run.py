#!/usr/bin/env python3
"""Real run directories of the reference's PyTorch CLG-ODE trainer, for `trainer compare`.

Usage (from the repository root):

    python tests/golden/reference_run.py /path/to/sc_connectome_trajectories \
        [--out tests/fixtures/reference-run] [--commit SHA]

The reference checkout (github.com/xsmilebook/sc_connectome_trajectories; the fixture in the
repository was produced against commit 4cc09e3df8aa4f910b9c46a3b186855c3738170c, torch 2.9.0 CPU)
is run through its own entry point, `python -m scripts.train_clg_ode` (PYTHONPATH = checkout,
nothing patched), on a tiny cohort made by this repository's scripts/synth_cohort.py (14 subjects;
400 nodes, because the reference's CLGDataset reads max_nodes=400 and the CLI cannot change it).
Each run takes one to two minutes on one CPU core. Needs torch, numpy, pandas, scikit-learn.

Three runs, laid out the way the authors' scripts/submit_clg_ode.sh lays them out
(<results_dir>/runs/<RUN_BASE>/fold<k> for a single fold, <results_dir>/runs/<RUN_BASE> for all):

* runs/clg_ode_ref/fold0, runs/clg_ode_ref/fold1: --cv_fold 0 / 1 (of the default 5), 2 epochs,
  --val_sc_eval_every 1 (validation SC metrics every epoch);
* runs/clg_ode_ref_allfolds: --cv_folds 2 --cv_fold -1 (both folds in one results file), 2 epochs,
  --lambda_density 0.01, validation SC metrics never computed (the reference then writes 0.0).

Of each run only the small text files `trainer compare` reads are kept: args.json, metrics.csv
and clg_ode_results.json (not the checkpoints, run_meta.json or test_sc_metrics.json, a copy of
clg_ode_results.json's test_sc_metrics). The files are copied byte for byte.

Side effects on the checkout: scripts.train_clg_ode creates <checkout>/outputs/logs/.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
KEEP = ["args.json", "metrics.csv", "clg_ode_results.json"]
COMMON = ["--max_epochs", "2", "--latent_dim", "8", "--hidden_dim", "16", "--solver_steps", "3"]
RUNS = [
    ("clg_ode_ref/fold0", ["--cv_fold", "0", "--val_sc_eval_every", "1"]),
    ("clg_ode_ref/fold1", ["--cv_fold", "1", "--val_sc_eval_every", "1"]),
    ("clg_ode_ref_allfolds", ["--cv_folds", "2", "--cv_fold", "-1", "--lambda_density", "0.01"]),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("reference", help="checkout of xsmilebook/sc_connectome_trajectories")
    p.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures", "reference-run"))
    p.add_argument("--commit", default="", help="the checkout's commit, when it is not a git work tree")
    a = p.parse_args()
    ref = os.path.abspath(a.reference)
    if not os.path.isfile(os.path.join(ref, "scripts", "train_clg_ode.py")):
        sys.exit(f"{ref}: no scripts/train_clg_ode.py (not a reference checkout)")
    commit = a.commit
    if not commit:
        try:
            commit = subprocess.check_output(
                ["git", "rev-parse", "HEAD"], cwd=ref, stderr=subprocess.DEVNULL
            ).decode().strip()
        except Exception:  # noqa: BLE001
            commit = "unknown"

    work = tempfile.mkdtemp(prefix="reference_run_")
    try:
        subprocess.run(
            [sys.executable, os.path.join(REPO, "scripts", "synth_cohort.py"), "--out", "cohort",
             "--subjects", "14", "--nodes", "400", "--seed", "3"],
            cwd=work, check=True, stdout=subprocess.DEVNULL,
        )
        env = dict(os.environ, PYTHONPATH=ref, OMP_NUM_THREADS="1")
        for name, flags in RUNS:
            cmd = [sys.executable, "-m", "scripts.train_clg_ode",
                   "--sc_dir", "cohort/sc", "--morph_root", "cohort/morph",
                   "--subject_info_csv", "cohort/subject_info_sc.csv",
                   "--results_dir", "results", "--run_name", name] + COMMON + flags
            sys.stderr.write(f"[reference_run] {' '.join(cmd[1:])}\n")
            subprocess.run(cmd, cwd=work, env=env, check=True)
        if os.path.isdir(a.out):
            shutil.rmtree(a.out)
        for name, _ in RUNS:
            src = os.path.join(work, "results", "runs", name)
            dst = os.path.join(a.out, "runs", name)
            os.makedirs(dst, exist_ok=True)
            for f in KEEP:
                shutil.copyfile(os.path.join(src, f), os.path.join(dst, f))
        with open(os.path.join(a.out, "README.md"), "w", encoding="utf-8") as f:
            f.write(
                "Run directories written by the reference's own CLG-ODE trainer "
                "(`python -m scripts.train_clg_ode`, github.com/xsmilebook/sc_connectome_trajectories "
                f"commit {commit}), kept for `trainer compare`. Regenerate with "
                "`python tests/golden/reference_run.py <checkout>`; see that script for the runs.\n"
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sys.stderr.write(f"[reference_run] wrote {a.out}\n")


if __name__ == "__main__":
    main()

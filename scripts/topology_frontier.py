#!/usr/bin/env python3
"""Forecasters on both axes: log-MSE skill against topology, on cohorts of a generator.

    scripts/topology_frontier.py --trainer BIN --work DIR [--generator synth_count_cohort.py]
                                 [--subjects 300,1000] [--seeds 501,502,503] [--nodes 100]
                                 [--truth]

For each size and seed: writes a cohort (`scripts/<generator> --subjects S --nodes N --seed K`),
trains fold 0 of `--model eb-drift` (`--forecast dense`, `sparse` and `graph`) and
`--model linear-drift` on it, and prints one Markdown row per forecaster (the identity, each
run's own, first): sc_log_mse skill (1 - mse / identity mse over the test forecasts), and on
the topology axis the mean over the test forecasts of beta0 L1 and beta1 L1 (the exact Betti
curves), ECC L2 and strength MAE (all four `per_subject.csv`'s forecast rows), each with its
topology skill 1 - model / identity (> 0: closer to the true graph than the start scan is), and
the paired difference from the identity with its bootstrap 95 % interval over test subjects
(`compare --against identity`) for beta0 L1, ECC L2 and strength MAE. Everything is the trainer's own
scoring; this script only runs it and sets the numbers side by side. `--truth` adds the Bayes
ceiling's own forecast (`scripts/ceiling_topology.py`: its topology scored by the prototype's
scoring, checked against the trainer's on the identity) for the generators it knows.
"""

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

RUNS = [
    ("linear drift", "ld", ["--model", "linear-drift"]),
    ("eb-drift dense", "dense", ["--model", "eb-drift", "--forecast", "dense"]),
    ("eb-drift sparse", "sparse", ["--model", "eb-drift", "--forecast", "sparse"]),
    ("eb-drift graph", "graph", ["--model", "eb-drift", "--forecast", "graph"]),
]
PAIRED = ["betti0_l1", "ecc_l2", "strength_mae"]


def run(cmd, **kw):
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if out.returncode != 0:
        sys.exit(f"topology_frontier.py: {' '.join(map(str, cmd))} failed:\n{out.stderr[-2000:]}")
    return out.stdout


def means(path):
    """Mean of model_* and identity_* of each PAIRED metric over the test forecasts."""
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if r["forecast"] == "1"]
    out = {}
    for m in ["betti1_l1", *PAIRED]:
        for side in ("model", "identity"):
            vals = [float(r[f"{side}_{m}"]) for r in rows]
            out[f"{side}_{m}"] = sum(vals) / len(vals)
    return out, len(rows)


def skill(model, identity):
    return 1.0 - model / identity if identity > 0 else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trainer", required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--generator", default="synth_count_cohort.py")
    ap.add_argument("--subjects", default="300,1000")
    ap.add_argument("--seeds", default="501,502,503")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--truth", action="store_true",
                    help="add the Bayes ceiling's own (dense) forecast, scored by "
                         "scripts/ceiling_topology.py on the dense run's split (generators "
                         "scripts/ceiling.py knows; beta1 not scored)")
    a = ap.parse_args()
    scripts = Path(__file__).resolve().parent
    a.work.mkdir(parents=True, exist_ok=True)
    print("| generator | subjects (test forecasts) | seed | forecaster | log-MSE skill | β0 L1 (skill) "
          "| β1 L1 (skill) | ECC L2 (skill) | strength MAE (skill) "
          "| β0 L1 − identity [95% CI] | ECC L2 − identity [95% CI] "
          "| strength MAE − identity [95% CI] |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for s in [int(x) for x in a.subjects.split(",")]:
        for k in [int(x) for x in a.seeds.split(",")]:
            cohort = a.work / f"{Path(a.generator).stem}_{s}_{k}"
            if not cohort.exists():
                run([sys.executable, str(scripts / a.generator), "--subjects", str(s), "--nodes",
                     str(a.nodes), "--seed", str(k), "--out", str(cohort)])
            results = a.work / f"runs_{cohort.name}"
            for _, name, flags in RUNS:
                if not (results / "runs" / name / "finished.json").exists():
                    run([a.trainer, "train-gnn", *flags, "--sc_dir", cohort / "sc", "--morph_root",
                         cohort / "morph", "--subject_info_csv", cohort / "subject_info_sc.csv",
                         "--cv_fold", "0", "--results_dir", results, "--run_name", name])
            dirs = [str(results / "runs" / name) for _, name, _ in RUNS]
            per_run = json.loads(run([a.trainer, "compare", *dirs, "--per-run", "--json"]))
            paired = {}
            for m in PAIRED:
                got = json.loads(run([a.trainer, "compare", *dirs, "--against", "identity",
                                      "--metric", m, "--json"]))
                for r in got["runs"]:
                    paired[(os.path.basename(r["run"]), m)] = r["vs_identity"]
            id_means, n = means(results / "runs" / RUNS[0][1] / "per_subject.csv")
            b0i, b1i = id_means["identity_betti0_l1"], id_means["identity_betti1_l1"]
            head = f"| {a.generator} | {s} ({n}) | {k} |"
            print(f"{head} identity | +0.000 | {b0i:.2f} | {b1i:.0f} | "
                  f"{id_means['identity_ecc_l2']:.0f} | {id_means['identity_strength_mae']:.1f} | "
                  "0 | 0 | 0 |")
            for (label, name, _), r in zip(RUNS, per_run):
                mm, _ = means(results / "runs" / name / "per_subject.csv")
                cells = []
                for m in PAIRED:
                    p = paired[(name, m)]
                    cells.append(f"{p['mean']:+.4g} [{p['ci_low']:+.4g}, {p['ci_high']:+.4g}]")
                print(f"{head} {label} | {r['skill']:+.3f} | "
                      f"{mm['model_betti0_l1']:.2f} ({skill(mm['model_betti0_l1'], b0i):+.2f}) | "
                      f"{mm['model_betti1_l1']:.0f} ({skill(mm['model_betti1_l1'], b1i):+.2f}) | "
                      f"{mm['model_ecc_l2']:.0f} "
                      f"({skill(mm['model_ecc_l2'], mm['identity_ecc_l2']):+.2f}) | "
                      f"{mm['model_strength_mae']:.1f} "
                      f"({skill(mm['model_strength_mae'], mm['identity_strength_mae']):+.2f}) | "
                      f"{cells[0]} | {cells[1]} | {cells[2]} |")
            if a.truth:
                out = results / "ceiling.json"
                run([sys.executable, str(scripts / "ceiling_topology.py"), "--cohort", cohort,
                     "--run", results / "runs" / "dense", "--json", out])
                c = json.load(open(out))
                cells = [f"{p['mean']:+.4g} [{p['ci_low']:+.4g}, {p['ci_high']:+.4g}]"
                         for p in (c["minus_identity"][m] for m in PAIRED)]
                cm, ci = c["ceiling"], c["identity"]
                print(f"{head} Bayes ceiling (dense) | {c['skill']:+.3f} | "
                      f"{cm['betti0_l1']:.2f} ({skill(cm['betti0_l1'], ci['betti0_l1']):+.2f}) | – | "
                      f"{cm['ecc_l2']:.0f} ({skill(cm['ecc_l2'], ci['ecc_l2']):+.2f}) | "
                      f"{cm['strength_mae']:.1f} "
                      f"({skill(cm['strength_mae'], ci['strength_mae']):+.2f}) | "
                      f"{cells[0]} | {cells[1]} | {cells[2]} |")
            sys.stdout.flush()


if __name__ == "__main__":
    main()

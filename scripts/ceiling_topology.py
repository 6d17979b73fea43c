#!/usr/bin/env python3
"""The Bayes ceiling's own forecast on both axes: log-MSE skill and topology, on a run's split.

    scripts/ceiling_topology.py --cohort DIR --run RUN_DIR [--boot 2000] [--sweeps 400]

For a cohort of a generator whose truth `scripts/ceiling.py` rebuilds (synth_noisy_cohort.py,
synth_drift_cohort.py, synth_cohort.py, `trainer synth-connectome`), and a `train-gnn` run on it
(its `run_meta.json` gives the test subjects): each test forecast's Bayes-ceiling forecast
(E[log1p weight at visit 1 | the whole scan at visit 0, ages, sex, site], the forecast of least
expected squared log error; dense, as eb-drift's) is scored as the trainer scores a forecast
(`scripts/topology_tradeoff.py`'s `scores`: log-MSE over the upper triangle; after keeping the
forecast's top-k edges, k the true scan's edge count, ECC L2 at 32 quantile thresholds, beta0 L1
at the true scan's 8 thresholds, strength MAE). Prints one Markdown row in the columns of
`scripts/topology_frontier.py` (beta1 left out: not scored here): the log-MSE skill, the
topology means with their skill against the identity, and for beta0, ECC and strength the
paired difference from the identity with its bootstrap 95 % interval over the test forecasts.

Checked before printing: the identity's beta0 L1, ECC L2 and strength MAE scored here equal the
run's `per_subject.csv` (the trainer's own scoring) subject by subject to 1e-5 relative on at
least 95 % of the forecasts, else the script stops (the rest, printed, are ties at a threshold:
an edge whose f64 log1p here and f32 log1p in the trainer fall on either side of a quantile
threshold, one component more or less); the identity's values in the row are the run's own.
"""

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ceiling  # noqa: E402
import eb_drift_reference as ref  # noqa: E402
from frontier import load  # noqa: E402
from topology_tradeoff import scores  # noqa: E402

# per_subject.csv's columns for scores()'s entries 1..3.
COLUMNS = ["betti0_l1", "ecc_l2", "strength_mae"]


def dense(y, n):
    """The N x N weight matrix of an upper triangle of log1p weights."""
    out = np.zeros((n, n))
    out[np.triu_indices(n, 1)] = np.expm1(y)
    return out + out.T


def interval(d, boot, rng):
    idx = rng.integers(0, len(d), size=(boot, len(d)))
    lo, hi = np.percentile(d[idx].mean(1), [2.5, 97.5])
    return d.mean(), lo, hi


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cohort", type=Path, required=True)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--json", type=Path, help="also write the row's numbers here")
    ap.add_argument("--sweeps", type=int, default=400,
                    help="sweeps of the ceiling's sampler (synth_noisy_cohort.py cohorts only)")
    a = ap.parse_args()
    bayes = ceiling.for_cohort(a.cohort, sweeps=a.sweeps, burn=a.sweeps // 4)
    if bayes is None:
        sys.exit(f"ceiling_topology.py: {a.cohort}: no Bayes ceiling for this generator")
    split = json.load(open(a.run / "run_meta.json"))["extra"]["split"]
    test = load(a.cohort, split["test"])
    info = list(csv.DictReader(open(a.cohort / "subject_info_sc.csv")))
    male = {r["subid"]: r["sex"] in ("1", "M") for r in info}
    scan_ids = {}
    for r in info:
        scan_ids.setdefault(r["subid"], []).append((float(r["age"]), r["scanid"]))
    trainer = {r["subject"]: r for r in csv.DictReader(open(a.run / "per_subject.csv"))
               if r["forecast"] == "1"}
    rows = {"identity": [], "ceiling": []}
    differ = {col: [] for col in COLUMNS}
    for s, scans in test.items():
        if len(scans) < 2:
            continue
        (a0, y0), (a1, _) = scans[0], scans[1]
        ids = [scan for _, scan in sorted(scan_ids[s])]
        start, truth = (np.asarray(ref.read_matrix(a.cohort / "sc" / f"{i}.csv"), np.float64)
                        for i in ids[:2])
        identity = scores(start, truth)
        for j, col in enumerate(COLUMNS, start=1):
            want = float(trainer[s][f"identity_{col}"])
            if abs(identity[j] - want) > 1e-5 * max(abs(want), 1e-6):
                differ[col].append(f"{s} {identity[j]:g} here, {want:g} in the run")
            identity[j] = want
        rows["identity"].append(identity)
        rows["ceiling"].append(scores(dense(bayes(s, a0, y0, a1, male[s]), start.shape[0]), truth))
    ident, ceil = np.array(rows["identity"]), np.array(rows["ceiling"])
    if len(ident) != len(trainer):
        sys.exit(f"ceiling_topology.py: {len(ident)} forecasts here, {len(trainer)} in the run")
    for col, bad in differ.items():
        print(f"ceiling_topology.py: identity {col} scored here = the trainer's on "
              f"{len(ident) - len(bad)} of {len(ident)} forecasts{': ' if bad else ''}"
              f"{'; '.join(bad[:3])}", file=sys.stderr)
        if len(bad) > 0.05 * len(ident):
            sys.exit(f"ceiling_topology.py: identity {col} differs from {a.run}/per_subject.csv "
                     f"on {len(bad)} of {len(ident)} forecasts: not the trainer's scoring")
    mi, mc = ident.mean(0), ceil.mean(0)
    rng = np.random.default_rng(0)
    cells, paired = [], {}
    for j, col in enumerate(COLUMNS, start=1):
        m, lo, hi = interval(ceil[:, j] - ident[:, j], a.boot, rng)
        cells.append(f"{m:+.4g} [{lo:+.4g}, {hi:+.4g}]")
        paired[col] = {"mean": m, "ci_low": lo, "ci_high": hi}
    sk = lambda j: 1 - mc[j] / mi[j] if mi[j] > 0 else float("nan")  # noqa: E731
    if a.json:
        names = ["sc_log_mse", *COLUMNS]
        json.dump({"forecasts": len(ceil), "skill": sk(0),
                   "ceiling": dict(zip(names, mc.tolist())),
                   "identity": dict(zip(names, mi.tolist())), "minus_identity": paired},
                  open(a.json, "w"), indent=1)
    print(f"| {a.cohort.name} | {len(split['test'])} ({len(ceil)}) | | Bayes ceiling "
          f"(dense) | {sk(0):+.3f} | {mc[1]:.2f} ({sk(1):+.2f}) | – | {mc[2]:.0f} ({sk(2):+.2f}) "
          f"| {mc[3]:.1f} ({sk(3):+.2f}) | {cells[0]} | {cells[1]} | {cells[2]} |")


if __name__ == "__main__":
    main()

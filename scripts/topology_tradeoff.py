#!/usr/bin/env python3
"""What the topology metrics see of a forecast, and what winning them costs in log-MSE (issue 75).

    scripts/topology_tradeoff.py --cohort DIR [--seed 0]

A numpy prototype beside the trainer's scoring, not a replacement for it: fits eb-drift with
its independent reference (`scripts/eb_drift_reference.py`) on 80 % of the cohort's subjects
(a seeded shuffle, not the trainer's split), forecasts visit 1 of every other subject with two
visits from visit 0, and scores each variant against the true visit 1 as the trainer does:
log-MSE over the upper triangle, and after keeping the forecast's top-k edges (k = the true
scan's edge count) the ECC L2 (32 bins at quantiles 0.05..0.95 of the graph's own positive
log1p weights: N - E + triangles), the beta0 L1 (connected components) at the *true* scan's
8 thresholds (the topology loss's, `--topo_loss_bins`) for both graphs, as the trainer's
`ExactTopology` counts it (before 2026-12-04 this script counted each graph's beta0 at its own
32 thresholds: another metric), and the strength MAE. Printed per variant: the means, log-MSE skill against the identity, and
for beta0, ECC and strength the paired t statistic of (variant - identity) over the forecasts
(< -2: better than the identity).

Variants: the identity (start scan), eb-drift's dense forecast; `qblendL`: the start scan's
positive weights (its value distribution: for streamline counts, integers with their ties)
placed on the edges ranked by (1 - L) * log1p(dense) + L * log1p(start), as many as the start
scan has, every other entry the dense value capped below the smallest of them; `qnoiseS`: the
same placement ranked by log1p(dense) + S * N(0, 1).
"""

import argparse
import random
import sys
from pathlib import Path

import numpy as np
from scipy import stats
from scipy.sparse.csgraph import connected_components

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eb_drift_reference as ref  # noqa: E402

BINS = 32
# beta0 as the trainer's `ExactTopology` counts it: at the topology loss's thresholds
# (`--topo_loss_bins`, default 8) of the true scan.
B0_BINS = 8


def top_k(m, k):
    n = m.shape[0]
    iu = np.triu_indices(n, 1)
    v = m[iu]
    out = np.zeros_like(m)
    idx = np.argsort(-v, kind="stable")[:k]
    idx = idx[v[idx] > 0]
    out[iu[0][idx], iu[1][idx]] = v[idx]
    return out + out.T


def thresholds(x, bins=BINS):
    v = x[np.triu_indices(x.shape[0], 1)]
    v = np.sort(v[v > 0])
    return None if len(v) == 0 else np.quantile(v, np.linspace(0.05, 0.95, bins))


def curves(x):
    """ECC and beta0 at the graph's own quantile thresholds."""
    n = x.shape[0]
    th = thresholds(x)
    if th is None:
        return np.zeros(BINS), np.zeros(BINS)
    ecc, b0 = [], []
    for t in th:
        a = (x >= t).astype(np.float64)
        np.fill_diagonal(a, 0)
        ecc.append(n - a.sum() / 2 + np.trace(a @ a @ a) / 6)
        b0.append(connected_components(a, directed=False)[0])
    return np.array(ecc), np.array(b0)


def scores(pred, truth):
    iu = np.triu_indices(truth.shape[0], 1)
    log_mse = np.mean((np.log1p(pred[iu]) - np.log1p(truth[iu])) ** 2)
    kept = top_k(pred, int((truth[iu] > 0).sum()))
    ep, et = curves(np.log1p(kept))[0], curves(np.log1p(truth))[0]
    # beta0 as the trainer's `ExactTopology` counts it: both graphs at the *truth's* thresholds.
    th = thresholds(np.log1p(truth), B0_BINS)
    bp, bt = (beta0_at(np.log1p(m), th) for m in (kept, truth))
    return np.array([log_mse, np.abs(bp - bt).sum(), np.sqrt(((ep - et) ** 2).sum()),
                     np.mean(np.abs(kept.sum(1) - truth.sum(1)))])


def beta0_at(x, th):
    """Connected components of the graph of `x` (log1p weights) at each of the thresholds `th`."""
    if th is None:
        return np.zeros(B0_BINS)
    out = []
    for t in th:
        a = (x >= t) & (x > 0)
        np.fill_diagonal(a, False)
        out.append(connected_components(a, directed=False)[0])
    return np.array(out, float)


def placed(dense, start, score):
    """The start scan's positive weights on the edges `score` ranks first; the rest dense, capped."""
    n = dense.shape[0]
    iu = np.triu_indices(n, 1)
    v, s = dense[iu].copy(), score[iu]
    weights = np.sort(start[iu][start[iu] > 0])[::-1]
    order = np.argsort(-s, kind="stable")
    v[order[len(weights):]] = np.minimum(v[order[len(weights):]], np.nextafter(weights[-1], 0))
    v[order[:len(weights)]] = weights
    out = np.zeros_like(dense)
    out[iu] = v
    return out + out.T


def fitted_split(cohort_dir, seed):
    """The cohort, eb-drift fitted on a seeded 80 % of its subjects, those and the rest."""
    cohort = ref.Cohort(str(cohort_dir / "sc"), str(cohort_dir / "subject_info_sc.csv"))
    subjects = sorted(cohort.sex)
    random.Random(seed).shuffle(subjects)
    cut = int(0.8 * len(subjects))
    model, _ = ref.fit_checked(cohort, sorted(subjects[:cut]))
    return cohort, model, subjects[:cut], subjects[cut:]


def dense_pair(cohort, model, s):
    """Subject `s`'s dense eb-drift forecast of visit 1, its visit 0 and visit 1 (N x N, f64), or
    None when it has one scan."""
    scans = cohort.scans(s)
    if len(scans) < 2:
        return None
    (_, p0, a0), (_, p1, a1) = scans[0], scans[1]
    y0, z0 = cohort.upper(p0)
    dense = np.asarray(ref.forecast_matrix(model, y0, z0, a0, a1, cohort.sex[s], False))
    return (dense, np.asarray(ref.read_matrix(p0), dtype=np.float64),
            np.asarray(ref.read_matrix(p1), dtype=np.float64))


def print_table(rows, ci=False):
    """The variants' means, log-MSE skill, and paired t against the identity, as a markdown table;
    `ci`: also the paired 95 % t-interval of (variant - identity) for beta0, ECC and strength."""
    extra = " beta0 - identity [95% CI] | ECC - identity [95% CI] | strength - identity [95% CI] |"
    print("| variant | log-MSE | skill | beta0 L1 (t) | ECC L2 (t) | strength MAE (t) |"
          + (extra if ci else ""))
    print("| --- | ---: | ---: | ---: | ---: | ---: |" + (" ---: | ---: | ---: |" if ci else ""))
    ident = np.mean([r["identity"] for r in rows], 0)
    for name in rows[0]:
        m = np.mean([r[name] for r in rows], 0)
        d = np.array([r[name] - r["identity"] for r in rows])
        se = d.std(0, ddof=1) / np.sqrt(len(d))
        t = d.mean(0) / np.maximum(se, 1e-12)
        line = (f"| {name} | {m[0]:.4f} | {1 - m[0] / ident[0]:+.3f} | {m[1]:.2f} ({t[1]:+.1f}) "
                f"| {m[2]:.0f} ({t[2]:+.1f}) | {m[3]:.1f} ({t[3]:+.1f}) |")
        if ci:
            half = stats.t.ppf(0.975, len(d) - 1) * se
            line += "".join(f" {d.mean(0)[i]:+.3g} [{d.mean(0)[i] - half[i]:+.3g}, "
                            f"{d.mean(0)[i] + half[i]:+.3g}] |" for i in (1, 2, 3))
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cohort", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    cohort, model, train, test = fitted_split(a.cohort, a.seed)
    noise = np.random.default_rng(a.seed + 1)
    rows = []
    for s in test:
        p = dense_pair(cohort, model, s)
        if p is None:
            continue
        dense, start, truth = p
        ld, ls = np.log1p(dense), np.log1p(start)
        row = {"identity": scores(start, truth), "dense": scores(dense, truth)}
        for lam in (0.0, 0.25, 0.5, 0.75, 1.0):
            row[f"qblend{lam}"] = scores(placed(dense, start, (1 - lam) * ld + lam * ls), truth)
        for sd in (0.2, 0.4):
            z = np.triu(noise.standard_normal(dense.shape), 1)
            row[f"qnoise{sd}"] = scores(placed(dense, start, ld + sd * (z + z.T)), truth)
        rows.append(row)
    print(f"{a.cohort.name}: {len(rows)} test forecasts")
    print_table(rows)


if __name__ == "__main__":
    main()

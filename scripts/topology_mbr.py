#!/usr/bin/env python3
"""A forecast graph of least expected topology loss: minimum Bayes risk over residual transplants.

    scripts/topology_mbr.py --cohort DIR [--seed 0] [--pseudo 32] [--alphas 0.75 0.5]
                            [--limit N]
    scripts/topology_mbr.py --cohort DIR --decompose
    scripts/topology_mbr.py --cohort DIR --run RUN_DIR [--per-subject CSV]

`--run` takes the split of a `train-gnn --model eb-drift` run (its `run_meta.json`: fold 0's
training subjects, the test subjects) instead of a seeded 80 %, so that the graphs can be set
beside the trainer's `--forecast graph` subject by subject; `--per-subject` writes each test
forecast's chosen candidate, the margin of its risk (the second least over the least, minus 1:
below f32's resolution another implementation may choose otherwise) and its beta0 L1, ECC L2 and
strength MAE.

`--decompose` prints instead where the identity's beta0 L1 comes from: per threshold bin, read at
the true scan's thresholds (the metric) and at the start scan's own (an oracle), and the start
scan mapped onto the truth's quantiles as predicted by a line fitted on the training pairs (the
start scan's 8 quantiles, its age, the gap) or onto the true ones (the oracle).

A numpy prototype beside the trainer (issue 75, item 1; not shipped in it), on the split and
scoring of `scripts/topology_tradeoff.py` (the trainer's metrics: log-MSE over the upper
triangle; after keeping the forecast's top-k edges, k the true scan's edge count, ECC L2 at 32
quantile thresholds of the graph's own positive log1p weights, beta0 L1 at the true scan's 8,
strength MAE), eb-drift fitted by `scripts/eb_drift_reference.py` on the training 80 %.

The topology metrics read a forecast at the *true* scan's thresholds and against the true scan's
own noise, so a forecast of the expected graph loses to the start scan there (docs/frontier.md).
Here the forecast graph is the candidate with the least expected loss under an empirical
predictive distribution of the next scan:
1. pseudo-truths: for the `--pseudo` training pairs whose dense eb-drift forecast is nearest the
   subject's (squared distance of the log1p upper triangles), their whole-scan residual
   r_j = log1p(truth_j) - log1p(dense_j) added to the subject's dense forecast:
   expm1(log1p(dense) + r_j), zero below 0.5 and rounded when every training scan is integer
   valued (streamline counts), else zero below 1e-6. A whole scan's residual keeps what a scan's
   noise has and an edge-wise draw does not: its scan-wide factor (which moves the quantile
   thresholds), its existence flicker and ties;
2. candidates: the start scan, the dense forecast, the pseudo-truths, and for each `--alphas` a
   the same transplants with a * r_j (a draw shrunk towards the expected graph);
3. risk of a candidate: its beta0 L1 at each pseudo-truth's 8 thresholds, ECC L2 and strength
   MAE against every pseudo-truth (a pseudo-truth is not scored against itself), each candidate
   summarised after keeping its top-k edges, k the pseudo-truths' median edge count; each of the
   three risks over the start scan's, summed; the forecast graph is the argmin (`mbr`).
The dense forecast stays the log-MSE forecast (the forecaster's log-MSE skill is the dense
one's); the chosen graph is the forecast for the topology columns (its own log-MSE is printed).
Printed: means, log-MSE skill, and the paired t of (variant - identity) over the test forecasts
for beta0, ECC and strength (< -2: better than the identity); `mbr_b0` is the argmin of the
beta0 risk alone, `pseudo0` one pseudo-truth (what a single draw scores).
"""

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eb_drift_reference as ref  # noqa: E402
import topology_tradeoff as tt  # noqa: E402


class Transplants:
    """The training pairs' dense forecasts and whole-scan residuals (log1p upper triangles)."""

    def __init__(self, train):
        self.n = train[0][0].shape[0]
        self.iu = np.triu_indices(self.n, 1)
        self.counts = all(np.all(t == np.round(t)) for _, _, t in train)
        self.dense = np.array([np.log1p(d[self.iu]) for d, _, _ in train])
        self.resid = np.array([np.log1p(t[self.iu]) - np.log1p(d[self.iu]) for d, _, t in train])

    def square(self, v):
        m = np.zeros((self.n, self.n))
        m[self.iu] = v
        return m + m.T

    def pseudo(self, dense, count, alpha=1.0):
        """`count` pseudo-truths of the subject whose dense forecast is `dense` (N x N)."""
        ld = np.log1p(dense[self.iu])
        near = np.argsort(((self.dense - ld) ** 2).sum(1), kind="stable")[:count]
        out = []
        for j in near:
            v = np.expm1(ld + alpha * self.resid[j])
            v = np.where(v < 0.5, 0, np.round(v)) if self.counts else np.where(v < 1e-6, 0, v)
            out.append(self.square(np.maximum(v, 0)))
        return out


def risks(cands, pseudos, skip):
    """Per candidate, its summed beta0 L1, ECC L2 and strength MAE against the pseudo-truths
    (candidate i not against pseudo-truth skip[i]), as the metrics score them."""
    iu = np.triu_indices(pseudos[0].shape[0], 1)
    k = int(np.median([int((g[iu] > 0).sum()) for g in pseudos]))
    truths = [(tt.curves(np.log1p(g))[0], tt.thresholds(np.log1p(g), tt.B0_BINS), g.sum(1))
              for g in pseudos]
    b0_truth = [tt.beta0_at(np.log1p(g), th) for g, (_, th, _) in zip(pseudos, truths)]
    out = np.zeros((len(cands), 3))
    for i, g in enumerate(cands):
        kept = tt.top_k(g, k)
        ecc, strength = tt.curves(np.log1p(kept))[0], kept.sum(1)
        for p, (ecc_p, th, strength_p) in enumerate(truths):
            if p == skip[i]:
                continue
            out[i] += [np.abs(tt.beta0_at(np.log1p(kept), th) - b0_truth[p]).sum(),
                       np.sqrt(((ecc - ecc_p) ** 2).sum()),
                       np.abs(strength - strength_p).mean()]
    return out


def choose(start, dense, tp, count, alphas):
    """The candidates (start, dense, pseudo-truths, shrunk transplants), their risks over the
    start scan's, and the pseudo-truths."""
    pseudos = tp.pseudo(dense, count)
    cands = [start, dense] + pseudos
    skip = [-1, -1] + list(range(len(pseudos)))
    for a in alphas:
        cands += tp.pseudo(dense, count, a)
        skip += [-1] * len(pseudos)
    r = risks(cands, pseudos, skip)
    return cands, r / r[0], pseudos


Q8 = np.linspace(0.05, 0.95, tt.B0_BINS)


def quantiles(x):
    """The 8 quantiles of `x`'s positive log1p weights (the beta0 thresholds, were it the truth)."""
    v = np.log1p(x[np.triu_indices(x.shape[0], 1)])
    return np.quantile(np.sort(v[v > 0]), Q8)


def qmap(x, known, wanted):
    """`x` with its positive log1p weights mapped piecewise linearly, its quantiles `known` onto
    `wanted` (0 to 0, slope 1 beyond the last knot); order and ties kept."""
    iu = np.triu_indices(x.shape[0], 1)
    v = np.log1p(x[iu])
    want = np.maximum.accumulate(wanted)
    xs, ys = [0.0], [0.0]
    for k_from, k_to in zip(known, want):
        if k_from > xs[-1]:
            xs.append(k_from)
            ys.append(max(k_to, ys[-1] + 1e-9))
    xs.append(xs[-1] + 10.0)
    ys.append(ys[-1] + 10.0)
    w = np.where(v > 0, np.maximum(np.interp(v, xs, ys), 1e-9), 0.0)
    m = np.zeros_like(x)
    m[iu] = np.expm1(w)
    return m + m.T


def decompose(cohort, train_ids, test_ids):
    """Where the identity's beta0 L1 comes from (see `--decompose`)."""
    def pairs(ids):
        for s in ids:
            scans = cohort.scans(s)
            if len(scans) >= 2:
                (_, p0, a0), (_, p1, a1) = scans[0], scans[1]
                yield (np.asarray(ref.read_matrix(p0), dtype=np.float64),
                       np.asarray(ref.read_matrix(p1), dtype=np.float64), [a0, a1 - a0])
    x = np.array([np.concatenate([[1.0], quantiles(s), ages]) for s, _, ages in pairs(train_ids)])
    y = np.array([quantiles(t) for _, t, _ in pairs(train_ids)])
    line = np.linalg.lstsq(x, y, rcond=None)[0]
    at_truth, at_own, rows = [], [], []
    for start, truth, ages in pairs(test_ids):
        k = int((truth[np.triu_indices(truth.shape[0], 1)] > 0).sum())
        kept, lt = np.log1p(tt.top_k(start, k)), np.log1p(truth)
        b_truth = tt.beta0_at(lt, tt.thresholds(lt, tt.B0_BINS))
        at_truth.append(np.abs(tt.beta0_at(kept, tt.thresholds(lt, tt.B0_BINS)) - b_truth))
        at_own.append(np.abs(tt.beta0_at(kept, tt.thresholds(kept, tt.B0_BINS)) - b_truth))
        q = quantiles(start)
        rows.append({"identity": tt.scores(start, truth),
                     "quantile map (line)": tt.scores(
                         qmap(start, q, np.concatenate([[1.0], q, ages]) @ line), truth),
                     "quantile map (oracle)": tt.scores(qmap(start, q, quantiles(truth)), truth)})
    print(f"{len(rows)} test forecasts; the identity's beta0 L1 per threshold bin (0.05 .. 0.95)")
    print("at the truth's thresholds:", np.round(np.mean(at_truth, 0), 2),
          f"sum {np.mean(np.sum(at_truth, 1)):.2f}")
    print("at its own (oracle):     ", np.round(np.mean(at_own, 0), 2),
          f"sum {np.mean(np.sum(at_own, 1)):.2f}")
    tt.print_table(rows, ci=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cohort", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pseudo", type=int, default=32, help="pseudo-truths (nearest training pairs)")
    ap.add_argument("--alphas", type=float, nargs="*", default=[0.75, 0.5],
                    help="residual shrinkages of the extra candidates")
    ap.add_argument("--limit", type=int, default=0, help="score only the first N test forecasts")
    ap.add_argument("--decompose", action="store_true",
                    help="where the identity's beta0 L1 comes from, and a quantile map (no choice)")
    ap.add_argument("--run", type=Path, help="take this train-gnn run's split (fold 0, test)")
    ap.add_argument("--per-subject", type=Path,
                    help="write subject, chosen candidate, risk margin, beta0 L1, ECC L2, strength MAE")
    a = ap.parse_args()
    if a.run:
        cohort = ref.Cohort(str(a.cohort / "sc"), str(a.cohort / "subject_info_sc.csv"))
        split = json.load(open(a.run / "run_meta.json"))["extra"]["split"]
        train_ids = next(f["train"] for f in split["folds"] if f["fold"] == 0)
        test_ids = split["test"]
        model, _ = ref.fit_checked(cohort, sorted(train_ids))
    else:
        cohort, model, train_ids, test_ids = tt.fitted_split(a.cohort, a.seed)
    if a.decompose:
        decompose(cohort, train_ids, test_ids)
        return

    def pair(s):
        return tt.dense_pair(cohort, model, s)

    tp = Transplants([p for p in map(pair, train_ids) if p is not None])
    rows, chosen, ids, t0 = [], [], [], time.time()
    for s in test_ids:
        p = pair(s)
        if p is None:
            continue
        dense, start, truth = p
        cands, r, pseudos = choose(start, dense, tp, a.pseudo, a.alphas)
        j = int(np.argmin(r.sum(1)))
        total = np.sort(r.sum(1))
        ids.append((s, (total[1] - total[0]) / max(total[0], 1e-12)))
        chosen.append("start" if j == 0 else "dense" if j == 1
                      else "pseudo" if j < 2 + len(pseudos) else "shrunk")
        rows.append({"identity": tt.scores(start, truth), "dense": tt.scores(dense, truth),
                     "mbr": tt.scores(cands[j], truth),
                     "mbr_b0": tt.scores(cands[int(np.argmin(r[:, 0]))], truth),
                     "pseudo0": tt.scores(pseudos[0], truth)})
        if a.limit and len(rows) >= a.limit:
            break
    print(f"{a.cohort.name}: {len(rows)} test forecasts, {len(tp.dense)} training pairs, "
          f"integer-valued: {tp.counts}, {time.time() - t0:.0f} s; mbr chose: "
          + ", ".join(f"{c} {chosen.count(c)}" for c in ("start", "dense", "pseudo", "shrunk")))
    tt.print_table(rows, ci=True)
    if a.per_subject:
        with open(a.per_subject, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["subject", "chosen", "margin", "betti0_l1", "ecc_l2", "strength_mae"])
            for (s, margin), c, r in zip(ids, chosen, rows):
                w.writerow([s, c, repr(float(margin)), *(repr(float(v)) for v in r["mbr"][1:4])])


if __name__ == "__main__":
    main()

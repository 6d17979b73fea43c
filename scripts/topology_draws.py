#!/usr/bin/env python3
"""A forecast graph chosen for its topology: analog draws selected by predicted summaries (issue 75).

    scripts/topology_draws.py --cohort DIR [--seed 0] [--k 20] [--draws 32] [--edit]
                              [--weights 1 1 1] [--mix 0 ...] [--search STEPS]

A numpy prototype beside the trainer (not shipped in it), scored as `scripts/topology_tradeoff.py`
scores (the trainer's metrics: log-MSE over the upper triangle; after keeping the forecast's
top-k edges, k the true scan's edge count, ECC L2 at 32 quantile thresholds of the graph's own
positive log1p weights, beta0 L1 at the true scan's 8, and strength MAE), on the same seeded 80 % split, eb-drift
fitted by `scripts/eb_drift_reference.py`.

Why: ECC and beta0 of a count scan are those of a *draw* (weak edges scattered, integer ties),
which a forecast of the expected graph does not have (docs/frontier.md, "What ECC and beta0 see
of a count forecast"). The expected ECC of the next scan is not the ECC of the expected scan.
So, for each test subject:
1. analog draws: for every edge, the K training pairs whose eb-drift forecast at that edge is
   nearest the subject's; a draw takes, edge by edge, the true next-scan value of one of those
   K at random (their existence, their integer ties); `--draws` such graphs;
2. a predicted summary: per threshold bin, a least-squares line of the true next scan's ECC,
   beta0 and node strengths on the start scan's and the dense forecast's, fitted on the
   training pairs (`selS`: on the start scan's only);
3. the forecast graph: the candidate whose summaries are nearest the prediction (each block's
   distance over its mean in-sample residual, summed); candidates: the draws, `+start` the
   start scan too, `+all` the dense forecast too. Every graph is summarised as the metrics see
   it, after keeping its top-k edges, k predicted from the start scan's edge count by a line
   fitted on the training pairs.
`--edit` also scores the `selSD+all` choice with its weakest tier (the edges tied at its smallest
value) moved, edge by edge, towards the triangle count the predicted ECC's first bin implies
(`edit_weakest`); `--weights` weighs the three distances in the choice; `--mix` takes part of a
draw's edges from the start scan. `+values` maps the chosen graph's values by the strictly
increasing map whose node strengths are nearest the predicted ones (`revalue`): every graph
the metrics threshold, so ECC and beta0, stays the same; only the strengths move. `--search N`
also scores the `selSD+all` choice with its tier boundaries moved (`+retier`, drawn graphs only)
and then N proposed value swaps towards the predicted summaries (`+search`; both in
`topology_search.py`).
The dense forecast stays the log-MSE forecast; the chosen graph is the topology forecast (its
own log-MSE is printed too). Printed: means, log-MSE skill, the paired t of (variant - identity)
over the forecasts for beta0, ECC and strength (< -2: better than the identity), and which
candidate `+all` chose.
"""

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

sys.path.insert(0, str(Path(__file__).resolve().parent))
import topology_search as ts  # noqa: E402
import topology_tradeoff as tt  # noqa: E402

NB = tt.BINS
BLOCKS = (slice(0, NB), slice(NB, 2 * NB), slice(2 * NB, None))  # ECC, beta0, strengths


def summary(x, at=None):
    """ECC at `x`'s own thresholds, beta0 at its own or (`at`, a scan) at that scan's, strengths."""
    e, b = tt.curves(np.log1p(x))
    if at is not None:
        b = tt.beta0_at(np.log1p(x), tt.thresholds(np.log1p(at)))
    return np.concatenate([e, b, x.sum(1)])


def distances(x, y):
    d = x - y
    return np.array([np.sqrt((d[BLOCKS[0]] ** 2).sum()), np.abs(d[BLOCKS[1]]).sum(),
                     np.abs(d[BLOCKS[2]]).mean()])


def fit_lines(target, predictors):
    """Per summary entry, least squares of target on [1, predictors...] over the training pairs."""
    return [np.linalg.lstsq(np.column_stack([np.ones(len(target))] + [p[:, j] for p in predictors]),
                            target[:, j], rcond=None)[0] for j in range(target.shape[1])]


def predict(lines, xs):
    return np.array([c @ np.concatenate([[1.0], [x[j] for x in xs]]) for j, c in enumerate(lines)])


def edit_weakest(x, triangles, plausible, steps=400):
    """Swaps edges of `x`'s weakest tier (its smallest positive value, tied) with absent plausible
    pairs, one at a time, towards `triangles` triangles; the tier's size, and so every
    quantile threshold, unchanged."""
    x = x.copy()
    n = x.shape[0]
    upper = np.triu(np.ones((n, n), bool), 1)
    low = x[x > 0].min()
    a = (x > 0).astype(np.float64)
    t = np.trace(a @ a @ a) / 6
    for _ in range(steps):
        gap = triangles - t
        c = a @ a
        weak = np.argwhere(upper & (x == low))
        free = np.argwhere(upper & (a == 0) & plausible)
        if abs(gap) < 1 or len(weak) == 0 or len(free) == 0:
            break
        cw, cf = c[weak[:, 0], weak[:, 1]], c[free[:, 0], free[:, 1]]
        r, f = (weak[np.argmin(cw)], free[np.argmax(cf)]) if gap > 0 else \
            (weak[np.argmax(cw)], free[np.argmin(cf)])
        y = x.copy()
        y[r[0], r[1]] = y[r[1], r[0]] = 0
        y[f[0], f[1]] = y[f[1], f[0]] = low
        b = (y > 0).astype(np.float64)
        t2 = np.trace(b @ b @ b) / 6
        if abs(triangles - t2) >= abs(gap):
            break
        x, a, t = y, b, t2
    return x


def revalue(x, strengths, knots=64):
    """`x` with its values mapped by a strictly increasing map g whose node strengths are
    nearest `strengths` in least squares: g(v) = 1e-3 v + sum_q d_q clip((v - k_(q-1)) /
    (k_q - k_(q-1)), 0, 1), d >= 0, knots k at `x`'s distinct positive values (at most `knots`
    of them, else at their quantiles; k_0 = 0). Every threshold graph at `x`'s own quantiles,
    so every ECC and beta0 value, and the top-k edges are unchanged: only the strengths move.
    For tied values (counts) g sets each tier's value freely, in order."""
    n = x.shape[0]
    iu = np.triu_indices(n, 1)
    v = x[iu]
    pos = v > 0
    k = np.unique(v[pos])
    if len(k) > knots:
        k = np.unique(np.quantile(v[pos], np.linspace(0, 1, knots)))
    k = np.concatenate([[0.0], k])
    phi = np.clip((v[:, None] - k[None, :-1]) / (k[None, 1:] - k[None, :-1]), 0, 1) * pos[:, None]
    a = np.zeros((n, len(k) - 1))
    np.add.at(a, iu[0], phi)
    np.add.at(a, iu[1], phi)
    floor = 1e-3
    extra, _ = nnls(a, strengths - floor * x.sum(1))
    out = floor * v + phi @ extra
    m = np.zeros_like(x)
    m[iu] = out
    return m + m.T


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cohort", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=int, default=20, help="analogs per edge")
    ap.add_argument("--draws", type=int, default=32)
    ap.add_argument("--weights", type=float, nargs=3, default=[1.0, 1.0, 1.0],
                    help="of the ECC, beta0 and strength distances in the choice")
    ap.add_argument("--edit", action="store_true",
                    help="also: the selSD+all choice with its weakest tier edited towards the "
                         "predicted triangle count")
    ap.add_argument("--b0-at", choices=["own", "start"], default="own",
                    help="the beta0 curve of a forecast in the choice: at its own thresholds, or "
                         "at the start scan's (the truth's stand-in; the metric reads the truth's)")
    ap.add_argument("--search", type=int, default=0, metavar="STEPS",
                    help="also: the selSD+all choice moved towards the predicted summaries by "
                         "STEPS proposed value swaps (topology_search.py)")
    ap.add_argument("--mix", type=float, nargs="+", default=[0.0],
                    help="fractions of each draw's edges taken from the start scan, in turn")
    a = ap.parse_args()
    cohort, model, train_ids, test_ids = tt.fitted_split(a.cohort, a.seed)

    def pair(s):
        return tt.dense_pair(cohort, model, s)

    train = [p for p in map(pair, train_ids) if p is not None]
    n = train[0][0].shape[0]
    iu = np.triu_indices(n, 1)
    f = np.array([np.log1p(d[iu]) for d, _, _ in train])
    y = np.array([t[iu] for _, _, t in train])
    order = np.argsort(f, 0, kind="stable")
    f_sorted, y_sorted = np.take_along_axis(f, order, 0), np.take_along_axis(y, order, 0)
    s_count, e_count = f.shape
    k = min(a.k, s_count)
    # Candidates are summarised as the metrics see them: their top-k edges, k the next scan's
    # edge count as a line on the start scan's predicts it (fitted on the training pairs).
    count = lambda x: int((x[iu] > 0).sum())  # noqa: E731
    k_line = np.polyfit([count(s) for _, s, _ in train], [count(t) for _, _, t in train], 1)
    k_next = lambda start: max(1, int(round(np.polyval(k_line, count(start)))))  # noqa: E731
    xs = np.array([summary(tt.top_k(s, k_next(s))) for _, s, _ in train])
    xt = np.array([summary(t) for _, _, t in train])
    # `--b0-at start`: beta0 of a forecast read at the start scan's thresholds, the stand-in for
    # the truth's, at which the trainer's metric reads it.
    at = (lambda s: s) if a.b0_at == "start" else (lambda s: None)  # noqa: E731
    xd = np.array([summary(tt.top_k(d, k_next(s)), at(s)) for d, s, _ in train])
    lines = {"selS": fit_lines(xt, [xs]), "selSD": fit_lines(xt, [xs, xd])}
    scale = {name: np.mean([distances(predict(c, [xs[i]] if name == "selS" else [xs[i], xd[i]]), xt[i])
                            for i in range(s_count)], 0) for name, c in lines.items()}
    rng = np.random.default_rng(a.seed + 7)
    rng_search = np.random.default_rng(a.seed + 11)

    def square(v):
        m = np.zeros((n, n))
        m[iu] = v
        return m + m.T

    rows, chosen, near = [], [], []
    w = np.array(a.weights)
    for s in test_ids:
        p = pair(s)
        if p is None:
            continue
        dense, start, truth = p
        fd = np.log1p(dense[iu])
        pos = np.array([np.searchsorted(f_sorted[:, e], fd[e]) for e in range(e_count)])
        lo = np.clip(pos - k // 2, 0, s_count - k)
        analogs = np.take_along_axis(y_sorted, lo[None, :] + np.arange(k)[:, None], 0)
        su = start[iu]
        draws = []
        for i in range(a.draws):
            v = analogs[rng.integers(0, k, e_count), np.arange(e_count)]
            mix = a.mix[i % len(a.mix)]
            if mix > 0:  # part of the edges from the start scan (its clustering, its ties)
                v = np.where(rng.random(e_count) < mix, su, v)
            draws.append(square(v))
        kn = k_next(start)
        sums = [summary(tt.top_k(d, kn), at(start)) for d in draws]
        ss, sd = summary(tt.top_k(start, kn)), summary(tt.top_k(dense, kn), at(start))
        row = {"identity": tt.scores(start, truth), "dense": tt.scores(dense, truth)}
        for name, c in lines.items():
            target = predict(c, [ss] if name == "selS" else [ss, sd])
            if name == "selSD":  # how near the prediction itself comes, and the identity
                near.append((distances(target, summary(truth)), distances(ss, summary(truth))))
            for suffix, cands, csums in (("", draws, sums), ("+start", draws + [start], sums + [ss]),
                                         ("+all", draws + [start, dense], sums + [ss, sd])):
                j = int(np.argmin([(w * distances(x, target) / scale[name]).sum() for x in csums]))
                row[name + suffix] = tt.scores(cands[j], truth)
                if name != "selSD" or suffix != "+all":
                    continue
                graph = cands[j]
                row[name + suffix + "+values"] = tt.scores(revalue(graph, target[BLOCKS[2]]), truth)
                if a.edit:  # the dense forecast has no tied tier to edit: kept as it is
                    if j <= len(draws):
                        kept = tt.top_k(graph, kn)
                        e_kept = (kept[iu] > 0).sum()
                        plausible = square((analogs > 0).any(0).astype(float)) > 0
                        graph = edit_weakest(kept, target[0] - n + e_kept, plausible)
                    row[name + suffix + "+edit"] = tt.scores(graph, truth)
                    row[name + suffix + "+edit+values"] = tt.scores(
                        revalue(graph, target[BLOCKS[2]]), truth)
                if a.search:
                    plausible = square(((analogs > 0).any(0) | (su > 0)).astype(float)) > 0
                    moved = tt.top_k(cands[j], kn)
                    if j <= len(draws):  # tied counts: their tier boundaries first
                        moved = ts.retier(moved, dense, target, scale[name], w)
                        row[name + suffix + "+retier"] = tt.scores(moved, truth)
                    moved = ts.search(moved, target, scale[name], w, plausible, rng_search,
                                      a.search)
                    row[name + suffix + "+search"] = tt.scores(moved, truth)
                    row[name + suffix + "+search+values"] = tt.scores(
                        revalue(moved, target[BLOCKS[2]]), truth)
                chosen.append("start" if j == len(draws) else "dense" if j > len(draws) else "draw")
        rows.append(row)
    print(f"{a.cohort.name}: {len(rows)} test forecasts, {s_count} training pairs, k = {k}, "
          f"{a.draws} draws; selSD+all chose: "
          + ", ".join(f"{c} {chosen.count(c)}" for c in ("draw", "start", "dense")))
    pn, sn = np.mean([x[0] for x in near], 0), np.mean([x[1] for x in near], 0)
    print(f"the selSD prediction's own distance to the truth's summaries (ECC L2, beta0 L1, "
          f"strength MAE): {pn[0]:.0f}, {pn[1]:.2f}, {pn[2]:.1f}; the start scan's (top-k): "
          f"{sn[0]:.0f}, {sn[1]:.2f}, {sn[2]:.1f}")
    tt.print_table(rows)


if __name__ == "__main__":
    main()

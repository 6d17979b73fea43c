"""A graph moved towards predicted topology summaries by value swaps (issue 75, a prototype).

`search` starts from a forecast graph (its top-k edges) and swaps the values of two upper-triangle
entries at a time: two edges (their placement: which edges are strong), or an edge and an absent
pair the analogs make plausible (the support). A swap keeps the multiset of positive values, so
every quantile threshold the metrics use (and the edge count at each) stays the same; what moves
is each threshold graph's triangles (so its ECC, N - E + triangles), its components (beta0) and
the node strengths. A swap is kept when the weighted sum of the three distances to the predicted
summaries (each over its in-sample scale, as the choice in `topology_draws.py` weighs them) falls.
Only the bins whose threshold lies between the two values change; their triangle counts are
updated from common neighbours, their components recomputed.
"""

import numpy as np
from scipy.sparse.csgraph import connected_components

import topology_tradeoff as tt


def _objective(ecc, b0, s, target, nb, w):
    return (w[0] * np.sqrt(((ecc - target[:nb]) ** 2).sum()) + w[1] * np.abs(b0 - target[nb:2 * nb]).sum()
            + w[2] * np.abs(s - target[2 * nb:]).mean())


def search(x, target, scale, weights, plausible, rng, steps=2000, with_objective=False):
    """`x` (symmetric, non-negative) after `steps` proposed swaps; see the module's docstring.
    `target`: the predicted summary (ECC bins, beta0 bins, strengths); `scale`: the three
    distances' in-sample means; `plausible`: boolean n x n, the absent pairs a swap may fill.
    `with_objective`: also the objective as the swaps' bookkeeping has it (the tests compare it
    with `objective`, computed afresh)."""
    n = x.shape[0]
    nb = tt.BINS
    iu = np.triu_indices(n, 1)
    v = x[iu].copy()
    lv = np.log1p(v)
    th = tt.thresholds(np.log1p(x))
    if th is None:
        return (x, np.inf) if with_objective else x
    w = np.asarray(weights, float) / np.asarray(scale, float)
    a = np.zeros((nb, n, n), bool)
    for j, t in enumerate(th):
        a[j][iu] = lv >= t
        a[j] |= a[j].T
    ecc, b0 = tt.curves(np.log1p(x))
    s = x.sum(1)
    best = _objective(ecc, b0, s, target, nb, w)
    free = np.flatnonzero((v == 0) & plausible[iu])
    for _ in range(steps):
        pos = np.flatnonzero(v > 0)
        e1 = pos[rng.integers(len(pos))]
        pool = pos if (len(free) == 0 or rng.random() < 0.5) else free
        e2 = pool[rng.integers(len(pool))]
        if v[e1] == v[e2]:
            continue
        hi, lo = (e1, e2) if v[e1] > v[e2] else (e2, e1)
        bins = np.flatnonzero((th > lv[lo]) & (th <= lv[hi]))
        (u, uu), (p, q) = (iu[0][hi], iu[1][hi]), (iu[0][lo], iu[1][lo])
        d_tri = -(a[bins, u] & a[bins, uu]).sum(1).astype(float)
        rp, rq = a[bins, p].copy(), a[bins, q].copy()
        for r, node in ((rp, p), (rq, q)):  # the removed edge no longer joins p or q
            if node == u:
                r[:, uu] = False
            elif node == uu:
                r[:, u] = False
        d_tri += (rp & rq).sum(1)
        dv = v[hi] - v[lo]
        s2 = s.copy()
        s2[[u, uu]] -= dv
        s2[[p, q]] += dv
        ecc2 = ecc.copy()
        ecc2[bins] += d_tri
        b02 = b0.copy()
        for j in bins:
            a[j, u, uu] = a[j, uu, u] = False
            a[j, p, q] = a[j, q, p] = True
            b02[j] = connected_components(a[j], directed=False)[0]
        f = _objective(ecc2, b02, s2, target, nb, w)
        if f < best:
            best, ecc, b0, s = f, ecc2, b02, s2
            v[hi], v[lo] = v[lo], v[hi]
            lv[hi], lv[lo] = lv[lo], lv[hi]
            free = np.flatnonzero((v == 0) & plausible[iu])
        else:
            for j in bins:
                a[j, p, q] = a[j, q, p] = False
                a[j, u, uu] = a[j, uu, u] = True
    out = np.zeros_like(x)
    out[iu] = v
    out = out + out.T
    return (out, best) if with_objective else out


def objective(x, target, scale, weights):
    """The weighted distance of `x`'s summaries to `target` that `search` and `retier` lower."""
    return _full(x, target, np.asarray(weights, float) / np.asarray(scale, float))


def _full(x, target, w):
    ecc, b0 = tt.curves(np.log1p(x))
    nb = tt.BINS
    return _objective(ecc, b0, x.sum(1), target, nb, w)


def retier(x, score, target, scale, weights, tiers=4, steps=(-0.08, -0.06, -0.04, -0.03, -0.02,
                                                             -0.01, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08),
           passes=2):
    """`x` (tied values: counts) with the boundary between each of its `tiers` smallest values and
    the next moved: the best of `steps` (fractions of its edges) by the same objective as
    `search`. Moving a boundary up demotes the next tier's edges `score` ranks lowest; down,
    promotes this tier's it ranks highest. The boundary decides at which quantile bin the tier
    drops out of the threshold graphs, and so the ECC and beta0 jumps there."""
    n = x.shape[0]
    iu = np.triu_indices(n, 1)
    w = np.asarray(weights, float) / np.asarray(scale, float)
    v = x[iu].copy()
    sc = score[iu]
    k = int((v > 0).sum())

    def square(u):
        m = np.zeros((n, n))
        m[iu] = u
        return m + m.T

    best = _full(x, target, w)
    for _ in range(passes):
        values = np.unique(v[v > 0])
        for c in range(min(tiers, len(values) - 1)):
            lo, hi = values[c], values[c + 1]
            in_lo, in_hi = np.flatnonzero(v == lo), np.flatnonzero(v == hi)
            trial_best = None
            for st in steps:
                m = int(round(abs(st) * k))
                u = v.copy()
                if st > 0:  # boundary up: the next tier's lowest-scored edges down to `lo`
                    pick = in_hi[np.argsort(sc[in_hi], kind="stable")[:m]]
                    u[pick] = lo
                else:  # boundary down: this tier's highest-scored edges up to `hi`
                    pick = in_lo[np.argsort(-sc[in_lo], kind="stable")[:m]]
                    u[pick] = hi
                if m == 0 or m >= len(in_lo if st < 0 else in_hi):
                    continue
                f = _full(square(u), target, w)
                if f < best:
                    best, trial_best = f, u
            if trial_best is not None:
                v = trial_best
    return square(v)

#!/usr/bin/env python3
"""Checks of scripts/topology_mbr.py (run by tests/gnn/gnn_eb_drift.rs).

A transplant of a training pair's own residual onto its own dense forecast must give back its
true next scan (exactly for counts, to 1e-9 otherwise), and that pair must be the nearest; the
risks must equal the metrics' own scores (`topology_tradeoff.scores`) summed over the
pseudo-truths, a candidate not against the pseudo-truth it is."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import topology_mbr as tm  # noqa: E402
import topology_tradeoff as tt  # noqa: E402


def sym(v, n):
    m = np.zeros((n, n))
    m[np.triu_indices(n, 1)] = v
    return m + m.T


def main():
    rng = np.random.default_rng(4)
    n, e = 20, 190
    for counts in (True, False):
        train = []
        for _ in range(6):
            dense = sym(rng.gamma(2.0, 3.0, e), n)
            v = rng.gamma(1.5, 4.0, e) * (rng.random(e) < 0.4)
            truth = sym(np.round(v) if counts else v, n)
            train.append((dense, None, truth))
        tp = tm.Transplants(train)
        assert tp.counts == counts
        for d, _, t in train:
            back = tp.pseudo(d, 1)[0]
            if counts:
                assert np.array_equal(back, t), "a count transplant does not give its truth back"
            else:
                assert np.allclose(back, t, rtol=1e-9, atol=1e-9), "a transplant moved its truth"
    # Pseudo-truths of one edge count (a fixed support, values permuted): the risks' top-k is
    # then every pseudo-truth's own, and each risk must be the metrics' scores summed.
    support = rng.random(e) < 0.45
    values = np.round(rng.gamma(1.5, 5.0, support.sum())) + 1
    pseudos = []
    for _ in range(5):
        v = np.zeros(e)
        v[support] = rng.permutation(values)
        pseudos.append(sym(v, n))
    cands = [sym(rng.gamma(2.0, 3.0, e), n), pseudos[2], sym(np.round(rng.gamma(1.0, 6.0, e)), n)]
    skip = [3, 2, -1]  # candidate 0 is not pseudo-truth 3: a skip that is ignored shows
    r = tm.risks(cands, pseudos, skip)
    for i, c in enumerate(cands):
        want = sum(tt.scores(c, p)[1:] for j, p in enumerate(pseudos) if j != skip[i])
        assert np.allclose(r[i], want, rtol=1e-12, atol=1e-9), (i, r[i], want)
    print("topology_mbr checks passed")


if __name__ == "__main__":
    main()

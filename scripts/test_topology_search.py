#!/usr/bin/env python3
"""Checks of scripts/topology_search.py (run by tests/gnn/gnn_eb_drift.rs).

`search` keeps each threshold graph's triangles, components and the strengths by increments: the
objective it reports must equal the objective computed afresh from the graph it returns, the
positive values must be the start's (a swap keeps the multiset), and the objective must not rise.
`retier` must keep the edge count and not raise the objective."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import topology_search as ts  # noqa: E402
import topology_tradeoff as tt  # noqa: E402


def count_graph(rng, n, density):
    """A symmetric graph of streamline counts: integers 1.. on a random support, many ties."""
    m = np.triu((rng.random((n, n)) < density) * (1 + rng.geometric(0.35, (n, n))), 1).astype(float)
    return m + m.T


def main():
    rng = np.random.default_rng(3)
    nb = tt.BINS
    checked = 0
    for trial in range(6):
        n = 24 + 4 * trial
        x = count_graph(rng, n, 0.25 + 0.05 * trial)
        other = count_graph(rng, n, 0.3)
        e, b = tt.curves(np.log1p(other))
        target = np.concatenate([e, b, other.sum(1)])
        scale, weights = [100.0, 2.0, 10.0], [1.0, 1.0, 1.0]
        plausible = (x > 0) | (other > 0)
        before = ts.objective(x, target, scale, weights)
        y, tracked = ts.search(x, target, scale, weights, plausible, np.random.default_rng(trial),
                               steps=300, with_objective=True)
        fresh = ts.objective(y, target, scale, weights)
        assert abs(tracked - fresh) <= 1e-9 * max(1.0, abs(fresh)), (trial, tracked, fresh)
        assert fresh <= before + 1e-12, (trial, before, fresh)
        iu = np.triu_indices(n, 1)
        assert np.array_equal(np.sort(x[iu][x[iu] > 0]), np.sort(y[iu][y[iu] > 0])), trial
        assert np.array_equal(y, y.T) and np.all(np.diag(y) == 0), trial
        z = ts.retier(x, other, target, scale, weights)
        assert (z[iu] > 0).sum() == (x[iu] > 0).sum(), trial
        assert ts.objective(z, target, scale, weights) <= before + 1e-12, trial
        checked += 1
        assert fresh < before or trial > 0, "the first trial's search moved nothing"
    print(f"topology_search: {checked} graphs, bookkeeping equal to a fresh count, values kept, "
          f"objective never raised; {nb} bins")


if __name__ == "__main__":
    main()

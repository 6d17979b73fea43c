#!/usr/bin/env python3
"""Checks of scripts/ceiling.py (run by tests/gnn/gnn_eb_drift.rs; exits non-zero on a failure).

* its numerical pieces against closed forms and seeded Monte Carlo (tolerances: 5 standard
  errors of the Monte Carlo mean, or 1e-9 against a closed form);
* the Hamiltonian Monte Carlo energy's gradient against central finite differences (a wrong
  gradient would leave the sampler's target right but its acceptance near 0);
* each generator's ceiling on a small cohort of its own: finite, never negative, 0 wherever the
  generator never puts an edge, the rebuilt template equal to the cohort's truth.npy; and with
  synth_noisy_cohort.py --no-noise, visit 1 exactly;
* `trainer synth-connectome`'s ceiling (from the synth_truth.json it writes): finite, never
  negative, and visit 1 itself when the scan noise is all but gone.

    python3 scripts/test_ceiling.py [WORKDIR]
"""

import csv
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from scipy.special import ndtr

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ceiling  # noqa: E402
import frontier  # noqa: E402


def check(cond, what):
    if not cond:
        raise SystemExit(f"test_ceiling.py: FAILED: {what}")
    print(f"ok: {what}")


def pieces():
    rng = np.random.default_rng(1)
    mu, sd, thr = np.array([-0.3, 0.2, 1.5]), np.array([0.5, 0.3, 0.8]), 0.1
    x = mu[:, None] + sd[:, None] * rng.normal(size=(3, 400_000))
    v = np.where(x > thr, x, 0.0)
    se = v.std(1) / np.sqrt(v.shape[1])
    got = ceiling.cens_mean(mu, sd, thr)
    check(np.all(np.abs(got - v.mean(1)) < 5 * se), f"cens_mean {got} vs Monte Carlo {v.mean(1)}")

    draws = ceiling.trunc_normal_upper(rng, np.full(200_000, 0.4), np.full(200_000, 0.7), 0.0)
    check(draws.max() <= 0.0, "truncated draws stay below the bound")
    a = (0.0 - 0.4) / 0.7
    want = 0.4 - 0.7 * ceiling.npdf(a) / ndtr(a)  # the mean of a normal truncated above
    se = draws.std() / np.sqrt(len(draws))
    check(abs(draws.mean() - want) < 5 * se, f"truncated mean {draws.mean()} vs {want}")

    m, s = np.array([0.3, -1.0]), np.array([1.2, 0.4])
    lo, hi = np.array([-0.5, -2.0]), np.array([1.0, np.inf])
    mass, first = ceiling.truncated(lambda t: t, m, s, lo, hi)
    za, zb = (lo - m) / s, np.minimum((hi - m) / s, 8.0)
    want_mass = ndtr(zb) - ndtr(za)
    want_first = m * want_mass + s * (ceiling.npdf(za) - ceiling.npdf(zb))
    check(np.allclose(mass, want_mass, atol=1e-9), f"truncated mass {mass} vs {want_mass}")
    check(np.allclose(first, want_first, atol=1e-9), f"truncated mean {first} vs {want_first}")
    got = ceiling.gauss(lambda t: t * t, np.array([0.5]), np.array([2.0]))
    check(abs(got[0] - 4.25) < 1e-9, f"Gauss-Hermite E[X^2] {got[0]} vs 4.25")


def gradient():
    rng = np.random.default_rng(2)
    n, rank = 7, 3
    iu = np.triu_indices(n, 1)
    m = len(iu[0])
    b_mat = rng.normal(size=(n, n)) * 0.5
    rho, coef = rng.uniform(-0.3, 0.3, m), rng.uniform(0.05, 0.1, m)
    base, v0 = rng.normal(size=m) * 0.3, rng.uniform(0.05, 0.2, m)
    energy = ceiling.hmc_energy(base, coef, rho, v0, b_mat, iu, n, rank)
    w = rng.normal(size=(n, rank))
    e, g, _ = energy(w)
    num = np.zeros_like(w)
    h = 1e-6
    for i in range(n):
        for k in range(rank):
            d = np.zeros_like(w)
            d[i, k] = h
            num[i, k] = (energy(w + d)[0] - energy(w - d)[0]) / (2 * h)
    err = np.abs(num - g).max() / max(np.abs(g).max(), 1e-12)
    check(err < 1e-6, f"HMC gradient vs finite differences (relative {err:.1e})")


def cohort(tmp, script, *args):
    out = tmp / script.replace(".py", "")
    subprocess.run([sys.executable, str(HERE / script), "--out", str(out), "--subjects", "12",
                    "--nodes", "14", "--seed", "3", *args], check=True, stdout=subprocess.DEVNULL)
    return out


def forecasts(c, sweeps=40):
    f = ceiling.for_cohort(c, sweeps=sweeps, burn=10)
    rows = list(csv.DictReader(open(c / "subject_info_sc.csv")))
    male = {r["subid"]: r["sex"] == "1" for r in rows}
    data = frontier.load(c, sorted(male))
    out = []
    for s, scans in data.items():
        if len(scans) >= 2:
            (a0, y0), (a1, y1) = scans[0], scans[1]
            out.append((s, y1, f(s, a0, y0, a1, male[s])))
    check(len(out) >= 3, f"{c.name}: {len(out)} subjects with two scans")
    return out


def generators(tmp):
    for script, never in (("synth_drift_cohort.py", "edge"), ("synth_cohort.py", "edge"),
                          ("synth_noisy_cohort.py", None)):
        c = cohort(tmp, script)
        rows = forecasts(c)
        ok = all(np.all(np.isfinite(p)) and p.min() >= 0 for _, _, p in rows)
        check(ok, f"{script}: the ceiling's forecasts are finite and never negative")
        if never:
            mod = ceiling._module(script[:-3])
            s = json.load(open(c / "summary.json"))
            if script == "synth_cohort.py":
                t = mod.template(s["nodes"], np.random.default_rng(s["seed"]))
            else:
                t = mod.template(s["nodes"], np.random.default_rng([s["seed"], 0]), s["drift"])
            off = ~t["edge"]
            check(all(np.all(p[off] == 0) and np.all(y1[off] == 0) for _, y1, p in rows),
                  f"{script}: 0 off the template, where the generator never puts an edge")
    quiet = cohort(tmp / "quiet", "synth_noisy_cohort.py", "--no-noise")
    gap = max(np.abs(p - y1).max() for _, y1, p in forecasts(quiet))
    # The files hold '%.6g' weights: each rounded by up to 5e-6 of itself, so each log1p value
    # by up to 5e-6; the forecast carries visit 0's rounding, the target has its own: 1e-5 at
    # most, and 2e-5 leaves room for the float32 parse (6e-8).
    check(gap < 2e-5, f"synth_noisy_cohort.py --no-noise: the ceiling forecasts visit 1 (gap {gap:.1e})")


def rust_generator(tmp):
    """`trainer synth-connectome` (the binary in TRAINER_BIN, else target/release/trainer):
    finite, never negative; and with the scan noise all but gone (--snr 1e8: sigma about 1e-5
    of a log weight), visit 1 itself up to the edges that cross the pruning threshold, which
    the start scan cannot tell: skill > 0.99 against the identity. A wrong rate, maturity,
    sex or site gain would move every forecast by a fraction of the change and miss that."""
    exe = os.environ.get("TRAINER_BIN", str(HERE.parent / "target" / "release" / "trainer"))
    if not Path(exe).exists():
        raise SystemExit(f"test_ceiling.py: no trainer binary at {exe} (set TRAINER_BIN)")
    for snr, name in (("4", "rust"), ("1e8", "rust-quiet")):
        out = tmp / name
        subprocess.run([exe, "synth-connectome", "--subjects", "24", "--nodes", "30", "--seed",
                        "5", "--snr", snr, "--out", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
        rows = forecasts(out)
        ok = all(np.all(np.isfinite(p)) and p.min() >= 0 for _, _, p in rows)
        check(ok, f"synth-connectome --snr {snr}: the ceiling's forecasts are finite and never negative")
        if name == "rust-quiet":
            data = frontier.load(out, [s for s, _, _ in rows])
            ident = sum(np.sum((d[0][1] - d[1][1]) ** 2) for d in data.values())
            err = sum(np.sum((p - y1) ** 2) for _, y1, p in rows)
            check(1 - err / ident > 0.99,
                  f"synth-connectome --snr 1e8: the ceiling forecasts visit 1 (skill {1 - err / ident:.4f})")


def main():
    pieces()
    gradient()
    work = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        (Path(tmp) / "quiet").mkdir()
        generators(Path(tmp))
        rust_generator(Path(tmp))
    print("test_ceiling.py: all checks passed")


if __name__ == "__main__":
    main()

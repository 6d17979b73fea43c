#!/usr/bin/env python3
"""Simple forecasters beside a trained `--model eb-drift` run, on the run's own split.

    scripts/frontier.py --cohort DIR --run RUN_DIR [--truth [--ceiling-sweeps 400]]
                        [--boot 2000] [--json OUT]

Reads the cohort (`DIR/sc/*.csv`, `DIR/subject_info_sc.csv`) and the run's split
(`run_meta.json`: the test subjects and fold 0's training subjects), fits on the training
subjects only, and forecasts visit 1 from visit 0 of every test subject with two scans, scored
as the run scores it: sc_log_mse over the upper triangle in log1p(max(w, 0)) of the symmetrised
scans. eb-drift's own errors are read from the run's `per_subject.csv`. Printed: each
forecaster's skill (1 - sum mse / sum identity mse over the test subjects) and its difference
from eb-drift's with a 95 % paired bootstrap interval over subjects, and its CPU seconds (fit
and forecasts; the JSON keeps both, and every forecaster's per-subject errors).

Forecasters (all in the log1p domain y, t the age):
* identity: y1 = y0.
* linear drift: per edge b = sum dy dt / sum dt^2 over the training pairs; y1 = y0 + b dt.
  (This and the next are floored at 0: a log1p weight is never negative.)
* global-shrink EB: per edge a population line m(t) = alpha + beta (t - mean age), least squares
  over all training scans (absent edges count as 0); one shrinkage factor for every edge,
  k = sum r0 r1 / sum r0^2 over the training pairs' residuals r = y - m(t);
  y1 = m(t1) + k (y0 - m(t0)).
* two-part: y1 = p * w. p = P(present at visit 1 | presence at visit 0), per edge from the
  training pairs, shrunk to the all-edge rate of its start state (beta prior, strength 20), its
  logit shifted by gamma (logit d0 - mean logit d0), d0 the subject's visit-0 density (gamma by
  grid search on the training pairs' log-likelihood). w, when present: for an edge present at
  visit 0, the global-shrink EB line fitted on present entries only; for one absent, that line
  at t1 plus the mean training gap of appearing edges below it.
* edge-wise oracle (`--truth`, cohorts of scripts/synth_noisy_cohort.py, which writes
  truth.npy): the generator's true parameters and the start scan only, each edge on its own.
  The latent log1p weights of visits 0 and 1 are jointly normal: means level + slope t +
  curv t^2 (t = age - ref age), variances var(o + dev + g t) + noise_sd^2 and covariance
  var(o + dev) + var(g) t0 t1 (o the subject offset, dev the edge deviation, g the subject
  slope, the scan noises independent); the scan shows max(latent, 0) above the threshold, 0
  below. The forecast is E[observed visit 1 | observed visit 0]: a censored normal's mean given
  the latent value when the edge is present, and that averaged over the latent's normal tail
  below the threshold when it is absent (64-point quadrature). The best forecast uses every
  edge of the scan at once (the subject offset and the scan-wide noise are shared), so this is
  a lower bound on the Bayes ceiling's skill, not the ceiling.
* pooled oracle (`--truth`): the same, after estimating from the whole start scan the parts its
  edges share (the persistent subject level and the scan-wide noise; `pooled_oracle`). Still a
  forecast from the start scan alone, so still a lower bound on the ceiling, a higher one; the
  node-factor structure of the edge deviations is not used.
* Bayes ceiling (`--truth`, cohorts of synth_noisy_cohort.py, synth_drift_cohort.py,
  synth_cohort.py and `trainer synth-connectome`): E[observed visit 1 | the whole visit-0 scan] under the generator's own
  model, every shared term integrated over (scripts/ceiling.py): the best any forecaster can do
  from the start scan, so the ceiling itself (up to its Monte Carlo error on the noisy cohorts).
"""

import argparse
import csv
import json
import time
from pathlib import Path

import numpy as np

import ceiling


def load(cohort: Path, subjects):
    ages = {}
    for r in csv.DictReader(open(cohort / "subject_info_sc.csv")):
        ages.setdefault(r["subid"], []).append((float(r["age"]), r["scanid"]))
    out = {}
    for s in subjects:
        scans = sorted(ages.get(s, []))
        mats = []
        for age, scan in scans:
            m = np.loadtxt(cohort / "sc" / f"{scan}.csv", delimiter=",", dtype=np.float32)
            m = (0.5 * (m + m.T)).astype(np.float32)
            np.fill_diagonal(m, 0)
            iu = np.triu_indices(m.shape[0], 1)
            mats.append((age, np.log1p(np.maximum(m[iu].astype(np.float64), 0))))
        out[s] = mats
    return out


def pairs(data):
    for s, scans in data.items():
        for (a0, y0), (a1, y1) in zip(scans, scans[1:]):
            yield s, a0, y0, a1, y1


def logit(p):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def fit_line(data, weight=None):
    """Per-edge least-squares line y = alpha + beta (t - abar) over all scans (weight: mask)."""
    t = np.array([a for sc in data.values() for a, _ in sc])
    y = np.array([v for sc in data.values() for _, v in sc])
    w = np.ones_like(y) if weight is None else weight(y).astype(float)
    abar = t.mean()
    tc = (t - abar)[:, None]
    sw, st, stt = w.sum(0), (w * tc).sum(0), (w * tc * tc).sum(0)
    sy, sty = (w * y).sum(0), (w * tc * y).sum(0)
    det = sw * stt - st * st
    ok = det > 1e-9
    beta = np.where(ok, (sw * sty - st * sy) / np.where(ok, det, 1), 0.0)
    alpha = np.where(sw > 0, (sy - beta * st) / np.maximum(sw, 1e-12), 0.0)
    return lambda a: alpha + beta * (a - abar)


def fit(train):
    fits = {}
    t0 = time.process_time()
    num = sum((y1 - y0) * (a1 - a0) for _, a0, y0, a1, y1 in pairs(train))
    den = sum((a1 - a0) ** 2 for _, a0, _, a1, _ in pairs(train))
    b = num / den
    fits["linear drift"] = (lambda a0, y0, a1: np.maximum(y0 + b * (a1 - a0), 0), time.process_time() - t0)

    t0 = time.process_time()
    m = fit_line(train)
    r01 = [(y0 - m(a0), y1 - m(a1)) for _, a0, y0, a1, y1 in pairs(train)]
    k = sum((r0 * r1).sum() for r0, r1 in r01) / sum((r0 * r0).sum() for r0, _ in r01)
    fits["global-shrink EB"] = (lambda a0, y0, a1: np.maximum(m(a1) + k * (y0 - m(a0)), 0), time.process_time() - t0)

    t0 = time.process_time()
    mp = fit_line(train, weight=lambda y: y > 0)
    P = list(pairs(train))
    z0 = np.array([y0 > 0 for _, _, y0, _, _ in P])
    z1 = np.array([y1 > 0 for _, _, _, _, y1 in P])
    dens = np.array([(y0 > 0).mean() for _, _, y0, _, _ in P])
    rate = {}
    for state in (True, False):
        sel = z0 == state
        n = sel.sum(0)
        hits = (sel & z1).sum(0)
        glob = hits.sum() / max(n.sum(), 1)
        rate[state] = (hits + 20 * glob) / (n + 20)
    base = np.where(z0, logit(rate[True]), logit(rate[False]))
    ld = logit(dens)[:, None] - logit(dens).mean()
    best = (-np.inf, 0.0)
    for g in np.linspace(-2, 2, 41):
        p = 1 / (1 + np.exp(-(base + g * ld)))
        ll = np.where(z1, np.log(p + 1e-12), np.log(1 - p + 1e-12)).sum()
        best = max(best, (ll, g))
    gamma, mean_ld = best[1], logit(dens).mean()
    both = [(y0 - mp(a0), y1 - mp(a1)) for _, a0, y0, a1, y1 in P]
    num = sum(np.where((y0 > 0) & (y1 > 0), r0 * r1, 0).sum() for (r0, r1), (_, _, y0, _, y1) in zip(both, P))
    den = sum(np.where((y0 > 0) & (y1 > 0), r0 * r0, 0).sum() for (r0, _), (_, _, y0, _, y1) in zip(both, P))
    kw = num / den
    gaps = [(y1 - mp(a1))[(y0 <= 0) & (y1 > 0)] for _, a0, y0, a1, y1 in P]
    gap = float(np.concatenate(gaps).mean()) if sum(len(g) for g in gaps) else 0.0

    def two_part(a0, y0, a1):
        z = y0 > 0
        lb = np.where(z, logit(rate[True]), logit(rate[False]))
        p = 1 / (1 + np.exp(-(lb + gamma * (logit(z.mean()) - mean_ld))))
        w = np.where(z, mp(a1) + kw * (y0 - mp(a0)), mp(a1) + gap)
        return p * np.maximum(w, 0)

    fits["two-part"] = (two_part, time.process_time() - t0)
    return fits


def oracle(cohort: Path):
    """The edge-wise oracle of `cohort` (see the module's docstring)."""
    truth = np.load(cohort / "truth.npy")
    summary = json.load(open(cohort / "summary.json"))
    level, slope, curv, noise = truth
    c, thr = summary["constants"], summary["threshold"]
    shared = c["subject_offset_sd"] ** 2 + c["dev_lowrank_sd"] ** 2 + c["dev_indep_sd"] ** 2
    gvar = 0.0 if summary["no_noise"] else c["slope_subject_sd"] ** 2 + c["slope_edge_sd"] ** 2
    edge = oracle_core(thr)

    def forecast(a0, y0, a1):
        t0, t1 = a0 - c["ref_age"], a1 - c["ref_age"]
        m0 = level + slope * t0 + curv * t0 * t0
        m1 = level + slope * t1 + curv * t1 * t1
        v0 = shared + gvar * t0 * t0 + noise**2
        v1 = shared + gvar * t1 * t1 + noise**2
        return edge(y0, m0, m1, v0, v1, shared + gvar * t0 * t1)

    return forecast


def pooled_oracle(cohort: Path):
    """The edge-wise oracle, but first estimating from the whole start scan what its edges
    share: the persistent subject level s0 = o + 0.01 G t0 and the scan-wide noise eta0 (a
    Bayesian regression of the residuals y0 - m0 on 1 and noise_sd sqrt(F), over the edges whose
    population mean is 3 sd above the threshold, where censoring is negligible and the choice
    depends on known means only). Those, plugged in (their posterior spread is ignored), move
    each edge's bivariate normal; the rest is the edge-wise computation."""
    truth = np.load(cohort / "truth.npy")
    summary = json.load(open(cohort / "summary.json"))
    level, slope, curv, noise = truth
    c, thr = summary["constants"], summary["threshold"]
    f = c["scan_global_fraction"]
    dev = c["dev_lowrank_sd"] ** 2 + c["dev_indep_sd"] ** 2
    ge = 0.0 if summary["no_noise"] else c["slope_edge_sd"] ** 2
    gs = 0.0 if summary["no_noise"] else c["slope_subject_sd"] ** 2
    o2 = c["subject_offset_sd"] ** 2
    edge = oracle_core(thr)

    def forecast(a0, y0, a1):
        t0, t1 = a0 - c["ref_age"], a1 - c["ref_age"]
        m0 = level + slope * t0 + curv * t0 * t0
        m1 = level + slope * t1 + curv * t1 * t1
        own0 = dev + ge * t0 * t0 + noise**2 * (1 - f)       # the edge's own variance at t0
        own1 = dev + ge * t1 * t1 + noise**2 * (1 - f)
        own01 = dev + ge * t0 * t1
        prior_s = o2 + gs * t0 * t0
        sure = m0 - thr > 3 * np.sqrt(own0 + prior_s + noise**2 * f)
        if sure.sum() >= 3:
            x = np.stack([np.ones(sure.sum()), noise[sure] * np.sqrt(f)], axis=1)
            w = 1 / own0[sure]
            prec = x.T @ (x * w[:, None]) + np.diag([1 / prior_s, 1.0])
            s_hat, eta_hat = np.linalg.solve(prec, x.T @ (w * (y0[sure] - m0[sure])))
        else:
            s_hat, eta_hat = 0.0, 0.0
        k = (o2 + gs * t0 * t1) / prior_s                     # what of s0 persists to t1
        rest1 = (o2 + gs * t1 * t1) - (o2 + gs * t0 * t1) ** 2 / prior_s
        mean0 = m0 + s_hat + noise * np.sqrt(f) * eta_hat
        mean1 = m1 + k * s_hat
        return edge(y0, mean0, mean1, own0, own1 + rest1 + noise**2 * f, own01)

    return forecast


def oracle_core(thr):
    """E[max-censored visit 1 | observed visit 0] for latent (L0, L1) ~ N((m0, m1), (v0, v1,
    cov)) per edge: given L0 = y0 when present, over L0's tail below `thr` when absent."""
    from math import erf, sqrt, pi
    ncdf = np.vectorize(lambda x: 0.5 * (1 + erf(x / sqrt(2))))
    npdf = lambda x: np.exp(-0.5 * x * x) / sqrt(2 * pi)
    z, w = np.polynomial.legendre.leggauss(64)

    def cens_mean(mu, sd):
        a = (mu - thr) / np.maximum(sd, 1e-12)
        return mu * ncdf(a) + sd * npdf(a)

    def run(y0, m0, m1, v0, v1, cov):
        beta, sc = cov / v0, np.sqrt(np.maximum(v1 - cov**2 / v0, 1e-12))
        out = cens_mean(m1 + beta * (y0 - m0), sc)
        absent = y0 <= 0
        if absent.any():
            s0 = np.sqrt(v0[absent])
            zt = np.clip((thr - m0[absent]) / s0, -8, 8)
            lo = -8.0
            nodes = lo + (zt[None, :] - lo) * (z[:, None] + 1) / 2
            wts = w[:, None] * (zt[None, :] - lo) / 2 * npdf(nodes)
            l0 = m0[absent][None, :] + s0[None, :] * nodes
            e = cens_mean(m1[absent][None, :] + beta[absent][None, :] * (l0 - m0[absent][None, :]),
                          sc[absent][None, :])
            out[absent] = (wts * e).sum(0) / np.maximum(wts.sum(0), 1e-300)
        return out

    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cohort", type=Path, required=True)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--boot", type=int, default=2000)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--truth", action="store_true",
                    help="add the oracles: the edge-wise and pooled ones (the cohort's truth.npy, "
                         "synth_noisy_cohort.py) and the Bayes ceiling (scripts/ceiling.py: our "
                         "generators)")
    ap.add_argument("--ceiling-sweeps", type=int, default=400,
                    help="sweeps of the Bayes ceiling's sampler on synth_noisy_cohort.py cohorts "
                         "(a quarter of them burn-in)")
    ap.add_argument("--ceiling-from", type=Path, metavar="JSON",
                    help="take the Bayes ceiling's per-subject errors from an earlier --json "
                         "of the same cohort instead of sampling them again")
    a = ap.parse_args()
    split = json.load(open(a.run / "run_meta.json"))["extra"]["split"]
    train_ids = next(f["train"] for f in split["folds"] if f["fold"] == 0)
    train, test = load(a.cohort, train_ids), load(a.cohort, split["test"])
    eb = {r["subject"]: float(r["model_sc_log_mse"]) for r in csv.DictReader(open(a.run / "per_subject.csv"))
          if r["forecast"] == "1"}
    fits = fit(train)
    subjects = [s for s, sc in test.items() if len(sc) >= 2]
    male = {r["subid"]: r["sex"] in ("1", "M") for r in csv.DictReader(open(a.cohort / "subject_info_sc.csv"))}
    if a.truth:
        if (a.cohort / "truth.npy").exists():
            fits["edge-wise oracle"] = (oracle(a.cohort), 0.0)
            fits["pooled oracle"] = (pooled_oracle(a.cohort), 0.0)
        bayes = ceiling.for_cohort(a.cohort, sweeps=a.ceiling_sweeps,
                                   burn=a.ceiling_sweeps // 4)
        if a.ceiling_from is not None:
            # The ceiling of these subjects from an earlier run (it does not depend on the run:
            # the generator's truth and each subject's start scan; its sampler is seeded by
            # the subject's id), checked to cover every test subject.
            old = json.load(open(a.ceiling_from))["per_subject"]["Bayes ceiling"]
            missing = [s for s in subjects if s not in old]
            if missing:
                raise SystemExit(f"frontier.py: {a.ceiling_from} has no ceiling for {missing[:3]}")
            fits["Bayes ceiling"] = ("cached", old)
        elif bayes is not None:
            fits["Bayes ceiling"] = (lambda a0, y0, a1, s: bayes(s, a0, y0, a1, male[s]), 0.0)
    mse = {"identity": [], "eb-drift (the run)": []}
    forecast_secs = {}
    for name in fits:
        mse[name] = []
    for s in subjects:
        (a0, y0), (a1, y1) = test[s][0], test[s][1]
        mse["identity"].append(np.mean((y0 - y1) ** 2))
        mse["eb-drift (the run)"].append(eb[s])
        for name, (f, cached) in fits.items():
            t0 = time.process_time()
            if f == "cached":
                mse[name].append(cached[s])
                continue
            y = f(a0, y0, a1, s) if name == "Bayes ceiling" else f(a0, y0, a1)
            mse[name].append(np.mean((y - y1) ** 2))
            forecast_secs[name] = forecast_secs.get(name, 0.0) + time.process_time() - t0
    mse = {k: np.array(v) for k, v in mse.items()}
    ident = mse["identity"]
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(subjects), size=(a.boot, len(subjects)))
    skill = lambda m, i=slice(None): 1 - m[i].sum(-1) / ident[i].sum(-1)
    ref = mse["eb-drift (the run)"]
    rows = []
    print(f"{len(subjects)} test forecasts, {len(train)} training subjects")
    print(f"{'forecaster':<22} {'skill':>8} {'- eb-drift':>10} {'95% CI':>20} {'cpu s':>7}")
    for name, m in mse.items():
        d = skill(m) - skill(ref)
        boot = skill(m, idx) - skill(ref, idx)
        lo, hi = np.percentile(boot, [2.5, 97.5])
        secs = fits[name][1] if name in fits and fits[name][0] != "cached" else None
        rows.append({"forecaster": name, "skill": float(skill(m)), "minus_eb_drift": float(d),
                     "ci_low": float(lo), "ci_high": float(hi), "fit_cpu_seconds": secs,
                     "forecast_cpu_seconds": forecast_secs.get(name)})
        total = (secs or 0.0) + forecast_secs.get(name, 0.0)
        sec = f"{total:7.2f}" if secs is not None or name in forecast_secs else "      -"
        print(f"{name:<22} {skill(m):+8.4f} {d:+10.4f} [{lo:+8.4f}, {hi:+8.4f}] {sec}")
    if a.json:
        per_subject = {name: dict(zip(subjects, map(float, m))) for name, m in mse.items()}
        a.json.write_text(json.dumps({"n_test": len(subjects), "rows": rows,
                                      "per_subject": per_subject}, indent=1))


if __name__ == "__main__":
    main()

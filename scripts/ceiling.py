#!/usr/bin/env python3
"""The Bayes ceiling of a synthetic cohort: the best forecast of visit 1 from visit 0 alone.

For a cohort written by one of our Python generators, rebuilds the generator's true population
(its template, from the seed and the options in summary.json, through the generator's own
code; checked against truth.npy where the cohort has one); for one of `trainer
synth-connectome`, reads the synth_truth.json it writes. Returns, for one subject,
E[observed log1p weight at visit 1 | the whole observed scan at visit 0, both ages, the sex
and the site] under the generator's model: the forecast with the least expected squared error that any
forecaster, however trained, can make from the start scan. Its skill on a test set is the
ceiling `scripts/frontier.py --truth` reports beside the fitted forecasters.

What each generator's posterior integrates over (the +-4 sd clipping of synth_noisy_cohort.py's
draws, 0.006 % of their mass, and the float32 rounding of the written weights are ignored):

* synth_noisy_cohort.py (`noisy`): the subject offset, the subject slope, the scan-wide noise
  of visit 0, the 3 node factors of the edge deviations (3 x nodes values whose products make
  the low-rank part) and the latent values of the edges absent at visit 0 (censored at the
  threshold): a Gibbs sampler (each block's conditional is normal; the censored latents are
  truncated normals) whose every sweep gives, in closed form, each edge's censored-normal mean
  at visit 1 (the edge's own deviation and slope shrunk from its visit-0 residual; visit 1's
  scan noise fresh). The forecast is that mean averaged over the sweeps after a burn-in.
* synth_drift_cohort.py (`drift`): the subject's global offset and drift gain on a grid (their
  exact posterior from every edge's marginal likelihood); given them, each template edge on its
  own: kept or not (absent edges), its offset given its visit-0 latent value (log w0 when
  present; a truncated normal below the threshold when absent), and
  E[log1p(exp(L1)) 1(L1 > threshold)] by quadrature.
* synth_cohort.py (`pysyn`): the subject's global offset on a grid; the drift is known from the
  sex; each template edge's true log weight at visit 0 given the scan (present: its noisy log w0
  and the pruning threshold below which it could not show; absent: below that threshold, or
  dropped), moved by the known change and pruned at visit 1's threshold, by quadrature.

* trainer synth-connectome (`rustsyn`, from the synth_truth.json it writes): as synth_cohort.py,
  the drift known from the sex and the site, plus the rare subject-only edges off the template.
"""

import csv
import importlib.util
import json
import zlib
from math import sqrt
from pathlib import Path

import numpy as np
from scipy.special import log_ndtr, ndtr, ndtri

HERE = Path(__file__).resolve().parent
SQRT2PI = sqrt(2 * np.pi)


def _module(name):
    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def npdf(x):
    return np.exp(-0.5 * x * x) / SQRT2PI


def cens_mean(mu, sd, thr):
    """E[X 1(X > thr)] for X ~ N(mu, sd^2)."""
    a = (mu - thr) / np.maximum(sd, 1e-12)
    return mu * ndtr(a) + sd * npdf(a)


def trunc_normal_upper(rng, mean, sd, upper):
    """Draws of N(mean, sd^2) truncated to (-inf, upper], by the inverse CDF."""
    p = ndtr((upper - mean) / sd)
    u = rng.random(len(mean)) * p
    return mean + sd * ndtri(np.clip(u, 1e-300, 1.0))


def for_cohort(cohort: Path, sweeps=400, burn=100):
    """The ceiling forecaster of `cohort`, f(subject id, age 0, y0, age 1, male) -> y1 (log1p
    weights over the upper triangle), or None for a generator without one."""
    if (cohort / "synth_truth.json").exists():
        return rustsyn(cohort)
    if not (cohort / "summary.json").exists():
        return None  # not one of our generators' cohorts (or a Rust one written before its truth)
    summary = json.load(open(cohort / "summary.json"))
    gen = summary.get("generator", "")
    if gen.endswith("synth_noisy_cohort.py"):
        return noisy(cohort, summary, sweeps, burn)
    if gen.endswith("synth_drift_cohort.py"):
        return drift(summary)
    if gen.endswith("synth_cohort.py"):
        return pysyn(summary)
    return None


# --- synth_noisy_cohort.py ------------------------------------------------------------------


def noisy(cohort, summary, sweeps, burn):
    gen = _module("synth_noisy_cohort")

    class Args:
        nodes = summary["nodes"]
        density = summary["density_target"]
        threshold = summary["threshold"]
        curvature = summary["curvature"]
        no_noise = summary["no_noise"]
        icc_weak = summary["icc_weak"]
        icc_strong = summary["icc_strong"]
        visit_probs = summary["visit_probs"]

    t = gen.template(Args, np.random.default_rng([summary["seed"], gen.STREAM_TEMPLATE]))
    if (cohort / "truth.npy").exists():  # cohorts written before truth.npy have none
        truth = np.load(cohort / "truth.npy")
        rebuilt = np.stack([t["level"], t["slope"], t["curv"], t["noise_sd"]])
        if not np.array_equal(truth, rebuilt):
            raise SystemExit(f"ceiling.py: {cohort}: the rebuilt template differs from truth.npy")
    c = summary["constants"]
    n, iu, m = t["n"], t["iu"], t["m"]
    thr, f = summary["threshold"], c["scan_global_fraction"]
    sig = t["noise_sd"]
    quiet = summary["no_noise"]
    dev_sd, lr_sd, o_sd = c["dev_indep_sd"], c["dev_lowrank_sd"], c["subject_offset_sd"]
    gs_sd = 0.0 if quiet else c["slope_subject_sd"]
    ge_sd = 0.0 if quiet else c["slope_edge_sd"]
    rank = c["dev_rank"]
    rho = t["rho"]
    norm = np.sqrt(rank * (1.0 + rho**2))  # L_ij = (u_i . u_j - rank rho_ij) / norm_ij
    # u_k = B w_k, w ~ N(0, I): the factors' prior, R = K K' = B B' (B from R's eigenvectors:
    # R is near-singular, so the node-by-node conditionals of u would barely move).
    lam, vec = np.linalg.eigh(t["factor_kernel"] @ t["factor_kernel"].T)
    b_mat = vec * np.sqrt(np.maximum(lam, 0.0))
    coef = lr_sd / norm

    def forecast(subject, a0, y0, a1, male):
        rng = np.random.default_rng(zlib.crc32(subject.encode()))
        t0, t1 = a0 - c["ref_age"], a1 - c["ref_age"]
        pop0 = t["level"] + t["slope"] * t0 + t["curv"] * t0 * t0
        pop1 = t["level"] + t["slope"] * t1 + t["curv"] * t1 * t1
        if quiet:
            # No scan noise: y0 is the latent value, every edge present, slopes shared.
            return pop1 + (y0 - pop0)
        v0 = dev_sd**2 + ge_sd**2 * t0 * t0 + sig**2 * (1 - f)  # an edge's own variance
        cov01 = dev_sd**2 + ge_sd**2 * t0 * t1
        var1 = dev_sd**2 + ge_sd**2 * t1 * t1 - cov01**2 / v0 + sig**2
        absent = y0 <= thr
        lat = np.where(absent, np.minimum(pop0, thr) - 0.1, y0)
        w = rng.normal(size=(n, rank))
        ell = -rank * rho * coef  # the low-rank part of the deviations, lr_sd L
        step, acc = 0.05, 0
        # Shared scalars: offset o, subject slope G (times gs_sd t), scan noise eta0 (times
        # sig sqrt(f)); prior precisions 1/o_sd^2, 1, 1.
        x = np.stack([np.ones(m), np.full(m, gs_sd * t0), sig * np.sqrt(f)], axis=1)
        xw = x / v0[:, None]
        prior = np.diag([1 / o_sd**2, 1.0, 1.0])
        shared = np.zeros(3)
        total = np.zeros(m)
        for sweep in range(sweeps):
            common = x @ shared + ell
            if absent.any():
                lat[absent] = trunc_normal_upper(rng, pop0[absent] + common[absent],
                                                 np.sqrt(v0[absent]), thr)
            # (o, G, eta0) | the rest.
            resid = lat - pop0 - ell
            p = prior + x.T @ xw
            mean = np.linalg.solve(p, xw.T @ resid)
            shared = mean + np.linalg.solve(np.linalg.cholesky(p).T, rng.normal(size=3))
            base = lat - pop0 - x @ shared
            # Node factors: one Hamiltonian Monte Carlo move of w (the low-rank part is quadratic
            # in it), its step size tuned during the burn-in to accept about 70 %.
            w, ell, accepted = hmc(rng, w, base, step, coef, rho, v0, b_mat, iu, n, rank)
            if sweep < burn:
                step *= 1.05 if accepted else 0.9
            else:
                acc += accepted
            if sweep >= burn:
                own0 = lat - pop0 - x @ shared - ell
                mean1 = (pop1 + shared[0] + shared[1] * gs_sd * t1 + ell
                         + own0 * cov01 / v0)
                total += cens_mean(mean1, np.sqrt(var1), thr)
        forecast.acceptance.append(acc / (sweeps - burn))
        return total / (sweeps - burn)

    forecast.acceptance = []
    return forecast


def hmc_energy(base, coef, rho, v0, b_mat, iu, n, rank):
    """w -> (energy, its gradient, the low-rank part coef_ij (u_i . u_j - rank rho_ij)) with
    energy(w) = sum_ij (base_ij - low-rank part_ij)^2 / (2 v0_ij) + |w|^2 / 2, u = b_mat w:
    minus the log density of the factor weights w given the rest, up to a constant."""

    def parts(w):
        # A step too long diverges (inf energy); the move is then rejected.
        with np.errstate(over="ignore", invalid="ignore"):
            u = b_mat @ w
            ell = (np.einsum("ik,ik->i", u[iu[0]], u[iu[1]]) - rank * rho) * coef
            res = base - ell
            energy = 0.5 * np.sum(res * res / v0) + 0.5 * np.sum(w * w)
            m = np.zeros((n, n))
            m[iu] = res * coef / v0
            m = m + m.T
            grad = -(b_mat.T @ (m @ u)) + w
        return energy, grad, ell

    return parts


def hmc(rng, w, base, step, coef, rho, v0, b_mat, iu, n, rank, leaps=20):
    """One HMC move of the factor weights w (n x rank) under hmc_energy's energy: (w, its
    low-rank part, accepted)."""
    parts = hmc_energy(base, coef, rho, v0, b_mat, iu, n, rank)
    e0, g, ell0 = parts(w)
    p = rng.normal(size=w.shape)
    h0 = e0 + 0.5 * np.sum(p * p)
    x = w.copy()
    with np.errstate(over="ignore", invalid="ignore"):
        p = p - 0.5 * step * g
        for k in range(leaps):
            x = x + step * p
            e, g, ell = parts(x)
            if k < leaps - 1:
                p = p - step * g
        p = p - 0.5 * step * g
        h1 = e + 0.5 * np.sum(p * p)
    if np.isfinite(h1) and np.log(rng.random()) < h0 - h1:
        return x, ell, True
    return w, ell0, False


# --- synth_drift_cohort.py and synth_cohort.py: a grid over the subject's shared terms ------

GH_X, GH_W = np.polynomial.hermite_e.hermegauss(24)  # E[g(Z)] = sum w g(x) / sqrt(2 pi)
GL_X, GL_W = np.polynomial.legendre.leggauss(32)


def softplus(x):
    return np.logaddexp(0.0, x)


def gauss(fn, mean, sd):
    """E[fn(mean + sd Z)], Z ~ N(0, 1), per element (Gauss-Hermite)."""
    v = fn(mean[..., None] + sd[..., None] * GH_X)
    return (v * GH_W).sum(-1) / SQRT2PI


def truncated(fn, mean, sd, lo, hi):
    """(mass, E[fn(X) 1(lo < X < hi)]) for X ~ N(mean, sd^2), per element (Gauss-Legendre in z,
    the interval cut to +-8 sd)."""
    zl = np.clip((lo - mean) / sd, -8, 8)
    zh = np.clip((hi - mean) / sd, -8, 8)
    zh = np.maximum(zh, zl)
    nodes = zl[..., None] + (zh - zl)[..., None] * (GL_X + 1) / 2
    wts = GL_W * (zh - zl)[..., None] / 2 * npdf(nodes)
    return wts.sum(-1), (wts * fn(mean[..., None] + sd[..., None] * nodes)).sum(-1)


def grid_average(loglik, forecasts):
    """The posterior-weighted forecast over grid points (log-likelihoods incl. the prior)."""
    w = np.exp(loglik - loglik.max())
    w /= w.sum()
    keep = w > 1e-6 * w.max()
    out = 0.0
    for k in np.flatnonzero(keep):
        out = out + w[k] * forecasts(k)
    return out / w[keep].sum()


def edge_forecast(mu0, off_sd, noise, keep, l0, present, change, p0, p1):
    """Each edge's E[log1p weight at visit 1 | its visit-0 scan value] when its true log weight
    at visit 0 is N(mu0, off_sd^2) if the subject has the edge (probability `keep`), the scan
    shows it (log w0 = l0 = lw0 + noise) only if lw0 >= p0, and visit 1's true log weight is
    lw0 + change, shown (with fresh noise) only if >= p1."""
    n = len(mu0)
    sd = np.hypot(off_sd, noise)
    out = np.zeros(n)
    # Present: lw0 | l0 is N(pm, ps) truncated to [p0, inf); shown at visit 1 iff
    # lw0 >= p1 - change; then log1p(exp(lw1 + noise)).
    pm = mu0 + off_sd**2 / sd**2 * (l0 - mu0)
    ps = np.broadcast_to(off_sd * noise / sd, (n,)).astype(float)
    p0 = np.broadcast_to(p0, (n,)).astype(float)
    p1 = np.broadcast_to(p1, (n,)).astype(float)
    show = lambda lw, ch: gauss(softplus, lw + ch, np.broadcast_to(noise, lw.shape).astype(float))
    lo = np.maximum(p0, p1 - change)
    mass_all, _ = truncated(lambda l: l * 0, pm, ps, p0, np.inf)
    _, val = truncated(lambda l: show(l, change[:, None]), pm, ps, lo, np.inf)
    out[present] = (val / np.maximum(mass_all, 1e-300))[present]
    # Absent: the subject has it with lw0 < p0 (shown at visit 1 iff lw0 >= p1 - change), or not.
    s0 = np.broadcast_to(off_sd, (n,)).astype(float)
    mass, _ = truncated(lambda l: l * 0, mu0, s0, -np.inf, p0)
    _, val = truncated(lambda l: show(l, change[:, None]), mu0, s0, p1 - change, p0)
    ab = ~present
    out[ab] = (keep * val / ((1 - keep) + keep * mass))[ab]
    return out


def edge_loglik(mu0, off_sd, noise, keep, l0, present, p0):
    """Each edge's log-likelihood of its visit-0 scan value under edge_forecast's model."""
    sd = np.hypot(off_sd, noise)
    tail = log_ndtr(((l0 - mu0) * off_sd**2 / sd**2 + mu0 - p0) / (off_sd * noise / sd))
    lp_present = np.log(keep) - 0.5 * ((l0 - mu0) / sd) ** 2 - np.log(sd) + tail
    lp_absent = np.log((1 - keep) + keep * ndtr((p0 - mu0) / off_sd))
    return np.where(present, lp_present, lp_absent)


def drift(summary):
    gen = _module("synth_drift_cohort")
    seed, n = summary["seed"], summary["nodes"]
    noise, thr, drift_sd = summary["noise"], summary["threshold"], summary["drift"]
    t = gen.template(n, np.random.default_rng([seed, gen.STREAM_TEMPLATE]), drift_sd)
    edge, base, rate = t["edge"], t["base"], t["rate"]
    keep, off_sd, goff_sd, gain_sd = gen.EDGE_KEEP, 0.2, 0.05, 0.1
    g_off = np.linspace(-4, 4, 17) * goff_sd
    g_gain = 1.0 + np.linspace(-4, 4, 17) * gain_sd
    sd0 = np.hypot(off_sd, noise)
    post_sd = np.sqrt(off_sd**2 - off_sd**4 / sd0**2)  # of the edge offset given L0
    obs_fn = lambda x: np.where(x > thr, softplus(x), 0.0)

    def forecast(subject, a0, y0, a1, male):
        t0, t1 = a0 - gen.REF_AGE, a1 - gen.REF_AGE
        y = y0[edge]
        present = y > 0
        l0 = np.log(np.expm1(np.where(present, y, 1.0)))
        grid = [(o, g) for o in g_off for g in g_gain]
        ll = np.empty(len(grid))
        for k, (o, g) in enumerate(grid):
            mu0 = base[edge] + o + g * rate[edge] * t0
            lp = np.where(present, -0.5 * ((l0 - mu0) / sd0) ** 2,
                          np.log((1 - keep) + keep * ndtr((thr - mu0) / sd0)))
            ll[k] = lp.sum() - 0.5 * (o / goff_sd) ** 2 - 0.5 * ((g - 1) / gain_sd) ** 2

        def at(k):
            o, g = grid[k]
            mu0 = base[edge] + o + g * rate[edge] * t0
            mu1 = base[edge] + o + g * rate[edge] * t1
            out = np.zeros(len(y))
            # Present: the offset's normal posterior given L0, then visit 1's noise.
            sd1 = np.sqrt(post_sd**2 + noise**2)
            shift = off_sd**2 / sd0**2 * (l0 - mu0)
            out[present] = gauss(obs_fn, (mu1 + shift)[present], np.full(present.sum(), sd1))
            # Absent: kept with L0 below the threshold, or dropped (then 0).
            ab = ~present
            mass, val = truncated(
                lambda l: gauss(obs_fn, mu1[ab][:, None] + off_sd**2 / sd0**2 * (l - mu0[ab][:, None]),
                                np.full(l.shape, sd1)),
                mu0[ab], np.full(ab.sum(), sd0), -np.inf, thr)
            p_keep = keep * mass / ((1 - keep) + keep * mass)
            out[ab] = p_keep * val / np.maximum(mass, 1e-300)
            return out

        y1 = np.zeros_like(y0)
        y1[edge] = grid_average(ll, at)
        return y1

    return forecast


def pysyn(summary):
    gen = _module("synth_cohort")
    seed, n = summary["seed"], summary["nodes"]
    t = gen.template(n, np.random.default_rng(seed))
    edge, base, rate = t["edge"], t["base"], t["rate"]
    noise, keep, off_sd, goff_sd = gen.NOISE, 0.93, 0.2, 0.08
    g_off = np.linspace(-4, 4, 33) * goff_sd

    def forecast(subject, a0, y0, a1, male):
        gain = 1.15 if male else 0.85
        p0, p1 = gen.prune_threshold(a0), gen.prune_threshold(a1)
        change = rate[edge] * gain * (gen.developed(a1) - gen.developed(a0))
        dev0 = rate[edge] * gain * gen.developed(a0)
        y = y0[edge]
        present = y > 0
        l0 = np.log(np.expm1(np.where(present, y, 1.0)))
        ll = np.array([edge_loglik(base[edge] + o + dev0, off_sd, noise, keep, l0, present, p0).sum()
                       - 0.5 * (o / goff_sd) ** 2 for o in g_off])

        def at(k):
            mu0 = base[edge] + g_off[k] + dev0
            return edge_forecast(mu0, off_sd, noise, keep, l0, present, change, p0, p1)

        y1 = np.zeros_like(y0)
        y1[edge] = grid_average(ll, at)
        return y1

    return forecast


# --- trainer synth-connectome (Rust): its synth_truth.json -----------------------------------


def rustsyn(cohort):
    """The ceiling of a `trainer synth-connectome` cohort, from the template and constants it
    wrote to synth_truth.json (src/data/connectome/synth). Its subject's rate of change is
    known from the sex and the site (both in the subject table) and the ages; what the scan
    leaves unknown is the global offset (a grid, its exact posterior from every template edge's
    likelihood) and each edge's own offset, whether the subject has it, and its true log weight
    (edge_forecast, the pruning threshold the same at both visits). Pairs outside the template
    are subject-only edges (rare, no global offset). The table's ages are rounded to 1e-4
    years: an error of up to 5e-5 years of change, ignored."""
    truth = json.load(open(cohort / "synth_truth.json"))
    c = truth["constants"]
    n, noise = truth["nodes"], truth["noise_sigma"]
    v = np.array(truth["maturity_v"])
    iu = np.triu_indices(n, 1)
    rate = c["global_rate"] + c["rate"] * (v[iu[0]] * v[iu[1]] - c["theta"])
    base = np.array([np.nan if w is None else w for w in truth["template_log_weight"]])
    edge = ~np.isnan(base)
    thr = c["prune_log_weight"]
    info = {}
    for r in csv.DictReader(open(cohort / "subject_info_sc.csv")):
        sex = c["sex_effect"] if r["sex"] == "F" else -c["sex_effect"]
        info[r["subid"]] = (1 + sex) * truth["site_gain"][r["siteid"]]
    goff_sd = c["global_offset_sd"]
    fine = np.linspace(-5, 5, 801) * goff_sd
    gh_x, gh_w = np.polynomial.hermite_e.hermegauss(15)

    def developed(a):
        return c["age_scale"] * (1 - np.exp(-(a - c["age_origin"]) / c["age_scale"]))

    def forecast(subject, a0, y0, a1, male):
        gain = info[subject]
        dev0 = rate * gain * developed(a0)
        change = rate * gain * (developed(a1) - developed(a0))
        present = y0 > 0
        l0 = np.log(np.expm1(np.where(present, y0, 1.0)))
        y1 = np.zeros_like(y0)
        # Subject-only edges: no shared term.
        x = ~edge
        y1[x] = edge_forecast(c["extra_edge_mean"] + dev0[x], c["extra_edge_sd"], noise,
                              c["extra_edge_prob"], l0[x], present[x], change[x], thr, thr)
        # Template edges: the global offset's posterior on a fine grid, then a Gauss-Hermite
        # rule around its mean and sd, each node weighted by posterior / its normal.
        args = (c["edge_offset_sd"], noise, c["edge_keep"], l0[edge], present[edge])

        def loglik(o):
            return (edge_loglik(base[edge] + o + dev0[edge], *args, thr).sum()
                    - 0.5 * (o / goff_sd) ** 2)

        ll = np.array([loglik(o) for o in fine])
        w = np.exp(ll - ll.max())
        w /= w.sum()
        mean = (w * fine).sum()
        sd = max(np.sqrt((w * (fine - mean) ** 2).sum()), fine[1] - fine[0])
        nodes = mean + sd * gh_x
        logw = np.log(gh_w) + np.array([loglik(o) for o in nodes]) + 0.5 * gh_x**2
        wts = np.exp(logw - logw.max())
        wts /= wts.sum()
        y1[edge] = sum(wk * edge_forecast(base[edge] + o + dev0[edge], *args, change[edge],
                                          thr, thr)
                       for o, wk in zip(nodes, wts) if wk > 1e-9)
        return y1

    return forecast

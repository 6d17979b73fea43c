#!/usr/bin/env python3
"""A fourth synthetic connectome cohort: realistic visit-to-visit measurement noise, set by ICC.

The other generators (`trainer synth-connectome`, `scripts/synth_cohort.py`,
`scripts/synth_drift_cohort.py`) give every edge one noise level. Here the noise of each edge is
derived from a target **test-retest reliability**, as measured on diffusion-MRI connectomes: the
edge-wise intraclass correlation of log1p weights between two scans of the same subject at the
same age is ICC_WEAK (default 0.62) for the weakest 80 % of edges and ICC_STRONG (default 0.75)
for the strongest 20 % (Tsai 2018, Sci Rep 8:11562). Everything below is in the **log1p
domain**: y = log1p(weight), t = age - 10 (years).

Population (stream [seed, 0]):
* Nodes on the unit sphere, x < 0 left hemisphere, x > 0 right; hub propensity h_i ~ N(0, 0.6).
  Raw level of pair ij: -3.5 d_ij - 3 [ij across hemispheres] + h_i + h_j + 1.3 N(0, 1)
  (d: Euclidean distance), shifted by a constant so that a fraction DENSITY (default 0.25) of the
  pairs has a level mu_ij above THRESHOLD (default 0). So the level is a Gaussian mixture over
  distances, and the weights expm1(mu) are heavy-tailed (log-normal-like): many weak edges just
  above the threshold, a few strong ones (log1p up to about 8, weights in the thousands, like
  streamline counts). Pairs far below the threshold are never seen.
* Population age effect per edge: b_ij = 0.005 + 0.03 (sqrt(1/2) s_ij + sqrt(1/2) z_ij) per year
  (s_ij = f_i + f_j standardised, f a node field smoothed on the sphere, z_ij ~ N(0, 1)), so some
  edges strengthen and some weaken, neighbours alike; mild curvature c_ij = -CURVATURE b_ij per
  year^2 (default CURVATURE 0.05: the rate b (1 - 0.1 t) slows by half from age 10 to 15).
  Population trajectory: mu_ij + b_ij t + c_ij t^2. `--curvature 0` makes it linear.
* Edge classes (fixed for the cohort): population edges are the pairs with mu > THRESHOLD; the
  strongest 20 % of them by mu are "strong", every other pair is "weak" (for the noise).

Subject s (stream [seed, 1, s]; every draw below clipped at +-4 sd):
* subject-wide offset o_s ~ N(0, 0.10), shared by all its edges;
* persistent edge deviations dev_ij = low rank + independent: 0.15 sum_k (u_ik u_jk - rho_ij) /
  sqrt(3 (1 + rho_ij^2)) over 3 node factors u_k (white noise smoothed on the sphere, kernel
  width 0.4, unit variance per node, rho_ij = corr(u_i, u_j)), so variance 0.15^2 and
  neighbouring nodes' edges deviate alike; plus 0.20 N(0, 1) per edge;
* subject slopes (its deviation drifts): g_ij = 0.01 G_s + 0.02 N(0, 1) per edge, G_s ~ N(0, 1);
* true trajectory y_sij(t) = mu_ij + b_ij t + c_ij t^2 + o_s + dev_ij + g_ij t.
* Ages: baseline U(9, 11); visit k (k >= 1) at baseline + 2k + U(-0.3, 0.3); rounded to 4
  decimals (the table's precision) before anything is computed from them. Visit counts: the
  fractions --visit-probs (default 0.40, 0.52, 0.08 for 1, 2, 3 sessions) assigned by quota
  (largest remainder, then shuffled with stream [seed, 3]), so the realised split is as close to
  them as the subject count allows. Sex "1"/"2", four sites, an ICV.

Measurement noise, per scan, independent between visits:
  latent = y + sigma_ij (sqrt(F) eta_scan + sqrt(1 - F) eps_ij), eta_scan, eps_ij ~ N(0, 1),
with F = 0.10 of the noise variance shared by all edges of the scan (a scan-wide offset, as from
head motion or SNR) and the rest independent per edge. The noise variance sets the ICC:
  ICC_ij = V_ij / (V_ij + sigma_ij^2)   =>   sigma_ij^2 = V_ij (1 - ICC_ij) / ICC_ij,
where V_ij is the between-subject variance of the true y_sij at the baseline visit (age
U(9, 11), t ~ U(-1, 1)), from the model exactly:
  V_ij = 0.10^2 + 0.15^2 + 0.20^2 + b^2 var(t) + c^2 var(t^2) + 2 b c cov(t, t^2)
         + (0.01^2 + 0.02^2) E[t^2]
(the +-4 sd clipping, which removes 0.1 % of the variance, is ignored). ICC_ij is --icc-strong
for strong edges, --icc-weak otherwise.
Edge existence: the edge is present in the scan iff latent > THRESHOLD; then log1p(weight) =
latent, else weight 0. With THRESHOLD 0 the observed log1p weight is max(latent, 0), so edges
near the threshold appear and disappear between visits with small weights (about 2 % of the
upper triangle changes existence between consecutive visits at the defaults).

Realised ICC (summary.json): each subject's baseline scan is re-scanned at the same age with
independent noise (stream [seed, 4, s]; not written); per edge, one-way ICC(1,1) over subjects,
(MSB - MSW) / (MSB + MSW) with 2 scans each; averaged (mean and median) over the weak and the
strong population edges, for the latent (uncensored) values and for the observed log1p weights
(absent = 0). The latent one is what the noise is calibrated for; the observed one of the weak
class is lower because absent edges are cut to 0.

`--no-noise` (for tests): no measurement noise, no subject slopes, no morphology visit noise,
every pair present at every visit (density 1; the level of each pair is replaced by
softplus(mu_ij) + a per-edge margin large enough that every y > 0), and every subject has at
least 2 visits (the 1-visit share goes to the others). Then each subject's log1p weights are
exactly its trajectory mu'_ij + o_s + dev_ij + b_ij t + c_ij t^2: with --curvature 0 linear in
age with the same slope b_ij for every subject; otherwise quadratic with the same c_ij.

Writes the layout of scripts/synth_drift_cohort.py: <out>/sc/<subid>_<ses>.csv (N x N,
comma-separated, no header, '%.6g'), <out>/morph/<ses>/<site>/Schaefer400_Morphology_<subid>.csv
(SubjectID + <roi>_<metric>, metrics Thickness, Area, Curv, GWC; per-ROI means, weak linear age
trends, subject offsets, visit noise), <out>/subject_info_sc.csv
(subid,sesid,scanid,age,sex,siteid,icv), <out>/summary.json (every parameter and the realised
density, existence flips, visit counts, ICC, identity error) and <out>/truth.npy (the true level,
age slope, curvature and noise sd of every upper-triangle pair, one row each, for oracles). Subject ids sub-NOISY00001...
Do not put a session token (e.g. "baseline", "2year") in --out: the loader infers a morphology
file's session from its whole path.

Usage: scripts/synth_noisy_cohort.py --out DIR [--subjects 60] [--nodes 400] [--seed 0]
           [--icc-weak 0.62] [--icc-strong 0.75] [--visit-probs 0.40,0.52,0.08]
           [--density 0.25] [--threshold 0] [--curvature 0.05] [--no-noise]
Needs numpy only.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

SESSIONS = [
    "ses-baselineYear1Arm1",
    "ses-2YearFollowUpYArm1",
    "ses-4YearFollowUpYArm1",
    "ses-6YearFollowUpYArm1",
]
METRICS = ["Thickness", "Area", "Curv", "GWC"]
SITES = ["siteA", "siteB", "siteC", "siteD"]

# Defaults of the options.
ICC_WEAK = 0.62
ICC_STRONG = 0.75
VISIT_PROBS = (0.40, 0.52, 0.08)
DENSITY = 0.25
THRESHOLD = 0.0
CURVATURE = 0.05

# Fixed model constants (all recorded in summary.json).
REF_AGE = 10.0
BASE_AGE = (9.0, 11.0)
FOLLOWUP_YEARS = 2.0
AGE_JITTER = 0.3
STRONG_FRACTION = 0.2
LEVEL_DISTANCE = 3.5
LEVEL_CROSS = 3.0
LEVEL_HUB_SD = 0.6
LEVEL_RESIDUAL_SD = 1.3
AGE_SLOPE_MEAN = 0.005
AGE_SLOPE_SD = 0.03
FIELD_WIDTH = 0.35
SUBJECT_OFFSET_SD = 0.10
DEV_LOWRANK_SD = 0.15
DEV_RANK = 3
DEV_FACTOR_WIDTH = 0.4
DEV_INDEP_SD = 0.20
SLOPE_SUBJECT_SD = 0.01
SLOPE_EDGE_SD = 0.02
SCAN_GLOBAL_FRACTION = 0.10
CLIP_SD = 4.0
NO_NOISE_MARGIN = 0.05
# Independent random streams of one seed.
STREAM_TEMPLATE, STREAM_SUBJECT, STREAM_SPLIT, STREAM_VISITS, STREAM_RESCAN = 0, 1, 2, 3, 4


def uniform_moments(lo, hi, k):
    """E[t^k] for t ~ U(lo, hi)."""
    return (hi ** (k + 1) - lo ** (k + 1)) / ((k + 1) * (hi - lo))


def smoothing_kernel(d, width):
    """Rows give unit-variance smoothed white noise: u = K g, g ~ N(0, I), var(u_i) = 1."""
    k = np.exp(-(d**2) / (2.0 * width**2))
    return k / np.sqrt(np.sum(k**2, axis=1, keepdims=True))


def template(a, rng):
    n = a.nodes
    half = (n + 1) // 2
    hemi = np.array([0] * half + [1] * (n - half))
    pos = rng.normal(size=(n, 3))
    pos /= np.linalg.norm(pos, axis=1, keepdims=True)
    pos[:, 0] = np.where(hemi == 0, -1.0, 1.0) * np.abs(pos[:, 0])
    d = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=2)
    iu = np.triu_indices(n, 1)
    m = len(iu[0])
    cross = hemi[iu[0]] != hemi[iu[1]]
    hub = rng.normal(0.0, LEVEL_HUB_SD, n)
    raw = (-LEVEL_DISTANCE * d[iu] - LEVEL_CROSS * cross + hub[iu[0]] + hub[iu[1]]
           + LEVEL_RESIDUAL_SD * rng.normal(size=m))
    mu = raw + (a.threshold - np.quantile(raw, 1.0 - a.density))
    # Population age effect: half spatially smooth, half independent; curvature tied to it.
    field = smoothing_kernel(d, FIELD_WIDTH) @ rng.normal(size=n)
    smooth = field[iu[0]] + field[iu[1]]
    smooth = (smooth - smooth.mean()) / (smooth.std() or 1.0)
    slope = AGE_SLOPE_MEAN + AGE_SLOPE_SD * (np.sqrt(0.5) * smooth
                                             + np.sqrt(0.5) * rng.normal(size=m))
    curv = -a.curvature * slope
    factor_kernel = smoothing_kernel(d, DEV_FACTOR_WIDTH)
    rho = (factor_kernel @ factor_kernel.T)[iu]
    pop_edge = mu > a.threshold
    cut = np.quantile(mu[pop_edge], 1.0 - STRONG_FRACTION) if pop_edge.any() else np.inf
    strong = pop_edge & (mu >= cut)
    rois = [f"{'LH' if hemi[i] == 0 else 'RH'}_Region_{i + 1:03d}" for i in range(n)]
    morph = np.stack(
        [
            rng.normal(2.5, 0.25, n),
            rng.normal(800.0, 200.0, n),
            rng.normal(0.11, 0.02, n),
            rng.normal(0.22, 0.03, n),
        ],
        axis=1,
    )
    morph_slope = np.array([-0.012, 2.0, 0.0, 0.002]) * (1.0 + 0.5 * rng.normal(size=(n, 4)))

    # Between-subject variance of y at the baseline visit, t ~ U(lo, hi) (see the docstring).
    lo, hi = BASE_AGE[0] - REF_AGE, BASE_AGE[1] - REF_AGE
    e1, e2, e3, e4 = (uniform_moments(lo, hi, k) for k in (1, 2, 3, 4))
    slope_var = 0.0 if a.no_noise else SLOPE_SUBJECT_SD**2 + SLOPE_EDGE_SD**2
    between = (SUBJECT_OFFSET_SD**2 + DEV_LOWRANK_SD**2 + DEV_INDEP_SD**2
               + slope**2 * (e2 - e1**2) + curv**2 * (e4 - e2**2)
               + 2.0 * slope * curv * (e3 - e1 * e2) + slope_var * e2)
    icc = np.where(strong, a.icc_strong, a.icc_weak)
    noise_sd = np.zeros(m) if a.no_noise else np.sqrt(between * (1.0 - icc) / icc)

    level = mu
    if a.no_noise:
        # Every y > 0 at every visit: softplus keeps the order of the levels, the margin covers
        # the most negative offset, deviation and age effect the ages can reach.
        t_max = max(abs(lo), abs(BASE_AGE[1] + FOLLOWUP_YEARS * (len(a.visit_probs) - 1)
                                 + AGE_JITTER - REF_AGE))
        dev_sd = np.hypot(DEV_LOWRANK_SD, DEV_INDEP_SD)
        margin = (CLIP_SD * (SUBJECT_OFFSET_SD + dev_sd) + np.abs(slope) * t_max
                  + np.abs(curv) * t_max**2 + NO_NOISE_MARGIN)
        level = np.logaddexp(0.0, mu) + margin
    return dict(n=n, iu=iu, m=m, mu=mu, level=level, slope=slope, curv=curv, rho=rho,
                factor_kernel=factor_kernel, pop_edge=pop_edge, strong=strong, between=between,
                noise_sd=noise_sd, rois=rois, morph=morph, morph_slope=morph_slope)


def visit_counts(probs, subjects, rng):
    """Quota assignment: floor(p n) each, the rest by largest remainder, then shuffled."""
    p = np.asarray(probs, dtype=float)
    exact = p * subjects
    counts = np.floor(exact).astype(int)
    rest = subjects - counts.sum()
    order = np.argsort(-(exact - counts), kind="stable")
    counts[order[:rest]] += 1
    visits = np.repeat(np.arange(1, len(p) + 1), counts)
    return rng.permutation(visits)


def clipped_normal(rng, sd, size=None):
    return sd * np.clip(rng.normal(size=size), -CLIP_SD, CLIP_SD)


def subject_params(t, a, rng):
    n, iu, m = t["n"], t["iu"], t["m"]
    male = rng.random() < 0.5
    site = SITES[rng.integers(len(SITES))]
    base_age = rng.uniform(*BASE_AGE)
    icv = rng.normal(1.45e6, 1.2e5)
    offset = float(clipped_normal(rng, SUBJECT_OFFSET_SD))
    u = t["factor_kernel"] @ rng.normal(size=(n, DEV_RANK))
    lowrank = ((u @ u.T)[iu] - DEV_RANK * t["rho"]) / np.sqrt(DEV_RANK * (1.0 + t["rho"] ** 2))
    dev = DEV_LOWRANK_SD * lowrank + DEV_INDEP_SD * rng.normal(size=m)
    dev_sd = np.hypot(DEV_LOWRANK_SD, DEV_INDEP_SD)
    dev = np.clip(dev, -CLIP_SD * dev_sd, CLIP_SD * dev_sd)
    g = clipped_normal(rng, SLOPE_SUBJECT_SD) + clipped_normal(rng, SLOPE_EDGE_SD, m)
    if a.no_noise:
        g = np.zeros(m)
    jitter = rng.uniform(-AGE_JITTER, AGE_JITTER, len(SESSIONS))
    morph_offset = rng.normal(0.0, 1.0, (n, 4)) * np.array([0.08, 30.0, 0.003, 0.01])
    return dict(male=male, site=site, base_age=base_age, icv=icv, offset=offset, dev=dev,
                slope=g, jitter=jitter, morph_offset=morph_offset)


def true_y(t, subj, age):
    dt = age - REF_AGE
    return (t["level"] + t["slope"] * dt + t["curv"] * dt * dt + subj["offset"] + subj["dev"]
            + subj["slope"] * dt)


def scan(t, a, y, rng):
    """(latent, present, observed log1p) of one scan of true y."""
    if a.no_noise:
        return y, np.ones(len(y), dtype=bool), y
    eta = rng.normal()
    eps = rng.normal(size=len(y))
    latent = y + t["noise_sd"] * (np.sqrt(SCAN_GLOBAL_FRACTION) * eta
                                  + np.sqrt(1.0 - SCAN_GLOBAL_FRACTION) * eps)
    present = latent > a.threshold
    return latent, present, np.where(present, latent, 0.0)


def matrix(n, iu, upper):
    m = np.zeros((n, n), dtype=np.float32)
    m[iu] = upper
    return m + m.T


def write_csv_matrix(path, m):
    np.savetxt(path, m, fmt="%.6g", delimiter=",")


def icc_stats(sum1, sum2, sumw, count, mask):
    """Per-edge ICC(1,1), 2 scans per subject, from running sums; mean/median over mask."""
    if count < 2 or not mask.any():
        return dict(mean=float("nan"), median=float("nan"), edges=int(mask.sum()))
    msb = 2.0 * (sum2[mask] - sum1[mask] ** 2 / count) / (count - 1)
    msw = sumw[mask] / (2.0 * count)
    tot = msb + msw
    ok = tot > 0
    icc = np.where(ok, (msb - msw) / np.where(ok, tot, 1.0), 1.0)
    return dict(mean=float(np.mean(icc)), median=float(np.median(icc)), edges=int(mask.sum()))


def generate(a):
    started = time.time()
    t = template(a, np.random.default_rng([a.seed, STREAM_TEMPLATE]))
    n, iu, m = t["n"], t["iu"], t["m"]
    counts = visit_counts(a.visit_probs, a.subjects,
                          np.random.default_rng([a.seed, STREAM_VISITS]))
    staging = a.out.rstrip("/") + ".tmp"
    if os.path.exists(staging):
        sys.exit(f"synth_noisy_cohort.py: {staging} exists (a failed run?); remove it first")
    os.makedirs(os.path.join(staging, "sc"))
    # The true per-edge parameters, for oracles (scripts/frontier.py --truth): rows level,
    # slope, curvature, noise sd over the upper triangle (row-major); a plain .npy (byte-stable).
    np.save(os.path.join(staging, "truth.npy"),
            np.stack([t["level"], t["slope"], t["curv"], t["noise_sd"]]))
    table = ["subid,sesid,scanid,age,sex,siteid,icv"]
    header = ["SubjectID"] + [f"{r}_{k}" for r in t["rois"] for k in METRICS]
    densities, flips, identity, truth_err, change_sq = [], [], [], [], []
    noise_sq, noise_count = 0.0, 0
    # ICC running sums: latent and observed, per edge.
    acc = {k: [np.zeros(m), np.zeros(m), np.zeros(m)] for k in ("latent", "observed")}
    morph_noise = np.array([0.04, 10.0, 0.003, 0.005]) * (0.0 if a.no_noise else 1.0)
    pe = t["pop_edge"]
    for s in range(a.subjects):
        rng = np.random.default_rng([a.seed, STREAM_SUBJECT, s])
        subj = subject_params(t, a, rng)
        sid = f"sub-NOISY{s + 1:05d}"
        prev = None
        for k in range(int(counts[s])):
            ses = SESSIONS[k]
            age = subj["base_age"] + (FOLLOWUP_YEARS * k + subj["jitter"][k] if k else 0.0)
            age = round(age, 4)
            y = true_y(t, subj, age)
            latent, present, obs = scan(t, a, y, rng)
            w = np.expm1(obs).astype(np.float32)
            densities.append(float(present.mean()))
            noise_sq += float(np.sum((latent - y)[pe] ** 2))
            noise_count += int(pe.sum())
            write_csv_matrix(os.path.join(staging, "sc", f"{sid}_{ses}.csv"), matrix(n, iu, w))
            morph = (t["morph"] + subj["morph_offset"] + t["morph_slope"] * (age - 12.0)
                     + rng.normal(0.0, 1.0, (n, 4)) * morph_noise)
            d = os.path.join(staging, "morph", ses, subj["site"])
            os.makedirs(d, exist_ok=True)
            values = [sid] + ["%.7g" % v for v in morph.reshape(-1)]
            with open(os.path.join(d, f"Schaefer400_Morphology_{sid}.csv"), "w") as f:
                f.write(",".join(header) + "\n" + ",".join(values) + "\n")
            table.append(f"{sid},{ses},{sid}_{ses},{age:.4f},{'1' if subj['male'] else '2'},"
                         f"{subj['site']},{subj['icv']:.0f}")
            # As a reader of the files sees it: log1p of the float32 weight.
            seen = np.log1p(w.astype(np.float64))
            if k == 0:
                # Same-age re-scan for the ICC, from its own stream (the files do not depend on it).
                r_lat, _, r_obs = scan(t, a, y, np.random.default_rng([a.seed, STREAM_RESCAN, s]))
                r_obs = np.log1p(np.expm1(r_obs).astype(np.float32).astype(np.float64))
                for key, x1, x2 in (("latent", latent, r_lat), ("observed", seen, r_obs)):
                    mean = 0.5 * (x1 + x2)
                    acc[key][0] += mean
                    acc[key][1] += mean**2
                    acc[key][2] += (x1 - x2) ** 2
            if prev is not None:
                p_age, p_y, p_present, p_seen = prev
                flips.append(float(np.mean(p_present != present)))
                if k == 1:
                    identity.append(float(np.mean((p_seen - seen) ** 2)))
                    truth1 = np.where(y > a.threshold, y, 0.0) if not a.no_noise else y
                    truth_err.append(float(np.mean((truth1 - seen) ** 2)))
                    step = (y - p_y)[pe] * 2.0 / (age - p_age)
                    change_sq.append(float(np.mean(step**2)))
            prev = (age, y, present, seen)
    with open(os.path.join(staging, "subject_info_sc.csv"), "w") as f:
        f.write("\n".join(table) + "\n")

    nan = float("nan")
    realised = {}
    for key in ("latent", "observed"):
        s1, s2, sw = acc[key]
        realised[key] = dict(
            weak=icc_stats(s1, s2, sw, a.subjects, pe & ~t["strong"]),
            strong=icc_stats(s1, s2, sw, a.subjects, t["strong"]),
        )
    hist = {str(v): int(np.sum(counts == v)) for v in range(1, len(a.visit_probs) + 1)}
    ident = float(np.mean(identity)) if identity else nan
    truth = float(np.mean(truth_err)) if truth_err else nan
    rms_change = float(np.sqrt(np.mean(change_sq))) if change_sq else nan
    rms_noise = float(np.sqrt(noise_sq / max(noise_count, 1)))
    summary = dict(
        generator="scripts/synth_noisy_cohort.py",
        subjects=a.subjects,
        nodes=n,
        seed=a.seed,
        no_noise=a.no_noise,
        icc_weak=a.icc_weak,
        icc_strong=a.icc_strong,
        visit_probs=list(a.visit_probs),
        density_target=a.density,
        threshold=a.threshold,
        curvature=a.curvature,
        constants=dict(
            ref_age=REF_AGE, base_age=list(BASE_AGE), followup_years=FOLLOWUP_YEARS,
            age_jitter=AGE_JITTER, strong_fraction=STRONG_FRACTION,
            level_distance=LEVEL_DISTANCE, level_cross=LEVEL_CROSS, level_hub_sd=LEVEL_HUB_SD,
            level_residual_sd=LEVEL_RESIDUAL_SD, age_slope_mean=AGE_SLOPE_MEAN,
            age_slope_sd=AGE_SLOPE_SD, field_width=FIELD_WIDTH,
            subject_offset_sd=SUBJECT_OFFSET_SD, dev_lowrank_sd=DEV_LOWRANK_SD,
            dev_rank=DEV_RANK, dev_factor_width=DEV_FACTOR_WIDTH, dev_indep_sd=DEV_INDEP_SD,
            slope_subject_sd=SLOPE_SUBJECT_SD, slope_edge_sd=SLOPE_EDGE_SD,
            scan_global_fraction=SCAN_GLOBAL_FRACTION, clip_sd=CLIP_SD,
            no_noise_margin=NO_NOISE_MARGIN,
        ),
        scans=len(table) - 1,
        visit_count_distribution=hist,
        visit_count_fractions={k: v / a.subjects for k, v in hist.items()},
        population_density=float(pe.mean()),
        strong_edges=int(t["strong"].sum()),
        weak_population_edges=int((pe & ~t["strong"]).sum()),
        density_mean=float(np.mean(densities)),
        flip_fraction=float(np.mean(flips)) if flips else nan,
        flip_pairs=len(flips),
        noise_sd_weak_mean=float(np.mean(t["noise_sd"][pe & ~t["strong"]])) if pe.any() else nan,
        noise_sd_strong_mean=float(np.mean(t["noise_sd"][t["strong"]])) if pe.any() else nan,
        between_sd_mean=float(np.sqrt(np.mean(t["between"][pe]))) if pe.any() else nan,
        icc_realised=realised,
        icc_weak_realised=realised["latent"]["weak"]["mean"],
        icc_strong_realised=realised["latent"]["strong"]["mean"],
        icc_weak_realised_observed=realised["observed"]["weak"]["mean"],
        icc_strong_realised_observed=realised["observed"]["strong"]["mean"],
        rms_noise_log1p=rms_noise,
        rms_change_2y_log1p=rms_change,
        forecast_pairs=len(identity),
        identity_sc_log_mse=ident,
        truth_sc_log_mse=truth,
        truth_skill=1.0 - truth / ident if identity and ident > 0 else nan,
    )
    with open(os.path.join(staging, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    if os.path.exists(a.out):
        os.rmdir(a.out)
    os.rename(staging, a.out)
    print(json.dumps(summary, indent=2))
    print(f"synth_noisy_cohort.py: {len(table) - 1} scans in {time.time() - started:.1f} s",
          file=sys.stderr)


def parse_probs(text):
    try:
        p = [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of numbers: {text!r}")
    if not 1 <= len(p) <= len(SESSIONS) or any(x < 0 for x in p) or sum(p) <= 0:
        raise argparse.ArgumentTypeError(
            f"need 1 to {len(SESSIONS)} non-negative probabilities (1, 2, ... sessions)")
    if abs(sum(p) - 1.0) > 1e-6:
        raise argparse.ArgumentTypeError(f"probabilities sum to {sum(p)}, not 1")
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--subjects", type=int, default=60)
    ap.add_argument("--nodes", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--icc-weak", type=float, default=ICC_WEAK,
                    help="test-retest ICC of the weakest 80%% of edges")
    ap.add_argument("--icc-strong", type=float, default=ICC_STRONG,
                    help="test-retest ICC of the strongest 20%% of edges")
    ap.add_argument("--visit-probs", type=parse_probs, default=list(VISIT_PROBS),
                    help="fractions of subjects with 1, 2, 3 (, 4) sessions")
    ap.add_argument("--density", type=float, default=DENSITY,
                    help="fraction of pairs whose population level is above the threshold")
    ap.add_argument("--threshold", type=float, default=THRESHOLD,
                    help="log1p level below which a scanned edge is absent")
    ap.add_argument("--curvature", type=float, default=CURVATURE,
                    help="c = -curvature * b (per year^2); 0: linear age effects")
    ap.add_argument("--no-noise", action="store_true",
                    help="no scan noise or subject slopes, all edges present, >= 2 visits")
    a = ap.parse_args()
    if a.subjects < 1 or a.nodes < 2:
        sys.exit("synth_noisy_cohort.py: --subjects must be >= 1 and --nodes >= 2")
    for name in ("icc_weak", "icc_strong"):
        if not 0.0 < getattr(a, name) <= 1.0:
            sys.exit(f"synth_noisy_cohort.py: --{name.replace('_', '-')} must be in (0, 1]")
    if not 0.0 < a.density < 1.0:
        sys.exit("synth_noisy_cohort.py: --density must be in (0, 1)")
    if a.threshold < 0:
        sys.exit("synth_noisy_cohort.py: --threshold must be >= 0 (a log1p weight is >= 0)")
    if a.no_noise:
        p = list(a.visit_probs) + [0.0] * max(0, 2 - len(a.visit_probs))
        p[0] = 0.0
        if sum(p) <= 0:
            p[1] = 1.0
        a.visit_probs = [x / sum(p) for x in p]
    if os.path.exists(a.out) and os.listdir(a.out):
        sys.exit(f"synth_noisy_cohort.py: {a.out} exists and is not empty; refusing to overwrite it")
    generate(a)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A third, independent synthetic connectome cohort: a small per-edge drift under large scan noise.

`trainer synth-connectome` (Rust) grows and prunes edges by the networks' maturity;
`scripts/synth_cohort.py` strengthens hubs and weakens the periphery. Both have a two-year
change that is large next to their scan noise. This generator is the hard case, where a forecast
barely beats "the next scan equals this one" (the identity):

* Nodes sit on the unit sphere, x < 0 for the left hemisphere and x > 0 for the right. A pair
  is a template edge with probability 0.9 exp(-d/0.7) inside a hemisphere (d: Euclidean
  distance) and 0.05 between hemispheres (about 14 % of pairs); its base log weight is
  N(1.0, 0.9). There are no hubs.
* **Population drift, edge by edge**: the log weight of edge ij changes linearly in age at
  r_ij per year, r_ij = DRIFT (sqrt(1/2) s_ij + sqrt(1/2) z_ij): z_ij ~ N(0, 1) independent per
  edge, s_ij a spatially smooth part (a node field u = K g, g ~ N(0, I), K a Gaussian kernel of
  width 0.35 on the sphere; s_ij = u_i + u_j standardised over all pairs). So r_ij ~ N(0, DRIFT)
  over all pairs (sd about 1.06 DRIFT over the template's mostly short-range edges), neighbouring
  edges drift alike, and the drift is independent of the base weight,
  of distance-based density, of sex and of site. The same r_ij for every subject, times a subject
  gain N(1, 0.1) (the only subject-level variation of the dynamics); no dependence on age other
  than through time (constant rate), no growth spurt, no pruning schedule.
* Per subject: each template edge kept with probability 0.95, per-edge offsets N(0, 0.2), a
  global offset N(0, 0.05); true log weight lw(age) = base + offsets + gain r (age - 10).
* **Scan noise and a threshold**: per scan, latent = lw + N(0, NOISE) on the subject's edges; the
  edge is present only if latent > THRESHOLD (weight exp(latent)), else 0. Weak edges (lw near
  the threshold) flicker between visits. Defaults NOISE 0.35, DRIFT 0.05/year: the rms two-year
  change is about 0.1 in log weight, the noise sd 3-4x larger (summary.json measures both in
  the log1p domain too).
* Morphology: 4 metrics per ROI, weak linear age trends (per-ROI slopes, smaller over two years
  than the visit noise), subject offsets. 1-3 visits about 2 years apart (±0.2), baseline age ~
  U(8.9, 11), sex M/F as "1"/"2", four sites.

Writes the same layout as scripts/synth_cohort.py: <out>/sc/<subid>_<ses>.csv (N x N,
comma-separated, no header), <out>/morph/<ses>/<site>/Schaefer400_Morphology_<subid>.csv
(SubjectID + <roi>_<metric>), <out>/subject_info_sc.csv (subid,sesid,scanid,age,sex,siteid,icv)
and <out>/summary.json. Scores (log1p domain, mean over the upper triangle, averaged over
subjects), visit 0 -> visit 1 of the subjects with 2+ visits:
* identity_sc_log_mse: "visit 1 = visit 0" (scripts/synth_cohort.py's definition);
* oracle_sc_log_mse: the true, noise-free visit 1 (exp(lw) where lw > THRESHOLD, else 0);
* oracle_change_sc_log_mse: observed visit 0 moved by the true change (the other generators'
  "oracle"; the ceiling of any "visit 0 + drift" forecast);
* linear_drift_sc_log_mse: per edge, b = sum(dy dt) / sum(dt^2) (least squares through the
  origin of the log1p-weight change dy on the age change dt) over all consecutive visit pairs
  of a random 80 % of the subjects with 2+ visits; forecast of the other 20 %:
  log1p(w0) + b dt. Its skill is against the identity on the same 20 %.
  linear_drift_clipped_*: the same forecast floored at 0 (a weight cannot be negative). The
  floor alone adds skill: on an edge absent at visit 0 a positive b dt hedges for the edge
  flickering back on, a negative one is cut to 0, so it is not pure drift.
skill = 1 - mse / mse_identity.

`--score DIR` scores the identity and the linear drift (same split rule, by --seed) on any
cohort in this format (e.g. scripts/synth_cohort.py's or `trainer synth-connectome`'s) and
prints JSON; it writes nothing.

Usage: scripts/synth_drift_cohort.py --out DIR [--subjects 60] [--nodes 400] [--seed 0]
           [--noise 0.35] [--drift 0.05] [--threshold 0.0]
       scripts/synth_drift_cohort.py --score DIR [--seed 0]
Needs numpy only.
"""

import argparse
import csv
import json
import os
import sys

import numpy as np

SESSIONS = ["ses-baselineYear1Arm1", "ses-2YearFollowUpYArm1", "ses-4YearFollowUpYArm1"]
METRICS = ["Thickness", "Area", "Curv", "GWC"]
SITES = ["siteA", "siteB", "siteC", "siteD"]
NOISE = 0.35
DRIFT = 0.05
THRESHOLD = 0.0
REF_AGE = 10.0
EDGE_KEEP = 0.95
TEST_FRACTION = 0.2
# Independent random streams of one seed: template, subjects, train/test split.
STREAM_TEMPLATE, STREAM_SUBJECT, STREAM_SPLIT = 0, 1, 2


def template(n, rng, drift):
    half = (n + 1) // 2
    hemi = np.array([0] * half + [1] * (n - half))
    pos = rng.normal(size=(n, 3))
    pos /= np.linalg.norm(pos, axis=1, keepdims=True)
    pos[:, 0] = np.where(hemi == 0, -1.0, 1.0) * np.abs(pos[:, 0])
    d = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=2)
    iu = np.triu_indices(n, 1)
    same = hemi[iu[0]] == hemi[iu[1]]
    p = np.where(same, 0.9 * np.exp(-d[iu] / 0.7), 0.05)
    m = len(iu[0])
    edge = rng.random(m) < p
    base = rng.normal(1.0, 0.9, m)
    # Drift: half spatially smooth (a node field smoothed on the sphere), half independent.
    field = np.exp(-(d**2) / (2.0 * 0.35**2)) @ rng.normal(size=n)
    smooth = field[iu[0]] + field[iu[1]]
    smooth = (smooth - smooth.mean()) / (smooth.std() or 1.0)
    rate = drift * (np.sqrt(0.5) * smooth + np.sqrt(0.5) * rng.normal(size=m))
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
    # Weak per-ROI trends per year: thickness thins, area and GWC grow a little, curvature flat.
    morph_slope = np.array([-0.012, 2.0, 0.0, 0.002]) * (1.0 + 0.5 * rng.normal(size=(n, 4)))
    return dict(n=n, iu=iu, edge=edge, base=base, rate=rate, rois=rois, morph=morph,
                morph_slope=morph_slope)


def true_log_weight(t, subj, age):
    return subj["base"] + subj["gain"] * t["rate"] * (age - REF_AGE)


def matrix(n, iu, upper):
    m = np.zeros((n, n), dtype=np.float32)
    m[iu] = upper
    return m + m.T


def write_csv_matrix(path, m):
    rows = []
    for row in m:
        rows.append(",".join("0" if v == 0 else repr(float(v)) for v in row))
    with open(path, "w") as f:
        f.write("\n".join(rows) + "\n")


def mse(a, b):
    return float(np.mean((a - b) ** 2))


def forecast_scores(subjects, seed):
    """Identity and per-edge linear drift on visit 0 -> 1.

    subjects: [(subid, [(age, upper triangle as float32), ...] sorted by age)] in table order.
    """
    paired = [visits for _, visits in subjects if len(visits) >= 2]
    identity = [mse(np.log1p(v[0][1]), np.log1p(v[1][1])) for v in paired]
    out = dict(forecast_pairs=len(paired),
               identity_sc_log_mse=float(np.mean(identity)) if identity else float("nan"))
    if len(paired) < 2:
        return out
    order = np.random.default_rng([seed, STREAM_SPLIT]).permutation(len(paired))
    n_test = max(1, int(round(TEST_FRACTION * len(paired))))
    test, train = order[:n_test], order[n_test:]
    num = np.zeros(len(paired[0][0][1]))
    den, train_pairs = 0.0, 0
    for i in train:
        v = paired[i]
        for (a0, w0), (a1, w1) in zip(v[:-1], v[1:]):
            dt = a1 - a0
            num += (np.log1p(w1.astype(np.float64)) - np.log1p(w0.astype(np.float64))) * dt
            den += dt * dt
            train_pairs += 1
    b = num / den
    ident, lin, clipped = [], [], []
    for i in test:
        (a0, w0), (a1, w1) = paired[i][0], paired[i][1]
        x0, target = np.log1p(w0.astype(np.float64)), np.log1p(w1.astype(np.float64))
        guess = x0 + b * (a1 - a0)
        ident.append(mse(x0, target))
        lin.append(mse(guess, target))
        clipped.append(mse(np.maximum(0.0, guess), target))
    mi, ml, mc = float(np.mean(ident)), float(np.mean(lin)), float(np.mean(clipped))
    out.update(
        linear_drift_train_subjects=len(train),
        linear_drift_train_pairs=train_pairs,
        linear_drift_test_subjects=len(test),
        identity_test_sc_log_mse=mi,
        linear_drift_sc_log_mse=ml,
        linear_drift_skill=1.0 - ml / mi if mi > 0 else float("nan"),
        linear_drift_clipped_sc_log_mse=mc,
        linear_drift_clipped_skill=1.0 - mc / mi if mi > 0 else float("nan"),
    )
    return out


def read_cohort(root):
    """[(subid, [(age, upper triangle float32), ...])] from a cohort directory, in table order."""
    by_subject = {}
    with open(os.path.join(root, "subject_info_sc.csv"), newline="") as f:
        for row in csv.DictReader(f):
            by_subject.setdefault(row["subid"], []).append((float(row["age"]), row["sesid"]))
    subjects = []
    for sid, visits in by_subject.items():
        scans = []
        for age, ses in sorted(visits):
            m = np.loadtxt(os.path.join(root, "sc", f"{sid}_{ses}.csv"), delimiter=",")
            scans.append((age, m[np.triu_indices(m.shape[0], 1)].astype(np.float32)))
        subjects.append((sid, scans))
    return subjects


def generate(a):
    rng = np.random.default_rng([a.seed, STREAM_TEMPLATE])
    t = template(a.nodes, rng, a.drift)
    n, iu = t["n"], t["iu"]
    m = len(iu[0])
    staging = a.out.rstrip("/") + ".tmp"
    os.makedirs(os.path.join(staging, "sc"), exist_ok=True)
    table = ["subid,sesid,scanid,age,sex,siteid,icv"]
    header = ["SubjectID"] + [f"{r}_{k}" for r in t["rois"] for k in METRICS]
    subjects, oracle, oracle_change, densities = [], [], [], []
    change_sq, noise_sq, noise_count, flicker = [], 0.0, 0, []
    for s in range(a.subjects):
        rng = np.random.default_rng([a.seed, STREAM_SUBJECT, s])
        sid = f"sub-DRIFT{s + 1:05d}"
        male = rng.random() < 0.5
        site = SITES[rng.integers(len(SITES))]
        visits = [1, 2, 3][int(rng.choice(3, p=[0.2, 0.4, 0.4]))]
        base_age = rng.uniform(8.9, 11.0)
        subj = dict(
            edge=t["edge"] & (rng.random(m) < EDGE_KEEP),
            base=t["base"] + rng.normal(0.0, 0.2, m) + rng.normal(0.0, 0.05),
            gain=max(0.0, 1.0 + 0.1 * rng.normal()),
        )
        morph_offset = rng.normal(0.0, 1.0, (n, 4)) * np.array([0.08, 30.0, 0.003, 0.01])
        icv = rng.normal(1.45e6, 1.2e5)
        observed, true_ages = [], []
        for k in range(visits):
            ses = SESSIONS[k]
            age = base_age + 2.0 * k + (rng.uniform(-0.2, 0.2) if k else 0.0)
            latent = true_log_weight(t, subj, age) + rng.normal(0.0, a.noise, m)
            present = subj["edge"] & (latent > a.threshold)
            w = np.where(present, np.exp(latent), 0.0).astype(np.float32)
            densities.append(float(present.mean()))
            lw = true_log_weight(t, subj, age)
            noise_sq += float(np.sum((np.log1p(w[present]) - np.log1p(np.exp(lw[present]))) ** 2))
            noise_count += int(present.sum())
            write_csv_matrix(os.path.join(staging, "sc", f"{sid}_{ses}.csv"), matrix(n, iu, w))
            morph = t["morph"] + morph_offset + t["morph_slope"] * (age - 12.0)
            morph += rng.normal(0.0, 1.0, (n, 4)) * np.array([0.04, 10.0, 0.003, 0.005])
            d = os.path.join(staging, "morph", ses, site)
            os.makedirs(d, exist_ok=True)
            values = [sid] + [repr(float(np.float32(v))) for v in morph.reshape(-1)]
            with open(os.path.join(d, f"Schaefer400_Morphology_{sid}.csv"), "w") as f:
                f.write(",".join(header) + "\n" + ",".join(values) + "\n")
            table.append(
                f"{sid},{ses},{sid}_{ses},{age:.4f},{'1' if male else '2'},{site},{icv:.0f}"
            )
            # The table holds ages to 4 decimals; score with those, as a reader of the files would.
            observed.append((float(f"{age:.4f}"), w))
            true_ages.append(age)
        subjects.append((sid, observed))
        if len(observed) >= 2:
            (_, w0), (_, w1) = observed[0], observed[1]
            a0, a1 = true_ages[0], true_ages[1]
            lw0, lw1 = true_log_weight(t, subj, a0), true_log_weight(t, subj, a1)
            target = np.log1p(w1.astype(np.float64))
            truth1 = np.where(subj["edge"] & (lw1 > a.threshold), np.exp(lw1), 0.0)
            oracle.append(mse(np.log1p(truth1), target))
            with np.errstate(divide="ignore"):
                moved = np.where(w0 > 0, np.exp(np.log(w0.astype(np.float64)) + lw1 - lw0), 0.0)
            oracle_change.append(mse(np.log1p(moved), target))
            e = subj["edge"]
            step = (np.log1p(np.exp(lw1[e])) - np.log1p(np.exp(lw0[e]))) * 2.0 / (a1 - a0)
            step_log = (lw1 - lw0)[e] * 2.0 / (a1 - a0)
            change_sq.append((float(np.mean(step**2)), float(np.mean(step_log**2))))
            flicker.append(float(np.mean((w0[e] > 0) != (w1[e] > 0))))
    with open(os.path.join(staging, "subject_info_sc.csv"), "w") as f:
        f.write("\n".join(table) + "\n")
    scores = forecast_scores(subjects, a.seed)
    ident = scores["identity_sc_log_mse"]
    orac = float(np.mean(oracle)) if oracle else float("nan")
    orac_change = float(np.mean(oracle_change)) if oracle_change else float("nan")
    nan = float("nan")
    rms_change_log1p = float(np.sqrt(np.mean([c[0] for c in change_sq]))) if change_sq else nan
    rms_change_log = float(np.sqrt(np.mean([c[1] for c in change_sq]))) if change_sq else nan
    rms_noise_log1p = float(np.sqrt(noise_sq / max(noise_count, 1)))
    summary = dict(
        generator="scripts/synth_drift_cohort.py",
        subjects=a.subjects,
        nodes=n,
        seed=a.seed,
        noise=a.noise,
        drift=a.drift,
        threshold=a.threshold,
        scans=len(table) - 1,
        template_density=float(t["edge"].mean()),
        density_mean=float(np.mean(densities)),
        flicker_fraction=float(np.mean(flicker)) if flicker else float("nan"),
        rms_change_2y_log=rms_change_log,
        noise_change_ratio_log=a.noise / rms_change_log if change_sq else float("nan"),
        rms_change_2y_log1p=rms_change_log1p,
        rms_noise_log1p=rms_noise_log1p,
        noise_change_ratio_log1p=rms_noise_log1p / rms_change_log1p if change_sq else float("nan"),
        forecast_pairs=scores["forecast_pairs"],
        identity_sc_log_mse=ident,
        oracle_sc_log_mse=orac,
        oracle_skill=1.0 - orac / ident if oracle else float("nan"),
        oracle_change_sc_log_mse=orac_change,
        oracle_change_skill=1.0 - orac_change / ident if oracle else float("nan"),
    )
    summary.update({k: v for k, v in scores.items() if k not in summary})
    with open(os.path.join(staging, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    if os.path.exists(a.out):
        os.rmdir(a.out)
    os.rename(staging, a.out)
    print(json.dumps(summary, indent=2))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    ap.add_argument("--score", metavar="DIR", help="score an existing cohort; write nothing")
    ap.add_argument("--subjects", type=int, default=60)
    ap.add_argument("--nodes", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise", type=float, default=NOISE, help="scan noise sd (log weight)")
    ap.add_argument("--drift", type=float, default=DRIFT,
                    help="sd of the per-edge drift (log weight per year)")
    ap.add_argument("--threshold", type=float, default=THRESHOLD,
                    help="log weight below which a scanned edge is absent")
    a = ap.parse_args()
    if a.score:
        if a.out:
            sys.exit("synth_drift_cohort.py: give --out or --score, not both")
        scores = dict(cohort=a.score, seed=a.seed, **forecast_scores(read_cohort(a.score), a.seed))
        print(json.dumps(scores, indent=2))
        return
    if not a.out:
        sys.exit("synth_drift_cohort.py: --out DIR (or --score DIR) is required")
    if a.subjects < 1 or a.nodes < 2:
        sys.exit("synth_drift_cohort.py: --subjects must be >= 1 and --nodes >= 2")
    if a.noise < 0 or a.drift < 0:
        sys.exit("synth_drift_cohort.py: --noise and --drift must be >= 0")
    if os.path.exists(a.out) and os.listdir(a.out):
        sys.exit(f"synth_drift_cohort.py: {a.out} exists and is not empty; refusing to overwrite it")
    generate(a)


if __name__ == "__main__":
    main()

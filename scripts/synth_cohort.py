#!/usr/bin/env python3
"""A second, independent synthetic connectome cohort, in the reference's on-disk format.

`trainer synth-connectome` (Rust) grows and prunes edges by the networks' maturity. This
generator has another dynamic, so that a model or preset tuned on one generator can be checked
on the other:

* Nodes sit on two spheres (hemispheres); each has a hub propensity h ~ N(0, 1). A pair is an
  edge with probability min(0.9, 0.5 exp(-d/0.6) exp(0.5 (h_i + h_j))) (d: distance inside a
  hemisphere; 0.04 between hemispheres), its base log weight N(0.8, 0.5) + 0.3 (h_i + h_j).
* **Hubs strengthen, the periphery weakens**: log w_ij changes at
  RATE (h_i + h_j) / 2 per year, RATE = 0.12, faster before 12 (the yearly rate is multiplied
  by 1 / (1 + exp((age - 12) / 1.5))·2), males x 1.15, females x 0.85.
* **Age-dependent pruning of weak edges**: an edge whose true log weight is below
  -0.6 + 0.12 (age - 9) is absent at that age (the threshold rises with age).
* Scan noise N(0, 0.04) on present log weights. Morphology: 4 metrics per ROI, age trends
  that depend on the hub propensity, small noise.
* 1-3 visits 2 years apart from a baseline age ~ U(8.9, 11), sex M/F as "1"/"2", four sites.

Writes <out>/sc/<subid>_<ses>.csv (N x N, comma-separated, no header),
<out>/morph/<ses>/<site>/Schaefer400_Morphology_<subid>.csv (SubjectID + <roi>_<metric>),
<out>/subject_info_sc.csv (subid,sesid,scanid,age,sex,siteid,icv) and <out>/summary.json with
the identity and oracle errors of the 0 -> 1 forecasts (log1p domain, upper triangle).

Usage: scripts/synth_cohort.py --out DIR [--subjects 60] [--nodes 400] [--seed 0]
Needs numpy only.
"""

import argparse
import json
import os
import sys

import numpy as np

SESSIONS = ["ses-baselineYear1Arm1", "ses-2YearFollowUpYArm1", "ses-4YearFollowUpYArm1"]
METRICS = ["Thickness", "Area", "Curv", "GWC"]
SITES = ["siteA", "siteB", "siteC", "siteD"]
RATE = 0.12
NOISE = 0.04


def age_speed(age):
    """Yearly rate multiplier: 1 at 12, faster before, slower after."""
    return 2.0 / (1.0 + np.exp((age - 12.0) / 1.5))


def developed(age):
    """Integral of age_speed from 9 to age (trapezoid rule, fine grid)."""
    grid = np.linspace(9.0, age, 200)
    trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy < 2 has only trapz
    return float(trapezoid(age_speed(grid), grid)) if age > 9.0 else 0.0


def prune_threshold(age):
    return -0.6 + 0.12 * (age - 9.0)


def template(n, rng):
    half = (n + 1) // 2
    hemi = np.array([0] * half + [1] * (n - half))
    pos = rng.normal(size=(n, 3))
    pos /= np.linalg.norm(pos, axis=1, keepdims=True)
    h = rng.normal(size=n)
    d = np.linalg.norm(pos[:, None, :] - pos[None, :, :], axis=2)
    same = hemi[:, None] == hemi[None, :]
    p = np.where(same, 0.5 * np.exp(-d / 0.6), 0.04) * np.exp(0.5 * (h[:, None] + h[None, :]))
    p = np.minimum(p, 0.9)
    iu = np.triu_indices(n, 1)
    edge = rng.random(len(iu[0])) < p[iu]
    base = rng.normal(0.8, 0.5, size=len(iu[0])) + 0.3 * (h[iu[0]] + h[iu[1]])
    rate = RATE * (h[iu[0]] + h[iu[1]]) / 2.0
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
    return dict(n=n, iu=iu, edge=edge, base=base, rate=rate, h=h, rois=rois, morph=morph)


def true_log_weight(t, subj, age):
    lw = subj["base"] + t["rate"] * subj["gain"] * developed(age)
    present = subj["edge"] & (lw >= prune_threshold(age))
    return lw, present


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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--subjects", type=int, default=60)
    ap.add_argument("--nodes", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.subjects < 1 or a.nodes < 2:
        sys.exit("synth_cohort.py: --subjects must be >= 1 and --nodes >= 2")
    if os.path.exists(a.out) and os.listdir(a.out):
        sys.exit(f"synth_cohort.py: {a.out} exists and is not empty; refusing to overwrite it")
    rng = np.random.default_rng(a.seed)
    t = template(a.nodes, rng)
    n, iu = t["n"], t["iu"]
    staging = a.out.rstrip("/") + ".tmp"
    os.makedirs(os.path.join(staging, "sc"), exist_ok=True)
    table = ["subid,sesid,scanid,age,sex,siteid,icv"]
    identity, oracle, densities = [], [], []
    for s in range(a.subjects):
        sid = f"sub-PYSYN{s + 1:05d}"
        male = rng.random() < 0.5
        site = SITES[rng.integers(len(SITES))]
        visits = [1, 2, 3][int(rng.choice(3, p=[0.2, 0.4, 0.4]))]
        base_age = rng.uniform(8.9, 11.0)
        subj = dict(
            edge=t["edge"] & (rng.random(len(iu[0])) < 0.93),
            base=t["base"] + rng.normal(0.0, 0.2, len(iu[0])) + rng.normal(0.0, 0.08),
            gain=1.15 if male else 0.85,
        )
        morph_offset = rng.normal(0.0, 1.0, (n, 4)) * np.array([0.08, 30.0, 0.003, 0.01])
        icv = rng.normal(1.45e6, 1.2e5)
        observed = []
        for k in range(visits):
            ses = SESSIONS[k]
            age = base_age + 2.0 * k + (rng.uniform(-0.2, 0.2) if k else 0.0)
            lw, present = true_log_weight(t, subj, age)
            w = np.where(present, np.exp(lw + rng.normal(0.0, NOISE, len(lw))), 0.0)
            w = w.astype(np.float32)
            densities.append(float(present.mean()))
            write_csv_matrix(os.path.join(staging, "sc", f"{sid}_{ses}.csv"), matrix(n, iu, w))
            slope = np.array([-0.025, 6.0, 0.0, 0.004]) * (1.0 + 0.3 * t["h"][:, None])
            morph = t["morph"] + morph_offset + slope * (age - 12.0)
            morph += rng.normal(0.0, 1.0, (n, 4)) * np.array([0.02, 5.0, 0.002, 0.003])
            d = os.path.join(staging, "morph", ses, site)
            os.makedirs(d, exist_ok=True)
            header = ["SubjectID"] + [f"{r}_{m}" for r in t["rois"] for m in METRICS]
            values = [sid] + [repr(float(np.float32(v))) for v in morph.reshape(-1)]
            with open(os.path.join(d, f"Schaefer400_Morphology_{sid}.csv"), "w") as f:
                f.write(",".join(header) + "\n" + ",".join(values) + "\n")
            table.append(
                f"{sid},{ses},{sid}_{ses},{age:.4f},{'1' if male else '2'},{site},{icv:.0f}"
            )
            observed.append((age, w))
        if len(observed) >= 2:
            (a0, w0), (a1, w1) = observed[0], observed[1]
            lw1, present1 = true_log_weight(t, subj, a1)
            change = t["rate"] * subj["gain"] * (developed(a1) - developed(a0))
            with np.errstate(divide="ignore"):
                guess = np.where((w0 > 0) & present1, np.exp(np.log(w0) + change), 0.0)
            target = np.log1p(w1)
            identity.append(float(np.mean((np.log1p(w0) - target) ** 2)))
            oracle.append(float(np.mean((np.log1p(guess) - target) ** 2)))
    with open(os.path.join(staging, "subject_info_sc.csv"), "w") as f:
        f.write("\n".join(table) + "\n")
    ident = float(np.mean(identity)) if identity else float("nan")
    orac = float(np.mean(oracle)) if oracle else float("nan")
    summary = dict(
        generator="scripts/synth_cohort.py",
        subjects=a.subjects,
        nodes=n,
        seed=a.seed,
        scans=len(table) - 1,
        density_mean=float(np.mean(densities)),
        forecast_pairs=len(identity),
        identity_sc_log_mse=ident,
        oracle_sc_log_mse=orac,
        oracle_skill=1.0 - orac / ident if identity else float("nan"),
    )
    with open(os.path.join(staging, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    if os.path.exists(a.out):
        os.rmdir(a.out)
    os.rename(staging, a.out)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A fifth synthetic connectome cohort: streamline counts, written from published descriptions.

Written for issue 75 after the four others (`trainer synth-connectome`, `synth_cohort.py`,
`synth_drift_cohort.py`, `synth_noisy_cohort.py`) had been used to tune eb-drift, so that a
forecaster can be checked on data it was not designed on. Nothing here was fitted to a
forecaster; the seeds of the checks (501, 502, 503) were stated before any cohort was looked at.
What each part follows:

* Geometry (Roberts et al. 2016, NeuroImage 124:379, "The contribution of geometry to the human
  connectome"; Betzel et al. 2016, NeuroImage 124:1054, "Generative models of the human
  connectome"): nodes on two hemispheres of the unit sphere; the expected streamline count of a
  pair falls exponentially with its Euclidean distance (the exponential distance rule), far
  fewer across hemispheres except between homotopic nodes, and nodes differ in hubness; counts
  are heavy-tailed (log-normal like): most pairs weak, a few in the hundreds or thousands.
* Measurement (tractography as sampling): a scan's count of pair ij is Poisson with a mean that
  is the subject's expected count times a scan-wide factor (SNR, motion: log-normal sd
  SCAN_SCALE_SD) and a per-edge gamma factor (overdispersion of tractography, shape
  OVERDISPERSION), i.e. negative binomial; an edge is present in the scan iff its count is at
  least 1 (no threshold). Weak pairs (mean count near 1) therefore appear and vanish from scan to
  scan, as reported for low-count edges (Roberts et al. 2017, NeuroImage 145:1, "Consistency-based
  thresholding of the human connectome"): the flicker is a property of the counting, not a
  latent threshold.
* Subjects: a persistent whole-brain scale (head size, white-matter volume: log-normal sd
  SUBJECT_SCALE_SD) and persistent edge deviations (log-normal sd SUBJECT_EDGE_SD), which set the
  between-subject variance of the counts.
* Development, ages 9-15 (Baum et al. 2017, Current Biology 27:1561, "Modular segregation of
  structural brain networks supports the development of executive function in youth"; Lebel &
  Deoni 2018, NeuroImage 182:207, review of white-matter development): within-module
  connections strengthen and between-module connections weaken with age (segregation), long
  association connections strengthen most; per year, the log expected count of ij changes by
  DEV_WITHIN (within a module) or DEV_BETWEEN (between modules), plus DEV_LENGTH times the
  standardised distance, plus N(0, DEV_EDGE_SD) per edge; each subject's rate is scaled by
  1 + N(0, DEV_SUBJECT_SD) (some mature faster).
* Visits as the ABCD study (the authors' data): baseline age U(9, 11), follow-ups two years apart
  (± 0.3), 40 / 52 / 8 % of subjects with 1 / 2 / 3 scans (the authors' 1,824 / 2,358 / 384).

The files are those of the reference project (`sc/<subject>_<session>.csv` dense N×N of counts,
`morph/<session>/<site>/Schaefer400_Morphology_<subject>.csv`, `subject_info_sc.csv`);
`summary.json` records every constant and what the cohort looks like (density, the fraction of
edges that change existence between visits, the identity's sc_log_mse).
"""

import argparse
import json
import os
import sys
import time

import numpy as np

# The quota of visit counts and the matrix writer are the realistic-noise generator's.
from synth_noisy_cohort import matrix, visit_counts, write_csv_matrix

SESSIONS = ["ses-baselineYear1Arm1", "ses-2YearFollowUpYArm1", "ses-4YearFollowUpYArm1"]
METRICS = ["Thickness", "Area", "Curv", "GWC"]
SITES = ["siteA", "siteB", "siteC"]
VISIT_PROBS = (0.40, 0.52, 0.08)

MODULES_PER_HEMISPHERE = 7
TOTAL_STREAMLINES_PER_PAIR = 6.0  # mean expected count over pairs (sets the density)
DISTANCE_DECAY = 3.0  # per unit of distance on the unit sphere (exponential distance rule)
CROSS_HEMISPHERE = np.log(0.05)  # non-homotopic pairs across hemispheres: 5 % of the count
HOMOTOPIC = np.log(3.0)  # homotopic pairs: three times the distance rule's count
HUB_SD = 0.5
PAIR_SD = 0.8
SUBJECT_SCALE_SD = 0.15
SUBJECT_EDGE_SD = 0.25
SCAN_SCALE_SD = 0.10
OVERDISPERSION = 4.0  # gamma shape of the per-edge, per-scan factor
DEV_WITHIN = 0.03
DEV_BETWEEN = -0.02
DEV_LENGTH = 0.02
DEV_EDGE_SD = 0.02
DEV_SUBJECT_SD = 0.3
REF_AGE = 10.0
STREAM_TEMPLATE, STREAM_SUBJECT, STREAM_VISITS = 0, 1, 2


def template(n, rng):
    """Node positions, modules, the population's log expected count and its rate per year."""
    left = n // 2
    hemi = np.array([0] * left + [1] * (n - left))
    # Points on each hemisphere: x < 0 left, x > 0 right; the right one mirrors the left, so
    # node i of the left and its homotopic node i + left share (|x|, y, z).
    v = rng.normal(size=(n - left, 3))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    v[:, 0] = np.abs(v[:, 0])
    pos = np.zeros((n, 3))
    pos[left:] = v
    pos[:left] = v[:left] * np.array([-1.0, 1.0, 1.0])
    # Modules: angular sectors of the (y, z) plane within each hemisphere.
    angle = np.arctan2(pos[:, 2], pos[:, 1])
    sector = np.floor((angle + np.pi) / (2 * np.pi) * MODULES_PER_HEMISPHERE).astype(int)
    module = hemi * MODULES_PER_HEMISPHERE + np.minimum(sector, MODULES_PER_HEMISPHERE - 1)
    iu = np.triu_indices(n, 1)
    i, j = iu
    d = np.linalg.norm(pos[i] - pos[j], axis=1)
    cross = hemi[i] != hemi[j]
    homotopic = cross & (np.abs(i - j) == left)
    hub = rng.normal(0.0, HUB_SD, n)
    level = (-DISTANCE_DECAY * d + np.where(cross, CROSS_HEMISPHERE, 0.0)
             + np.where(homotopic, HOMOTOPIC - CROSS_HEMISPHERE, 0.0)
             + hub[i] + hub[j] + rng.normal(0.0, PAIR_SD, len(d)))
    level += np.log(TOTAL_STREAMLINES_PER_PAIR) - np.log(np.mean(np.exp(level)))
    within = module[i] == module[j]
    rate = (np.where(within, DEV_WITHIN, DEV_BETWEEN) + DEV_LENGTH * (d - d.mean()) / d.std()
            + rng.normal(0.0, DEV_EDGE_SD, len(d)))
    morph = rng.normal(size=(n, 4)) * np.array([0.2, 150.0, 0.02, 0.03]) + np.array(
        [2.7, 1200.0, 0.1, 0.2])
    return dict(n=n, iu=iu, level=level, rate=rate, within=within, morph=morph)


def generate(a):
    started = time.time()
    t = template(a.nodes, np.random.default_rng([a.seed, STREAM_TEMPLATE]))
    n, iu = t["n"], t["iu"]
    counts = visit_counts(VISIT_PROBS, a.subjects,
                          np.random.default_rng([a.seed, STREAM_VISITS]))
    staging = a.out.rstrip("/") + ".tmp"
    if os.path.exists(staging):
        sys.exit(f"synth_count_cohort.py: {staging} exists (a failed run?); remove it first")
    os.makedirs(os.path.join(staging, "sc"))
    table = ["subid,sesid,scanid,age,sex,siteid,icv"]
    header = ["SubjectID"] + [f"ROI{r + 1}_{k}" for r in range(n) for k in METRICS]
    densities, flips, identity = [], [], []
    for s in range(a.subjects):
        rng = np.random.default_rng([a.seed, STREAM_SUBJECT, s])
        scale = rng.normal(0.0, SUBJECT_SCALE_SD)
        dev = rng.normal(0.0, SUBJECT_EDGE_SD, len(t["level"]))
        pace = max(1.0 + rng.normal(0.0, DEV_SUBJECT_SD), 0.0)
        base_age = rng.uniform(9.0, 11.0)
        male = bool(rng.random() < 0.5)
        site = SITES[int(rng.integers(len(SITES)))]
        icv = rng.normal(1.5e6, 1.2e5)
        morph_offset = rng.normal(size=(n, 4)) * np.array([0.1, 60.0, 0.01, 0.01])
        sid = f"sub-COUNT{s + 1:05d}"
        prev = None
        for k in range(int(counts[s])):
            age = round(base_age + (2.0 * k + rng.uniform(-0.3, 0.3) if k else 0.0), 4)
            mean_log = t["level"] + scale + dev + pace * t["rate"] * (age - REF_AGE)
            mean_log = mean_log + rng.normal(0.0, SCAN_SCALE_SD)
            gamma = rng.gamma(OVERDISPERSION, 1.0 / OVERDISPERSION, len(mean_log))
            count = rng.poisson(np.exp(mean_log) * gamma).astype(np.float32)
            present = count > 0
            densities.append(float(present.mean()))
            write_csv_matrix(os.path.join(staging, "sc", f"{sid}_{SESSIONS[k]}.csv"),
                             matrix(n, iu, count))
            morph = t["morph"] + morph_offset + rng.normal(size=(n, 4)) * np.array(
                [0.03, 8.0, 0.003, 0.004])
            d = os.path.join(staging, "morph", SESSIONS[k], site)
            os.makedirs(d, exist_ok=True)
            values = [sid] + ["%.7g" % v for v in morph.reshape(-1)]
            with open(os.path.join(d, f"Schaefer400_Morphology_{sid}.csv"), "w") as f:
                f.write(",".join(header) + "\n" + ",".join(values) + "\n")
            table.append(f"{sid},{SESSIONS[k]},{sid}_{SESSIONS[k]},{age:.4f},"
                         f"{'1' if male else '2'},{site},{icv:.0f}")
            y = np.log1p(count.astype(np.float64))
            if prev is not None:
                flips.append(float(np.mean(prev[1] != present)))
                if k == 1:
                    identity.append(float(np.mean((prev[0] - y) ** 2)))
            prev = (y, present)
    with open(os.path.join(staging, "subject_info_sc.csv"), "w") as f:
        f.write("\n".join(table) + "\n")
    nan = float("nan")
    summary = dict(
        generator="scripts/synth_count_cohort.py",
        subjects=a.subjects, nodes=n, seed=a.seed, scans=len(table) - 1,
        constants={k: (float(v) if isinstance(v, (float, np.floating)) else v)
                   for k, v in globals().items()
                   if k.isupper() and isinstance(v, (int, float, tuple, np.floating))},
        density_mean=float(np.mean(densities)),
        flip_fraction=float(np.mean(flips)) if flips else nan,
        within_module_fraction=float(t["within"].mean()),
        forecast_pairs=len(identity),
        identity_sc_log_mse=float(np.mean(identity)) if identity else nan,
    )
    with open(os.path.join(staging, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    if os.path.exists(a.out):
        os.rmdir(a.out)
    os.rename(staging, a.out)
    print(json.dumps(summary, indent=2))
    print(f"synth_count_cohort.py: {len(table) - 1} scans in {time.time() - started:.1f} s",
          file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--subjects", type=int, default=60)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.subjects < 1 or a.nodes < 4:
        sys.exit("synth_count_cohort.py: --subjects must be >= 1 and --nodes >= 4")
    if os.path.exists(a.out) and os.listdir(a.out):
        sys.exit(f"synth_count_cohort.py: {a.out} exists and is not empty; refusing to overwrite it")
    generate(a)


if __name__ == "__main__":
    main()

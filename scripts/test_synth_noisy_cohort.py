#!/usr/bin/env python3
"""Checks of scripts/synth_noisy_cohort.py (plain asserts; run: python3 scripts/test_synth_noisy_cohort.py).

* format: the files named in subject_info_sc.csv exist (sc/<subid>_<ses>.csv,
  morph/<ses>/<site>/Schaefer400_Morphology_<subid>.csv), nothing else in sc/, N x N matrices,
  symmetric, zero diagonal, non-negative, morphology header SubjectID + <roi>_<metric>;
* determinism: the same seed writes byte-identical files, another seed does not;
* --no-noise: every subject has >= 2 visits, every off-diagonal entry is present (density 1);
  truth.npy's slope and curvature rows are the ones the written scans follow;
  with --curvature 0 the per-edge slope of log1p(weight) on age is the same for every subject
  and every visit pair (exactly linear trajectories, common slope); with the default curvature
  the second divided difference is the same for every 3-visit subject (exactly quadratic);
* ICC: at 60 subjects x 100 nodes the realised edge-wise ICC in summary.json (latent and
  observed log1p) is within +-0.1 of the targets, for the defaults and for other targets; a
  rough ICC read from the written files alone agrees too;
* realised density, existence flips and visit counts are in the documented ranges.
Needs numpy only.
"""

import csv
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "synth_noisy_cohort.py")
SESSIONS = ["ses-baselineYear1Arm1", "ses-2YearFollowUpYArm1", "ses-4YearFollowUpYArm1"]
METRICS = ["Thickness", "Area", "Curv", "GWC"]


def generate(out, *args):
    r = subprocess.run([sys.executable, SCRIPT, "--out", out, *map(str, args)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(out, "summary.json")) as f:
        summary = json.load(f)
    assert json.loads(r.stdout) == summary
    return summary


def table(root):
    with open(os.path.join(root, "subject_info_sc.csv"), newline="") as f:
        return list(csv.DictReader(f))


def load(root, row):
    return np.loadtxt(os.path.join(root, "sc", f"{row['scanid']}.csv"), delimiter=",")


def subjects(root):
    """subid -> [(age, log1p upper triangle)] sorted by age."""
    out = {}
    for row in table(root):
        m = load(root, row)
        out.setdefault(row["subid"], []).append(
            (float(row["age"]), np.log1p(m[np.triu_indices(m.shape[0], 1)])))
    return {k: sorted(v, key=lambda x: x[0]) for k, v in out.items()}


def all_files(root):
    found = {}
    for d, _, files in os.walk(root):
        for name in files:
            path = os.path.join(d, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, root)] = f.read()
    return found


def check_format(root, nodes, subjects_n):
    rows = table(root)
    with open(os.path.join(root, "subject_info_sc.csv")) as f:
        assert f.readline().strip() == "subid,sesid,scanid,age,sex,siteid,icv"
    assert len({r["subid"] for r in rows}) == subjects_n
    sc_names = set()
    for r in rows:
        assert r["subid"].startswith("sub-NOISY") and r["sesid"] in SESSIONS
        assert r["scanid"] == f"{r['subid']}_{r['sesid']}"
        assert r["sex"] in ("1", "2") and 8.5 < float(r["age"]) < 16.0
        assert float(r["icv"]) > 0
        sc_names.add(f"{r['scanid']}.csv")
        m = load(root, r)
        assert m.shape == (nodes, nodes), m.shape
        assert np.array_equal(m, m.T)
        assert np.all(np.diag(m) == 0) and np.all(m >= 0) and np.all(np.isfinite(m))
        morph = os.path.join(root, "morph", r["sesid"], r["siteid"],
                             f"Schaefer400_Morphology_{r['subid']}.csv")
        with open(morph) as f:
            header = f.readline().strip().split(",")
            values = f.readline().strip().split(",")
        assert header[0] == "SubjectID" and len(header) == 1 + 4 * nodes
        assert header[1:5] == [f"LH_Region_001_{k}" for k in METRICS], header[1:5]
        assert values[0] == r["subid"] and len(values) == len(header)
        assert all(np.isfinite(float(v)) for v in values[1:])
    assert set(os.listdir(os.path.join(root, "sc"))) == sc_names
    # Visits in session order, about 2 years apart.
    for visits in subjects_by_rows(rows).values():
        sessions = [r["sesid"] for r in visits]
        assert sessions == SESSIONS[: len(sessions)], sessions
        ages = [float(r["age"]) for r in visits]
        # Visit k at baseline + 2k + U(-0.3, 0.3).
        assert all(abs(a - ages[0] - 2.0 * k) <= 0.3001 for k, a in enumerate(ages)), ages
        assert 9.0 <= ages[0] <= 11.0


def subjects_by_rows(rows):
    out = {}
    for r in rows:
        out.setdefault(r["subid"], []).append(r)
    return out


def file_icc(root, strong_mask_fn):
    """Per edge: within = var(visit 1 - visit 0) / 2, total = var(visit 0) over the subjects with
    2+ visits (log1p); strong_mask_fn(x0, within, total) reduces them."""
    subs = [v for v in subjects(root).values() if len(v) >= 2]
    x0 = np.stack([v[0][1] for v in subs])
    x1 = np.stack([v[1][1] for v in subs])
    diff = x1 - x0
    within = np.var(diff, axis=0, ddof=1) / 2.0
    total = np.var(x0, axis=0, ddof=1)
    return strong_mask_fn(x0, within, total)


def test_format_determinism_and_icc(tmp):
    a = os.path.join(tmp, "a")
    s = generate(a, "--subjects", 60, "--nodes", 100, "--seed", 5)
    check_format(a, 100, 60)
    # Realised ICC within +-0.1 of the targets (latent: what the noise is set for; observed:
    # log1p weights with absent = 0).
    for kind in ("latent", "observed"):
        got = s["icc_realised"][kind]
        assert abs(got["weak"]["mean"] - 0.62) < 0.1, (kind, got)
        assert abs(got["strong"]["mean"] - 0.75) < 0.1, (kind, got)
        assert got["weak"]["edges"] > 0 and got["strong"]["edges"] > 0
    assert 0.10 <= s["density_mean"] <= 0.40, s["density_mean"]
    assert 0.01 <= s["flip_fraction"] <= 0.03, s["flip_fraction"]
    assert s["visit_count_distribution"] == {"1": 24, "2": 31, "3": 5}, s["visit_count_distribution"]
    for key in ("icc_weak", "icc_strong", "visit_probs", "density_target", "threshold",
                "curvature", "seed", "subjects", "nodes", "constants"):
        assert key in s, key

    # A rough ICC from the written files alone: the 2-year change stands in for a same-age
    # re-scan (subject slopes add a little within-subject variance, so it reads a little low,
    # about 0.72-0.74 here): 1 - sum(within) / sum(total) over the top 20 % (by mean level) of
    # the edges present in every baseline scan, near the strong class's 0.75.
    def strong_icc(x0, within, total):
        level = x0.mean(axis=0)
        present = (x0 > 0).all(axis=0)
        top = present & (level >= np.quantile(level[present], 0.8))
        return float(1.0 - within[top].sum() / total[top].sum())
    icc_files = file_icc(a, strong_icc)
    assert abs(icc_files - 0.75) < 0.1, icc_files

    # Determinism.
    b = os.path.join(tmp, "b")
    generate(b, "--subjects", 60, "--nodes", 100, "--seed", 5)
    fa, fb = all_files(a), all_files(b)
    assert fa.keys() == fb.keys() and all(fa[k] == fb[k] for k in fa), "same seed, other files"
    c = os.path.join(tmp, "c")
    generate(c, "--subjects", 60, "--nodes", 100, "--seed", 6)
    fc = all_files(c)
    assert any(fa[k] != fc.get(k) for k in fa if k.startswith("sc")), "seed has no effect"

    # Refuses to overwrite a non-empty directory.
    r = subprocess.run([sys.executable, SCRIPT, "--out", a], capture_output=True, text=True)
    assert r.returncode != 0 and "refusing" in r.stderr

    # Other targets are met too.
    d = os.path.join(tmp, "d")
    s = generate(d, "--subjects", 60, "--nodes", 100, "--seed", 7, "--icc-weak", 0.4,
                 "--icc-strong", 0.9, "--visit-probs", "0.2,0.5,0.3")
    for kind in ("latent", "observed"):
        got = s["icc_realised"][kind]
        assert abs(got["weak"]["mean"] - 0.4) < 0.1, (kind, got)
        assert abs(got["strong"]["mean"] - 0.9) < 0.1, (kind, got)
    assert s["visit_count_distribution"] == {"1": 12, "2": 30, "3": 18}
    check_format(d, 100, 60)


def test_no_noise(tmp):
    # Linear: --curvature 0.
    a = os.path.join(tmp, "nn_linear")
    s = generate(a, "--subjects", 30, "--nodes", 40, "--seed", 3, "--no-noise", "--curvature", 0)
    check_format(a, 40, 30)
    assert s["density_mean"] == 1.0 and s["flip_fraction"] == 0.0
    subs = subjects(a)
    assert len(subs) == 30 and all(len(v) >= 2 for v in subs.values())
    assert s["visit_count_distribution"]["1"] == 0
    assert sum(len(v) == 3 for v in subs.values()) >= 2
    slopes = []
    for visits in subs.values():
        for (a0, y0), (a1, y1) in zip(visits, visits[1:]):
            assert np.all(y0 > 0) and np.all(y1 > 0)  # density 1
            slopes.append((y1 - y0) / (a1 - a0))
    slopes = np.stack(slopes)
    # One slope per edge, the same for every subject and visit pair, to the files' precision
    # (%.6g weights: ~5e-7 relative in the weight, so ~1e-6 in the slope).
    assert np.max(np.abs(slopes - slopes[0])) < 1e-5, np.max(np.abs(slopes - slopes[0]))
    assert np.std(slopes[0]) > 0.01  # and the slopes do differ between edges
    # truth.npy holds the generator's own parameters: the common slope is its slope row, and
    # without noise its noise row is 0.
    truth = np.load(os.path.join(a, "truth.npy"))
    assert truth.shape == (4, 40 * 39 // 2), truth.shape
    assert np.max(np.abs(truth[1] - slopes[0])) < 1e-5, np.max(np.abs(truth[1] - slopes[0]))
    assert not truth[3].any() and not truth[2].any()
    # Each subject its own trajectory: the intercepts at age 10 differ between subjects by the
    # subject offset and edge deviations (sd sqrt(0.10^2 + 0.15^2 + 0.20^2) = 0.27).
    intercepts = np.stack([v[0][1] - slopes[0] * (v[0][0] - 10.0) for v in subs.values()])
    sd = float(np.mean(np.std(intercepts, axis=0)))
    assert 0.2 < sd < 0.35, sd

    # Quadratic: the default curvature; same second divided difference for every 3-visit subject.
    b = os.path.join(tmp, "nn_quad")
    s = generate(b, "--subjects", 30, "--nodes", 40, "--seed", 3, "--no-noise",
                 "--visit-probs", "0.2,0.4,0.4")
    check_format(b, 40, 30)
    subs = subjects(b)
    assert all(len(v) >= 2 for v in subs.values()) and s["density_mean"] == 1.0
    second = []
    for visits in subs.values():
        if len(visits) == 3:
            (t0, y0), (t1, y1), (t2, y2) = visits
            second.append(((y2 - y1) / (t2 - t1) - (y1 - y0) / (t1 - t0)) / (t2 - t0))
    assert len(second) >= 2
    second = np.stack(second)
    assert np.max(np.abs(second - second[0])) < 1e-5, np.max(np.abs(second - second[0]))
    assert np.max(np.abs(second[0])) > 1e-4  # curvature is really there
    # The second divided difference of a + b t + c t^2 is c: truth.npy's curvature row.
    curv = np.load(os.path.join(b, "truth.npy"))[2]
    assert np.max(np.abs(second[0] - curv)) < 1e-5, np.max(np.abs(second[0] - curv))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_format_determinism_and_icc(tmp)
        print("format, determinism, ICC: ok")
        test_no_noise(tmp)
        print("--no-noise: ok")
    print("all tests passed")


if __name__ == "__main__":
    main()

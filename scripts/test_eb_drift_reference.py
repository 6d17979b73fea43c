#!/usr/bin/env python3
"""Self-check of scripts/eb_drift_reference.py (docs/eb-drift.md); plain asserts, numpy only.

Builds tiny cohorts in the on-disk format (sc/<subject>_<session>.csv, subject_info_sc.csv) in a
temporary directory and checks:
1. the no-noise property of the specification: subjects whose log1p weights are exactly linear in
   age with one slope per edge, every edge present at every visit -> the forecast is
   expm1(y0 + d_e (t - a0)) to 1e-9 relative (weights 2^k - 1 are exact in float32, so the
   log1p weights are linear in age to rounding);
2. the existence shrinkage by hand: a 3-node cohort (defaults, m = 1e6, new-edge level, an edge
   never seen in training) and a 7-node cohort whose first two existence bins give m = 5 and
   m = 1/7, plus the m = 0 / n = 0 fallback;
3. on a noisy cohort (asymmetric files, missing ages, a single-visit subject, a 6-year visit):
   the output is symmetric with a zero diagonal, finite and non-negative, and the fit does not
   depend on subjects outside the training fold.

Usage: python3 scripts/test_eb_drift_reference.py
"""

import importlib.util
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "eb_drift_reference.py")
SESSIONS = ["ses-baselineYear1Arm1", "ses-2YearFollowUpYArm1", "ses-4YearFollowUpYArm1",
            "ses-6YearFollowUpYArm1"]

spec = importlib.util.spec_from_file_location("eb_drift_reference", SCRIPT)
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)


def write_cohort(root, subjects, table_rows=None):
    """subjects: {sid: [(age or None, N x N array), ...]} in visit order.

    Writes sc/<sid>_<ses>.csv and subject_info_sc.csv (a scan with age None gets an empty age
    cell). table_rows: optional {scan_id: None} to drop a scan's row from the table."""
    sc = os.path.join(root, "sc")
    os.makedirs(sc, exist_ok=True)
    lines = ["subid,sesid,scanid,age,sex,siteid,icv"]
    for sid, scans in subjects.items():
        for v, (age, m) in enumerate(scans):
            ses = SESSIONS[v]
            m = np.asarray(m, dtype=np.float32)
            with open(os.path.join(sc, f"{sid}_{ses}.csv"), "w") as f:
                for row in m:
                    f.write(",".join("0" if x == 0 else repr(float(x)) for x in row) + "\n")
            scan = f"{sid}_{ses}"
            if table_rows is not None and scan in table_rows:
                continue
            cell = "" if age is None else repr(float(age))
            lines.append(f"{sid},{ses},{scan},{cell},M,site1,1500000")
    with open(os.path.join(root, "subject_info_sc.csv"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return sc, os.path.join(root, "subject_info_sc.csv")


def run_cli(sc, info, train, requests, out, requests_file=None):
    cmd = [sys.executable, SCRIPT, "--sc-dir", sc, "--subject-info-csv", info,
           "--train", ",".join(train), "--out", out]
    for sid, t in requests:
        cmd += ["--request", f"{sid}:{t!r}"]
    if requests_file:
        cmd += ["--requests-file", requests_file]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    with open(out) as f:
        return json.load(f)


def sym(n, upper):
    m = np.zeros((n, n))
    iu = np.triu_indices(n, 1)
    m[iu] = upper
    return m + m.T


def check_no_noise(tmp):
    n = 6
    iu = np.triu_indices(n, 1)
    m_edges = len(iu[0])
    rng = np.random.default_rng(1)
    c = rng.integers(-1, 3, m_edges)  # drift d_e = c_e ln2 / 2 per year
    c[:4] = [-1, 0, 1, 2]
    d_true = c * math.log(2.0) / 2.0
    subjects, info = {}, {}
    for s in range(6):
        sid = f"sub-NDARINVS{s + 1:07d}"
        a0 = 9.25 + 0.25 * s
        k = rng.integers(3, 7, m_edges)  # per-subject, per-edge base
        visits = 2 + s % 2
        scans = []
        for v in range(visits):
            w = 2.0 ** (k + c * v) - 1.0  # log1p(w) = (k + c v) ln2, age = a0 + 2v
            scans.append((a0 + 2.0 * v, sym(n, w)))
        subjects[sid] = scans
        info[sid] = (a0, scans[0][1][iu])
    sc, csv_path = write_cohort(tmp, subjects)
    train = list(subjects)[:5]
    held = list(subjects)[5]
    requests = [(held, info[held][0] + 3.0), (train[2], info[train[2]][0] + 5.5),
                (train[0], info[train[0]][0] + 2.0)]
    out = run_cli(sc, csv_path, train, requests, os.path.join(tmp, "out.json"))
    p = out["params"]
    assert p["n_train_scans"] == 12, p
    assert p["n_pairs"] == 7, p
    assert abs(p["k_g"] - 1.0) < 1e-9, p
    assert all(abs(k - 1.0) < 1e-9 for k in p["k_bins"]), p
    assert len(p["k_bins"]) == 10
    model = ref.fit(ref.Cohort(sc, csv_path), train)
    assert np.allclose(model["d"], d_true, rtol=0, atol=1e-12)
    assert np.all(np.abs(model["p11"] - 1.0) < 1e-15)
    worst = 0.0
    for pred, (sid, t) in zip(out["predictions"], requests):
        a0, w0 = info[sid]
        assert pred["subject"] == sid and pred["start_age"] == a0 and pred["target_age"] == t
        want = np.expm1(np.log1p(w0) + d_true * (t - a0))
        got = np.asarray(pred["matrix"])[iu]
        rel = np.max(np.abs(got - want) / np.abs(want))
        worst = max(worst, rel)
        assert rel < 1e-9, (sid, rel)
    print(f"1. no-noise property: forecast = expm1(y0 + d(t - a0)), worst relative error "
          f"{worst:.2e}; k_g = {p['k_g']!r}, k_b in [{min(p['k_bins'])!r}, {max(p['k_bins'])!r}]")


def check_three_nodes(tmp):
    # Edges e0 = (0,1), e1 = (0,2), e2 = (1,2).
    def mat(e0, e1, e2):
        return [[0, e0, e1], [e0, 0, e2], [e1, e2, 0]]

    subjects = {
        "sub-A": [(10.0, mat(3.0, 1.5, 0)), (12.0, mat(4.0, 0, 0))],
        "sub-B": [(9.0, mat(2.0, 0, 0)), (11.5, mat(2.5, 7.0, 0))],
        "sub-C": [(10.5, mat(9.0, 2.0, 0)), (12.5, mat(11.0, 3.0, 0))],
        "sub-H": [(10.0, mat(3.5, 0, 0.5))],
    }
    sc, csv_path = write_cohort(tmp, subjects)
    train = ["sub-C", "sub-A", "sub-B"]
    t = 13.0
    out = run_cli(sc, csv_path, train, [("sub-H", t)], os.path.join(tmp, "out.json"))
    model = ref.fit(ref.Cohort(sc, csv_path), train)
    # Counts over the 3 pairs: e0 present everywhere; e1 (1,0), (0,1), (1,1); e2 never.
    assert list(model["n_plus"]) == [6, 4, 0]
    assert list(model["ebin"]) == [2, 1, 0]  # by (rho, e): e2 (0), e1 (4/6), e0 (1)
    assert (list(model["n1"]), list(model["s11"])) == ([3, 2, 0], [3, 1, 0])
    assert (list(model["n0"]), list(model["s01"])) == ([0, 1, 3], [0, 1, 0])
    # e0: 11 P = 1 -> m = 1e6, p = 1; 01 no pair from 0 -> default P = 0.
    # e1: 11 P = 1/2, one edge: V = 0 <= W -> m = 1e6, p = (1 + 5e5)/(2 + 1e6) = 1/2;
    #     01 P = 1 -> p = 1.
    # e2: 11 no pair from 1 -> default P = 1; 01 P = 0 -> p = 0.
    assert np.allclose(model["p11"], [1.0, 0.5, 1.0], rtol=0, atol=1e-15), model["p11"]
    assert np.allclose(model["p01"], [0.0, 1.0, 0.0], rtol=0, atol=1e-15), model["p01"]
    assert list(model["m11"]) == [1e6, 1e6, 1e6] and list(model["m01"]) == [1e6, 1e6, 1e6]
    # New-edge level: the one 0 -> 1 transition is sub-B's e1 (7.0) in existence bin 1.
    assert np.allclose(model["nu"], [0.0, math.log1p(7.0), 0.0], rtol=0, atol=1e-15)

    # e0 by hand: drift, level, offsets, k_g; the start scan's only present seen edge is e0,
    # so g0 = its residual and the k_b term vanishes.
    ages = [(10.0, 12.0), (9.0, 11.5), (10.5, 12.5)]  # sub-A, sub-B, sub-C
    w0 = [(3.0, 4.0), (2.0, 2.5), (9.0, 11.0)]
    w1 = [(1.5, 0), (0, 7.0), (2.0, 3.0)]  # e1
    lg = math.log1p
    d0 = sum((lg(b) - lg(a)) * (q - p) for (a, b), (p, q) in zip(w0, ages)) / sum(
        (q - p) ** 2 for p, q in ages)
    d1 = (lg(3.0) - lg(2.0)) * 2.0 / 4.0  # only sub-C has e1 at both visits
    a_bar = sum(a for pq in ages for a in pq) / 6
    alpha0 = sum(lg(w) - d0 * (a - a_bar) for ws, pq in zip(w0, ages)
                 for w, a in zip(ws, pq)) / 6
    e1_present = [(w, a) for ws, pq in zip(w1, ages) for w, a in zip(ws, pq) if w > 0]
    alpha1 = sum(lg(w) - d1 * (a - a_bar) for w, a in e1_present) / 4
    g = []
    for ws0, ws1, pq in zip(w0, w1, ages):
        gv = []
        for v in range(2):
            r = [lg(ws0[v]) - alpha0 - d0 * (pq[v] - a_bar)]
            if ws1[v] > 0:
                r.append(lg(ws1[v]) - alpha1 - d1 * (pq[v] - a_bar))
            gv.append(sum(r) / len(r))
        g.append(gv)
    k_g = min(max(sum(a * b for a, b in g) / sum(a * a for a, _ in g), 0.0), 1.0)
    assert 0.0 < k_g < 1.0, k_g  # the unclamped branch
    assert abs(out["params"]["k_g"] - k_g) < 1e-12, (out["params"]["k_g"], k_g)
    assert abs(out["params"]["a_bar"] - a_bar) < 1e-12
    # Step 8, the drift's two factors (every subject "M": sex +1): least squares of
    # r = dy - d dt on u = x (mid - a_bar) and v = x (x = d dt) over the entries present at
    # both visits: e0 of every pair, e1 of sub-C's (r = 0 there: d1 is that pair's own slope).
    entries = [(d0 * (q - p), (p + q) / 2, lg(b) - lg(a)) for (a, b), (p, q) in zip(w0, ages)]
    entries.append((d1 * 2.0, 11.5, lg(3.0) - lg(2.0)))
    a11 = a12 = a22 = b1 = b2 = 0.0
    for x, mid, dy in entries:
        u, v, r = x * (mid - a_bar), x, dy - x
        a11, a12, a22, b1, b2 = a11 + u * u, a12 + u * v, a22 + v * v, b1 + u * r, b2 + v * r
    det = a11 * a22 - a12 * a12
    beta = ((a22 * b1 - a12 * b2) / det, (a11 * b2 - a12 * b1) / det)
    assert np.allclose(out["params"]["drift_factors"], beta, rtol=0, atol=1e-12), beta
    assert out["params"]["exist"] is None  # 5 rows present at the start: fewer than 6
    mult = min(max(1 + beta[0] * ((10.0 + t) / 2 - a_bar) + beta[1], 0.0), 2.0)
    mu0 = alpha0 + d0 * (10.0 - a_bar)
    e0_hat = max(mu0 + mult * d0 * (t - 10.0) + k_g * (lg(3.5) - mu0), 0.0)
    pred = np.asarray(out["predictions"][0]["matrix"])
    want = np.array(mat(math.expm1(e0_hat), 7.0, 0.5))  # e1: p01 expm1(nu); e2: E = y0, p = 1
    assert np.allclose(pred, want, rtol=1e-12, atol=0), (pred, want)
    print(f"2a. 3-node existence: p11 = {model['p11'].tolist()}, p01 = {model['p01'].tolist()}, "
          f"nu = {model['nu'].tolist()}, k_g = {k_g!r}, drift factors = {beta!r}; forecast matches by "
          "hand")


def check_shrinkage(tmp):
    n = 7
    iu = np.triu_indices(n, 1)
    m_edges = len(iu[0])  # 21 -> 10 existence bins, bin 0 = ranks 0-2, bin 1 = ranks 3-4
    # Per edge, (visit 0, visit 1) presence of the 4 subjects; all edges n+ = 4 (rho ties).
    pa = [(1, 1), (1, 1), (0, 0), (0, 0)]
    pb = [(1, 0), (1, 0), (0, 1), (0, 1)]
    pc = [(1, 1), (1, 0), (0, 1), (0, 0)]
    pe = [(1, 0), (1, 0), (1, 0), (1, 0)]
    patterns = [pa, pb, pc, pa, pe] + [pa] * (m_edges - 5)
    weights = np.arange(1, m_edges + 1, dtype=np.float64) * 0.5
    subjects = {}
    for s in range(4):
        scans = []
        for v in range(2):
            z = np.array([pat[s][v] for pat in patterns], dtype=np.float64)
            scans.append((9.0 + s + 2.0 * v, sym(n, z * (weights + s + v))))
        subjects[f"sub-{s}"] = scans
    sc, csv_path = write_cohort(tmp, subjects)
    model = ref.fit(ref.Cohort(sc, csv_path), list(subjects))
    assert np.all(model["n_plus"] == 4)
    assert list(model["ebin"][:5]) == [0, 0, 0, 1, 1]
    # Bin 0, 11: s/n = 1, 0, 1/2 (n = 2): P = 1/2, V = 1/6, W = 1/8, m = (1/4)/(1/24) - 1 = 5.
    assert abs(model["m11"][0] - 5.0) < 1e-12 and abs(model["m01"][0] - 5.0) < 1e-12
    assert np.allclose(model["p11"][:3], [4.5 / 7, 2.5 / 7, 0.5], rtol=0, atol=1e-14)
    assert np.allclose(model["p01"][:3], [2.5 / 7, 4.5 / 7, 0.5], rtol=0, atol=1e-14)
    # Bin 1, 11: (s, n) = (2, 2), (0, 4): P = 1/3, V = 5/18, W = 1/12, m = 8/7 - 1 = 1/7;
    # p = (2 + 1/21)/(2 + 1/7) = 43/45 and (1/21)/(4 + 1/7) = 1/87.
    assert abs(model["m11"][1] - 1.0 / 7.0) < 1e-12
    assert np.allclose(model["p11"][3:5], [43 / 45, 1 / 87], rtol=0, atol=1e-14)
    # Bin 1, 01: only edge 3 has n0 > 0, s01 = 0 -> P = 0, m = 1e6; edge 4 (n0 = 0) gets 0.
    assert model["m01"][1] == 1e6 and np.all(model["p01"][3:5] == 0.0)
    assert np.all(model["p11"][5:] == 1.0) and np.all(model["p01"][5:] == 0.0)
    # New-edge level of bin 0: y1 of edge 1 (subjects 2, 3) and edge 2 (subject 2).
    nu0 = (math.log1p(weights[1] + 3) + math.log1p(weights[1] + 4) + math.log1p(weights[2] + 3)) / 3
    assert abs(model["nu"][0] - nu0) < 1e-14 and np.all(model["nu"][1:] == 0.0)
    # A forecast: an absent edge in bin 0 gets p01 * max(nu0, 0).
    y0 = np.zeros(m_edges)
    z0 = np.zeros(m_edges, dtype=bool)
    yhat = ref.forecast_log(model, y0, z0, 10.0, 12.0, 0)
    assert np.allclose(yhat[:3], np.array([2.5 / 7, 4.5 / 7, 0.5]) * nu0, rtol=1e-14, atol=0)
    # m clamped to 0 with an n = 0 edge in the bin: 0/0 -> the pooled P (documented choice).
    p, pool, m = ref.shrink(np.array([0, 1, 0]), np.array([100, 1, 0]), np.zeros(3, int), 1, 1.0)
    assert m[0] == 0.0 and p[0] == 0.0 and p[1] == 1.0 and p[2] == pool[0] == 1 / 101
    print("2b. 7-node shrinkage: bin 0 m = 5 (p11 = 9/14, 5/14, 1/2), bin 1 m = 1/7 "
          "(p11 = 43/45, 1/87); m = 0 fallback ok")


def check_output_shape(tmp):
    n = 12
    rng = np.random.default_rng(7)
    subjects = {}
    for s in range(9):
        visits = [1, 2, 3, 4][s % 4]
        a0 = 9.0 + rng.uniform(0, 2)
        scans = []
        for v in range(visits):
            m = rng.lognormal(0.5, 1.0, (n, n)) * (rng.random((n, n)) < 0.6)
            m[rng.random((n, n)) < 0.05] *= -0.1  # a few negatives (clipped to 0 by y, z)
            scans.append((a0 + 2 * v + rng.uniform(-0.2, 0.2), m))  # asymmetric on purpose
        subjects[f"sub-NDARINVS{s + 1:07d}"] = scans
    ids = list(subjects)
    subjects[ids[2]][1] = (None, subjects[ids[2]][1][1])  # empty age -> visit index 1
    missing = {f"{ids[3]}_{SESSIONS[0]}": None}  # no table row -> visit index 0
    sc, csv_path = write_cohort(tmp, subjects, missing)
    # The loader's symmetrisation: (A + A.T)/2 in float32, zero diagonal.
    a = np.loadtxt(os.path.join(sc, f"{ids[0]}_{SESSIONS[0]}.csv"), delimiter=",")
    a32 = a.astype(np.float32)
    want = ((a32 + a32.T) / np.float32(2)).astype(np.float64)
    np.fill_diagonal(want, 0.0)
    assert np.array_equal(ref.read_matrix(os.path.join(sc, f"{ids[0]}_{SESSIONS[0]}.csv")), want)
    cohort = ref.Cohort(sc, csv_path)
    assert cohort.scans(ids[2])[1][2] == 1.0 and cohort.scans(ids[3])[0][2] == 0.0

    train = ids[:7]
    req_file = os.path.join(tmp, "requests.txt")
    with open(req_file, "w") as f:
        f.write(f"{ids[7]}:12.5\n{ids[8]}:11\n\n")
    requests = [(ids[0], 13.0), (ids[3], 4.0)]
    out = run_cli(sc, csv_path, train, requests, os.path.join(tmp, "out.json"), req_file)
    preds = out["predictions"]
    assert [p["subject"] for p in preds] == [ids[0], ids[3], ids[7], ids[8]]
    assert preds[1]["start_age"] == 0.0
    n_scans = sum(len(subjects[i]) for i in train)
    assert out["params"]["n_train_scans"] == n_scans
    assert out["params"]["n_pairs"] == n_scans - len(train)
    for p in preds:
        m = np.asarray(p["matrix"])
        assert m.shape == (n, n)
        assert np.all(np.isfinite(m)) and np.all(m >= 0.0)
        assert np.array_equal(m, m.T) and np.all(np.diag(m) == 0.0)
    # Only the fold's training subjects enter the fit: dropping the others changes nothing.
    for sid in ids[7:]:
        for v in range(len(subjects[sid])):
            os.remove(os.path.join(sc, f"{sid}_{SESSIONS[v]}.csv"))
    again = run_cli(sc, csv_path, train[::-1], requests, os.path.join(tmp, "out2.json"))
    assert again["params"] == out["params"]
    assert again["predictions"] == preds[:2]
    print(f"3. noisy cohort ({n} nodes, {n_scans} training scans): 4 forecasts symmetric, zero "
          f"diagonal, finite, >= 0; k_g = {out['params']['k_g']:.6f}; fit independent of "
          f"non-training subjects")


def main():
    for check in (check_no_noise, check_three_nodes, check_shrinkage, check_output_shape):
        with tempfile.TemporaryDirectory() as tmp:
            check(tmp)
    print("all eb-drift reference checks passed")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Independent numpy reference of `train-gnn --model eb-drift` (docs/eb-drift.md).

Fits the empirical-Bayes drift forecaster on a fold's training subjects and forecasts requested
subjects from their first scan (visit 0) to a target age. `tests/gnn/gnn_eb_drift.rs` compares the
Rust model (`src/models/eb_drift/`) with this script to 1e-6, so every step follows the
specification literally, in float64.

Usage:
    python3 scripts/eb_drift_reference.py --sc-dir DIR --subject-info-csv CSV \
        --train ID,ID,... --request ID:TARGET_AGE [--request ...] [--requests-file FILE] \
        --out OUT.json

Output JSON (written to a temporary file, then renamed):
    {"params": {"a_bar", "k_g", "k_bins": [k_b per weight bin, bin order], "n_train_scans",
                "n_pairs"},
     "predictions": [{"subject", "start_age", "target_age",
                      "matrix": N x N forecast weight expm1(y_hat), symmetric, zero diagonal}]}

Cohort reading, as the Rust loader (src/data/connectome/{sc,naming,subjects,preprocess}.rs,
dataset/load.rs):
* `sc_dir/*.csv`, one dense N x N matrix per scan (comma separated, no header). The subject and
  session come from the file name (`<subject>_<session>.csv`, the loader's parsing rules).
  Cells are parsed as float64 and rounded to float32; `A_raw = (A + A.T) / 2` in float32 with a
  zero diagonal, then converted to float64.
* A subject's scans, ordered by (session rank, session string) with ranks baseline 0, 2-year 1,
  4-year 2, 6-year 3, anything else 999 (file-name order among ties), are visits 0, 1, 2, ...
* Ages from `subject_info_sc.csv`, looked up by its `scanid` column (`<subject>_<session>`, the
  loader's join key; when the table has no `scanid` column, by `subid` + `_` + `sesid`). A
  duplicated scanid: the last row wins. A scan with no row, an empty / NA / unparsable / non-finite
  age gets its visit index (0, 1, 2, ...) as its age; that substituted age is used everywhere
  (the mean age, mu_e(a), and the pairs' delta t, as the loader's `Scan::age` and `delta_t`).

Choices where the specification leaves a case open (the Rust side must match):
* Training subjects are processed in byte order of their ids (the loader's cohort order),
  duplicates in --train ignored; the order only affects float summation.
* Existence shrinkage: when m = 0 (clamped) and an edge of the bin has n = 0, (s + mP)/(n + m)
  is 0/0; such an edge gets P (the bin's pooled rate, the limit m -> 0+ of the formula).
* k_bins lists k_b for the B weight bins in bin order (empty when no edge has n+ > 0).

Needs numpy only.
"""

import argparse
import csv
import json
import math
import os
import sys
import tempfile

import numpy as np

CANONICAL_SESSIONS = [
    "ses-baselineYear1Arm1",
    "ses-2YearFollowUpYArm1",
    "ses-4YearFollowUpYArm1",
    "ses-6YearFollowUpYArm1",
]
UNKNOWN_SESSION_RANK = 999
SESSION_TOKENS = [
    ("baselineYear1Arm1", CANONICAL_SESSIONS[0]),
    ("BaselineYear1Arm1", CANONICAL_SESSIONS[0]),
    ("baseline", CANONICAL_SESSIONS[0]),
    ("2YearFollowUpYArm1", CANONICAL_SESSIONS[1]),
    ("2_year_follow_up_y_arm_1", CANONICAL_SESSIONS[1]),
    ("2year", CANONICAL_SESSIONS[1]),
    ("4YearFollowUpYArm1", CANONICAL_SESSIONS[2]),
    ("4_year_follow_up_y_arm_1", CANONICAL_SESSIONS[2]),
    ("4year", CANONICAL_SESSIONS[2]),
    ("6YearFollowUpYArm1", CANONICAL_SESSIONS[3]),
    ("6_year_follow_up_y_arm_1", CANONICAL_SESSIONS[3]),
    ("6year", CANONICAL_SESSIONS[3]),
]
NA_STRINGS = {
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
}

MAX_BINS = 10
EPS_DEN = 1e-12
M_MAX = 1e6
DT_MIN = 1e-3
EXIST_RIDGE = 1.0
EXIST_STEPS = 100
EXIST_TOL = 1e-9


class CohortError(Exception):
    pass


# ---------------------------------------------------------------------------------------------
# Reading the cohort


def session_rank(session):
    try:
        return CANONICAL_SESSIONS.index(session)
    except ValueError:
        return UNKNOWN_SESSION_RANK


def infer_session(text):
    for token, canonical in SESSION_TOKENS:
        if token in text:
            return canonical
    return None


def parse_subject_session(stem):
    """Subject and session of an SC file's base name without `.csv` (the loader's rules)."""
    pos = stem.find("_ses-")
    if pos >= 0:
        rest = stem[pos + len("_ses-"):]
        nxt = rest.find("_ses-")
        piece = rest if nxt < 0 else rest[:nxt]
        return stem[:pos], "ses-" + piece
    candidate = stem.split("_")[0]
    if candidate.startswith("sub-"):
        subject = candidate
    else:
        found = None
        start = stem.find("sub-")
        while start >= 0:
            k = start + 4
            while k < len(stem) and stem[k].isascii() and stem[k].isalnum():
                k += 1
            if k > start + 4:
                found = stem[start:k]
                break
            start = stem.find("sub-", start + 4)
        if found is not None:
            subject = found
        elif (candidate.startswith("NDARINV") and len(candidate) > 7
              and all(c.isascii() and c.isalnum() for c in candidate[7:])):
            subject = "sub-" + candidate
        else:
            subject = candidate
    return subject, infer_session(stem) or ""


def scan_id(subject, session):
    return f"{subject}_{session}" if session else subject


def list_sequences(sc_dir):
    """{subject: [(scan_id, path), ...] in visit order} of the `.csv` files directly in sc_dir."""
    files = []
    for name in os.listdir(sc_dir):
        path = os.path.join(sc_dir, name)
        if not name.endswith(".csv") or not os.path.isfile(path):
            continue
        subject, session = parse_subject_session(name[: -len(".csv")])
        if not subject:
            raise CohortError(f"{path}: no subject id in the file name")
        files.append((name, subject, session, path))
    if not files:
        raise CohortError(f"{sc_dir}: no SC matrix files (*.csv)")
    files.sort(key=lambda f: f[0].encode())
    seqs = {}
    for name, subject, session, path in files:
        seqs.setdefault(subject, []).append((session, scan_id(subject, session), path))
    out = {}
    for subject, scans in seqs.items():
        scans.sort(key=lambda s: (session_rank(s[0]), s[0].encode()))  # stable
        out[subject] = [(sid, path) for _, sid, path in scans]
    return out


def parse_float(cell):
    cell = cell.strip()
    if cell in NA_STRINGS:
        return math.nan
    if "_" in cell:  # Python accepts digit separators, Rust's f64 parser does not
        return math.nan
    try:
        return float(cell)
    except ValueError:
        return math.nan


def sex_id(cell):
    """The loader's sex id: m/male/1 -> 1, f/female/2 -> 2 (trimmed, any case), else 0."""
    v = cell.strip().lower()
    return 1 if v in ("m", "male", "1") else 2 if v in ("f", "female", "2") else 0


def read_ages(path):
    """({scan_id: age (float, possibly NaN)}, {scan_id: sex id}); the last row of a duplicated
    scanid wins. Sex from a `sex` column (case-sensitive, as the loader), else 0."""
    ages, sexes = {}, {}
    with open(path, newline="", encoding="utf-8-sig") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if header is None:
            raise CohortError(f"{path}: empty subject table")
        header = [h.lstrip("\ufeff") for h in header]
        if "age" not in header:
            raise CohortError(f"{path}: no `age` column")
        age_col = header.index("age")
        sex_col = header.index("sex") if "sex" in header else None
        scan_col = header.index("scanid") if "scanid" in header else None
        if scan_col is None and not ("subid" in header and "sesid" in header):
            raise CohortError(f"{path}: neither `scanid` nor `subid` + `sesid` columns")
        sub_col = header.index("subid") if "subid" in header else None
        ses_col = header.index("sesid") if "sesid" in header else None

        def cell(row, col):
            return row[col] if col is not None and col < len(row) else ""

        for row in reader:
            if scan_col is not None:
                key = cell(row, scan_col).strip()
            else:
                key = scan_id(cell(row, sub_col).strip(), cell(row, ses_col).strip())
            if key.strip() in NA_STRINGS:
                continue
            ages[key] = parse_float(cell(row, age_col))
            sexes[key] = sex_id(cell(row, sex_col))
    return ages, sexes


def read_matrix(path):
    """A_raw (float64) of one SC file: parsed as f64, rounded to f32, (A + A.T)/2 in f32, diag 0."""
    try:
        a = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2, encoding="utf-8-sig")
    except ValueError as err:
        raise CohortError(f"{path}: {err}") from err
    if a.size == 0:
        raise CohortError(f"{path}: empty matrix")
    if a.shape[0] != a.shape[1]:
        raise CohortError(f"{path}: not square ({a.shape[0]} x {a.shape[1]})")
    a32 = a.astype(np.float32)
    if not np.all(np.isfinite(a32)):
        raise CohortError(f"{path}: non-finite value")
    raw = (a32 + a32.T) / np.float32(2.0)
    np.fill_diagonal(raw, np.float32(0.0))
    return raw.astype(np.float64)


class Cohort:
    """Lazily loaded scans: `subjects[id]` = [(scan_id, path, age)] in visit order."""

    def __init__(self, sc_dir, subject_info_csv):
        seqs = list_sequences(sc_dir)
        ages, sexes = read_ages(subject_info_csv)
        self.subjects = {}
        self.sex = {}
        for subject, scans in seqs.items():
            rows = []
            for visit, (sid, path) in enumerate(scans):
                age = ages.get(sid, math.nan)
                if not math.isfinite(age):
                    age = float(visit)
                rows.append((sid, path, float(age)))
            self.subjects[subject] = rows
            # The subject's sex: the first non-zero id along its scans (the loader's rule).
            self.sex[subject] = next((sexes[sid] for sid, _ in scans if sexes.get(sid)), 0)
        self.n_nodes = None

    def scans(self, subject):
        if subject not in self.subjects:
            raise CohortError(f"subject {subject} has no SC file")
        return self.subjects[subject]

    def upper(self, path):
        """(y, z) of the upper triangle (row-major) of one scan."""
        a = read_matrix(path)
        if self.n_nodes is None:
            self.n_nodes = a.shape[0]
            self.iu = np.triu_indices(self.n_nodes, 1)
        elif a.shape[0] != self.n_nodes:
            raise CohortError(f"{path}: {a.shape[0]} nodes, expected {self.n_nodes}")
        v = a[self.iu]
        return np.log1p(np.maximum(v, 0.0)), v > 0.0


# ---------------------------------------------------------------------------------------------
# The fit (docs/eb-drift.md, "Fit")


def delta_t(age0, age1, visit_gap=1):
    d = age1 - age0
    if not (math.isfinite(d) and d > 0.0):
        d = float(visit_gap)
    return max(d, DT_MIN)


def rank_bins(key, index, n_bins):
    """Bin of each element: stable sort by (key, index), rank q -> floor(q * n_bins / K)."""
    k = len(key)
    order = np.lexsort((index, key))
    bins = np.empty(k, dtype=np.int64)
    bins[order] = (np.arange(k, dtype=np.int64) * n_bins) // k if k else 0
    return bins


def shrink(s, n, bins, n_bins, default_p):
    """Beta-binomial empirical-Bayes rate per edge (step 6) for one transition.

    Returns (p per edge, per-bin P, per-bin m)."""
    s = s.astype(np.float64)
    n = n.astype(np.float64)
    p = np.empty(len(s), dtype=np.float64)
    pool = np.empty(n_bins)
    prior = np.empty(n_bins)
    for b in range(n_bins):
        members = np.nonzero(bins == b)[0]
        has = members[n[members] > 0]
        if len(has) == 0:
            pool[b], prior[b] = default_p, M_MAX
            p[members] = default_p
            continue
        sb, nb = s[has], n[has]
        big_p = sb.sum() / nb.sum()
        var = np.mean((sb / nb - big_p) ** 2)
        w = np.mean(big_p * (1.0 - big_p) / nb)
        pq = big_p * (1.0 - big_p)
        if pq <= 0.0 or var - w <= 0.0:
            m = M_MAX
        else:
            m = min(max(pq / (var - w) - 1.0, 0.0), M_MAX)
        se, ne = s[members], n[members]
        den = ne + m
        safe = den > 0.0
        # den == 0 (m clamped to 0 and n_e = 0): 0/0; the edge gets the pooled rate P.
        p[members] = np.where(safe, (se + m * big_p) / np.where(safe, den, 1.0), big_p)
        pool[b], prior[b] = big_p, m
    return p, pool, prior


def fit(cohort, train_ids):
    """The fitted model as a dict of numpy arrays and floats."""
    train_ids = sorted(set(train_ids), key=lambda s: s.encode())
    if not train_ids:
        raise CohortError("no training subjects")
    ys, zs, ages, pairs = [], [], [], []  # pairs: (scan index v-1, scan index v, dt, sex)
    for subject in train_ids:
        rows = cohort.scans(subject)
        first = len(ys)
        for v, (_, path, age) in enumerate(rows):
            y, z = cohort.upper(path)
            ys.append(y)
            zs.append(z)
            ages.append(age)
            if v > 0:
                pairs.append((first + v - 1, first + v, delta_t(ages[-2], age),
                              cohort.sex[subject]))
    n_scans = len(ys)
    m_edges = len(ys[0])
    edge = np.arange(m_edges, dtype=np.int64)

    # 1. Drift over the pairs where the edge is present at both visits.
    num = np.zeros(m_edges)
    den = np.zeros(m_edges)
    for i0, i1, dt, _ in pairs:
        both = zs[i0] & zs[i1]
        num += np.where(both, (ys[i1] - ys[i0]) * dt, 0.0)
        den += np.where(both, dt * dt, 0.0)
    d = np.where(den > 0.0, num / np.where(den > 0.0, den, 1.0), 0.0)

    # 2. Population level of the present edges.
    a_bar = 0.0
    for a in ages:
        a_bar += a
    a_bar /= n_scans
    acc = np.zeros(m_edges)
    n_plus = np.zeros(m_edges, dtype=np.int64)
    for y, z, a in zip(ys, zs, ages):
        acc += np.where(z, y - d * (a - a_bar), 0.0)
        n_plus += z
    seen = n_plus > 0
    alpha = np.where(seen, acc / np.where(seen, n_plus, 1), 0.0)
    rho = n_plus / n_scans

    def mu(a):
        return alpha + d * (a - a_bar)

    # 3. Residuals, subject-wide offsets g and edge-specific parts u of every training scan.
    def offset(y, z, a):
        r = y - mu(a)
        use = z & seen
        g = float(r[use].sum() / use.sum()) if use.any() else 0.0
        return r, g

    gs, us = [], []
    for y, z, a in zip(ys, zs, ages):
        r, g = offset(y, z, a)
        gs.append(g)
        us.append(r - g)

    # 4. Persistence of the subject-wide offset.
    sgg = sg0 = 0.0
    for i0, i1, _, _ in pairs:
        sgg += gs[i0] * gs[i1]
        sg0 += gs[i0] * gs[i0]
    k_g = 1.0 if sg0 <= EPS_DEN else min(max(sgg / sg0, 0.0), 1.0)

    # 5. Persistence of edge deviations, by weight bin (edges with n+ > 0, sorted by (alpha, e)).
    seen_idx = np.nonzero(seen)[0]
    n_wbins = min(MAX_BINS, len(seen_idx))
    wbin = np.full(m_edges, -1, dtype=np.int64)
    wbin[seen_idx] = rank_bins(alpha[seen_idx], seen_idx, n_wbins)
    suu = np.zeros(n_wbins)
    su0 = np.zeros(n_wbins)
    for i0, i1, _, _ in pairs:
        both = zs[i0] & zs[i1] & seen
        b = wbin[both]
        u0, u1 = us[i0][both], us[i1][both]
        suu += np.bincount(b, weights=u0 * u1, minlength=n_wbins)
        su0 += np.bincount(b, weights=u0 * u0, minlength=n_wbins)
    k_bins = np.where(su0 <= EPS_DEN, 1.0,
                      np.clip(suu / np.where(su0 > 0.0, su0, 1.0), 0.0, 1.0))

    # 6. Existence: every edge, sorted by (rho, e), in B_E bins; shrunken transition rates.
    n_ebins = min(MAX_BINS, m_edges)
    ebin = rank_bins(rho, edge, n_ebins)
    n1 = np.zeros(m_edges, dtype=np.int64)
    s11 = np.zeros(m_edges, dtype=np.int64)
    n0 = np.zeros(m_edges, dtype=np.int64)
    s01 = np.zeros(m_edges, dtype=np.int64)
    # 7. Level of a new edge: mean y1 over the 0 -> 1 transitions of the bin's edges.
    nu_sum = np.zeros(n_ebins)
    nu_cnt = np.zeros(n_ebins, dtype=np.int64)
    for i0, i1, _, _ in pairs:
        z0, z1 = zs[i0], zs[i1]
        n1 += z0
        s11 += z0 & z1
        n0 += ~z0
        born = ~z0 & z1
        s01 += born
        nu_sum += np.bincount(ebin[born], weights=ys[i1][born], minlength=n_ebins)
        nu_cnt += np.bincount(ebin[born], minlength=n_ebins)
    p11, pool11, m11 = shrink(s11, n1, ebin, n_ebins, 1.0)
    p01, pool01, m01 = shrink(s01, n0, ebin, n_ebins, 0.0)
    nu = np.where(nu_cnt > 0, nu_sum / np.where(nu_cnt > 0, nu_cnt, 1), 0.0)

    model = dict(
        n_nodes=cohort.n_nodes, a_bar=a_bar, d=d, alpha=alpha, n_plus=n_plus, rho=rho,
        k_g=k_g, k_bins=k_bins, wbin=wbin, ebin=ebin, n1=n1, s11=s11, n0=n0, s01=s01,
        p11=p11, p01=p01, pool11=pool11, pool01=pool01, m11=m11, m01=m01, nu=nu,
        n_train_scans=n_scans, n_pairs=len(pairs), g=gs, drift_factors=(0.0, 0.0), exist=None,
        node_sim=None, codev=0.0,
    )

    # 8. The drift's age and sex factors: least squares of r = dy - x (x = d dt) on
    # x (mid - a_bar) and x sex over the entries present at both visits of a pair.
    a = np.zeros((2, 2))
    b = np.zeros(2)
    for i0, i1, dt, sex in pairs:
        both = zs[i0] & zs[i1] & seen
        x = d[both] * dt
        r = ys[i1][both] - ys[i0][both] - x
        u, v = x * (ages[i0] + 0.5 * dt - a_bar), x * sex_sign(sex)
        a += [[u @ u, u @ v], [u @ v, v @ v]]
        b += [u @ r, v @ r]
    model["drift_factors"] = solve_factors(a, b)

    # 9. Co-deviations of edges that share a node: the node similarity S over every training
    # scan, then gamma over the pairs' edges present (and seen) at both visits.
    n = cohort.n_nodes
    c_sum, k_sum = np.zeros((n, n)), np.zeros((n, n))
    for y, z, a_ in zip(ys, zs, ages):
        u, used = deviations(model, y, z, a_)
        uu, zz = square(n, u), square(n, used)
        c_sum += uu.T @ uu
        k_sum += zz.T @ zz
    sim = c_sum / np.maximum(k_sum, 1.0)
    np.fill_diagonal(sim, 0.0)
    norm = np.abs(sim).sum(1, keepdims=True)
    sim = np.where(norm > EPS_DEN, sim / np.where(norm > EPS_DEN, norm, 1.0), sim)
    k_edge = np.ones(m_edges)
    if len(k_bins):
        k_edge[seen] = k_bins[wbin[seen]]
    pu = pp = 0.0
    for i0, i1, _, _ in pairs:
        u0, _ = deviations(model, ys[i0], zs[i0], ages[i0])
        u1, _ = deviations(model, ys[i1], zs[i1], ages[i1])
        p = pooled(sim, u0)
        both = zs[i0] & zs[i1] & seen
        pu += p[both] @ (u1 - k_edge * u0)[both]
        pp += p[both] @ p[both]
    model["node_sim"] = sim
    model["codev"] = pu / pp if pp > EPS_DEN else 0.0

    # 10. Existence of an edge present at the start given its forecast level E.
    rows, label = [], []
    for i0, i1, dt, sex in pairs:
        level = levels(model, ys[i0], zs[i0], ages[i0], ages[i0] + dt, sex)
        z = zs[i0]
        rows.append(features(model, level[z], ages[i0], ages[i0] + dt, z))
        label.append(zs[i1][z])
    if rows:
        model["exist"] = fit_existence(np.concatenate(rows), np.concatenate(label))
    return model


# Issue 75, item 2: the small-sample check (src/models/eb_drift/fallback.rs). The training
# subjects (sorted by id, as `fit` takes them) dealt into CHECK_FOLDS groups by position; each
# group forecast by eb-drift and by the one-factor global-shrinkage forecaster fitted on the
# others; the global factor is used when its summed squared error is lower. Skipped above
# CHECK_UP_TO training subjects or with fewer than CHECK_FOLDS of them with two scans.
CHECK_FOLDS = 5
CHECK_UP_TO = 500


def fit_global_shrink(cohort, train_ids):
    """Per edge a line over every training scan (absent entries 0), one persistence factor."""
    train_ids = sorted(set(train_ids), key=lambda s: s.encode())
    ys, ages, pairs = [], [], []
    for subject in train_ids:
        first = len(ys)
        for v, (_, path, age) in enumerate(cohort.scans(subject)):
            ys.append(cohort.upper(path)[0])
            ages.append(age)
            if v > 0:
                pairs.append((first + v - 1, first + v))
    a_bar = sum(ages) / len(ages)
    tc = [a - a_bar for a in ages]
    stt = sum(t * t for t in tc)
    alpha = sum(ys) / len(ys)
    beta = sum(t * y for t, y in zip(tc, ys)) / stt if stt > EPS_DEN else np.zeros_like(alpha)
    r = [y - alpha - beta * t for y, t in zip(ys, tc)]
    r01 = sum(float(r[i0] @ r[i1]) for i0, i1 in pairs)
    r00 = sum(float(r[i0] @ r[i0]) for i0, _ in pairs)
    k = 1.0 if r00 <= EPS_DEN else min(max(r01 / r00, 0.0), 1.0)
    return dict(global_shrink=True, alpha=alpha, beta=beta, a_bar=a_bar, k=k,
                n_nodes=cohort.n_nodes, n_train_scans=len(ys), n_pairs=len(pairs))


def held_out_error(model, cohort, subjects):
    total = 0.0
    for subject in subjects:
        rows = cohort.scans(subject)
        for (_, p0, a0), (_, p1, a1) in zip(rows, rows[1:]):
            y0, z0 = cohort.upper(p0)
            y1, _ = cohort.upper(p1)
            f = forecast_log(model, y0, z0, a0, a0 + delta_t(a0, a1), cohort.sex[subject])
            total += float(np.sum((f - y1) ** 2))
    return total


def fit_checked(cohort, train_ids):
    """(model, (eb error, global error) or None): eb-drift unless the check prefers the
    global factor."""
    ids = sorted(set(train_ids), key=lambda s: s.encode())
    with_pairs = sum(1 for s in ids if len(cohort.scans(s)) >= 2)
    if len(ids) > CHECK_UP_TO or with_pairs < CHECK_FOLDS:
        return fit(cohort, ids), None
    eb = gl = 0.0
    for f in range(CHECK_FOLDS):
        train = [s for i, s in enumerate(ids) if i % CHECK_FOLDS != f]
        held = [s for i, s in enumerate(ids) if i % CHECK_FOLDS == f]
        eb += held_out_error(fit(cohort, train), cohort, held)
        gl += held_out_error(fit_global_shrink(cohort, train), cohort, held)
    if gl < eb:
        return fit_global_shrink(cohort, ids), (eb, gl)
    return fit(cohort, ids), (eb, gl)


def deviations(model, y, z, a):
    """A scan's edge deviations u = y - mu_e(a) - g on its present, seen edges (0 elsewhere),
    and 1.0 where used."""
    seen = model["n_plus"] > 0
    r = y - (model["alpha"] + model["d"] * (a - model["a_bar"]))
    use = z & seen
    g = float(r[use].sum() / use.sum()) if use.any() else 0.0
    return np.where(use, r - g, 0.0), use.astype(np.float64)


def square(n, v):
    """The symmetric n x n matrix of upper-triangle values v (row-major), zero diagonal."""
    out = np.zeros((n, n))
    iu = np.triu_indices(n, 1)
    out[iu] = v
    out[(iu[1], iu[0])] = v
    return out


def pooled(sim, u):
    """p_ij = sum_l S_jl u_il + sum_l S_il u_lj: the deviations u pooled through S."""
    n = sim.shape[0]
    uu = square(n, u)
    return (uu @ sim.T + sim @ uu)[np.triu_indices(n, 1)]


def sex_sign(sex):
    return 1.0 if sex == 1 else -1.0 if sex == 2 else 0.0


def solve_factors(a, b):
    """(beta_age, beta_sex): both when the 2x2 system is well conditioned, else the age factor
    alone, else the sex factor alone, else none (docs/eb-drift.md step 8)."""
    det = a[0, 0] * a[1, 1] - a[0, 1] * a[0, 1]
    if a[0, 0] > EPS_DEN and a[1, 1] > EPS_DEN and det > EPS_DEN * a[0, 0] * a[1, 1]:
        return ((a[1, 1] * b[0] - a[0, 1] * b[1]) / det, (a[0, 0] * b[1] - a[0, 1] * b[0]) / det)
    if a[0, 0] > EPS_DEN:
        return (b[0] / a[0, 0], 0.0)
    if a[1, 1] > EPS_DEN:
        return (0.0, b[1] / a[1, 1])
    return (0.0, 0.0)


def features(model, level, a0, t, z):
    """Rows (1, logit p11, E, E^2, t - a_bar, t - a0) of the edges `z` present at the start."""
    p = np.clip(model["p11"][z], 1e-6, 1 - 1e-6)
    k = len(level)
    return np.stack([np.ones(k), np.log(p / (1 - p)), level, level * level,
                     np.full(k, t - model["a_bar"]), np.full(k, t - a0)], axis=1)


def sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


def fit_existence(x, z):
    """Logistic regression by Newton steps from 0, each damped by a ridge of 1, until the
    largest step is below 1e-9 (100 at most); None with fewer rows than features or one label."""
    if len(z) < x.shape[1] or z.all() or not z.any():
        return None
    w = np.zeros(x.shape[1])
    for _ in range(EXIST_STEPS):
        p = sigmoid(x @ w)
        h = x.T @ (x * (p * (1 - p))[:, None]) + EXIST_RIDGE * np.eye(len(w))
        g = x.T @ (z - p) - EXIST_RIDGE * w
        step = np.linalg.solve(h, g)
        w = w + step
        if np.abs(step).max() < EXIST_TOL:
            break
    return w


# ---------------------------------------------------------------------------------------------
# The forecast (docs/eb-drift.md, "Forecast")


def levels(model, y0, z0, a0, t, sex):
    """The forecast level E of every edge from a start scan (y0, z0, age a0) to age t."""
    alpha, d, a_bar = model["alpha"], model["d"], model["a_bar"]
    seen = model["n_plus"] > 0
    mu0 = alpha + d * (a0 - a_bar)
    r0 = y0 - mu0
    use = z0 & seen
    g0 = float(r0[use].sum() / use.sum()) if use.any() else 0.0
    k_b = np.ones(len(y0))
    if len(model["k_bins"]):
        k_b[seen] = model["k_bins"][model["wbin"][seen]]
    beta_age, beta_sex = model["drift_factors"]
    mult = min(max(1.0 + beta_age * (0.5 * (a0 + t) - a_bar) + beta_sex * sex_sign(sex), 0.0), 2.0)
    e_seen = mu0 + mult * d * (t - a0) + model["k_g"] * g0 + k_b * (r0 - g0)
    if model["codev"] != 0.0 and model["node_sim"] is not None:
        e_seen = e_seen + model["codev"] * pooled(model["node_sim"], deviations(model, y0, z0, a0)[0])
    return np.where(z0, np.where(seen, e_seen, y0), model["nu"][model["ebin"]])


def forecast_log(model, y0, z0, a0, t, sex, sparse=False):
    """y_hat (upper triangle, log1p domain) from a start scan (y0, z0, age a0) to age t of a
    subject of sex id `sex`: dense, p * max(E, 0); sparse (`--forecast sparse`), max(E, 0) on
    the round(sum p) edges of highest p (ties to the lower edge index, never p = 0), else 0."""
    if model.get("global_shrink"):
        m0 = model["alpha"] + model["beta"] * (a0 - model["a_bar"])
        m1 = model["alpha"] + model["beta"] * (t - model["a_bar"])
        return np.maximum(m1 + model["k"] * (y0 - m0), 0.0)
    e_val = levels(model, y0, z0, a0, t, sex)
    p = np.where(z0, model["p11"], model["p01"])
    if model["exist"] is not None:
        p = p.copy()
        p[z0] = sigmoid(features(model, e_val[z0], a0, t, z0) @ model["exist"])
    if not sparse:
        return p * np.maximum(e_val, 0.0)
    k = min(int(np.floor(p.sum() + 0.5)), len(p))
    order = np.lexsort((np.arange(len(p)), -p))[:k]
    keep = np.zeros(len(p), dtype=bool)
    keep[order] = p[order] > 0
    return np.where(keep, np.maximum(e_val, 0.0), 0.0)


def forecast_matrix(model, y0, z0, a0, t, sex, sparse=False):
    n = model["n_nodes"]
    w = np.expm1(forecast_log(model, y0, z0, a0, t, sex, sparse))
    out = np.zeros((n, n))
    iu = np.triu_indices(n, 1)
    out[iu] = w
    out[(iu[1], iu[0])] = w
    return out


# ---------------------------------------------------------------------------------------------
# Command line


def parse_request(text):
    text = text.strip()
    if ":" not in text:
        raise CohortError(f"request {text!r}: expected ID:TARGET_AGE")
    subject, age = text.rsplit(":", 1)
    try:
        target = float(age)
    except ValueError as err:
        raise CohortError(f"request {text!r}: target age {age!r} is not a number") from err
    if not subject or not math.isfinite(target):
        raise CohortError(f"request {text!r}: expected ID:TARGET_AGE with a finite age")
    return subject, target


def run(args):
    requests = [parse_request(r) for r in args.request or []]
    for path in args.requests_file or []:
        with open(path) as f:
            requests += [parse_request(line) for line in f if line.strip()
                         and not line.lstrip().startswith("#")]
    train = [s.strip() for s in args.train.split(",") if s.strip()]
    cohort = Cohort(args.sc_dir, args.subject_info_csv)
    model, check = fit_checked(cohort, train)
    predictions = []
    for subject, target in requests:
        _, path, a0 = cohort.scans(subject)[0]
        y0, z0 = cohort.upper(path)
        m = forecast_matrix(model, y0, z0, a0, target, cohort.sex[subject],
                            args.forecast == "sparse")
        predictions.append(dict(subject=subject, start_age=a0, target_age=target,
                                matrix=m.tolist()))
    if model.get("global_shrink"):
        params = dict(global_shrink=True, a_bar=float(model["a_bar"]), k_g=float(model["k"]),
                      n_train_scans=int(model["n_train_scans"]), n_pairs=int(model["n_pairs"]))
    else:
        params = dict(
            a_bar=float(model["a_bar"]),
            k_g=float(model["k_g"]),
            k_bins=[float(k) for k in model["k_bins"]],
            n_train_scans=int(model["n_train_scans"]),
            n_pairs=int(model["n_pairs"]),
            drift_factors=[float(b) for b in model["drift_factors"]],
            codev=float(model["codev"]),
            exist=None if model["exist"] is None else [float(w) for w in model["exist"]],
        )
    params["check"] = None if check is None else [float(check[0]), float(check[1])]
    result = dict(params=params, predictions=predictions)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    fd, tmp = tempfile.mkstemp(prefix=".eb_drift_", suffix=".json.tmp", dir=out_dir)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(result, f, allow_nan=False)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, args.out)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sc-dir", required=True)
    ap.add_argument("--subject-info-csv", required=True)
    ap.add_argument("--train", required=True, help="comma-separated training subject ids")
    ap.add_argument("--request", action="append", metavar="ID:TARGET_AGE",
                    help="forecast ID from its first scan to TARGET_AGE (repeatable)")
    ap.add_argument("--requests-file", action="append", metavar="FILE",
                    help="one ID:TARGET_AGE per line (repeatable)")
    ap.add_argument("--forecast", choices=("dense", "sparse"), default="dense",
                    help="the forecast's form, as train-gnn's --forecast")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    try:
        run(args)
    except (CohortError, OSError) as err:
        sys.exit(f"eb_drift_reference.py: {err}")


if __name__ == "__main__":
    main()

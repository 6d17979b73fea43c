//! `eb-drift`: the empirical-Bayes forecaster of docs/eb-drift.md, in closed form on the host
//! (f64): the population trajectory of every present edge (a level at the mean age and the
//! longitudinal drift), the persistence of a subject's deviation from it (subject-wide, and per
//! weight bin for single edges), and beta-binomial existence transitions per edge shrunk to
//! their existence bin. The forecast is the expected log1p weight `p · max(E, 0)`.
//!
//! The checkpoint holds the fitted parameters per upper-triangle edge (f32, like any model's
//! weights): [`EbDrift`]. `scripts/eb_drift_reference.py` is an independent numpy
//! implementation of the same page (`tests/gnn/gnn_eb_drift.rs` compares the two).

use ndarray::Array2;

mod codev;
mod fallback;
mod module;
mod pooling;
mod refine;
#[cfg(test)]
mod tests;
mod visits;

pub(crate) use crate::models::linear_drift::ForecastForm;
pub(crate) use fallback::{CHECK_UP_TO, Choice};
pub(crate) use module::{EbDrift, params_from};
use pooling::{persistence, rank_bins, shrink};
use visits::{Logs, for_all, for_pairs, mean_age, visits};

/// Name of the model in checkpoint metadata.
pub(crate) const MODEL_NAME: &str = "eb_drift";

/// One scan of a training subject: its age (years; the visit index when unknown) and matrix.
#[derive(Debug, Clone, Copy)]
pub(crate) struct EbScan<'a> {
    pub age: f64,
    /// N, and the strict upper triangle of the scan's matrix (row-major, `i < j`).
    pub n: usize,
    pub a_raw: &'a [f32],
    /// The subject's sex id (the loader's: 1 male, 2 female, 0 unknown).
    pub sex: usize,
}

/// The fitted forecaster (docs/eb-drift.md "Fit"); per-edge vectors are indexed by the
/// row-major upper-triangle edge.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EbParams {
    pub n: usize,
    /// Mean age of the training scans.
    pub a_bar: f64,
    /// Persistence of the subject-wide offset.
    pub k_g: f64,
    /// Persistence of an edge's own deviation (its weight bin's).
    pub k_edge: Vec<f64>,
    /// Level at `a_bar` and drift per year of the present edge.
    pub alpha: Vec<f64>,
    pub drift: Vec<f64>,
    /// Present in some training scan.
    pub seen: Vec<bool>,
    /// P(present at the next visit | present now / absent now).
    pub p11: Vec<f64>,
    pub p01: Vec<f64>,
    /// Expected log1p weight of an edge that appears (its existence bin's).
    pub nu: Vec<f64>,
    /// The drift's age and sex factors `(β_age, β_sex)` (0, 0: the drift alone).
    pub drift_factors: [f64; 2],
    /// Node similarity of the co-deviations (N×N row-major; empty: none) and its factor `γ`.
    pub node_sim: Vec<f64>,
    pub codev: f64,
    /// Weights of the existence regression of present edges (`None`: `p11` alone).
    pub exist: Option<[f64; refine::EXIST_FEATURES]>,
    /// The global-shrinkage forecaster of [`fallback`]: every edge read as present (absent at
    /// 0), `p = 1`, the forecast `m(t1) + k_g·(y0 − m(t0))`.
    pub all_present: bool,
}

/// Δt of a visit pair as `--model linear-drift` takes it: the age difference if finite and
/// positive, else the visit-index difference; at least 0.001 years.
fn pair_dt(a0: f64, a1: f64, visits: usize) -> f64 {
    let d = a1 - a0;
    let d = if d.is_finite() && d > 0.0 {
        d
    } else {
        visits as f64
    };
    d.max(1e-3)
}

/// N of the training subjects' scans (their first scan's; 0 without one).
fn nodes(subjects: &[Vec<EbScan<'_>>]) -> usize {
    subjects
        .iter()
        .flat_map(|s| s.first())
        .map(|s| s.n)
        .next()
        .unwrap_or(0)
}

/// `(log1p(max(a, 0)), a > 0)` of every upper-triangle entry.
fn upper(a: &[f32]) -> (Vec<f64>, Vec<bool>) {
    let Logs { y, z } = Logs::of(a);
    (y, z)
}

impl EbParams {
    /// Fits the forecaster on the training subjects (each its scans in visit order).
    pub(crate) fn fit(subjects: &[Vec<EbScan<'_>>]) -> Self {
        let n = nodes(subjects);
        let m = n * n.saturating_sub(1) / 2;
        let scans = visits(subjects);
        let n_scans = scans.iter().flatten().count();
        let a_bar = mean_age(&scans);

        // 1. Drift of the edges present at both visits of a pair.
        let (mut sxy, mut sxx) = (vec![0.0; m], vec![0.0; m]);
        for_pairs(&scans, |_, s0, _, s1, dt| {
            for e in 0..m {
                if s0.z[e] && s1.z[e] {
                    sxy[e] += (s1.y[e] - s0.y[e]) * dt;
                    sxx[e] += dt * dt;
                }
            }
        });
        let drift: Vec<f64> = (0..m)
            .map(|e| if sxx[e] > 0.0 { sxy[e] / sxx[e] } else { 0.0 })
            .collect();
        // 2. Level of the present edges at the mean age.
        let (mut level, mut present) = (vec![0.0; m], vec![0.0; m]);
        for_all(&scans, |v, s| {
            for e in 0..m {
                if s.z[e] {
                    level[e] += s.y[e] - drift[e] * (v.age - a_bar);
                    present[e] += 1.0;
                }
            }
        });
        let alpha: Vec<f64> = (0..m)
            .map(|e| {
                if present[e] > 0.0 {
                    level[e] / present[e]
                } else {
                    0.0
                }
            })
            .collect();
        let seen: Vec<bool> = present.iter().map(|&c| c > 0.0).collect();
        let rho: Vec<f64> = present.iter().map(|&c| c / n_scans.max(1) as f64).collect();
        let partial = EbParams {
            n,
            a_bar,
            k_g: 1.0,
            k_edge: vec![1.0; m],
            alpha,
            drift,
            seen,
            p11: vec![1.0; m],
            p01: vec![0.0; m],
            nu: vec![0.0; m],
            drift_factors: [0.0, 0.0],
            node_sim: Vec::new(),
            codev: 0.0,
            exist: None,
            all_present: false,
        };
        // 3–5. Persistence of the subject-wide offset and, per weight bin, of edge deviations.
        let seen_edges: Vec<usize> = (0..m).filter(|&e| partial.seen[e]).collect();
        let (weight_bin, n_weight_bins) = rank_bins(&seen_edges, &partial.alpha, m);
        let (mut gg, mut g01) = (0.0, 0.0);
        let (mut uu, mut u01) = (vec![0.0; n_weight_bins], vec![0.0; n_weight_bins]);
        for_pairs(&scans, |v0, s0, v1, s1, _| {
            let g0 = partial.offset(v0.age, &s0.y, &s0.z);
            let g1 = partial.offset(v1.age, &s1.y, &s1.z);
            gg += g0 * g0;
            g01 += g0 * g1;
            for (e, bin) in weight_bin.iter().enumerate() {
                if let (true, true, Some(b)) = (s0.z[e], s1.z[e], *bin) {
                    let u0 = s0.y[e] - partial.mu(e, v0.age) - g0;
                    let u1 = s1.y[e] - partial.mu(e, v1.age) - g1;
                    uu[b] += u0 * u0;
                    u01[b] += u0 * u1;
                }
            }
        });
        let k_bins: Vec<f64> = (0..n_weight_bins)
            .map(|b| persistence(u01[b], uu[b]))
            .collect();
        let k_edge = weight_bin
            .iter()
            .map(|b| b.map_or(1.0, |b| k_bins[b]))
            .collect();
        // 6–7. Existence transitions and new-edge levels, per existence bin.
        let every: Vec<usize> = (0..m).collect();
        let (exist_bin, n_exist_bins) = rank_bins(&every, &rho, m);
        let (mut n1, mut s11, mut n0, mut s01) =
            (vec![0.0; m], vec![0.0; m], vec![0.0; m], vec![0.0; m]);
        let (mut new_sum, mut new_count) = (vec![0.0; n_exist_bins], vec![0.0; n_exist_bins]);
        for_pairs(&scans, |_, s0, _, s1, _| {
            for e in 0..m {
                let up = f64::from(u8::from(s1.z[e]));
                if s0.z[e] {
                    n1[e] += 1.0;
                    s11[e] += up;
                } else {
                    n0[e] += 1.0;
                    s01[e] += up;
                    if s1.z[e] {
                        let b = exist_bin[e].unwrap_or(0);
                        new_sum[b] += s1.y[e];
                        new_count[b] += 1.0;
                    }
                }
            }
        });
        let mut members = vec![Vec::new(); n_exist_bins];
        for e in 0..m {
            members[exist_bin[e].unwrap_or(0)].push(e);
        }
        let (mut p11, mut p01, mut nu) = (vec![1.0; m], vec![0.0; m], vec![0.0; m]);
        for (b, edges) in members.iter().enumerate() {
            shrink(edges, &s11, &n1, 1.0, &mut p11);
            shrink(edges, &s01, &n0, 0.0, &mut p01);
            let level = if new_count[b] > 0.0 {
                new_sum[b] / new_count[b]
            } else {
                0.0
            };
            for &e in edges {
                nu[e] = level;
            }
        }
        let fitted = EbParams {
            k_g: persistence(g01, gg),
            k_edge,
            p11,
            p01,
            nu,
            ..partial
        };
        // 8. The drift's age and sex factors.
        let mut sums = refine::FactorSums::default();
        for_pairs(&scans, |v0, s0, _, s1, dt| {
            for e in 0..m {
                if s0.z[e] && s1.z[e] && fitted.seen[e] {
                    let x = fitted.drift[e] * dt;
                    let r = s1.y[e] - s0.y[e] - x;
                    sums.add(x, r, v0.age + 0.5 * dt - a_bar, v0.sex);
                }
            }
        });
        let fitted = EbParams {
            drift_factors: sums.solve(),
            ..fitted
        };
        // 9. Co-deviations of edges that share a node (codev.rs).
        let fitted = fitted.with_co_deviations(&scans);
        // 10. Existence of a present edge given its forecast level (the rows held as their
        // edge and level, 12 bytes instead of 48: tens of millions at 1,000 × 400).
        let mut rows = refine::ExistenceRows::new(&fitted.p11);
        for_pairs(&scans, |v0, s0, _, s1, dt| {
            let (age0, target) = (v0.age, v0.age + dt);
            let levels = fitted.levels(&s0.y, &s0.z, age0, target, v0.sex);
            rows.start_pair(target - a_bar, target - age0);
            for (e, &level) in levels.iter().enumerate() {
                if s0.z[e] {
                    rows.push(e, level, s1.z[e]);
                }
            }
        });
        EbParams {
            exist: refine::fit_existence(&rows),
            ..fitted
        }
    }

    /// The existence regression's features of present edge `e` at forecast level `level`.
    fn features(&self, e: usize, level: f64, age0: f64, target: f64) -> [f64; 6] {
        refine::features(self.p11[e], level, target - self.a_bar, target - age0)
    }

    /// The forecast level `E` of every upper-triangle edge (before `p·max(E, 0)`).
    fn levels(&self, y0: &[f64], z0: &[bool], age0: f64, target: f64, sex: usize) -> Vec<f64> {
        if self.all_present {
            return (0..y0.len())
                .map(|e| self.mu(e, target) + self.k_g * (y0[e] - self.mu(e, age0)))
                .collect();
        }
        let g0 = self.offset(age0, y0, z0);
        let mult = refine::multiplier(self.drift_factors, self.a_bar, age0, target, sex);
        let pooled = self.co_deviation(age0, y0, z0);
        (0..y0.len())
            .map(|e| match (z0[e], self.seen[e]) {
                (true, true) => {
                    self.mu(e, age0)
                        + mult * self.drift[e] * (target - age0)
                        + self.k_g * g0
                        + self.k_edge[e] * (y0[e] - self.mu(e, age0) - g0)
                        + pooled[e]
                }
                (true, false) => y0[e],
                (false, _) => self.nu[e],
            })
            .collect()
    }

    /// The population trajectory of present edge `e` at `age`.
    fn mu(&self, e: usize, age: f64) -> f64 {
        self.alpha[e] + self.drift[e] * (age - self.a_bar)
    }

    /// A scan's subject-wide offset: its mean residual over its present, seen edges.
    fn offset(&self, age: f64, y: &[f64], z: &[bool]) -> f64 {
        let (mut sum, mut count) = (0.0, 0usize);
        for e in 0..y.len() {
            if z[e] && self.seen[e] {
                sum += y[e] - self.mu(e, age);
                count += 1;
            }
        }
        if count > 0 { sum / count as f64 } else { 0.0 }
    }

    /// The existence probability `p` and the level `max(E, 0)` of every upper-triangle edge,
    /// from a start scan's upper triangle (`y0` = log1p weights, `z0` = presence) at age `age0`,
    /// at `target`, of a subject of sex id `sex`.
    fn parts(
        &self,
        y0: &[f64],
        z0: &[bool],
        age0: f64,
        target: f64,
        sex: usize,
    ) -> Vec<(f64, f64)> {
        let levels = self.levels(y0, z0, age0, target, sex);
        (0..y0.len())
            .map(|e| {
                let level = levels[e];
                let p = match (z0[e], &self.exist) {
                    _ if self.all_present => 1.0,
                    (true, Some(w)) => refine::existence(w, &self.features(e, level, age0, target)),
                    (true, None) => self.p11[e],
                    (false, _) => self.p01[e],
                };
                (p, level.max(0.0))
            })
            .collect()
    }

    /// The forecast log1p weight of every upper-triangle edge in the given form: dense, the
    /// expected value `p·max(E, 0)`; sparse, `max(E, 0)` on the `round(Σ p)` edges most likely
    /// to exist and 0 elsewhere ([`sparse_keep`]).
    fn expected(
        &self,
        y0: &[f64],
        z0: &[bool],
        age0: f64,
        target: f64,
        sex: usize,
        form: ForecastForm,
    ) -> Vec<f64> {
        let parts = self.parts(y0, z0, age0, target, sex);
        match form {
            ForecastForm::Dense | ForecastForm::Graph => {
                parts.iter().map(|(p, level)| p * level).collect()
            }
            ForecastForm::Sparse => {
                let p: Vec<f64> = parts.iter().map(|x| x.0).collect();
                let keep = sparse_keep(&p);
                parts
                    .iter()
                    .zip(keep)
                    .map(|((_, level), k)| if k { *level } else { 0.0 })
                    .collect()
            }
        }
    }

    /// The forecast of the raw matrix `a0` (taken at age `age0`) at age `target`.
    pub(crate) fn forecast(
        &self,
        a0: &[f32],
        age0: f64,
        target: f64,
        sex: usize,
        form: ForecastForm,
    ) -> Array2<f32> {
        let n = self.n;
        let (y0, z0) = upper(a0);
        let expected = self.expected(&y0, &z0, age0, target, sex, form);
        let mut out = Array2::<f32>::zeros((n, n));
        let mut e = 0;
        for i in 0..n {
            for j in i + 1..n {
                let w = expected[e].exp_m1() as f32;
                out[(i, j)] = w;
                out[(j, i)] = w;
                e += 1;
            }
        }
        out
    }

    /// The forecast in the log1p domain, row-major N×N with a zero diagonal, from a start scan
    /// given in the log1p domain (row-major N×N, as CLG-ODE's inputs): the base of CLG-ODE's
    /// residual under `--eb-head`.
    pub(crate) fn forecast_log(
        &self,
        start_log: &[f32],
        age0: f64,
        target: f64,
        sex: usize,
    ) -> Vec<f32> {
        let n = self.n;
        let (mut y0, mut z0) = (Vec::new(), Vec::new());
        for i in 0..n {
            for j in i + 1..n {
                let v = start_log[i * n + j];
                y0.push(f64::from(v.max(0.0)));
                z0.push(v > 0.0);
            }
        }
        let expected = self.expected(&y0, &z0, age0, target, sex, ForecastForm::Dense);
        let mut out = vec![0.0f32; n * n];
        let mut e = 0;
        for i in 0..n {
            for j in i + 1..n {
                out[i * n + j] = expected[e] as f32;
                out[j * n + i] = expected[e] as f32;
                e += 1;
            }
        }
        out
    }
}

/// The edges a sparse forecast keeps: the `round(Σ p)` most likely to exist (the expected edge
/// count, so the forecast has the density the probabilities promise), ties to the lower edge
/// index; an edge of probability 0 never.
pub(crate) fn sparse_keep(p: &[f64]) -> Vec<bool> {
    let k = (p.iter().sum::<f64>().round() as usize).min(p.len());
    let mut order: Vec<usize> = (0..p.len()).collect();
    let cmp = |a: &usize, b: &usize| p[*b].total_cmp(&p[*a]).then(a.cmp(b));
    if k > 0 && k < order.len() {
        order.select_nth_unstable_by(k - 1, cmp);
    }
    let mut keep = vec![false; p.len()];
    for &e in &order[..k] {
        keep[e] = p[e] > 0.0;
    }
    keep
}

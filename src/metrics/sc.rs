//! CLG-ODE test metrics on SC predictions (docs/clg-ode-model.md §5.2), computed on the CPU from f32 matrices
//! with f64 accumulation.
//!
//! Notation: `P` = predicted weights (raw domain, e.g. `A_pred`), `T` = the target visit's
//! `A_raw`, `A0` = the start visit's `A_raw`; `p = log1p(ut(P))`, `t = log1p(ut(T))`,
//! `t_raw = ut(T)`, `pos = {t_raw > 0}`, `k = |pos|`; `ut` = upper triangle (i < j), row-major.

use std::collections::BTreeMap;

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use crate::data::connectome::preprocess::{ecc, upper_triangle};

macro_rules! metric_struct {
    ($(#[$doc:meta])* $name:ident, $(#[$kdoc:meta])* $key:ident { $($field:ident => $variant:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
        pub(crate) struct $name {
            $(
                #[serde(default = "super::absent::nan", deserialize_with = "super::absent::null_as_nan")]
                pub $field: f64,
            )*
        }

        $(#[$kdoc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum $key {
            $($variant),*
        }

        impl $key {
            /// Every key, in the order of the struct's fields.
            pub(crate) const ALL: &'static [$key] = &[$($key::$variant),*];

            /// The key's name: its field, JSON key and CSV column (`sc_log_mse`).
            pub(crate) fn name(self) -> &'static str {
                match self {
                    $($key::$variant => stringify!($field)),*
                }
            }

            /// The key named `name`, if any.
            pub(crate) fn from_name(name: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|k| k.name() == name)
            }
        }

        impl $name {
            /// Metric names, in the order of [`Self::values`].
            pub(crate) const NAMES: &'static [&'static str] = &[$(stringify!($field)),*];

            /// Values in the order of [`Self::NAMES`].
            pub(crate) fn values(&self) -> Vec<f64> {
                vec![$(self.$field),*]
            }

            /// Every metric undefined (NaN).
            pub(crate) fn undefined() -> Self {
                Self { $($field: f64::NAN),* }
            }

            /// The value of metric `key`.
            pub(crate) fn get(&self, key: $key) -> f64 {
                match key {
                    $($key::$variant => self.$field),*
                }
            }

            fn from_values(values: &[f64]) -> Self {
                let mut it = values.iter().copied();
                Self { $($field: it.next().unwrap_or(0.0)),* }
            }
        }
    };
}

metric_struct! {
    /// The 22 keys of the reference's `test_sc_metrics.json`:
    ///
    /// * `sc_log_mse` / `sc_log_mae`: mean (p − t)² / |p − t| over all M entries.
    /// * `sc_log_pearson`: r(p, t); `sc_log_pearson_pos`: `r(p[pos], t[pos])` (0 if k ≤ 1).
    /// * `sc_log_pearson_topk`: `r(p[m], t_raw[m])` (**raw** truth) on the top-k mask m of ut(P)
    ///   (0 if |m| ≤ 1);
    ///   `sc_log_pearson_sparse`: r(log1p(ut(P_sparse)), **t_raw**) over all entries.
    ///   Reference quirk, kept: the truth is in the raw domain in these two, despite the name.
    /// * `ecc_l2` / `ecc_pearson`: ‖·‖₂ and r between ECC(log1p P_sparse) and ECC(log1p T).
    /// * `deg_*` / `strength_*` (`mae`, `rmse`, `pearson`, `ks`): per-node degree (#>0 per row)
    ///   and strength (row sum) of P_sparse vs T over full rows; `ks` = two-sample KS statistic.
    /// * `mse_zero`: mean p² over {t_raw ≤ 0}; `mse_new_region`: mean (p − **t_raw**)² over
    ///   {ut(A0) ≤ 0} (raw truth, reference quirk); `mse_zero_strict`: mean p² over
    ///   {ut(A0) ≤ 0 and t_raw ≤ 0}. Each 0 when its set is empty.
    /// * `new_edge_precision_at_knew` / `new_edge_recall_at_knew` / `new_edge_auprc`: the
    ///   innovation module's new-edge scores of a forecast (set by [`ScMetrics::with_new_edges`]);
    ///   NaN (null in JSON, empty in CSV, N/A in tables) where undefined: no innovation module,
    ///   the identity, or no true new edge (the reference writes 0). Means skip undefined values.
    ScMetrics,
    /// A key of [`ScMetrics`]: a metric named by type, never by a string sliced or searched.
    ScKey {
        sc_log_mse => ScLogMse,
        sc_log_mae => ScLogMae,
        sc_log_pearson => ScLogPearson,
        sc_log_pearson_pos => ScLogPearsonPos,
        sc_log_pearson_topk => ScLogPearsonTopk,
        sc_log_pearson_sparse => ScLogPearsonSparse,
        ecc_l2 => EccL2,
        ecc_pearson => EccPearson,
        deg_mae => DegMae,
        deg_rmse => DegRmse,
        deg_pearson => DegPearson,
        deg_ks => DegKs,
        strength_mae => StrengthMae,
        strength_rmse => StrengthRmse,
        strength_pearson => StrengthPearson,
        strength_ks => StrengthKs,
        mse_zero => MseZero,
        mse_new_region => MseNewRegion,
        mse_zero_strict => MseZeroStrict,
        new_edge_precision_at_knew => NewEdgePrecisionAtKnew,
        new_edge_recall_at_knew => NewEdgeRecallAtKnew,
        new_edge_auprc => NewEdgeAuprc,
    }
}

impl ScMetrics {
    /// name → value, e.g. for JSON output or CSV columns.
    pub(crate) fn to_map(self) -> BTreeMap<String, f64> {
        Self::NAMES
            .iter()
            .map(|n| n.to_string())
            .zip(self.values())
            .collect()
    }

    /// These scores with the topology half (ECC, degree, strength) of `graph`'s: the scores of
    /// a forecast of two objects (`--forecast graph`).
    pub(crate) fn with_topology_of(mut self, graph: &ScMetrics) -> Self {
        self.ecc_l2 = graph.ecc_l2;
        self.ecc_pearson = graph.ecc_pearson;
        (self.deg_mae, self.deg_rmse, self.deg_pearson, self.deg_ks) = (
            graph.deg_mae,
            graph.deg_rmse,
            graph.deg_pearson,
            graph.deg_ks,
        );
        (
            self.strength_mae,
            self.strength_rmse,
            self.strength_pearson,
            self.strength_ks,
        ) = (
            graph.strength_mae,
            graph.strength_rmse,
            graph.strength_pearson,
            graph.strength_ks,
        );
        self
    }

    /// These scores with the innovation module's new-edge precision, recall and AUPRC (`None`:
    /// undefined, NaN).
    pub(crate) fn with_new_edges(mut self, scores: Option<[f64; 3]>) -> Self {
        let [p, r, a] = scores.unwrap_or([f64::NAN; 3]);
        self.new_edge_precision_at_knew = p;
        self.new_edge_recall_at_knew = r;
        self.new_edge_auprc = a;
        self
    }

    /// As [`Self::to_map`] (keys sorted), for serde's `serialize_with`: the key order of
    /// `test_sc_metrics.json` and of the SC metrics in `clg_ode_results.json`.
    pub(crate) fn serialize_sorted<S: serde::Serializer>(
        m: &ScMetrics,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        m.to_map().serialize(s)
    }

    /// Whether metric `key` may be undefined (NaN) for a subject and is then left out of means.
    fn may_be_undefined(key: ScKey) -> bool {
        matches!(
            key,
            ScKey::NewEdgePrecisionAtKnew | ScKey::NewEdgeRecallAtKnew | ScKey::NewEdgeAuprc
        )
    }

    /// Element-wise mean over subjects (all zeros for an empty slice), as the reference averages
    /// per-subject metrics; a metric that may be undefined is averaged over the subjects that
    /// define it (NaN when none does).
    pub(crate) fn mean(items: &[ScMetrics]) -> ScMetrics {
        if items.is_empty() {
            return ScMetrics::default().with_new_edges(None);
        }
        let mut sum = vec![0.0; Self::NAMES.len()];
        let mut count = vec![0usize; Self::NAMES.len()];
        for m in items {
            for (k, v) in m.values().into_iter().enumerate() {
                if v.is_nan() && Self::may_be_undefined(ScKey::ALL[k]) {
                    continue;
                }
                sum[k] += v;
                count[k] += 1;
            }
        }
        let means: Vec<f64> = sum
            .iter()
            .zip(&count)
            .map(|(s, &c)| if c == 0 { f64::NAN } else { s / c as f64 })
            .collect();
        Self::from_values(&means)
    }
}

/// Pearson r = Σ(x−x̄)(y−ȳ) / sqrt(Σ(x−x̄)²·Σ(y−ȳ)²), 0 when the denominator is 0 (or the
/// inputs are empty).
pub(crate) fn pearson(x: &[f64], y: &[f64]) -> f64 {
    let n = x.len().min(y.len());
    if n == 0 {
        return 0.0;
    }
    let mx = x[..n].iter().sum::<f64>() / n as f64;
    let my = y[..n].iter().sum::<f64>() / n as f64;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    let den = (sxx * syy).sqrt();
    if den == 0.0 || !den.is_finite() {
        0.0
    } else {
        sxy / den
    }
}

/// Two-sample Kolmogorov–Smirnov statistic: max |ECDF_a − ECDF_b| over every pooled sample
/// value, with right-continuous ECDFs. 0 if either sample is empty.
pub(crate) fn ks_statistic(a: &[f64], b: &[f64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort_by(f64::total_cmp);
    b.sort_by(f64::total_cmp);
    let cdf = |s: &[f64], x: f64| s.partition_point(|v| *v <= x) as f64 / s.len() as f64;
    a.iter()
        .chain(&b)
        .map(|&x| (cdf(&a, x) - cdf(&b, x)).abs())
        .fold(0.0, f64::max)
}

/// Top-k sparsification of a prediction: keep the `k` largest upper-triangle entries of `pred`
/// (ties broken by row-major position; NaN counts as smallest), zero the rest, mirror, zero the
/// diagonal. Returns the sparse matrix and the upper-triangle keep-mask (all false for k = 0).
pub(crate) fn sparsify_topk(pred: ArrayView2<f32>, k: usize) -> (Array2<f32>, Vec<bool>) {
    let n = pred.nrows();
    let values: Vec<f32> = upper_triangle(pred).collect();
    let mut mask = vec![false; values.len()];
    let k = k.min(values.len());
    if k > 0 {
        let key = |i: usize| {
            if values[i].is_nan() {
                f32::NEG_INFINITY
            } else {
                values[i]
            }
        };
        let mut order: Vec<usize> = (0..values.len()).collect();
        let cmp = |a: &usize, b: &usize| key(*b).total_cmp(&key(*a)).then(a.cmp(b));
        if k < order.len() {
            order.select_nth_unstable_by(k - 1, cmp);
        }
        for &i in &order[..k] {
            mask[i] = true;
        }
    }
    let mut sparse = Array2::<f32>::zeros((n, n));
    let mut idx = 0;
    for i in 0..n {
        for j in i + 1..n {
            if mask[idx] {
                sparse[(i, j)] = values[idx];
                sparse[(j, i)] = values[idx];
            }
            idx += 1;
        }
    }
    (sparse, mask)
}

fn mean_of(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// The SC metrics of one prediction (docs/clg-ode-model.md §5.2): `pred` = predicted raw weights, `truth_raw` =
/// the target's `A_raw`, `a0_raw` = the start visit's `A_raw` (the truth itself for a
/// reconstruction), ECC with `topo_bins` bins (32 in the trainer). All three are N×N.
pub(crate) fn sc_metrics(
    pred: ArrayView2<f32>,
    truth_raw: ArrayView2<f32>,
    a0_raw: ArrayView2<f32>,
    topo_bins: usize,
) -> ScMetrics {
    let p: Vec<f64> = upper_triangle(pred).map(|v| f64::from(v.ln_1p())).collect();
    let t_raw: Vec<f64> = upper_triangle(truth_raw).map(f64::from).collect();
    let t: Vec<f64> = upper_triangle(truth_raw)
        .map(|v| f64::from(v.ln_1p()))
        .collect();
    let a0: Vec<f64> = upper_triangle(a0_raw).map(f64::from).collect();
    let pos: Vec<bool> = t_raw.iter().map(|v| *v > 0.0).collect();
    let k = pos.iter().filter(|b| **b).count();
    let select = |v: &[f64], m: &[bool]| -> Vec<f64> {
        v.iter()
            .zip(m)
            .filter(|(_, k)| **k)
            .map(|(x, _)| *x)
            .collect()
    };

    let mut out = ScMetrics {
        sc_log_mse: mean_of(p.iter().zip(&t).map(|(a, b)| (a - b).powi(2))),
        sc_log_mae: mean_of(p.iter().zip(&t).map(|(a, b)| (a - b).abs())),
        sc_log_pearson: pearson(&p, &t),
        ..ScMetrics::default()
    };
    if k > 1 {
        out.sc_log_pearson_pos = pearson(&select(&p, &pos), &select(&t, &pos));
    }

    let (p_sparse, mask) = sparsify_topk(pred, k);
    if k > 1 {
        out.sc_log_pearson_topk = pearson(&select(&p, &mask), &select(&t_raw, &mask));
    }
    let ps: Vec<f64> = upper_triangle(p_sparse.view())
        .map(|v| f64::from(v.ln_1p()))
        .collect();
    out.sc_log_pearson_sparse = pearson(&ps, &t_raw);

    let ecc_pred = ecc(p_sparse.mapv(f32::ln_1p).view(), topo_bins);
    let ecc_true = ecc(truth_raw.mapv(f32::ln_1p).view(), topo_bins);
    out.ecc_l2 = ecc_pred
        .iter()
        .zip(&ecc_true)
        .map(|(a, b)| (a - b).powi(2))
        .sum::<f64>()
        .sqrt();
    out.ecc_pearson = pearson(
        ecc_pred.as_slice().unwrap_or(&[]),
        ecc_true.as_slice().unwrap_or(&[]),
    );

    let rows = |m: ArrayView2<f32>, f: &dyn Fn(f32) -> f64| -> Vec<f64> {
        m.outer_iter()
            .map(|r| r.iter().map(|v| f(*v)).sum())
            .collect()
    };
    let count_pos = |v: f32| if v > 0.0 { 1.0 } else { 0.0 };
    let deg_pred = rows(p_sparse.view(), &count_pos);
    let deg_true = rows(truth_raw, &count_pos);
    let str_pred = rows(p_sparse.view(), &f64::from);
    let str_true = rows(truth_raw, &f64::from);
    let errors = |a: &[f64], b: &[f64]| -> (f64, f64, f64, f64) {
        let mae = mean_of(a.iter().zip(b).map(|(x, y)| (x - y).abs()));
        let mse = mean_of(a.iter().zip(b).map(|(x, y)| (x - y).powi(2)));
        (mae, mse.sqrt(), pearson(a, b), ks_statistic(a, b))
    };
    (out.deg_mae, out.deg_rmse, out.deg_pearson, out.deg_ks) = errors(&deg_pred, &deg_true);
    (
        out.strength_mae,
        out.strength_rmse,
        out.strength_pearson,
        out.strength_ks,
    ) = errors(&str_pred, &str_true);

    out.mse_zero = mean_of(
        p.iter()
            .zip(&t_raw)
            .filter(|(_, tr)| **tr <= 0.0)
            .map(|(pv, _)| pv * pv),
    );
    out.mse_new_region = mean_of(
        p.iter()
            .zip(&t_raw)
            .zip(&a0)
            .filter(|(_, a)| **a <= 0.0)
            .map(|((pv, tr), _)| (pv - tr).powi(2)),
    );
    out.mse_zero_strict = mean_of(
        p.iter()
            .zip(&t_raw)
            .zip(&a0)
            .filter(|((_, tr), a)| **a <= 0.0 && **tr <= 0.0)
            .map(|((pv, _), _)| pv * pv),
    );
    out.with_new_edges(None)
}

#[cfg(test)]
mod tests;

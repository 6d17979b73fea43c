//! One fold's host data: the cohort with the fold's normalisation applied (z-scored
//! morphology and the numeric covariates of every scan).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::{Result, bail};
use ndarray::Array2;
use serde_json::json;

use super::super::metric::GnnMetric;
use super::super::prepared::{Prepared, fold_stem};
use super::super::seeds::fold_seed;
use crate::data::connectome::{Cohort, NormStats, Scan};
use crate::engine::{JobMetric, ModelFile, Monitor, Row, Stage};

/// Stage `stage` of a train-gnn run as every `--model` starts it: the fold's data with the
/// normalisation of its training subjects, and the engine's stage (the training subjects
/// shuffled from `seed`, the `fold` column, the model files `<model>_fold<k>_{best,last}` with
/// `metadata` and the fold, and the fold's monitor: [`fold_monitor`]).
pub(crate) struct FoldStart {
    pub fold: usize,
    pub data: FoldData,
    pub stats: NormStats,
    pub stage: Stage,
}

impl FoldStart {
    pub(crate) fn new(
        prep: &Prepared,
        stage: usize,
        include_s_mean: bool,
        seed: u64,
        model: &str,
        monitor: Option<&Monitor>,
        mut metadata: BTreeMap<String, String>,
    ) -> Result<Self> {
        let split = &prep.folds[stage];
        let fold = split.fold;
        let fallback = fold_monitor(prep, stage, monitor)?;
        if let (Some(f), Some(run)) = (&fallback, monitor) {
            eprintln!(
                "[train-gnn] fold {fold}: none of its {} validation subjects has a follow-up \
                 scan, so `{}` is undefined; early stopping on `{}` instead (recorded in \
                 run_meta.json)",
                split.val.len(),
                run.metric,
                f.metric
            );
        }
        let stats = prep.cohort.norm_stats(&split.train)?;
        let data = FoldData::new(prep.cohort.clone(), &stats, include_s_mean);
        metadata.insert("fold".into(), fold.to_string());
        let mut columns = Row::new();
        columns.insert("fold".into(), json!(fold));
        let stage = Stage {
            items: split.train.len(),
            shuffle_seed: fold_seed(seed, fold),
            label: format!("fold {fold}"),
            columns,
            model_file: Some(ModelFile {
                stem: fold_stem(model, fold),
                metadata,
            }),
            monitor: fallback,
        };
        Ok(Self {
            fold,
            data,
            stats,
            stage,
        })
    }
}

/// Fold `stage`'s own monitor when the run's cannot be computed on it: a metric scored on
/// validation visit pairs (`val_skill`, `val_sc_log_mse`, …) needs a validation subject with a
/// follow-up scan; without one the fold monitors `val_loss` (lower is better, the run's
/// patience, no min-delta: another scale), which exists whenever the fold has validation
/// subjects. `None`: the run's monitor applies. A fold without any validation subject is an
/// error, before training.
pub(crate) fn fold_monitor(
    prep: &Prepared,
    stage: usize,
    monitor: Option<&Monitor>,
) -> Result<Option<Monitor>> {
    let split = &prep.folds[stage];
    if split.val.is_empty() {
        bail!(
            "fold {} has no validation subject ({} training subjects): use fewer --cv_folds or a \
             larger cohort",
            split.fold,
            split.train.len()
        );
    }
    let pairs = split
        .val
        .iter()
        .any(|&s| prep.cohort.subjects[s].scans.len() >= 2);
    Ok(match monitor {
        Some(m) if !pairs && m.metric != GnnMetric::ValLoss.name() => {
            Some(Monitor::of(GnnMetric::ValLoss, None, m.patience, 0.0))
        }
        _ => None,
    })
}

/// Per-fold host data: the cohort, its z-scored inputs and the per-scan numeric covariates.
pub(crate) struct FoldData {
    pub cohort: Arc<Cohort>,
    /// `[subject][scan]` z-scored morphology, N×F.
    pub x: Vec<Vec<Array2<f32>>>,
    /// `[subject][scan]` numeric covariates (age, s, s_mean, z-ECC).
    pub numeric: Vec<Vec<Vec<f32>>>,
    /// Upper-triangle indicator, N×N row-major.
    #[cfg_attr(not(test), allow(dead_code))] // read by the unit tests (goldens) only
    pub upper: Vec<f32>,
    /// `[subject]` the index of its first scan among the cohort's, subjects in order (scan
    /// indices of the scans held on a device).
    pub scan_offsets: Vec<usize>,
}

impl FoldData {
    pub(crate) fn new(cohort: Arc<Cohort>, stats: &NormStats, include_s_mean: bool) -> Self {
        let norm = cohort.normalized(stats);
        let mut x = Vec::with_capacity(norm.len());
        let mut numeric = Vec::with_capacity(norm.len());
        for (subject, scans) in cohort.subjects.iter().zip(norm) {
            let mut xs = Vec::with_capacity(scans.len());
            let mut cs = Vec::with_capacity(scans.len());
            for (scan, ns) in subject.scans.iter().zip(scans) {
                cs.push(scan.numeric_covariates(ns.ecc.view(), include_s_mean));
                xs.push(ns.x);
            }
            x.push(xs);
            numeric.push(cs);
        }
        let n = cohort.n_nodes;
        let mut upper = vec![0.0f32; n * n];
        for i in 0..n {
            for j in i + 1..n {
                upper[i * n + j] = 1.0;
            }
        }
        let scan_offsets = cohort.scan_offsets();
        Self {
            cohort,
            x,
            numeric,
            upper,
            scan_offsets,
        }
    }

    /// The index of scan `visit` of `subject` among the cohort's.
    pub(crate) fn scan_id(&self, subject: usize, visit: usize) -> i64 {
        (self.scan_offsets[subject] + visit) as i64
    }

    pub(crate) fn n_nodes(&self) -> usize {
        self.cohort.n_nodes
    }

    pub(crate) fn scans(&self, subject: usize) -> &[Scan] {
        &self.cohort.subjects[subject].scans
    }

    /// The numeric-covariate width (35 by default).
    pub(crate) fn numeric_dim(&self) -> usize {
        self.numeric.iter().flatten().next().map_or(0, |v| v.len())
    }
}

/// Δt between visits `a < b` of one subject (docs/clg-ode-model.md §2.5): age difference, or `b − a` when that
/// is not finite or ≤ 0; at least 1e-3.
pub(crate) fn delta_t(scans: &[Scan], a: usize, b: usize) -> f64 {
    let d = scans[b].age - scans[a].age;
    let d = if d.is_finite() && d > 0.0 {
        d
    } else {
        (b - a) as f64
    };
    d.max(1e-3)
}

//! The end of a `train-gnn` run: the best fold and its data (with that fold's normalisation) and
//! best checkpoint, for the model to forecast the held-out test subjects; the result files
//! `test_metrics.json`, `test_sc_metrics.json` and `clg_ode_results.json` (the reference's file
//! names, for every model).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::super::config::GnnConfig;
use super::super::metric::GnnMetric;
use super::super::prepared::Prepared;
use super::breakdown::{
    Predictions, per_subject, per_subject_at, strata, three_visit_subjects, write_per_subject,
};
use super::evaluate::exact_topology;
use super::fold_data::FoldData;
use crate::engine::{JobMetric, StageResult};
use crate::files::write_json;
use crate::outputs::RunDir;
use crate::outputs::result_files::{
    FallbackChoice, FoldEntry, RunResults, TestMetrics, TestMetricsFile,
};
use crate::toolbox::checkpoint::Checkpoint;

/// One finished fold, as `clg_ode_results.json` reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct FoldResult {
    pub fold: usize,
    pub best_val_loss: f64,
    pub best_epoch: usize,
    pub epochs_run: usize,
    pub stopped_early: bool,
    pub best_checkpoint: Option<PathBuf>,
    pub last_checkpoint: Option<PathBuf>,
}

impl FoldResult {
    /// The engine's record of stage `s`, which trained fold `fold`.
    pub(crate) fn from_stage(s: &StageResult, fold: usize) -> Self {
        Self {
            fold,
            best_val_loss: s.best_value.unwrap_or(f64::NAN),
            best_epoch: s.best_epoch,
            epochs_run: s.epochs_run,
            stopped_early: s.stopped_early,
            best_checkpoint: s.best_checkpoint.clone(),
            last_checkpoint: s.last_checkpoint.clone(),
        }
    }
}

/// The finished stages as folds (`fold_ids[stage]`).
pub(crate) fn fold_results(stages: &[StageResult], fold_ids: &[usize]) -> Vec<FoldResult> {
    stages
        .iter()
        .map(|s| FoldResult::from_stage(s, fold_ids[s.stage]))
        .collect()
}

/// The fold whose best monitored value is best, in the monitor's direction.
pub(crate) fn best_fold(config: &GnnConfig, finished: &[FoldResult]) -> Result<FoldResult> {
    let higher_better = config
        .monitor
        .as_ref()
        .is_some_and(|m| m.mode == crate::engine::Mode::Max);
    finished
        .iter()
        .filter(|f| f.best_val_loss.is_finite() && f.best_checkpoint.is_some())
        .min_by(|a, b| {
            let o = a.best_val_loss.total_cmp(&b.best_val_loss);
            if higher_better { o.reverse() } else { o }
        })
        .cloned()
        .context("no fold produced a finite validation loss")
}

/// The best fold's data (with its normalisation) and its best checkpoint.
pub(crate) fn best_fold_data(
    prep: &Prepared,
    config: &GnnConfig,
    best: &FoldResult,
) -> Result<(FoldData, Checkpoint)> {
    let split = prep
        .folds
        .iter()
        .find(|s| s.fold == best.fold)
        .context("best fold not in the fold list")?;
    let stats = prep.cohort.norm_stats(&split.train)?;
    let data = FoldData::new(
        prep.cohort.clone(),
        &stats,
        config.settings.sampling.include_s_mean(),
    );
    let path = best
        .best_checkpoint
        .clone()
        .context("the best fold has no best checkpoint")?;
    Ok((data, Checkpoint::load(&path)?))
}

/// What the test result files report besides the predictions.
pub(crate) struct TestRun<'a> {
    pub config: &'a GnnConfig,
    pub prep: &'a Prepared,
    pub finished: &'a [FoldResult],
    pub best: &'a FoldResult,
    /// The model's loss on the test subjects (its own objective; the forecast MSE for a
    /// closed-form baseline).
    pub test_loss: f64,
    /// CLG-ODE's `--eb-fallback` choice.
    pub eb_fallback: Option<FallbackChoice>,
}

/// Scores `preds` (one per test subject, visit 1 from visit 0) and writes `test_metrics.json`,
/// `test_sc_metrics.json` and `clg_ode_results.json` (the reference's file names, for every
/// model).
pub(crate) fn write_test_results(
    r: &TestRun<'_>,
    data: &FoldData,
    preds: &Predictions,
    far: Option<&Predictions>,
    loss_bins: usize,
    run_dir: &Path,
) -> Result<()> {
    let (config, prep, finished, best_fold, test_loss) =
        (r.config, r.prep, r.finished, r.best, r.test_loss);
    let cohort = &prep.cohort;
    let rows = per_subject(data, &prep.test, preds, config.settings.topo_bins);
    let test = TestMetrics::of(&rows);
    let files = RunDir::new(run_dir);
    let (exact, exact_rows) = exact_topology(data, &prep.test, preds, loss_bins);
    write_per_subject(&files.per_subject_csv(), &rows, &exact_rows)?;
    let far_rows = far.map(|far| {
        let subjects = three_visit_subjects(data, &prep.test);
        let visit2 = vec![2; subjects.len()];
        per_subject_at(data, &subjects, &visit2, far, config.settings.topo_bins)
    });
    write_json(&files.strata_json(), &strata(&rows, far_rows.as_deref()))?;
    let test_file = TestMetricsFile {
        metrics: test.clone(),
        exact_topology: exact.clone(),
        test_loss,
        best_fold: Some(best_fold.fold),
        checkpoint: best_fold.best_checkpoint.clone(),
        eb_fallback: r.eb_fallback.clone(),
    };
    write_json(&files.test_metrics_json(), &test_file)?;
    write_json(&files.test_sc_metrics_json(), &test.model.to_map())?;
    let monitor = config
        .monitor
        .as_ref()
        .map_or(GnnMetric::ValLoss.name(), |m| m.metric.as_str());
    let model = serde_json::to_value(config.settings.model_kind)?;
    let results = RunResults {
        model: model.as_str().map(str::to_owned),
        cv_folds: finished
            .iter()
            .map(|f| FoldEntry {
                fold: Some(f.fold),
                best_val_loss: f.best_val_loss,
                best_monitor_metric: monitor.to_string(),
                best_monitor: f.best_val_loss,
                best_epoch: Some(f.best_epoch),
                epochs_run: f.epochs_run,
                stopped_early: f.stopped_early,
                best_model_path: f.best_checkpoint.clone(),
                last_model_path: f.last_checkpoint.clone(),
            })
            .collect(),
        cv_fold: Some(config.settings.cv_fold),
        cv_folds_total: config.settings.cv_folds,
        best_cv_score: best_fold.best_val_loss,
        best_fold: Some(best_fold.fold),
        best_model_path: best_fold.best_checkpoint.clone(),
        test_loss,
        test_sc_metrics: test.model,
        test_identity_baseline_sc_metrics: test.identity_baseline,
        test_skill: test.skill,
        test_exact_topology: exact,
        n_subjects: cohort.subjects.len(),
        n_trainval: prep.trainval.len(),
        n_test: prep.test.len(),
        cpu_seconds: crate::toolbox::usage::cpu_seconds(),
    };
    write_json(&files.results_json(), &results)?;
    eprintln!(
        "[train-gnn] test ({} subjects, fold {} best epoch {}{}): loss {:.4}, sc_log_mse {:.4} \
         (identity {:.4}, skill {:+.3}), pearson_sparse {:.4} (identity {:.4})",
        prep.test.len(),
        best_fold.fold,
        best_fold.best_epoch,
        if r.eb_fallback.as_ref().is_some_and(|c| c.used) {
            ", forecasts of eb-drift: --eb-fallback"
        } else {
            ""
        },
        test_loss,
        test.model.sc_log_mse,
        test.identity_baseline.sc_log_mse,
        test.skill.skill,
        test.model.sc_log_pearson_sparse,
        test.identity_baseline.sc_log_pearson_sparse,
    );
    Ok(())
}

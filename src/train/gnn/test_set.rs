//! The end of a `train-gnn` run: the best fold's best weights, with that fold's normalisation,
//! scored on the held-out test subjects; writes `test_metrics.json`, `test_sc_metrics.json` and
//! `clg_ode_results.json` (the reference's file names).

use anyhow::{Context, Result};
use burn::prelude::*;
use serde_json::{Value, json};

use super::batch::FoldData;
use super::evaluate::{predict_visit1, test_metrics};
use super::step::eval_loss;
use super::{CV_FOLDS, FoldResult, GnnConfig, Prepared, TOPO_BINS};
use crate::dist::Single;
use crate::engine::checkpoint::Checkpoint;
use crate::engine::params;
use crate::files::write_json;

/// Scores the test subjects and writes the result files into the run directory.
pub fn score_test<B: Backend>(
    config: &GnnConfig,
    prep: &Prepared,
    finished: &[FoldResult],
    device: &B::Device,
) -> Result<()> {
    let cohort = &prep.cohort;
    let run_dir = &config.results_dir;
    let best_fold = finished
        .iter()
        .filter(|f| f.best_val_loss.is_finite())
        .min_by(|a, b| a.best_val_loss.total_cmp(&b.best_val_loss))
        .cloned()
        .context("no fold produced a finite validation loss")?;
    let split = prep
        .folds
        .iter()
        .find(|s| s.fold == best_fold.fold)
        .context("best fold not in the fold list")?;
    let stats = cohort.norm_stats(&split.train)?;
    let data = FoldData::new(cohort, &stats);
    let ck = Checkpoint::load(&best_fold.best_checkpoint)?;
    let model = params::load(
        config.model.init::<B>(device),
        &ck.with_prefix("model"),
        device,
    )?;
    let test_sums = eval_loss(
        &model,
        &data,
        &prep.test,
        config.batch_size,
        config.max_epochs,
        &config.loss,
        device,
        &Single,
    )?;
    let preds = predict_visit1(&model, &data, &prep.test, 8, device);
    let test = test_metrics(&data, &prep.test, &preds, TOPO_BINS);
    let mut test_json = serde_json::to_value(&test)?;
    if let Value::Object(m) = &mut test_json {
        m.insert("test_loss".into(), json!(test_sums.mean_total()));
        m.insert("best_fold".into(), json!(best_fold.fold));
        m.insert("checkpoint".into(), json!(best_fold.best_checkpoint));
    }
    write_json(&run_dir.join("test_metrics.json"), &test_json)?;
    write_json(&run_dir.join("test_sc_metrics.json"), &test.model.to_map())?;
    let results = json!({
        "cv_folds": finished.iter().map(|f| json!({
            "fold": f.fold, "best_val_loss": f.best_val_loss, "best_monitor_metric": "val_loss",
            "best_monitor": f.best_val_loss, "best_epoch": f.best_epoch,
            "epochs_run": f.epochs_run, "stopped_early": f.stopped_early,
            "best_model_path": f.best_checkpoint, "last_model_path": f.last_checkpoint,
        })).collect::<Vec<_>>(),
        "cv_fold": config.cv_fold,
        "cv_folds_total": CV_FOLDS,
        "best_cv_score": best_fold.best_val_loss,
        "best_fold": best_fold.fold,
        "best_model_path": best_fold.best_checkpoint,
        "test_loss": test_sums.mean_total(),
        "test_sc_metrics": test.model.to_map(),
        "test_identity_baseline_sc_metrics": test.identity_baseline.to_map(),
        "n_subjects": cohort.subjects.len(),
        "n_trainval": prep.trainval.len(),
        "n_test": prep.test.len(),
    });
    write_json(&run_dir.join("clg_ode_results.json"), &results)?;
    eprintln!(
        "[train-gnn] test ({} subjects, fold {} best epoch {}): loss {:.4}, sc_log_mse {:.4} \
         (identity {:.4}), pearson_sparse {:.4} (identity {:.4})",
        prep.test.len(),
        best_fold.fold,
        best_fold.best_epoch,
        test_sums.mean_total(),
        test.model.sc_log_mse,
        test.identity_baseline.sc_log_mse,
        test.model.sc_log_pearson_sparse,
        test.identity_baseline.sc_log_pearson_sparse,
    );
    Ok(())
}

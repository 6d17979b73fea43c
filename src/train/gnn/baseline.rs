//! What the reference's gradient-trained baselines (`gcn`, `vector-lstm`) share as engine jobs:
//! their job spec (constant-lr Adam, loss and validation-SC panels), the epoch report (the
//! reference's `val_loss` beside the validation forecasts against the identity) and the test
//! files (the best fold's best weights: the test loss and visit 0 → 1 forecasts).

use std::collections::BTreeMap;

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;
use serde_json::json;

use super::Prepared;
use super::columns::val_sc_columns;
use super::config::GnnConfig;
use super::evaluate::Versus;
use super::fold_data::FoldStart;
use super::settings::GnnSettings;
use super::test_set::{TestRun, write_test_results};
use super::test_set::{best_fold, best_fold_data, fold_results};
use crate::engine::{
    Done, EpochReport, JobSpec, LossSums, LrSchedule, Monitor, Panel, Row, RunContext,
};
use crate::toolbox::checkpoint::Checkpoint;

/// What a baseline job holds besides its fold in progress: the settings, the prepared cohort,
/// the folds it trains, the resolved configuration and the engine's spec.
pub struct Common {
    pub settings: GnnSettings,
    pub prep: Prepared,
    pub fold_ids: Vec<usize>,
    pub config: GnnConfig,
    pub spec: JobSpec,
    /// Whether this rank prints.
    pub main: bool,
    /// Nodes per connectome.
    pub n: usize,
}

impl Common {
    pub fn new<B: AutodiffBackend>(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<Self> {
        let model_name = settings.model_kind.file_stem();
        let (config, spec) = job_spec(&settings, monitor, &prep, ctx, model_name)?;
        Ok(Self {
            n: prep.cohort.n_nodes,
            main: ctx.is_main(),
            fold_ids: settings.fold_ids(),
            settings,
            prep,
            config,
            spec,
        })
    }

    /// Fold `stage`'s data and the engine's stage; `metadata` (the model's sizes) goes into its
    /// checkpoints with the number of nodes.
    pub fn start_fold(&self, stage: usize, metadata: &[(&str, usize)]) -> Result<FoldStart> {
        let mut meta: BTreeMap<String, String> = BTreeMap::new();
        meta.insert("n_nodes".into(), self.n.to_string());
        for (k, v) in metadata {
            meta.insert(k.to_string(), v.to_string());
        }
        FoldStart::new(
            &self.prep,
            stage,
            self.settings.sampling.include_s_mean(),
            self.settings.seed,
            self.settings.model_kind.file_stem(),
            meta,
        )
    }
}

/// The resolved configuration and the engine's spec of a baseline job.
fn job_spec<B: AutodiffBackend>(
    settings: &GnnSettings,
    monitor: Option<Monitor>,
    prep: &Prepared,
    ctx: &RunContext<B>,
    model_name: &'static str,
) -> Result<(GnnConfig, JobSpec)> {
    let config = GnnConfig::new(settings.clone(), monitor.clone(), prep, ctx);
    let spec = JobSpec {
        name: "train-gnn",
        model_name,
        epochs: settings.max_epochs,
        batch_size: settings.batch_size,
        lr: LrSchedule::Constant(settings.learning_rate),
        seed: settings.seed,
        stages: settings.fold_ids().len(),
        monitor,
        unit: "subjects",
        cpu_columns: true,
        epoch_checkpoints: false,
        validate_initial: false,
        plot: vec![
            Panel::new("loss", &["train_loss", "val_loss"], &[]),
            Panel::new(
                "validation sc_log_mse",
                &["val_sc_log_mse"],
                &["val_identity_sc_log_mse"],
            ),
        ],
        config: serde_json::to_value(&config)?,
        fingerprint: config.fingerprint(),
        meta: config.meta(prep),
    };
    Ok((config, spec))
}

/// The epoch's report: the training loss (mean of the batch losses), `val_loss` and the
/// validation forecasts `v` against the identity.
pub fn epoch_report(
    settings: &GnnSettings,
    sums: &LossSums,
    val_loss: f64,
    v: &Versus,
) -> EpochReport {
    let mut head = Row::new();
    head.insert("val_loss".into(), json!(val_loss));
    let mut detail = Row::new();
    val_sc_columns(Some(v), 0.0, 0.0, &mut detail);
    detail.insert("model".into(), json!(settings.model_kind));
    let train_loss = if sums.count > 0.0 {
        sums.mean()
    } else {
        f64::INFINITY
    };
    EpochReport {
        train_loss,
        head,
        detail,
        summary: format!(
            "val_loss {val_loss:.4}, val sc_log_mse {:.4} (identity {:.4}, skill {:+.3})",
            v.model.sc_log_mse, v.identity.sc_log_mse, v.skill.skill
        ),
    }
}

/// The test files of a finished run: `score` gets the best fold's data and best checkpoint
/// and returns the test loss and the test subjects' visit 0 → 1 forecasts.
pub fn finish<B: AutodiffBackend>(
    done: &Done<'_, B>,
    config: &GnnConfig,
    prep: &Prepared,
    fold_ids: &[usize],
    score: impl FnOnce(&super::fold_data::FoldData, &Checkpoint) -> Result<(f64, Vec<Array2<f32>>)>,
) -> Result<()> {
    if done.comm.rank() != 0 {
        return Ok(());
    }
    let folds = fold_results(done.stages, fold_ids);
    let best = best_fold(config, &folds)?;
    let (data, ck) = best_fold_data(prep, config, &best)?;
    let (test_loss, preds) = score(&data, &ck)?;
    let run = TestRun {
        config,
        prep,
        finished: &folds,
        best: &best,
        test_loss,
    };
    let loss_bins = config.settings.objective.topology.loss_bins;
    write_test_results(&run, &data, &preds.into(), None, loss_bins, done.run_dir)
}

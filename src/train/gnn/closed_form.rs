//! The state every closed-form forecaster's job shares ([`ClosedFormJob`](super::closed_form_job)
//! runs `--model linear-drift`, [`drift`](super::drift), and `--model eb-drift`,
//! [`eb_drift`](super::eb_drift)): one epoch per fold, the same loader, split, folds, validation
//! columns, test protocol and result files as CLG-ODE; the fitted forecaster as a function
//! ([`Forecast`]). Each model keeps only its own sums, fit and forecast.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;
use serde_json::json;

use super::Prepared;
use super::batch::delta_t;
use super::breakdown::three_visit_subjects;
use super::columns::val_sc_columns;
use super::config::GnnConfig;
use super::evaluate::versus_identity;
use super::fold_data::{FoldData, FoldStart};
use super::settings::GnnSettings;
use super::test_set::{TestRun, best_fold, best_fold_data, fold_results, write_test_results};
use crate::data::connectome::Scan;
use crate::engine::{
    Done, EpochReport, JobSpec, LrSchedule, Monitor, Panel, Row, RunContext, Stage,
};
use crate::toolbox::checkpoint::Checkpoint;

/// The state of a closed-form forecaster's job: its settings, the cohort, the spec and the fold
/// in progress.
pub struct ClosedForm {
    pub settings: GnnSettings,
    pub prep: Prepared,
    fold_ids: Vec<usize>,
    config: GnnConfig,
    /// Rank 0: the one that logs.
    pub main: bool,
    pub spec: JobSpec,
    pub n: usize,
    /// The fold in progress: its index in `fold_ids` and data.
    fold: Option<(usize, FoldData)>,
    /// The forecaster's error on the training pairs after the last fit (what the epoch
    /// reports as its training loss).
    pub train_loss: f64,
}

impl ClosedForm {
    /// The job's state for the forecaster `model_name` (the model files' stem).
    pub fn new<B: AutodiffBackend>(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
        model_name: &'static str,
    ) -> Result<Self> {
        let fold_ids = settings.fold_ids();
        let config = GnnConfig::new(settings.clone(), monitor.clone(), &prep, ctx);
        let spec = JobSpec {
            name: "train-gnn",
            model_name,
            // A closed-form fit: one pass over the training subjects.
            epochs: 1,
            batch_size: settings.batch_size,
            lr: LrSchedule::Constant(0.0),
            seed: settings.seed,
            stages: fold_ids.len(),
            monitor,
            unit: "subjects",
            cpu_columns: true,
            plot: vec![Panel::new(
                "validation sc_log_mse",
                &["val_sc_log_mse"],
                &["val_identity_sc_log_mse"],
            )],
            config: serde_json::to_value(&config)?,
            fingerprint: config.fingerprint(),
            meta: config.meta(&prep),
            ..JobSpec::default()
        };
        Ok(Self {
            n: prep.cohort.n_nodes,
            main: ctx.is_main(),
            settings,
            prep,
            fold_ids,
            config,
            spec,
            fold: None,
            train_loss: f64::NAN,
        })
    }

    /// Loads fold `stage` (with `metadata` beside `n_nodes` in its model file) and logs its
    /// sizes on rank 0.
    pub fn begin_stage(
        &mut self,
        stage: usize,
        mut metadata: BTreeMap<String, String>,
    ) -> Result<Stage> {
        metadata.insert("n_nodes".into(), self.n.to_string());
        let start = FoldStart::new(
            &self.prep,
            stage,
            self.settings.sampling.include_s_mean(),
            self.settings.seed,
            self.settings.model_kind.file_stem(),
            self.spec.monitor.as_ref(),
            metadata,
        )?;
        let split = &self.prep.folds[stage];
        if self.main {
            eprintln!(
                "[train-gnn] {} fold {}: {} train / {} val / {} test subjects",
                self.settings.model_kind,
                start.fold,
                split.train.len(),
                split.val.len(),
                self.prep.test.len()
            );
        }
        self.fold = Some((stage, start.data));
        Ok(start.stage)
    }

    /// The fold in progress: its data and its training subjects.
    pub fn training(&self) -> Result<(&FoldData, &[usize])> {
        let (stage, data) = self.fold.as_ref().context("no fold in progress")?;
        Ok((data, &self.prep.folds[*stage].train))
    }

    /// The epoch's report: the forecast `forecast` makes of the fold's validation subjects at
    /// their visit 1, against the identity's.
    pub fn report(&self, forecast: impl Forecast) -> Result<EpochReport> {
        let (stage, data) = self.fold.as_ref().context("no fold in progress")?;
        let val = &self.prep.folds[*stage].val;
        let preds = forecast(data, val, None);
        let v = versus_identity(data, val, &preds.into(), self.settings.topo_bins);
        let mut head = Row::new();
        head.insert("val_loss".into(), json!(v.model.sc_log_mse));
        let mut detail = Row::new();
        val_sc_columns(Some(&v), 0.0, 0.0, &mut detail);
        detail.insert("model".into(), json!(self.settings.model_kind));
        Ok(EpochReport {
            train_loss: self.train_loss,
            head,
            detail,
            summary: format!(
                "val sc_log_mse {:.4} (identity {:.4}, skill {:+.3})",
                v.model.sc_log_mse, v.identity.sc_log_mse, v.skill.skill
            ),
        })
    }

    /// Rank 0's test results: the best fold's checkpoint, through `forecaster`, forecasts the
    /// test subjects at their visit 1 and the three-visit ones at their visit 2. The test loss
    /// of a closed-form forecast is its test sc_log_mse.
    pub fn finish<B: AutodiffBackend, F: Forecast>(
        &self,
        done: &Done<'_, B>,
        forecaster: impl FnOnce(&Checkpoint) -> Result<F>,
    ) -> Result<()> {
        if done.comm.rank() != 0 {
            return Ok(());
        }
        let folds = fold_results(done.stages, &self.fold_ids);
        let best = best_fold(&self.config, &folds)?;
        let (data, ck) = best_fold_data(&self.prep, &self.config, &best)?;
        let forecast = forecaster(&ck)?;
        let test_subjects = &self.prep.test;
        let preds = forecast(&data, test_subjects, None);
        let test = versus_identity(
            &data,
            test_subjects,
            &preds.clone().into(),
            self.settings.topo_bins,
        );
        let run = TestRun {
            config: &self.config,
            prep: &self.prep,
            finished: &folds,
            best: &best,
            test_loss: test.model.sc_log_mse,
        };
        let far_subjects = three_visit_subjects(&data, test_subjects);
        let far_dts: Vec<f64> = far_subjects
            .iter()
            .map(|&s| delta_t(data.scans(s), 0, 2))
            .collect();
        let far = forecast(&data, &far_subjects, Some(&far_dts));
        write_test_results(
            &run,
            &data,
            &preds.into(),
            Some(&far.into()),
            self.settings.objective.topology.loss_bins,
            done.run_dir,
        )
    }
}

/// A fitted forecaster: the forecast of each subject of `subjects` of a fold from its visit 0,
/// `dts[i]` years later, or (`dts` = `None`) at its visit 1 (a one-scan subject: its scan).
pub trait Forecast: Fn(&FoldData, &[usize], Option<&[f64]>) -> Vec<Array2<f32>> {}

impl<F: Fn(&FoldData, &[usize], Option<&[f64]>) -> Vec<Array2<f32>>> Forecast for F {}

/// The forecast of each subject of `subjects` from its visit 0 by `one(scan 0, dt, sex id)`:
/// `dts[i]` years later, or (`dts` = `None`) at its visit 1 (a one-scan subject: its scan, as
/// every model).
pub(super) fn from_visit_0(
    data: &FoldData,
    subjects: &[usize],
    dts: Option<&[f64]>,
    one: impl Fn(&Scan, f64, usize) -> Array2<f32>,
) -> Vec<Array2<f32>> {
    subjects
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let scans = data.scans(s);
            let dt = match dts {
                Some(dts) => dts[i],
                None if scans.len() < 2 => return scans[0].a_raw.clone(),
                None => delta_t(scans, 0, 1),
            };
            one(&scans[0], dt, data.cohort.subjects[s].sex)
        })
        .collect()
}

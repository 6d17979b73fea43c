//! One cross-validation job for every `train-gnn --model`: [`CvJob`] runs a [`Forecaster`]
//! over the folds of the prepared cohort. The job owns what every model shares ([`Cv`]: the
//! settings, the cohort and its split, the resolved configuration, the job spec; [`CvFold`]:
//! the fold in progress, its normalised data and training items; the fold results after the
//! last stage); a forecaster brings what is its own: its network, a gradient step or a
//! closed-form refit, its epoch report, its test scoring and its forecast from a saved run.
//!
//! The forecasters: CLG-ODE (`clg_ode/`), the gradient-trained baselines through
//! [`Grad`](super::baseline::Grad) (`gcn.rs`, `lstm.rs`), the closed-form ones through
//! [`Fitted`](super::closed_form::Fitted) (`drift.rs`, `eb_drift.rs`); the list is
//! `registry.rs`.

mod batch;
mod job;

use std::collections::BTreeMap;

use anyhow::Result;
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::config::GnnConfig;
use super::kind::ModelKind;
use super::metric::GnnMetric;
use super::prepared::Prepared;
use super::protocol::breakdown::Predictions;
use super::protocol::columns::val_sc_columns;
use super::protocol::evaluate::versus_identity;
use super::protocol::fold_data::{FoldData, FoldStart};
use super::protocol::saved_run::{Horizon, SavedRun};
use super::protocol::test_set::FoldResult;
use super::settings::GnnSettings;
use crate::data::connectome::FoldSplit;
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, EpochSums, JobMetric, LrSchedule, Monitor, Row, RunContext,
    StepOut, StepSums, degeneracy::Phase,
};

pub(super) use self::job::CvJob;

/// What every forecaster's job shares: the run's settings, the prepared cohort, the folds to
/// train and the resolved configuration.
pub(super) struct Cv {
    pub settings: GnnSettings,
    pub prep: Prepared,
    /// The folds trained, one stage each (`--fold`, or every fold).
    pub fold_ids: Vec<usize>,
    pub config: GnnConfig,
    /// The run's early-stopping monitor (the spec's).
    pub monitor: Option<Monitor>,
    /// Rank 0: the one that logs.
    pub main: bool,
    /// Ranks.
    pub world: usize,
    /// Nodes per connectome.
    pub n: usize,
}

impl Cv {
    /// The metric the run monitors, if any (the CLI checked it is one of [`GnnMetric`]'s).
    pub(super) fn metric(&self) -> Option<GnnMetric> {
        self.monitor.as_ref().and_then(|m| m.metric_of().ok())
    }

    /// Whether the monitored metric needs the validation SC metrics every epoch.
    pub(super) fn monitors_val_sc(&self) -> bool {
        self.metric().is_some_and(GnnMetric::needs_val_sc)
    }

    /// The split of the fold in progress.
    pub(super) fn split(&self, fold: &CvFold) -> &FoldSplit {
        &self.prep.folds[fold.stage]
    }

    /// The epoch report of a baseline: `preds`, the forecast of the fold's validation subjects
    /// at their visit 1, scored against the identity's (the validation SC columns and the
    /// model's name); `val_loss` is the model's own validation loss, or without one its
    /// validation sc_log_mse.
    pub(super) fn versus_report(
        &self,
        fold: &CvFold,
        preds: Predictions,
        val_loss: Option<f64>,
        train_loss: f64,
    ) -> EpochReport {
        let v = versus_identity(
            &fold.data,
            &self.split(fold).val,
            &preds,
            self.settings.topo_bins,
        );
        let mut head = Row::new();
        let head_loss = val_loss.unwrap_or(v.model.sc_log_mse);
        head.insert(GnnMetric::ValLoss.name().into(), json!(head_loss));
        let mut detail = Row::new();
        val_sc_columns(Some(&v), 0.0, 0.0, &mut detail);
        detail.insert("model".into(), json!(self.settings.model_kind));
        let own = val_loss.map_or(String::new(), |l| format!("val_loss {l:.4}, "));
        EpochReport {
            train_loss,
            head,
            detail,
            summary: format!(
                "{own}val sc_log_mse {:.4} (identity {:.4}, skill {:+.3})",
                v.model.sc_log_mse, v.identity.sc_log_mse, v.skill.skill
            ),
        }
    }
}

/// The fold in progress.
pub(super) struct CvFold {
    /// Its index in `fold_ids` (the engine's stage).
    pub stage: usize,
    /// Its fold number.
    pub id: usize,
    /// The cohort normalised with the fold's training subjects.
    pub data: FoldData,
    /// What a batch's order indexes: the training items (subjects).
    pub items: Vec<usize>,
}

/// A forecaster's part of the job spec.
pub(super) struct Plan {
    /// Epochs per fold.
    pub epochs: usize,
    pub lr: LrSchedule,
    /// The metrics `curves.svg` draws (their panels follow from [`GnnMetric`]).
    pub drawn: Vec<GnnMetric>,
    /// See `JobSpec::validate_initial`.
    pub validate_initial: Option<String>,
    /// See `JobSpec::phases`.
    pub phases: Vec<Phase>,
}

/// The evaluation-mode network of forecaster `F` on the autodiff backend `B`.
pub(super) type Inner<F, B> = <<F as Forecaster>::Net<B> as AutodiffModule<B>>::InnerModule;

/// One `train-gnn --model`: what [`CvJob`] asks of it. A value of the type is the forecaster's
/// state during a run (CLG-ODE's objective; nothing for most); the generic methods run on
/// whichever backend the command dispatches to.
pub(crate) trait Forecaster: Sized + 'static {
    /// Its `--model` value.
    const KIND: ModelKind;
    /// Its name in checkpoints (the `model` metadata) and the stem of its model files
    /// (`checkpoints/<stem>_fold<k>_{best,last}.safetensors`).
    const FILE_STEM: &'static str;
    /// Whether it forecasts at any horizon (an age or Δt input): `predict --target-age`,
    /// `--dt-years`, `--ages` and eval-gnn's visit 0 → 2 rows. Without it, only the next visit.
    const TIME_INPUT: bool;
    /// Whether it needs `--subject-info-csv` (ages and covariates); without the table, ages
    /// are visit indices.
    const NEEDS_SUBJECT_TABLE: bool = false;
    /// Whether it takes morphology as input (NaN morphology cells are then refused at load,
    /// naming the files, instead of failing folds later).
    const READS_MORPHOLOGY: bool = false;
    /// Whether an optimiser trains it (`--optimizer` applies); a closed-form fit has none.
    const GRADIENT_TRAINED: bool = true;

    /// The GPU memory its training step takes a subject at `nodes` nodes, if it is known: a
    /// run on a CUDA GPU without `--batch-size` then sizes its batch to the GPU (`cv/batch.rs`).
    /// `None`: the reference's batch of 2 everywhere.
    fn gpu_bytes_per_subject(_nodes: usize) -> Option<u64> {
        None
    }

    /// Its network (a closed-form forecaster: the module its fitted parameters are saved in).
    type Net<B: AutodiffBackend>: AutodiffModule<B>;
    /// What a step adds up over ranks.
    type Step: StepSums;
    /// What an epoch adds up over its steps.
    type Epoch: EpochSums<Self::Step>;
    /// What a resume checkpoint keeps of it.
    type State: Serialize + DeserializeOwned + Default;

    /// Its state for a run on `cv` (checks that must fail before the run directory exists
    /// belong here).
    fn new<B: AutodiffBackend>(cv: &Cv, ctx: &RunContext<B>) -> Result<Self>;
    /// Its epochs, learning rate, panels and phases.
    fn plan(&self, cv: &Cv) -> Plan;
    /// Metadata of a fold's model files (beside `fold`).
    fn metadata(&self, cv: &Cv) -> Result<BTreeMap<String, String>>;
    /// Sets up the fold `start` of stage `stage` (logs it on rank 0) and returns its training
    /// items (`None`: the fold's training subjects). `resumed`: the run resumes inside it.
    fn begin_fold(
        &mut self,
        cv: &Cv,
        stage: usize,
        start: &mut FoldStart,
        resumed: bool,
    ) -> Result<Option<Vec<usize>>>;
    /// A fresh network for fold `stage`.
    fn init<B: AutodiffBackend>(
        &self,
        cv: &Cv,
        stage: usize,
        device: &B::Device,
    ) -> Result<Self::Net<B>>;
    /// One shard's gradients and sums (the engine's step convention, `Job::step`).
    fn step<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        fold: &CvFold,
        net: &Self::Net<B>,
        b: &Batch<'_, B>,
    ) -> Result<StepOut<Self::Step>>;
    /// A closed-form refit from the epoch's sums (the default keeps the trained network).
    fn refit<B: AutodiffBackend>(
        &mut self,
        _cv: &Cv,
        _fold: &CvFold,
        net: Self::Net<B>,
        _sums: &Self::Epoch,
        _device: &B::Device,
    ) -> Result<Self::Net<B>> {
        Ok(net)
    }
    /// The epoch's training loss, validation and columns.
    fn end_epoch<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        fold: &CvFold,
        net: &Inner<Self, B>,
        sums: &Self::Epoch,
        ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport>;
    /// Its state for a resume checkpoint.
    fn state(&self) -> Self::State {
        Self::State::default()
    }
    /// Restores the state of a resume checkpoint.
    fn restore(&mut self, _state: Self::State) {}
    /// Rank 0's test files from the finished folds.
    fn test<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        folds: &[FoldResult],
        done: &Done<'_, B>,
    ) -> Result<()>;
    /// A saved run's forecast of `subjects` (repeats allowed) from its checkpoint. `horizon`
    /// is `Years` only when [`Self::TIME_INPUT`] (the caller refuses it otherwise).
    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        horizon: &Horizon<'_>,
        device: &B::Device,
    ) -> Result<Predictions>;
}

/// Something done with the forecaster of a `ModelKind`, given its type (see
/// [`with_model`](super::registry::with_model)).
pub(super) trait WithModel {
    type Output;
    fn with<F: Forecaster>(self) -> Self::Output;
}

//! What a model of `train-gnn --model` is ([`GnnModel`], one zero-sized type per model, each in
//! its own file) and something done with a model given its type ([`WithModel`]). The list of
//! models is `registry.rs`; the `--model` values are `kind.rs`.
//!
//! A gradient-trained baseline implements [`GradBaseline`](super::baseline::GradBaseline)
//! instead, and is a `GnnModel` through the shared baseline job.

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;

use super::Prepared;
use super::breakdown::Predictions;
use super::kind::ModelKind;
use super::saved_run::{Horizon, SavedRun};
use super::settings::GnnSettings;
use crate::engine::{Job, Monitor, RunContext};

/// One `train-gnn --model`. Implemented by a (zero-sized) type per model; the generic methods
/// run on whichever backend the command dispatches to.
pub trait GnnModel: 'static {
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

    /// Its training job.
    type Job<B: AutodiffBackend>: Job<B>;

    /// The training job of a run, on the prepared cohort.
    fn job<B: AutodiffBackend>(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<Self::Job<B>>;

    /// A saved run's forecast of `subjects` (repeats allowed) from its checkpoint. `horizon` is
    /// `Years` only when [`Self::TIME_INPUT`] (the caller refuses it otherwise).
    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        horizon: &Horizon<'_>,
        device: &B::Device,
    ) -> Result<Predictions>;
}

/// Something done with the model of a `ModelKind`, given its type (see [`with_model`]).
pub trait WithModel {
    type Output;
    fn with<M: GnnModel>(self) -> Self::Output;
}

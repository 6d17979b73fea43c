//! The models of `train-gnn --model`: what a model is ([`GnnModel`], one type per model) and
//! the list of them ([`models!`] below: the `ModelKind` enum and the one match that turns a
//! `ModelKind` into its type). Every command asks the model through this file: `train-gnn`
//! builds its job ([`GnnModel::job`]), `eval-gnn`, `predict` and `plot-sc` its forecast
//! ([`GnnModel::forecast`]), and anything else reads [`ModelInfo`] (`kind.info()`).
//!
//! A gradient-trained baseline implements [`GradBaseline`](super::baseline::GradBaseline)
//! instead, and is a `GnnModel` through the shared baseline job.

use anyhow::Result;
use burn::tensor::backend::AutodiffBackend;
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

use super::Prepared;
use super::breakdown::Predictions;
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

/// The models, one line each: `Kind => type`, the doc comment being its `--model` help. The
/// variant's kebab-case name is the `--model` value. Expands to `ModelKind` and
/// [`with_model`], the one place a `ModelKind` becomes a type.
macro_rules! models {
    ($($(#[doc = $doc:literal])* $(#[cfg($cfg:meta)])? $kind:ident => $model:ty,)*) => {
        /// The models `train-gnn` trains, on one loader, split and test protocol.
        #[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum ModelKind {
            $($(#[doc = $doc])* $(#[cfg($cfg)])? $kind,)*
        }

        /// Calls `w` with the model type of `kind`.
        pub fn with_model<W: WithModel>(kind: ModelKind, w: W) -> W::Output {
            match kind {
                $($(#[cfg($cfg)])? ModelKind::$kind => w.with::<$model>(),)*
            }
        }
    };
}

models! {
    /// CLG-ODE, the coupled latent graph ODE.
    ClgOde => super::clg_ode::ClgOdeModel,
    /// The start scan plus a per-edge drift × Δt (closed form).
    LinearDrift => super::drift::DriftModel,
    /// Empirical Bayes: the population trajectory plus the subject's deviation shrunk by how
    /// much it repeats between visits, times each edge's existence probability (closed form,
    /// docs/eb-drift.md).
    EbDrift => super::eb_drift::EbDriftModel,
    /// The reference's two-layer GCN baseline (gradient-trained, `--hidden-dim` channels).
    Gcn => super::gcn::GcnModel,
    /// The reference's VectorLSTM baseline (upper triangle → Linear → LSTM → Linear,
    /// `--latent-dim` units).
    VectorLstm => super::lstm::LstmModel,
    /// A toy: the start scan times a trained scale (tests only).
    #[cfg(test)]
    Identity => super::toy_model::IdentityModel,
}

/// What a model says about itself, without its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelInfo {
    pub kind: ModelKind,
    /// See [`GnnModel::FILE_STEM`].
    pub file_stem: &'static str,
    /// See [`GnnModel::TIME_INPUT`].
    pub time_input: bool,
    /// See [`GnnModel::NEEDS_SUBJECT_TABLE`].
    pub needs_subject_table: bool,
}

struct Info;

impl WithModel for Info {
    type Output = ModelInfo;
    fn with<M: GnnModel>(self) -> ModelInfo {
        ModelInfo {
            kind: M::KIND,
            file_stem: M::FILE_STEM,
            time_input: M::TIME_INPUT,
            needs_subject_table: M::NEEDS_SUBJECT_TABLE,
        }
    }
}

impl ModelKind {
    /// What the model says about itself.
    pub fn info(self) -> ModelInfo {
        with_model(self, Info)
    }

    /// The stem of its model files (`checkpoints/<stem>_fold<k>_{best,last}`).
    pub fn file_stem(self) -> &'static str {
        self.info().file_stem
    }
}

/// Its `--model` value (`vector-lstm`).
impl std::fmt::Display for ModelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_possible_value() {
            Some(v) => f.write_str(v.get_name()),
            None => write!(f, "{self:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_names_its_own_model_with_its_own_file_stem() {
        let mut stems = Vec::new();
        for &kind in ModelKind::value_variants() {
            let info = kind.info();
            assert_eq!(
                info.kind, kind,
                "{kind:?} is registered with another model's type"
            );
            assert!(!stems.contains(&info.file_stem), "{kind:?}: stem taken");
            stems.push(info.file_stem);
            let json = serde_json::to_value(kind).unwrap();
            assert_eq!(json, kind.to_string(), "serde and clap name {kind:?} alike");
        }
        assert_eq!(ModelKind::VectorLstm.to_string(), "vector-lstm");
    }
}

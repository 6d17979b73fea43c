//! The forecasters of `train-gnn --model`, one line each: [`with_model`] turns a [`ModelKind`]
//! into its forecaster's type, the one place that happens. Every command asks the model
//! through this file: `train-gnn` runs it in the one cross-validation job
//! ([`CvJob`](super::cv::CvJob)), `eval-gnn`, `predict` and `plot-sc` ask its forecast
//! ([`Forecaster::forecast`]), and anything else reads [`ModelInfo`] (`kind.info()`).
//!
//! Adding a model: its folder or file with a type implementing [`Forecaster`] (or a
//! [`GradBaseline`](super::baseline::GradBaseline), run as `Grad<M>`, or a
//! [`ClosedFormFit`](super::closed_form::ClosedFormFit), run as `Fitted<M>`), a variant of
//! [`ModelKind`] (`kind.rs`) and its line in [`with_model`].

use super::baseline::Grad;
use super::closed_form::Fitted;
use super::cv::{Forecaster, WithModel};
use super::kind::ModelKind;

/// Calls `w` with the model type of `kind`.
pub(super) fn with_model<W: WithModel>(kind: ModelKind, w: W) -> W::Output {
    match kind {
        ModelKind::ClgOde => w.with::<super::clg_ode::ClgOdeModel>(),
        ModelKind::LinearDrift => w.with::<Fitted<super::drift::DriftModel>>(),
        ModelKind::EbDrift => w.with::<Fitted<super::eb_drift::EbDriftModel>>(),
        ModelKind::Gcn => w.with::<Grad<super::gcn::GcnModel>>(),
        ModelKind::VectorLstm => w.with::<Grad<super::lstm::LstmModel>>(),
        #[cfg(test)]
        ModelKind::Identity => w.with::<Grad<super::toy_model::IdentityModel>>(),
    }
}

/// What a model says about itself, without its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ModelInfo {
    pub kind: ModelKind,
    /// See [`Forecaster::FILE_STEM`].
    pub file_stem: &'static str,
    /// See [`Forecaster::TIME_INPUT`].
    pub time_input: bool,
    /// See [`Forecaster::NEEDS_SUBJECT_TABLE`].
    pub needs_subject_table: bool,
    /// See [`Forecaster::GRADIENT_TRAINED`].
    pub gradient_trained: bool,
}

struct Info;

impl WithModel for Info {
    type Output = ModelInfo;
    fn with<M: Forecaster>(self) -> ModelInfo {
        ModelInfo {
            kind: M::KIND,
            file_stem: M::FILE_STEM,
            time_input: M::TIME_INPUT,
            needs_subject_table: M::NEEDS_SUBJECT_TABLE,
            gradient_trained: M::GRADIENT_TRAINED,
        }
    }
}

impl ModelKind {
    /// What the model says about itself.
    pub(crate) fn info(self) -> ModelInfo {
        with_model(self, Info)
    }

    /// The stem of its model files (`checkpoints/<stem>_fold<k>_{best,last}`).
    pub(crate) fn file_stem(self) -> &'static str {
        self.info().file_stem
    }
}

#[cfg(test)]
mod tests {
    use clap::ValueEnum;

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

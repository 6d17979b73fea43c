//! The models of `train-gnn --model`, one line each: [`with_model`] turns a [`ModelKind`] into
//! its model's type, the one place that happens. Every command asks the model through this
//! file: `train-gnn` builds its job ([`GnnModel::job`]), `eval-gnn`, `predict` and `plot-sc` its
//! forecast ([`GnnModel::forecast`]), and anything else reads [`ModelInfo`] (`kind.info()`).
//!
//! Adding a model: its folder or file with a type implementing [`GnnModel`] (or
//! [`GradBaseline`](super::baseline::GradBaseline)), a variant of [`ModelKind`] (`kind.rs`) and
//! its line in [`with_model`].

use super::kind::ModelKind;
use super::model::{GnnModel, WithModel};

/// Calls `w` with the model type of `kind`.
pub fn with_model<W: WithModel>(kind: ModelKind, w: W) -> W::Output {
    match kind {
        ModelKind::ClgOde => w.with::<super::clg_ode::ClgOdeModel>(),
        ModelKind::LinearDrift => w.with::<super::drift::DriftModel>(),
        ModelKind::EbDrift => w.with::<super::eb_drift::EbDriftModel>(),
        ModelKind::Gcn => w.with::<super::gcn::GcnModel>(),
        ModelKind::VectorLstm => w.with::<super::lstm::LstmModel>(),
        #[cfg(test)]
        ModelKind::Identity => w.with::<super::toy_model::IdentityModel>(),
    }
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

//! `train-gnn --model linear-drift`: a closed-form forecaster ([`ClosedFormFit`]) run as a
//! [`Fitted`](super::closed_form::Fitted) forecaster: the same loader, split, folds, validation
//! columns, test protocol and result files as CLG-ODE; one epoch per fold whose steps add up the closed-form fit's
//! statistics over the training subjects' consecutive visit pairs (summed over ranks like any
//! step's sums), and whose end fits the drift.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};

use super::closed_form::{ClosedFormFit, Forecast, from_visit_0};
use super::cv::{Cv, CvFold};
use super::fits::pair_stats;
use super::kind::ModelKind;
use super::protocol::fold_data::FoldData;
use super::settings::GnnSettings;
use crate::engine::{EpochSums, StepSums};
use crate::models::linear_drift::{DriftStats, DriftSupport, LinearDrift, MODEL_NAME, forecast};
use crate::toolbox::checkpoint::Checkpoint;

/// `--model linear-drift`.
pub(super) struct DriftModel;

impl ClosedFormFit for DriftModel {
    const KIND: ModelKind = ModelKind::LinearDrift;
    const MODEL_NAME: &'static str = MODEL_NAME;
    type Module<B: AutodiffBackend> = LinearDrift<B>;
    type Sums = DriftSums;
    /// The drift per matrix entry.
    type Params = Vec<f32>;

    fn metadata(settings: &GnnSettings) -> Result<BTreeMap<String, String>> {
        let support = serde_json::to_string(&settings.drift.drift_support)?;
        Ok(BTreeMap::from([("drift_support".to_string(), support)]))
    }

    fn init<B: AutodiffBackend>(n: usize, device: &B::Device) -> LinearDrift<B> {
        LinearDrift::new(n, device)
    }

    fn sums(data: &FoldData, subjects: impl Iterator<Item = usize>) -> DriftSums {
        DriftSums(pair_stats(data, subjects))
    }

    fn fit<B: AutodiffBackend>(
        cv: &Cv,
        _fold: &CvFold,
        sums: &DriftSums,
        device: &B::Device,
    ) -> Result<(LinearDrift<B>, f64)> {
        let n = cv.n;
        let d = sums.0.drift();
        let train_loss = sums.0.residual(&d, n);
        Ok((LinearDrift::with_drift(n, d, device), train_loss))
    }

    fn valid_params<B: AutodiffBackend>(
        m: &<LinearDrift<B> as AutodiffModule<B>>::InnerModule,
        _n: usize,
    ) -> Result<Vec<f32>> {
        Ok(m.host())
    }

    fn checkpoint_params(ck: &Checkpoint, _n: usize) -> Result<Vec<f32>> {
        Ok(ck
            .model()
            .get("drift")
            .context("the linear-drift model file has no drift")?
            .data
            .clone())
    }

    fn forecaster(d: Vec<f32>, settings: &GnnSettings) -> impl Forecast {
        drift_forecaster(d, settings.drift.drift_support)
    }
}

/// One step's (or an epoch's) statistics of the fit.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct DriftSums(pub DriftStats);

impl StepSums for DriftSums {
    fn flat(&self) -> Vec<f64> {
        let s = &self.0;
        let mut v = Vec::with_capacity(2 * s.xy.len() + 2);
        v.extend(&s.xy);
        v.extend(&s.yy);
        v.extend([s.xx, s.pairs]);
        v
    }

    fn with_flat(self, g: &[f64]) -> Self {
        let n = self.0.xy.len();
        Self(DriftStats {
            xy: g[..n].to_vec(),
            yy: g[n..2 * n].to_vec(),
            xx: g[2 * n],
            pairs: g[2 * n + 1],
        })
    }

    /// The identity's mean squared change per pair and matrix entry (what the drift explains
    /// part of).
    fn loss(&self) -> f64 {
        let s = &self.0;
        s.yy.iter().sum::<f64>() / (s.pairs * s.yy.len() as f64).max(1.0)
    }
}

impl EpochSums<DriftSums> for DriftSums {
    fn add(&mut self, step: &DriftSums) {
        self.0.merge(&step.0);
    }
}

/// The linear-drift forecaster of drift `d` (see [`Forecast`]).
fn drift_forecaster(d: Vec<f32>, support: DriftSupport) -> impl Forecast {
    move |data: &FoldData, subjects: &[usize], dts: Option<&[f64]>| {
        from_visit_0(data, subjects, dts, |scan, dt, _sex| {
            forecast(&scan.a_raw.dense(), &d, dt, support)
        })
    }
}

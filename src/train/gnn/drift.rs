//! `train-gnn --model linear-drift` as a job of the engine: the same loader, split, folds,
//! validation columns, test protocol and result files as CLG-ODE; one epoch per fold whose
//! steps add up the closed-form fit's statistics over the training subjects' consecutive visit
//! pairs (summed over ranks like any step's sums), and whose end fits the drift.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::{Context, Result};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use serde::{Deserialize, Serialize};

use super::Prepared;
use super::breakdown::Predictions;
use super::closed_form::{ClosedForm, Forecast, from_visit_0};
use super::fits::pair_stats;
use super::fold_data::FoldData;
use super::kind::ModelKind;
use super::model::GnnModel;
use super::saved_run::{Horizon, SavedRun};
use super::settings::GnnSettings;
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, EpochSums, Job, JobSpec, Monitor, RunContext, Stage,
    StepOut, StepSums, Valid,
};
use crate::models::linear_drift::{DriftStats, DriftSupport, LinearDrift, MODEL_NAME, forecast};

/// `--model linear-drift`.
pub struct DriftModel;

impl GnnModel for DriftModel {
    const KIND: ModelKind = ModelKind::LinearDrift;
    const FILE_STEM: &'static str = MODEL_NAME;
    const TIME_INPUT: bool = true;
    type Job<B: AutodiffBackend> = DriftJob<B>;

    fn job<B: AutodiffBackend>(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<DriftJob<B>> {
        DriftJob::new(settings, monitor, prep, ctx)
    }

    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        horizon: &Horizon<'_>,
        _device: &B::Device,
    ) -> Result<Predictions> {
        let weights = run.ck.with_prefix("model");
        let d = &weights
            .get("drift")
            .context("the checkpoint has no drift")?
            .data;
        let dts = match horizon {
            Horizon::NextVisit => None,
            Horizon::Years { dts, .. } => Some(*dts),
        };
        let forecast = drift_forecaster(d.clone(), run.config.settings.drift.drift_support);
        Ok(forecast(&run.data, subjects, dts).into())
    }
}

/// One step's (or an epoch's) statistics of the fit.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DriftSums(pub DriftStats);

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

pub struct DriftJob<B: AutodiffBackend> {
    core: ClosedForm,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend> DriftJob<B> {
    pub fn new(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<Self> {
        Ok(Self {
            core: ClosedForm::new(settings, monitor, prep, ctx, MODEL_NAME)?,
            _b: PhantomData,
        })
    }

    /// The forecaster of drift `d`.
    fn forecaster(&self, d: Vec<f32>) -> impl Forecast {
        drift_forecaster(d, self.core.settings.drift.drift_support)
    }
}

/// The linear-drift forecaster of drift `d` (see [`Forecast`]).
fn drift_forecaster(d: Vec<f32>, support: DriftSupport) -> impl Forecast {
    move |data: &FoldData, subjects: &[usize], dts: Option<&[f64]>| {
        from_visit_0(data, subjects, dts, |scan, dt, _sex| {
            forecast(&scan.a_raw, &d, dt, support)
        })
    }
}

impl<B: AutodiffBackend> Job<B> for DriftJob<B> {
    type Model = LinearDrift<B>;
    type Step = DriftSums;
    type Epoch = DriftSums;
    type State = ();

    fn spec(&self) -> &JobSpec {
        &self.core.spec
    }

    fn begin_stage(&mut self, stage: usize, _resumed: bool) -> Result<Stage> {
        let support = serde_json::to_string(&self.core.settings.drift.drift_support)?;
        let metadata = BTreeMap::from([("drift_support".to_string(), support)]);
        self.core.begin_stage(stage, metadata)
    }

    fn init_model(&self, _stage: usize, device: &B::Device) -> Result<LinearDrift<B>> {
        Ok(LinearDrift::new(self.core.n, device))
    }

    fn step(&mut self, _model: &LinearDrift<B>, b: &Batch<'_, B>) -> Result<StepOut<DriftSums>> {
        let (data, train) = self.core.training()?;
        let shard = b.order[b.lo..b.hi].iter().map(|&i| train[i]);
        Ok(StepOut {
            grads: GradientsParams::new(),
            sums: DriftSums(pair_stats(data, shard)),
        })
    }

    fn refit(
        &mut self,
        _model: LinearDrift<B>,
        sums: &DriftSums,
        device: &B::Device,
    ) -> Result<LinearDrift<B>> {
        let n = self.core.n;
        let d = sums.0.drift();
        self.core.train_loss = sums.0.residual(&d, n);
        Ok(LinearDrift::with_drift(n, d, device))
    }

    fn end_epoch(
        &mut self,
        model: &Valid<B, Self>,
        _sums: &DriftSums,
        _ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        self.core.report(self.forecaster(model.host()))
    }

    fn finish(&mut self, done: &Done<'_, B>) -> Result<()> {
        self.core.finish(done, |ck| {
            let d = ck
                .with_prefix("model")
                .remove("drift")
                .context("the best checkpoint has no drift")?
                .data;
            Ok(self.forecaster(d))
        })
    }
}

//! `train-gnn --model eb-drift` as a job of the engine (docs/eb-drift.md): the loader, split,
//! folds, validation columns, test protocol and result files of every model; one epoch per
//! fold whose steps add up the identity's error over the training subjects' visit pairs, and
//! whose end fits the empirical-Bayes forecaster on the fold's training subjects (on every rank
//! alike: a closed form on data every rank holds).

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::{Context, Result};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;

use super::Prepared;
use super::batch::delta_t;
use super::breakdown::Predictions;
use super::closed_form::{ClosedForm, Forecast, from_visit_0};
use super::fits::training_scans;
use super::fold_data::FoldData;
use super::kind::ModelKind;
use super::model::GnnModel;
use super::saved_run::{Horizon, SavedRun};
use super::settings::GnnSettings;
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, Job, JobSpec, LossSums, Monitor, RunContext, Stage,
    StepOut, Valid,
};
use crate::models::eb_drift::{EbDrift, EbParams, MODEL_NAME, params_from};
use crate::toolbox::checkpoint::Checkpoint;

/// `--model eb-drift`.
pub struct EbDriftModel;

impl GnnModel for EbDriftModel {
    const KIND: ModelKind = ModelKind::EbDrift;
    const FILE_STEM: &'static str = MODEL_NAME;
    const TIME_INPUT: bool = true;
    type Job<B: AutodiffBackend> = EbDriftJob<B>;

    fn job<B: AutodiffBackend>(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<EbDriftJob<B>> {
        EbDriftJob::new(settings, monitor, prep, ctx)
    }

    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        horizon: &Horizon<'_>,
        _device: &B::Device,
    ) -> Result<Predictions> {
        let params = checkpoint_params(&run.ck, run.data.n_nodes())?;
        let dts = match horizon {
            Horizon::NextVisit => None,
            Horizon::Years { dts, .. } => Some(*dts),
        };
        Ok(forecaster(params)(&run.data, subjects, dts).into())
    }
}

/// The forecaster of `params` (see [`Forecast`]).
fn forecaster(params: EbParams) -> impl Forecast {
    move |data: &FoldData, subjects: &[usize], dts: Option<&[f64]>| {
        from_visit_0(data, subjects, dts, |scan, dt, sex| {
            params.forecast(&scan.a_raw, scan.age, scan.age + dt, sex)
        })
    }
}

/// The forecaster's parameters in the model file `ck` of a cohort of `n` nodes.
fn checkpoint_params(ck: &Checkpoint, n: usize) -> Result<EbParams> {
    let weights = ck.with_prefix("model");
    params_from(n, |name| {
        Ok(weights
            .get(name)
            .with_context(|| format!("the eb-drift model file has no {name}"))?
            .data
            .clone())
    })
}

/// Mean squared log1p error over the upper triangle, and the number of entries.
fn squared_error(pred: &Array2<f32>, truth: &Array2<f32>) -> (f64, f64) {
    let n = pred.nrows();
    let mut sum = 0.0;
    for i in 0..n {
        for j in i + 1..n {
            let p = f64::from(pred[(i, j)].max(0.0)).ln_1p();
            let t = f64::from(truth[(i, j)].max(0.0)).ln_1p();
            sum += (p - t) * (p - t);
        }
    }
    (sum, (n * n.saturating_sub(1) / 2) as f64)
}

pub struct EbDriftJob<B: AutodiffBackend> {
    core: ClosedForm,
    _b: PhantomData<B>,
}

impl<B: AutodiffBackend> EbDriftJob<B> {
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

    fn params(model: &Valid<B, Self>, n: usize) -> Result<EbParams> {
        params_from(n, |name| {
            let t = match name {
                "a_bar" => model.a_bar.val(),
                "k_g" => model.k_g.val(),
                "k_edge" => model.k_edge.val(),
                "alpha" => model.alpha.val(),
                "drift" => model.drift.val(),
                "seen" => model.seen.val(),
                "p11" => model.p11.val(),
                "p01" => model.p01.val(),
                "drift_factors" => model.drift_factors.val(),
                "node_sim" => model.node_sim.val(),
                "codev" => model.codev.val(),
                "exist" => model.exist.val(),
                _ => model.nu.val(),
            };
            Ok(crate::host_reads::data(t)
                .convert::<f32>()
                .to_vec()
                .unwrap_or_default())
        })
    }
}

impl<B: AutodiffBackend> Job<B> for EbDriftJob<B> {
    type Model = EbDrift<B>;
    type Step = LossSums;
    type Epoch = LossSums;
    type State = ();

    fn spec(&self) -> &JobSpec {
        &self.core.spec
    }

    fn begin_stage(&mut self, stage: usize, _resumed: bool) -> Result<Stage> {
        self.core.begin_stage(stage, BTreeMap::new())
    }

    fn init_model(&self, _stage: usize, device: &B::Device) -> Result<EbDrift<B>> {
        Ok(EbDrift::new(self.core.n, device))
    }

    /// The identity's error over the shard's training pairs (what the forecaster improves on).
    fn step(&mut self, _model: &EbDrift<B>, b: &Batch<'_, B>) -> Result<StepOut<LossSums>> {
        let (data, train) = self.core.training()?;
        let mut sums = LossSums::default();
        for &i in &b.order[b.lo..b.hi] {
            let scans = data.scans(train[i]);
            for v in 1..scans.len() {
                let (sum, count) = squared_error(&scans[v - 1].a_raw, &scans[v].a_raw);
                sums.sum += sum;
                sums.count += count;
            }
        }
        Ok(StepOut {
            grads: GradientsParams::new(),
            sums,
        })
    }

    fn refit(
        &mut self,
        _model: EbDrift<B>,
        _sums: &LossSums,
        device: &B::Device,
    ) -> Result<EbDrift<B>> {
        let (data, train) = self.core.training()?;
        let params = EbParams::fit(&training_scans(data, train));
        let mut err = (0.0, 0.0);
        for &s in train {
            let scans = data.scans(s);
            for v in 1..scans.len() {
                let dt = delta_t(scans, v - 1, v);
                let (start, sex) = (&scans[v - 1], data.cohort.subjects[s].sex);
                let f = params.forecast(&start.a_raw, start.age, start.age + dt, sex);
                let (sum, count) = squared_error(&f, &scans[v].a_raw);
                err = (err.0 + sum, err.1 + count);
            }
        }
        self.core.train_loss = if err.1 > 0.0 { err.0 / err.1 } else { f64::NAN };
        if self.core.main {
            let [age, sex] = params.drift_factors;
            eprintln!(
                "[train-gnn] eb-drift fit: subject offset kept {:.3}, edge deviations kept \
                 {:.3}..{:.3}; drift x(1 {age:+.3}/year from age {:.2}, {sex:+.3} for males, \
                 {:+.3} for females); co-deviations of edges sharing a node x{:.3}; existence {}",
                params.k_g,
                params.k_edge.iter().copied().fold(f64::INFINITY, f64::min),
                params
                    .k_edge
                    .iter()
                    .copied()
                    .fold(f64::NEG_INFINITY, f64::max),
                params.a_bar,
                -sex,
                params.codev,
                if params.exist.is_some() {
                    "by the forecast level (a logistic regression)"
                } else {
                    "per edge (p11)"
                },
            );
        }
        Ok(EbDrift::from_params(&params, device))
    }

    fn end_epoch(
        &mut self,
        model: &Valid<B, Self>,
        _sums: &LossSums,
        _ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let params = Self::params(model, self.core.n)?;
        self.core.report(forecaster(params))
    }

    fn finish(&mut self, done: &Done<'_, B>) -> Result<()> {
        let n = self.core.n;
        self.core
            .finish(done, |ck| Ok(forecaster(checkpoint_params(ck, n)?)))
    }
}

//! One engine job for every closed-form forecaster (`--model linear-drift`, `--model eb-drift`):
//! a model is a [`ClosedFormFit`] (its sums, its fit, its parameters and their forecast) and
//! [`ClosedFormJob`] does the rest the same way for each, on [`ClosedForm`]'s loader, split,
//! folds, validation columns, test protocol and result files: one epoch per fold whose steps add
//! up the model's sums over the training subjects (summed over ranks like any step's sums), and
//! whose end fits the model.

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::Result;
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;

use super::Prepared;
use super::breakdown::Predictions;
use super::closed_form::{ClosedForm, Forecast};
use super::fold_data::FoldData;
use super::saved_run::{Horizon, SavedRun};
use super::settings::GnnSettings;
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, EpochSums, Job, JobSpec, Monitor, RunContext, Stage,
    StepOut, StepSums, Valid,
};
use crate::toolbox::checkpoint::Checkpoint;

/// A closed-form forecaster: what [`ClosedFormJob`] asks of it.
pub trait ClosedFormFit: 'static {
    /// The stem of its model files.
    const MODEL_NAME: &'static str;
    /// The Burn module its fitted parameters are saved in.
    type Module<B: AutodiffBackend>: AutodiffModule<B>;
    /// What a step adds up over its training subjects (an epoch adds up the same).
    type Sums: StepSums + EpochSums<Self::Sums>;
    /// The fitted parameters.
    type Params;

    /// Metadata of the fold's model file beside `n_nodes`.
    fn metadata(_core: &ClosedForm) -> Result<BTreeMap<String, String>> {
        Ok(BTreeMap::new())
    }
    /// The module before the fit, for a cohort of `n` nodes.
    fn init<B: AutodiffBackend>(n: usize, device: &B::Device) -> Self::Module<B>;
    /// The sums of `subjects` (a shard of the fold's training subjects).
    fn sums(data: &FoldData, subjects: impl Iterator<Item = usize>) -> Self::Sums;
    /// The fit on the fold in progress (`core.training()`) from the epoch's `sums`; sets
    /// `core.train_loss`.
    fn fit<B: AutodiffBackend>(
        core: &mut ClosedForm,
        sums: &Self::Sums,
        device: &B::Device,
    ) -> Result<Self::Module<B>>;
    /// The parameters of the validation-mode module `m` (a cohort of `n` nodes).
    fn valid_params<B: AutodiffBackend>(
        m: &<Self::Module<B> as AutodiffModule<B>>::InnerModule,
        n: usize,
    ) -> Result<Self::Params>;
    /// The parameters in model file `ck` (a cohort of `n` nodes).
    fn checkpoint_params(ck: &Checkpoint, n: usize) -> Result<Self::Params>;
    /// The forecaster of `params` under the run's `settings`.
    fn forecaster(params: Self::Params, settings: &GnnSettings) -> impl Forecast;
}

/// The training job of closed-form forecaster `M`.
pub struct ClosedFormJob<B: AutodiffBackend, M: ClosedFormFit> {
    core: ClosedForm,
    _m: PhantomData<(B, M)>,
}

impl<B: AutodiffBackend, M: ClosedFormFit> ClosedFormJob<B, M> {
    pub fn new(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<Self> {
        Ok(Self {
            core: ClosedForm::new(settings, monitor, prep, ctx, M::MODEL_NAME)?,
            _m: PhantomData,
        })
    }
}

impl<B: AutodiffBackend, M: ClosedFormFit> Job<B> for ClosedFormJob<B, M> {
    type Model = M::Module<B>;
    type Step = M::Sums;
    type Epoch = M::Sums;
    type State = ();

    fn spec(&self) -> &JobSpec {
        &self.core.spec
    }

    fn begin_stage(&mut self, stage: usize, _resumed: bool) -> Result<Stage> {
        let metadata = M::metadata(&self.core)?;
        self.core.begin_stage(stage, metadata)
    }

    fn init_model(&self, _stage: usize, device: &B::Device) -> Result<M::Module<B>> {
        Ok(M::init::<B>(self.core.n, device))
    }

    fn step(&mut self, _model: &M::Module<B>, b: &Batch<'_, B>) -> Result<StepOut<M::Sums>> {
        let (data, train) = self.core.training()?;
        let shard = b.order[b.lo..b.hi].iter().map(|&i| train[i]);
        Ok(StepOut {
            grads: GradientsParams::new(),
            sums: M::sums(data, shard),
        })
    }

    fn refit(
        &mut self,
        _model: M::Module<B>,
        sums: &M::Sums,
        device: &B::Device,
    ) -> Result<M::Module<B>> {
        M::fit::<B>(&mut self.core, sums, device)
    }

    fn end_epoch(
        &mut self,
        model: &Valid<B, Self>,
        _sums: &M::Sums,
        _ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let params = M::valid_params::<B>(model, self.core.n)?;
        self.core.report(M::forecaster(params, &self.core.settings))
    }

    fn finish(&mut self, done: &Done<'_, B>) -> Result<()> {
        let (core, n) = (&self.core, self.core.n);
        core.finish(done, |ck| {
            Ok(M::forecaster(M::checkpoint_params(ck, n)?, &core.settings))
        })
    }
}

/// A saved run's forecast of `subjects` by closed-form forecaster `M` (its
/// `GnnModel::forecast`).
pub fn saved_forecast<M: ClosedFormFit>(
    run: &SavedRun,
    subjects: &[usize],
    horizon: &Horizon<'_>,
) -> Result<Predictions> {
    let params = M::checkpoint_params(&run.ck, run.data.n_nodes())?;
    let dts = match horizon {
        Horizon::NextVisit => None,
        Horizon::Years { dts, .. } => Some(*dts),
    };
    Ok(M::forecaster(params, &run.config.settings)(&run.data, subjects, dts).into())
}

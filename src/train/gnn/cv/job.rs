//! [`CvJob`]: the engine job of every forecaster, one stage per cross-validation fold.

use anyhow::{Context, Result};
use burn::tensor::backend::AutodiffBackend;

use super::super::config::GnnConfig;
use super::super::prepared::Prepared;
use super::super::protocol::fold_data::FoldStart;
use super::super::protocol::test_set::fold_results;
use super::super::settings::GnnSettings;
use super::batch::{self, BatchInputs};
use super::{Cv, CvFold, Forecaster};
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, Job, JobSpec, Monitor, Outputs, RunContext, Stage, StepOut,
    TrainPlan, Valid, panels,
};

/// The training job of forecaster `F`: the folds, each with its normalised data, the job spec,
/// and the test scoring after the last fold through `F`.
pub(crate) struct CvJob<B: AutodiffBackend, F: Forecaster> {
    cv: Cv,
    spec: JobSpec,
    fold: Option<CvFold>,
    f: F,
    _b: std::marker::PhantomData<fn() -> B>,
}

impl<B: AutodiffBackend, F: Forecaster> CvJob<B, F> {
    /// The job of a run on the prepared cohort.
    pub(crate) fn new(
        mut settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<Self> {
        let optimizer = settings.optimizer.spec()?;
        let inputs = BatchInputs {
            given: settings.batch_size,
            resume: ctx.resume.as_deref(),
            placement: ctx.placement,
            nodes: prep.cohort.n_nodes,
            train_subjects: prep.folds.iter().map(|f| f.train.len()).min().unwrap_or(0),
        };
        let choice = batch::resolve::<F>(&inputs, ctx.comm.as_ref())?;
        if ctx.is_main() && inputs.given.is_none() && F::GRADIENT_TRAINED {
            eprintln!(
                "[train-gnn] batch {} subjects a step and rank: {}; --batch-size sets it \
                 (the reference's is 2)",
                choice.batch, choice.why
            );
        }
        settings.batch_size = Some(choice.batch);
        let inputs_given = inputs.given.is_some();
        let config = GnnConfig::new(settings.clone(), monitor.clone(), &prep, optimizer, ctx);
        let cv = Cv {
            fold_ids: settings.fold_ids(),
            n: prep.cohort.n_nodes,
            settings,
            prep,
            config,
            monitor,
            main: ctx.is_main(),
            world: ctx.world_size(),
        };
        let f = F::new(&cv, ctx)?;
        let plan = f.plan(&cv);
        let spec = JobSpec {
            name: "train-gnn",
            model_name: F::FILE_STEM,
            plan: TrainPlan {
                epochs: plan.epochs,
                batch_size: cv.settings.batch(),
                micro_batches: 1,
                stages: cv.fold_ids.len(),
                lr: plan.lr,
                optimizer,
                seed: cv.settings.seed,
            },
            outputs: Outputs {
                unit: "subjects",
                cpu_columns: true,
                panels: panels(&plan.drawn),
                meta: cv.config.meta(&cv.prep),
            },
            monitor: cv.monitor.clone(),
            validate_initial: plan.validate_initial,
            phases: plan.phases,
            config: serde_json::to_value(&cv.config)?,
            fingerprint: cv.config.fingerprint(),
            settled: batch::settled(inputs_given, cv.settings.batch()),
        };
        Ok(Self {
            cv,
            spec,
            fold: None,
            f,
            _b: std::marker::PhantomData,
        })
    }
}

impl<B: AutodiffBackend, F: Forecaster> Job<B> for CvJob<B, F> {
    type Model = F::Net<B>;
    type Step = F::Step;
    type Epoch = F::Epoch;
    type State = F::State;

    fn spec(&self) -> &JobSpec {
        &self.spec
    }

    fn begin_stage(&mut self, stage: usize, resumed: bool) -> Result<Stage> {
        let metadata = self.f.metadata(&self.cv)?;
        let s = &self.cv.settings;
        let mut start = FoldStart::new(
            &self.cv.prep,
            stage,
            s.sampling.include_s_mean(),
            s.seed,
            F::FILE_STEM,
            self.spec.monitor.as_ref(),
            metadata,
        )?;
        let items = self.f.begin_fold(&self.cv, stage, &mut start, resumed)?;
        let items = items.unwrap_or_else(|| self.cv.prep.folds[stage].train.clone());
        start.stage.items = items.len();
        self.fold = Some(CvFold {
            stage,
            id: start.fold,
            data: start.data,
            items,
        });
        Ok(start.stage)
    }

    fn init_model(&self, stage: usize, device: &B::Device) -> Result<F::Net<B>> {
        self.f.init::<B>(&self.cv, stage, device)
    }

    fn step(&mut self, net: &F::Net<B>, b: &Batch<'_, B>) -> Result<StepOut<F::Step>> {
        let fold = self.fold.as_ref().context("no fold in progress")?;
        self.f.step(&self.cv, fold, net, b)
    }

    fn refit(&mut self, net: F::Net<B>, sums: &F::Epoch, device: &B::Device) -> Result<F::Net<B>> {
        let fold = self.fold.as_ref().context("no fold in progress")?;
        self.f.refit(&self.cv, fold, net, sums, device)
    }

    fn end_epoch(
        &mut self,
        net: &Valid<B, Self>,
        sums: &F::Epoch,
        ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let fold = self.fold.as_ref().context("no fold in progress")?;
        self.f.end_epoch(&self.cv, fold, net, sums, ctx)
    }

    fn state(&self) -> F::State {
        self.f.state()
    }

    fn restore(&mut self, state: F::State) {
        self.f.restore(state);
    }

    /// Rank 0 scores the test set through the forecaster.
    fn finish(&mut self, done: &Done<'_, B>) -> Result<()> {
        if done.comm.rank() != 0 {
            return Ok(());
        }
        let folds = fold_results(done.stages, &self.cv.fold_ids);
        self.f.test(&self.cv, &folds, done)
    }
}

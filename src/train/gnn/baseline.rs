//! The reference's gradient-trained baselines (`gcn`, `vector-lstm`) as one forecaster,
//! [`Grad`]: a baseline ([`GradBaseline`]) brings its network, its training items, its loss and
//! its prediction; `Grad` brings the rest: its plan (constant-lr Adam, loss and validation-SC
//! panels), the step (the shard's share of the batch's mean loss), the epoch report (the
//! reference's `val_loss` beside the validation forecasts against the identity) and the test
//! files (the best fold's best weights: the test loss and visit 0 → 1 forecasts). `Grad<M>` is
//! a [`Forecaster`] (next visit only, no time input).

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::Result;
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;

use super::cv::{Cv, CvFold, Forecaster, Plan};
use super::kind::ModelKind;
use super::metric::GnnMetric;
use super::protocol::breakdown::Predictions;
use super::protocol::fold_data::{FoldData, FoldStart};
use super::protocol::saved_run::{Horizon, SavedRun};
use super::protocol::test_set::{
    FoldResult, TestRun, best_fold, best_fold_data, write_test_results,
};
use super::seeds::fold_seed;
use super::settings::GnnSettings;
use crate::data::connectome::FoldSplit;
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, LossSums, LrSchedule, RunContext, StepOut,
};
use crate::toolbox::params;

/// The evaluation-mode network of baseline `M` on the autodiff backend `B`.
pub(super) type Inner<M, B> = <<M as GradBaseline>::Net<B> as AutodiffModule<B>>::InnerModule;

/// A gradient-trained baseline: what differs between `gcn` and `vector-lstm`. Its loss is a
/// mean over the consecutive visit pairs (S_v → S_{v+1}) of a batch's subjects and the upper
/// triangle's edges.
pub(super) trait GradBaseline: 'static {
    /// Its `--model` value.
    const KIND: ModelKind;
    /// See [`Forecaster::FILE_STEM`].
    const FILE_STEM: &'static str;
    /// Its network.
    type Net<B: AutodiffBackend>: AutodiffModule<B>;

    /// Its sizes for `n` nodes (recorded in its model files; what [`Self::init`] reads).
    fn sizes(settings: &GnnSettings, n: usize) -> Vec<(&'static str, usize)>;
    /// A fresh network for `n` nodes (drawn from the backend's generator).
    fn init<B: AutodiffBackend>(
        settings: &GnnSettings,
        n: usize,
        device: &B::Device,
    ) -> Self::Net<B>;
    /// The training items of fold `fold` (subjects of `split.train`), and the log line that
    /// announces the fold; an error when the fold cannot be trained.
    fn fold_items(
        data: &FoldData,
        split: &FoldSplit,
        fold: usize,
        settings: &GnnSettings,
        test_subjects: usize,
    ) -> Result<(Vec<usize>, String)>;
    /// The loss summed over the visit pairs of `subjects` and the upper triangle's edges
    /// (training mode; the job divides by the batch's pairs × edges).
    fn loss_sum<B: AutodiffBackend>(
        net: &Self::Net<B>,
        data: &FoldData,
        subjects: &[usize],
        device: &B::Device,
    ) -> Tensor<B, 1>;
    /// The reference's `_evaluate` loss of `subjects` in batches of `batch` (∞ without pairs).
    fn eval_loss<B: AutodiffBackend>(
        net: &Inner<Self, B>,
        data: &FoldData,
        subjects: &[usize],
        batch: usize,
        device: &B::Device,
    ) -> f64;
    /// Visit 1 of every subject of `subjects` predicted from visit 0, in batches of `batch`.
    fn predict<B: AutodiffBackend>(
        net: &Inner<Self, B>,
        data: &FoldData,
        subjects: &[usize],
        batch: usize,
        device: &B::Device,
    ) -> Vec<Array2<f32>>;
}

/// The consecutive visit pairs `(subject, v)` (S_v → S_{v+1}) of `subjects`.
pub(super) fn pairs(data: &FoldData, subjects: &[usize]) -> Vec<(usize, usize)> {
    subjects
        .iter()
        .flat_map(|&s| (0..data.scans(s).len().saturating_sub(1)).map(move |v| (s, v)))
        .collect()
}

/// `--model M` of a gradient-trained baseline `M`.
pub(super) struct Grad<M>(PhantomData<fn() -> M>);

impl<M: GradBaseline> Forecaster for Grad<M> {
    const KIND: ModelKind = M::KIND;
    const FILE_STEM: &'static str = M::FILE_STEM;
    const TIME_INPUT: bool = false;
    type Net<B: AutodiffBackend> = M::Net<B>;
    type Step = LossSums;
    type Epoch = LossSums;
    type State = ();

    fn new<B: AutodiffBackend>(_cv: &Cv, _ctx: &RunContext<B>) -> Result<Self> {
        Ok(Self(PhantomData))
    }

    fn plan(&self, cv: &Cv) -> Plan {
        Plan {
            epochs: cv.settings.max_epochs,
            lr: LrSchedule::Constant(cv.settings.learning_rate),
            drawn: vec![
                GnnMetric::TrainLoss,
                GnnMetric::ValLoss,
                GnnMetric::ValScLogMse,
                GnnMetric::ValIdentityScLogMse,
            ],
            validate_initial: None,
            phases: Vec::new(),
        }
    }

    fn metadata(&self, cv: &Cv) -> Result<BTreeMap<String, String>> {
        let mut metadata = BTreeMap::new();
        metadata.insert("n_nodes".into(), cv.n.to_string());
        for (k, v) in M::sizes(&cv.settings, cv.n) {
            metadata.insert(k.to_string(), v.to_string());
        }
        Ok(metadata)
    }

    fn begin_fold(
        &mut self,
        cv: &Cv,
        stage: usize,
        start: &mut FoldStart,
        _resumed: bool,
    ) -> Result<Option<Vec<usize>>> {
        let split = &cv.prep.folds[stage];
        let test = cv.prep.test.len();
        let (items, line) = M::fold_items(&start.data, split, start.fold, &cv.settings, test)?;
        if cv.main {
            eprintln!("[train-gnn] {line}");
        }
        Ok(Some(items))
    }

    fn init<B: AutodiffBackend>(
        &self,
        cv: &Cv,
        stage: usize,
        device: &B::Device,
    ) -> Result<M::Net<B>> {
        params::init_seeded(
            fold_seed(cv.settings.seed, cv.fold_ids[stage]),
            device,
            || M::init::<B>(&cv.settings, cv.n, device),
            |cpu| M::init(&cv.settings, cv.n, cpu),
        )
    }

    fn step<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        fold: &CvFold,
        net: &M::Net<B>,
        b: &Batch<'_, B>,
    ) -> Result<StepOut<LossSums>> {
        let (data, items) = (&fold.data, &fold.items);
        let subjects = |lo: usize, hi: usize| -> Vec<usize> {
            b.order[lo..hi].iter().map(|&i| items[i]).collect()
        };
        // The batch's mean is over every shard's pairs: this shard's sum over the global count.
        let global = pairs(data, &subjects(b.start, b.end)).len();
        let mine = subjects(b.lo, b.hi);
        let my_pairs = pairs(data, &mine).len();
        if global == 0 || my_pairs == 0 {
            return Ok(StepOut {
                grads: GradientsParams::new(),
                sums: LossSums::default(),
            });
        }
        let edges = (cv.n * cv.n.saturating_sub(1) / 2).max(1);
        let l = M::loss_sum(net, data, &mine, b.device).div_scalar((global * edges) as f64);
        let value = crate::host_reads::scalar(l.clone());
        let grads = GradientsParams::from_grads(l.backward(), net);
        Ok(StepOut {
            grads,
            // Summed over shards: the batch's loss, counted once.
            sums: LossSums {
                sum: value,
                count: my_pairs as f64 / global as f64,
            },
        })
    }

    /// The training loss (mean of the batch losses), `val_loss` and the validation forecasts
    /// against the identity.
    fn end_epoch<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        fold: &CvFold,
        net: &Inner<M, B>,
        sums: &LossSums,
        ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let (data, val) = (&fold.data, &cv.split(fold).val);
        let bs = cv.settings.batch();
        let val_loss = M::eval_loss::<B>(net, data, val, bs, ctx.device);
        let preds = M::predict::<B>(net, data, val, bs, ctx.device);
        let train_loss = if sums.count > 0.0 {
            sums.mean()
        } else {
            f64::INFINITY
        };
        Ok(cv.versus_report(fold, preds.into(), Some(val_loss), train_loss))
    }

    /// The test files: the best fold's best weights score the test subjects.
    fn test<B: AutodiffBackend>(
        &mut self,
        cv: &Cv,
        folds: &[FoldResult],
        done: &Done<'_, B>,
    ) -> Result<()> {
        let best = best_fold(&cv.config, folds)?;
        let (data, ck) = best_fold_data(&cv.prep, &cv.config, &best)?;
        let net = load::<B, M>(&cv.settings, cv.n, &ck, done.device)?;
        let (bs, test) = (cv.settings.batch(), &cv.prep.test);
        let test_loss = M::eval_loss::<B>(&net, &data, test, bs, done.device);
        let preds = M::predict::<B>(&net, &data, test, bs, done.device);
        let run = TestRun {
            config: &cv.config,
            prep: &cv.prep,
            finished: folds,
            best: &best,
            test_loss,
            eb_fallback: None,
        };
        let loss_bins = cv.settings.objective.topology.loss_bins;
        write_test_results(&run, &data, &preds.into(), None, loss_bins, done.run_dir)
    }

    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        _horizon: &Horizon<'_>,
        device: &B::Device,
    ) -> Result<Predictions> {
        let (set, data) = (&run.config.settings, &run.data);
        let net = load::<B, M>(set, data.n_nodes(), &run.ck, device)?;
        Ok(M::predict::<B>(&net, data, subjects, set.batch(), device).into())
    }
}

/// The evaluation-mode network of a checkpoint's `model.` tensors.
fn load<B: AutodiffBackend, M: GradBaseline>(
    settings: &GnnSettings,
    n: usize,
    ck: &crate::toolbox::checkpoint::Checkpoint,
    device: &B::Device,
) -> Result<Inner<M, B>> {
    let net = M::init::<B>(settings, n, device).valid();
    params::load(net, &ck.model(), device)
}

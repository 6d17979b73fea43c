//! The reference's gradient-trained baselines (`gcn`, `vector-lstm`) as one engine job,
//! [`BaselineJob`]: a baseline ([`GradBaseline`]) brings its network, its training items, its
//! loss and its prediction; the job brings the rest: the job spec (constant-lr Adam, loss and
//! validation-SC panels), the folds, the step (the shard's share of the batch's mean loss), the
//! epoch report (the reference's `val_loss` beside the validation forecasts against the
//! identity) and the test files (the best fold's best weights: the test loss and visit 0 → 1
//! forecasts). Every `GradBaseline` is a [`GnnModel`] (next visit only, no time input).

use std::collections::BTreeMap;
use std::marker::PhantomData;

use anyhow::{Context, Result};
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;
use serde_json::json;

use super::breakdown::Predictions;
use super::columns::val_sc_columns;
use super::config::GnnConfig;
use super::evaluate::versus_identity;
use super::fold_data::{FoldData, FoldStart};
use super::kind::ModelKind;
use super::model::GnnModel;
use super::saved_run::{Horizon, SavedRun};
use super::settings::GnnSettings;
use super::test_set::{TestRun, best_fold, best_fold_data, fold_results, write_test_results};
use super::{Prepared, fold_seed};
use crate::data::connectome::FoldSplit;
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, Job, JobSpec, LossSums, LrSchedule, Monitor, Panel, Row,
    RunContext, Stage, StepOut, Valid,
};
use crate::toolbox::params;

/// The evaluation-mode network of baseline `M` on the autodiff backend `B`.
pub type Inner<M, B> = <<M as GradBaseline>::Net<B> as AutodiffModule<B>>::InnerModule;

/// A gradient-trained baseline: what differs between `gcn` and `vector-lstm`. Its loss is a
/// mean over the consecutive visit pairs (S_v → S_{v+1}) of a batch's subjects and the upper
/// triangle's edges.
pub trait GradBaseline: 'static {
    /// Its `--model` value.
    const KIND: ModelKind;
    /// See [`GnnModel::FILE_STEM`].
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
pub fn pairs(data: &FoldData, subjects: &[usize]) -> Vec<(usize, usize)> {
    subjects
        .iter()
        .flat_map(|&s| (0..data.scans(s).len().saturating_sub(1)).map(move |v| (s, v)))
        .collect()
}

impl<M: GradBaseline> GnnModel for M {
    const KIND: ModelKind = M::KIND;
    const FILE_STEM: &'static str = M::FILE_STEM;
    const TIME_INPUT: bool = false;
    type Job<B: AutodiffBackend> = BaselineJob<B, M>;

    fn job<B: AutodiffBackend>(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<BaselineJob<B, M>> {
        BaselineJob::new(settings, monitor, prep, ctx)
    }

    fn forecast<B: AutodiffBackend>(
        run: &SavedRun,
        subjects: &[usize],
        _horizon: &Horizon<'_>,
        device: &B::Device,
    ) -> Result<Predictions> {
        let (set, data) = (&run.config.settings, &run.data);
        let net = load::<B, M>(set, data.n_nodes(), &run.ck, device)?;
        Ok(M::predict::<B>(&net, data, subjects, set.batch_size, device).into())
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
    params::load(net, &ck.with_prefix("model"), device)
}

/// The fold in progress.
struct Fold {
    /// Its index in `fold_ids`.
    stage: usize,
    data: FoldData,
    /// The training items: subjects.
    items: Vec<usize>,
}

/// The engine's job of every gradient-trained baseline `M`.
pub struct BaselineJob<B: AutodiffBackend, M> {
    settings: GnnSettings,
    prep: Prepared,
    fold_ids: Vec<usize>,
    config: GnnConfig,
    spec: JobSpec,
    /// Whether this rank prints.
    main: bool,
    /// Nodes per connectome.
    n: usize,
    fold: Option<Fold>,
    _b: PhantomData<fn() -> (B, M)>,
}

impl<B: AutodiffBackend, M: GradBaseline> BaselineJob<B, M> {
    pub fn new(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<Self> {
        let config = GnnConfig::new(settings.clone(), monitor.clone(), &prep, ctx);
        let spec = JobSpec {
            name: "train-gnn",
            model_name: M::FILE_STEM,
            epochs: settings.max_epochs,
            batch_size: settings.batch_size,
            lr: LrSchedule::Constant(settings.learning_rate),
            seed: settings.seed,
            stages: settings.fold_ids().len(),
            monitor,
            unit: "subjects",
            cpu_columns: true,
            plot: vec![
                Panel::new("loss", &["train_loss", "val_loss"], &[]),
                Panel::new(
                    "validation sc_log_mse",
                    &["val_sc_log_mse"],
                    &["val_identity_sc_log_mse"],
                ),
            ],
            config: serde_json::to_value(&config)?,
            fingerprint: config.fingerprint(),
            meta: config.meta(&prep),
            ..JobSpec::default()
        };
        Ok(Self {
            n: prep.cohort.n_nodes,
            main: ctx.is_main(),
            fold_ids: settings.fold_ids(),
            settings,
            prep,
            config,
            spec,
            fold: None,
            _b: PhantomData,
        })
    }

    fn current(&self) -> Result<&Fold> {
        self.fold.as_ref().context("no fold in progress")
    }
}

impl<B: AutodiffBackend, M: GradBaseline> Job<B> for BaselineJob<B, M> {
    type Model = M::Net<B>;
    type Step = LossSums;
    type Epoch = LossSums;
    type State = ();

    fn spec(&self) -> &JobSpec {
        &self.spec
    }

    fn begin_stage(&mut self, stage: usize, _resumed: bool) -> Result<Stage> {
        let mut metadata: BTreeMap<String, String> = BTreeMap::new();
        metadata.insert("n_nodes".into(), self.n.to_string());
        for (k, v) in M::sizes(&self.settings, self.n) {
            metadata.insert(k.to_string(), v.to_string());
        }
        let s = &self.settings;
        let include_s_mean = s.sampling.include_s_mean();
        let mut start = FoldStart::new(
            &self.prep,
            stage,
            include_s_mean,
            s.seed,
            M::FILE_STEM,
            self.spec.monitor.as_ref(),
            metadata,
        )?;
        let split = &self.prep.folds[stage];
        let test = self.prep.test.len();
        let (items, line) = M::fold_items(&start.data, split, start.fold, s, test)?;
        if self.main {
            eprintln!("[train-gnn] {line}");
        }
        start.stage.items = items.len();
        self.fold = Some(Fold {
            stage,
            data: start.data,
            items,
        });
        Ok(start.stage)
    }

    fn init_model(&self, stage: usize, device: &B::Device) -> Result<M::Net<B>> {
        crate::toolbox::params::init_seeded(
            fold_seed(self.settings.seed, self.fold_ids[stage]),
            device,
            || M::init::<B>(&self.settings, self.n, device),
            |cpu| M::init(&self.settings, self.n, cpu),
        )
    }

    fn step(&mut self, net: &M::Net<B>, b: &Batch<'_, B>) -> Result<StepOut<LossSums>> {
        let Fold { data, items, .. } = self.current()?;
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
        let edges = (self.n * self.n.saturating_sub(1) / 2).max(1);
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
    fn end_epoch(
        &mut self,
        net: &Valid<B, Self>,
        sums: &LossSums,
        ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let Fold { stage, data, .. } = self.current()?;
        let val = &self.prep.folds[*stage].val;
        let bs = self.settings.batch_size;
        let val_loss = M::eval_loss::<B>(net, data, val, bs, ctx.device);
        let preds = M::predict::<B>(net, data, val, bs, ctx.device);
        let v = versus_identity(data, val, &preds.into(), self.settings.topo_bins);
        let mut head = Row::new();
        head.insert("val_loss".into(), json!(val_loss));
        let mut detail = Row::new();
        val_sc_columns(Some(&v), 0.0, 0.0, &mut detail);
        detail.insert("model".into(), json!(self.settings.model_kind));
        let train_loss = if sums.count > 0.0 {
            sums.mean()
        } else {
            f64::INFINITY
        };
        Ok(EpochReport {
            train_loss,
            head,
            detail,
            summary: format!(
                "val_loss {val_loss:.4}, val sc_log_mse {:.4} (identity {:.4}, skill {:+.3})",
                v.model.sc_log_mse, v.identity.sc_log_mse, v.skill.skill
            ),
        })
    }

    /// The test files: the best fold's best weights score the test subjects.
    fn finish(&mut self, done: &Done<'_, B>) -> Result<()> {
        if done.comm.rank() != 0 {
            return Ok(());
        }
        let folds = fold_results(done.stages, &self.fold_ids);
        let best = best_fold(&self.config, &folds)?;
        let (data, ck) = best_fold_data(&self.prep, &self.config, &best)?;
        let net = load::<B, M>(&self.settings, self.n, &ck, done.device)?;
        let (bs, test) = (self.settings.batch_size, &self.prep.test);
        let test_loss = M::eval_loss::<B>(&net, &data, test, bs, done.device);
        let preds = M::predict::<B>(&net, &data, test, bs, done.device);
        let run = TestRun {
            config: &self.config,
            prep: &self.prep,
            finished: &folds,
            best: &best,
            test_loss,
        };
        let loss_bins = self.settings.objective.topology.loss_bins;
        write_test_results(&run, &data, &preds.into(), None, loss_bins, done.run_dir)
    }
}

//! `train-gnn --model gcn`: the reference's GCN "GNN baseline" (docs/baselines-surface.md §2)
//! as a job of the engine, on the same loader, split, folds, validation columns, test protocol
//! and result files as CLG-ODE and linear-drift.
//!
//! * Training items are the fold's training subjects; a step trains on the consecutive visit
//!   pairs (S_v → S_{v+1}) of its subjects (the reference batches `--batch-size` *pairs*;
//!   here a batch is `--batch-size` subjects with all their pairs). The loss is the reference's
//!   `GNNTrainer._loss`: the mean over (pairs × upper-triangle edges) of the squared
//!   difference of log1p(max(pred, 0)) and log1p(target); the epoch's training loss is the
//!   unweighted mean of the steps' losses, as the reference's.
//! * Validation loss (`val_loss`): the same loss on every consecutive pair of the validation
//!   subjects, in batches of `--batch-size` pairs, unweighted mean over batches (the
//!   reference's `_evaluate`), eval mode (no dropout).
//! * The SC columns and the test set are scored as linear-drift's: the visit 0 → visit 1
//!   prediction of each subject by `versus_identity` / `write_test_results`. The reference's
//!   `GNNTrainer._test_metrics` scores **every** consecutive pair of each test subject (plus
//!   an identity pair for one-scan subjects) instead (docs/baselines-surface.md Q1); here the
//!   test loss is the loss over every consecutive test pair, the SC metrics are visit 0 → 1.
//! * The best checkpoint is a copy of the best epoch's weights (the engine's); weight init and
//!   dropout draw from the backend's RNG seeded per fold from `--seed` (the reference's are
//!   unseeded).

use std::marker::PhantomData;

use anyhow::{Context, Result};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;

use super::baseline;
use super::evaluate::versus_identity;
use super::fold_data::FoldData;
use super::settings::GnnSettings;
use super::{Prepared, fold_seed};
use crate::engine::{
    Batch, Done, EpochCtx, EpochReport, Job, JobSpec, LossSums, Monitor, RunContext, Stage,
    StepOut, Valid,
};
use crate::models::gcn_baseline::{GcnBaseline, loss, loss_sum};
use crate::toolbox::params;

pub struct GcnJob<B: AutodiffBackend> {
    c: baseline::Common,
    /// The fold in progress: its index in `fold_ids` and data.
    fold: Option<(usize, FoldData)>,
    _b: PhantomData<B>,
}

/// The consecutive visit pairs `(subject, v)` (S_v → S_{v+1}) of `subjects`.
fn pairs(data: &FoldData, subjects: &[usize]) -> Vec<(usize, usize)> {
    subjects
        .iter()
        .flat_map(|&s| (0..data.scans(s).len().saturating_sub(1)).map(move |v| (s, v)))
        .collect()
}

/// Matrices stacked into a `[B, N, N]` tensor.
fn stack<B: Backend>(mats: &[&Array2<f32>], n: usize, device: &B::Device) -> Tensor<B, 3> {
    let mut v = Vec::with_capacity(mats.len() * n * n);
    for m in mats {
        v.extend(m.iter().copied());
    }
    Tensor::from_data(TensorData::new(v, [mats.len(), n, n]), device)
}

fn unstack<B: Backend>(t: Tensor<B, 3>) -> Vec<Array2<f32>> {
    let [b, n, _] = t.dims();
    let v = t
        .into_data()
        .convert::<f32>()
        .to_vec::<f32>()
        .unwrap_or_default();
    (0..b)
        .map(|i| {
            Array2::from_shape_vec((n, n), v[i * n * n..(i + 1) * n * n].to_vec()).expect("n × n")
        })
        .collect()
}

/// The reference's `_evaluate`: the loss over the consecutive pairs of `subjects` in batches
/// of `batch` pairs, unweighted mean over batches (∞ without pairs).
fn eval_loss<B: Backend>(
    model: &GcnBaseline<B>,
    data: &FoldData,
    subjects: &[usize],
    batch: usize,
    device: &B::Device,
) -> f64 {
    let n = data.n_nodes();
    let all = pairs(data, subjects);
    if all.is_empty() {
        return f64::INFINITY;
    }
    let mut total = 0.0;
    let mut batches = 0usize;
    for chunk in all.chunks(batch.max(1)) {
        let a_in: Vec<_> = chunk
            .iter()
            .map(|&(s, v)| &data.scans(s)[v].a_raw)
            .collect();
        let a_out: Vec<_> = chunk
            .iter()
            .map(|&(s, v)| &data.scans(s)[v + 1].a_raw)
            .collect();
        let pred = model.forward(stack(&a_in, n, device));
        let l = loss(pred, stack(&a_out, n, device));
        total += l.into_scalar().elem::<f64>();
        batches += 1;
    }
    total / batches as f64
}

/// Visit 1 of every subject of `subjects` predicted from visit 0 (eval mode; a one-scan
/// subject's prediction is the model's from its only scan, as the reference's identity pair).
pub(super) fn predict<B: Backend>(
    model: &GcnBaseline<B>,
    data: &FoldData,
    subjects: &[usize],
    batch: usize,
    device: &B::Device,
) -> Vec<Array2<f32>> {
    let n = data.n_nodes();
    let mut out = Vec::with_capacity(subjects.len());
    for chunk in subjects.chunks(batch.max(1)) {
        let a: Vec<_> = chunk.iter().map(|&s| &data.scans(s)[0].a_raw).collect();
        out.extend(unstack(model.forward(stack(&a, n, device))));
    }
    out
}

impl<B: AutodiffBackend> GcnJob<B> {
    pub fn new(
        settings: GnnSettings,
        monitor: Option<Monitor>,
        prep: Prepared,
        ctx: &RunContext<B>,
    ) -> Result<Self> {
        Ok(Self {
            c: baseline::Common::new(settings, monitor, prep, ctx)?,
            fold: None,
            _b: PhantomData,
        })
    }

    fn hidden(&self) -> usize {
        self.c.settings.sizes.hidden_dim
    }
}

impl<B: AutodiffBackend> Job<B> for GcnJob<B> {
    type Model = GcnBaseline<B>;
    type Step = LossSums;
    type Epoch = LossSums;
    type State = ();

    fn spec(&self) -> &JobSpec {
        &self.c.spec
    }

    fn begin_stage(&mut self, stage: usize, _resumed: bool) -> Result<Stage> {
        let start = self.c.start_fold(stage, &[("hidden_dim", self.hidden())])?;
        let split = &self.c.prep.folds[stage];
        if self.c.main {
            eprintln!(
                "[train-gnn] gcn fold {}: {} train pairs, {} val pairs ({} / {} subjects), \
                 {} test subjects",
                start.fold,
                pairs(&start.data, &split.train).len(),
                pairs(&start.data, &split.val).len(),
                split.train.len(),
                split.val.len(),
                self.c.prep.test.len()
            );
        }
        self.fold = Some((stage, start.data));
        Ok(start.stage)
    }

    fn init_model(&self, stage: usize, device: &B::Device) -> Result<GcnBaseline<B>> {
        B::seed(
            device,
            fold_seed(self.c.settings.seed, self.c.fold_ids[stage]),
        );
        Ok(GcnBaseline::new(self.hidden(), device))
    }

    fn step(&mut self, model: &GcnBaseline<B>, b: &Batch<'_, B>) -> Result<StepOut<LossSums>> {
        let (stage, data) = self.fold.as_ref().context("no fold in progress")?;
        let train = &self.c.prep.folds[*stage].train;
        let subjects = |lo: usize, hi: usize| -> Vec<usize> {
            b.order[lo..hi].iter().map(|&i| train[i]).collect()
        };
        // The batch's mean is over every rank's pairs: this shard's sum over the global count.
        let global = pairs(data, &subjects(b.start, b.end)).len();
        let mine = pairs(data, &subjects(b.lo, b.hi));
        if global == 0 || mine.is_empty() {
            return Ok(StepOut {
                grads: GradientsParams::new(),
                grad_weight: 1.0,
                sums: LossSums::default(),
            });
        }
        let n = self.c.n;
        let edges = (n * n.saturating_sub(1) / 2).max(1);
        let a_in: Vec<_> = mine.iter().map(|&(s, v)| &data.scans(s)[v].a_raw).collect();
        let a_out: Vec<_> = mine
            .iter()
            .map(|&(s, v)| &data.scans(s)[v + 1].a_raw)
            .collect();
        let pred = model.forward(stack(&a_in, n, b.device));
        let l = loss_sum(pred, stack(&a_out, n, b.device)).div_scalar((global * edges) as f64);
        let value = l.clone().into_scalar().elem::<f64>();
        let grads = GradientsParams::from_grads(l.backward(), model);
        Ok(StepOut {
            grads,
            grad_weight: 1.0,
            // Summed over ranks: the batch's loss, counted once.
            sums: LossSums {
                sum: value,
                count: mine.len() as f64 / global as f64,
            },
        })
    }

    fn end_epoch(
        &mut self,
        model: &Valid<B, Self>,
        sums: &LossSums,
        ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let (stage, data) = self.fold.as_ref().context("no fold in progress")?;
        let val = &self.c.prep.folds[*stage].val;
        let bs = self.c.settings.batch_size;
        let val_loss = eval_loss(model, data, val, bs, ctx.device);
        let preds = predict(model, data, val, bs, ctx.device);
        let v = versus_identity(data, val, &preds.into(), self.c.settings.topo_bins);
        Ok(baseline::epoch_report(&self.c.settings, sums, val_loss, &v))
    }

    fn state(&self) {}

    fn restore(&mut self, _state: ()) {}

    fn finish(&mut self, done: &Done<'_, B>) -> Result<()> {
        let (hidden, bs, test) = (self.hidden(), self.c.settings.batch_size, &self.c.prep.test);
        baseline::finish(
            done,
            &self.c.config,
            &self.c.prep,
            &self.c.fold_ids,
            |data, ck| {
                let model = params::load(
                    GcnBaseline::<B::InnerBackend>::new(hidden, done.device),
                    &ck.with_prefix("model"),
                    done.device,
                )?;
                let test_loss = eval_loss(&model, data, test, bs, done.device);
                Ok((test_loss, predict(&model, data, test, bs, done.device)))
            },
        )
    }
}

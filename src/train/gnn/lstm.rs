//! `train-gnn --model vector-lstm`: the reference's VectorLSTM baseline
//! (docs/baselines-surface.md §1) as a job of the engine, on the same loader, split, folds,
//! validation columns, test protocol and result files as the other models.
//!
//! * Training items are the fold's training subjects with two scans or more (the reference
//!   drops the others; none left is an error). A subject is one sequence: inputs = the upper
//!   triangles of visits 0…T−1, targets = visits 1…T, zero-padded to the batch's longest. The
//!   loss is the reference's masked MSE on the raw weights, Σ mask·(ŷ−y)² / (Σ mask · D) per
//!   batch; the epoch's training loss is the unweighted mean of the batch losses.
//! * Validation loss (`val_loss`): the same loss over the validation subjects with two scans or
//!   more, in batches of `--batch-size`, unweighted mean over batches (the reference's).
//! * SC columns and the test set: the visit 0 → visit 1 prediction of each subject from its
//!   scan 0 as a one-step sequence (the reference's `_test_metrics`), clipped at 0 (the
//!   reference's SC metrics clip before log1p; its `mse`/`pearson` on unclipped vectors are
//!   not reported).
//! * Inputs are our loader's symmetrised matrices (the reference's training items read the
//!   upper triangle as loaded, which differs only for asymmetric files); the best checkpoint
//!   is a copy of the best epoch's weights (the reference's aliases the live weights, Q2);
//!   init draws from the backend's RNG seeded per fold from `--seed` (the reference's is
//!   unseeded).

use std::marker::PhantomData;

use anyhow::{Context, Result, bail};
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
use crate::models::vector_lstm::{VectorLstm, from_upper_triangle, masked_sq_sum, upper_triangle};
use crate::toolbox::params;

pub struct VectorLstmJob<B: AutodiffBackend> {
    c: baseline::Common,
    /// The fold in progress: its index in `fold_ids`, data and training sequences.
    fold: Option<(usize, FoldData, Vec<usize>)>,
    _b: PhantomData<B>,
}

/// The subjects of `subjects` with two scans or more (the reference's sequences).
fn sequences(data: &FoldData, subjects: &[usize]) -> Vec<usize> {
    subjects
        .iter()
        .copied()
        .filter(|&s| data.scans(s).len() >= 2)
        .collect()
}

/// A padded batch of sequences: inputs, targets `[B, T, D]`, the step mask `[B, T]` and its sum.
struct Padded<B: Backend> {
    x: Tensor<B, 3>,
    y: Tensor<B, 3>,
    mask: Tensor<B, 2>,
}

fn pad<B: Backend>(data: &FoldData, subjects: &[usize], device: &B::Device) -> Padded<B> {
    let n = data.n_nodes();
    let d = n * n.saturating_sub(1) / 2;
    let t = subjects
        .iter()
        .map(|&s| data.scans(s).len() - 1)
        .max()
        .unwrap_or(0);
    let b = subjects.len();
    let (mut x, mut y) = (vec![0.0f32; b * t * d], vec![0.0f32; b * t * d]);
    let mut mask = vec![0.0f32; b * t];
    for (i, &s) in subjects.iter().enumerate() {
        let scans = data.scans(s);
        for v in 0..scans.len() - 1 {
            let at = (i * t + v) * d;
            let src = scans[v].a_raw.as_slice().expect("standard layout");
            let dst = scans[v + 1].a_raw.as_slice().expect("standard layout");
            x[at..at + d].copy_from_slice(&upper_triangle(src, n));
            y[at..at + d].copy_from_slice(&upper_triangle(dst, n));
            mask[i * t + v] = 1.0;
        }
    }
    Padded {
        x: Tensor::from_data(TensorData::new(x, [b, t, d]), device),
        y: Tensor::from_data(TensorData::new(y, [b, t, d]), device),
        mask: Tensor::from_data(TensorData::new(mask, [b, t]), device),
    }
}

/// Steps (visit pairs) of `subjects`' sequences.
fn steps(data: &FoldData, subjects: &[usize]) -> usize {
    subjects.iter().map(|&s| data.scans(s).len() - 1).sum()
}

/// The reference's `_evaluate`: the loss over the sequences of `subjects` in batches of `batch`
/// subjects, unweighted mean over batches (∞ without sequences).
fn eval_loss<B: Backend>(
    model: &VectorLstm<B>,
    data: &FoldData,
    subjects: &[usize],
    batch: usize,
    device: &B::Device,
) -> f64 {
    let seqs = sequences(data, subjects);
    if seqs.is_empty() {
        return f64::INFINITY;
    }
    let d = model.decoder.weight.dims()[1];
    let mut total = 0.0;
    let mut batches = 0usize;
    for chunk in seqs.chunks(batch.max(1)) {
        let p = pad::<B>(data, chunk, device);
        let sum = masked_sq_sum(model.forward(p.x), p.y, p.mask);
        total += sum.into_scalar().elem::<f64>() / (steps(data, chunk) * d) as f64;
        batches += 1;
    }
    total / batches as f64
}

/// Visit 1 of every subject of `subjects` predicted from its scan 0 as a one-step sequence,
/// clipped at 0, as N×N matrices.
pub(super) fn predict<B: Backend>(
    model: &VectorLstm<B>,
    data: &FoldData,
    subjects: &[usize],
    batch: usize,
    device: &B::Device,
) -> Vec<Array2<f32>> {
    let n = data.n_nodes();
    let d = n * n.saturating_sub(1) / 2;
    let mut out = Vec::with_capacity(subjects.len());
    for chunk in subjects.chunks(batch.max(1)) {
        let mut x = Vec::with_capacity(chunk.len() * d);
        for &s in chunk {
            let a = data.scans(s)[0].a_raw.as_slice().expect("standard layout");
            x.extend(upper_triangle(a, n));
        }
        let x = Tensor::<B, 3>::from_data(TensorData::new(x, [chunk.len(), 1, d]), device);
        let y = model
            .forward(x)
            .clamp_min(0.0)
            .into_data()
            .convert::<f32>()
            .to_vec::<f32>()
            .unwrap_or_default();
        for v in y.chunks(d) {
            let m = from_upper_triangle(v, n);
            out.push(Array2::from_shape_vec((n, n), m).expect("n × n"));
        }
    }
    out
}

impl<B: AutodiffBackend> VectorLstmJob<B> {
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

    fn dims(&self) -> (usize, usize) {
        let d = self.c.n * self.c.n.saturating_sub(1) / 2;
        (d, self.c.settings.sizes.latent_dim)
    }
}

impl<B: AutodiffBackend> Job<B> for VectorLstmJob<B> {
    type Model = VectorLstm<B>;
    type Step = LossSums;
    type Epoch = LossSums;
    type State = ();

    fn spec(&self) -> &JobSpec {
        &self.c.spec
    }

    fn begin_stage(&mut self, stage: usize, _resumed: bool) -> Result<Stage> {
        let (d, h) = self.dims();
        let mut start = self
            .c
            .start_fold(stage, &[("input_dim", d), ("latent_dim", h)])?;
        let split = &self.c.prep.folds[stage];
        let train = sequences(&start.data, &split.train);
        let val = sequences(&start.data, &split.val);
        if train.is_empty() || val.is_empty() {
            bail!(
                "fold {}: vector-lstm needs subjects with at least two scans in training and \
                 validation, found {} and {}",
                start.fold,
                train.len(),
                val.len()
            );
        }
        if self.c.main {
            eprintln!(
                "[train-gnn] vector-lstm fold {}: {} train / {} val sequences ({} / {} \
                 subjects), D = {d}, H = {h}, {} test subjects",
                start.fold,
                train.len(),
                val.len(),
                split.train.len(),
                split.val.len(),
                self.c.prep.test.len()
            );
        }
        start.stage.items = train.len();
        self.fold = Some((stage, start.data, train));
        Ok(start.stage)
    }

    fn init_model(&self, stage: usize, device: &B::Device) -> Result<VectorLstm<B>> {
        B::seed(
            device,
            fold_seed(self.c.settings.seed, self.c.fold_ids[stage]),
        );
        let (d, h) = self.dims();
        Ok(VectorLstm::new(d, h, device))
    }

    fn step(&mut self, model: &VectorLstm<B>, b: &Batch<'_, B>) -> Result<StepOut<LossSums>> {
        let (_, data, train) = self.fold.as_ref().context("no fold in progress")?;
        let subjects = |lo: usize, hi: usize| -> Vec<usize> {
            b.order[lo..hi].iter().map(|&i| train[i]).collect()
        };
        // The batch's loss is over every rank's steps: this shard's sum over the global count.
        let global = steps(data, &subjects(b.start, b.end));
        let mine = subjects(b.lo, b.hi);
        if global == 0 || mine.is_empty() {
            return Ok(StepOut {
                grads: GradientsParams::new(),
                grad_weight: 1.0,
                sums: LossSums::default(),
            });
        }
        let (d, _) = self.dims();
        let p = pad::<B>(data, &mine, b.device);
        let l = masked_sq_sum(model.forward(p.x), p.y, p.mask).div_scalar((global * d) as f64);
        let value = l.clone().into_scalar().elem::<f64>();
        let grads = GradientsParams::from_grads(l.backward(), model);
        Ok(StepOut {
            grads,
            grad_weight: 1.0,
            // Summed over ranks: the batch's loss, counted once.
            sums: LossSums {
                sum: value,
                count: steps(data, &mine) as f64 / global as f64,
            },
        })
    }

    fn end_epoch(
        &mut self,
        model: &Valid<B, Self>,
        sums: &LossSums,
        ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let (stage, data, _) = self.fold.as_ref().context("no fold in progress")?;
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
        let ((d, h), bs, test) = (self.dims(), self.c.settings.batch_size, &self.c.prep.test);
        baseline::finish(
            done,
            &self.c.config,
            &self.c.prep,
            &self.c.fold_ids,
            |data, ck| {
                let model = params::load(
                    VectorLstm::<B::InnerBackend>::new(d, h, done.device),
                    &ck.with_prefix("model"),
                    done.device,
                )?;
                let test_loss = eval_loss(&model, data, test, bs, done.device);
                Ok((test_loss, predict(&model, data, test, bs, done.device)))
            },
        )
    }
}

//! `train-gnn --model gcn`: the reference's GCN "GNN baseline" (docs/baselines-surface.md §2)
//! as a [`GradBaseline`] (the shared baseline job of the engine), on the same loader, split, folds, validation columns, test protocol
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

use anyhow::Result;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;

use super::baseline::{GradBaseline, Inner, pairs};
use super::kind::ModelKind;
use super::protocol::fold_data::FoldData;
use super::settings::GnnSettings;
use crate::data::connectome::{FoldSplit, SymMatrix};
use crate::models::gcn_baseline::{GcnBaseline, MODEL_NAME, loss, loss_sum};

/// `--model gcn`.
pub(super) struct GcnModel;

impl GradBaseline for GcnModel {
    const KIND: ModelKind = ModelKind::Gcn;
    const FILE_STEM: &'static str = MODEL_NAME;
    type Net<B: AutodiffBackend> = GcnBaseline<B>;

    fn sizes(settings: &GnnSettings, _n: usize) -> Vec<(&'static str, usize)> {
        vec![("hidden_dim", settings.sizes.hidden_dim)]
    }

    fn init<B: AutodiffBackend>(s: &GnnSettings, _n: usize, device: &B::Device) -> GcnBaseline<B> {
        GcnBaseline::new(s.sizes.hidden_dim, device)
    }

    /// Every training subject (one-scan subjects have no pair and add nothing).
    fn fold_items(
        data: &FoldData,
        split: &FoldSplit,
        fold: usize,
        _settings: &GnnSettings,
        test_subjects: usize,
    ) -> Result<(Vec<usize>, String)> {
        let line = format!(
            "gcn fold {fold}: {} train pairs, {} val pairs ({} / {} subjects), {test_subjects} \
             test subjects",
            pairs(data, &split.train).len(),
            pairs(data, &split.val).len(),
            split.train.len(),
            split.val.len(),
        );
        Ok((split.train.clone(), line))
    }

    fn loss_sum<B: AutodiffBackend>(
        net: &GcnBaseline<B>,
        data: &FoldData,
        subjects: &[usize],
        device: &B::Device,
    ) -> Tensor<B, 1> {
        let n = data.n_nodes();
        let mine = pairs(data, subjects);
        let a_in: Vec<_> = mine.iter().map(|&(s, v)| &data.scans(s)[v].a_raw).collect();
        let a_out: Vec<_> = mine
            .iter()
            .map(|&(s, v)| &data.scans(s)[v + 1].a_raw)
            .collect();
        let pred = net.forward(stack(&a_in, n, device));
        loss_sum(pred, stack(&a_out, n, device))
    }

    fn eval_loss<B: AutodiffBackend>(
        net: &Inner<Self, B>,
        data: &FoldData,
        subjects: &[usize],
        batch: usize,
        device: &B::Device,
    ) -> f64 {
        eval_loss(net, data, subjects, batch, device)
    }

    fn predict<B: AutodiffBackend>(
        net: &Inner<Self, B>,
        data: &FoldData,
        subjects: &[usize],
        batch: usize,
        device: &B::Device,
    ) -> Vec<Array2<f32>> {
        predict(net, data, subjects, batch, device)
    }
}

/// Matrices stacked into a `[B, N, N]` tensor.
fn stack<B: Backend>(mats: &[&SymMatrix], n: usize, device: &B::Device) -> Tensor<B, 3> {
    let mut v = Vec::with_capacity(mats.len() * n * n);
    for m in mats {
        m.dense_into(&mut v);
    }
    Tensor::from_data(TensorData::new(v, [mats.len(), n, n]), device)
}

fn unstack<B: Backend>(t: Tensor<B, 3>) -> Vec<Array2<f32>> {
    let [b, n, _] = t.dims();
    let v = crate::host_reads::data(t)
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
        total += crate::host_reads::scalar(l);
        batches += 1;
    }
    total / batches as f64
}

/// Visit 1 of every subject of `subjects` predicted from visit 0 (eval mode; a one-scan
/// subject's prediction is the model's from its only scan, as the reference's identity pair).
fn predict<B: Backend>(
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

#[cfg(test)]
mod golden;

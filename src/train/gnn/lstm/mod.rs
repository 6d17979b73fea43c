//! `train-gnn --model vector-lstm`: the reference's VectorLSTM baseline
//! (docs/baselines-surface.md §1) as a [`GradBaseline`] (the shared baseline job of the
//! engine), on the same loader, split, folds,
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

use anyhow::{Result, bail};
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use ndarray::Array2;

use super::baseline::{GradBaseline, Inner};
use super::kind::ModelKind;
use super::protocol::fold_data::FoldData;
use super::settings::GnnSettings;
use crate::data::connectome::FoldSplit;
use crate::models::vector_lstm::{MODEL_NAME, VectorLstm, from_upper_triangle, masked_sq_sum};

/// `--model vector-lstm`.
pub(super) struct LstmModel;

/// Upper-triangle entries of an N×N matrix: the network's input and output width.
fn width(n: usize) -> usize {
    n * n.saturating_sub(1) / 2
}

impl GradBaseline for LstmModel {
    const KIND: ModelKind = ModelKind::VectorLstm;
    const FILE_STEM: &'static str = MODEL_NAME;
    type Net<B: AutodiffBackend> = VectorLstm<B>;

    fn sizes(settings: &GnnSettings, n: usize) -> Vec<(&'static str, usize)> {
        vec![
            ("input_dim", width(n)),
            ("latent_dim", settings.sizes.latent_dim),
        ]
    }

    fn init<B: AutodiffBackend>(s: &GnnSettings, n: usize, device: &B::Device) -> VectorLstm<B> {
        VectorLstm::new(width(n), s.sizes.latent_dim, device)
    }

    /// The training subjects with two scans or more (the reference's sequences); none in
    /// training or validation is an error.
    fn fold_items(
        data: &FoldData,
        split: &FoldSplit,
        fold: usize,
        settings: &GnnSettings,
        test_subjects: usize,
    ) -> Result<(Vec<usize>, String)> {
        let train = sequences(data, &split.train);
        let val = sequences(data, &split.val);
        if train.is_empty() || val.is_empty() {
            bail!(
                "fold {fold}: vector-lstm needs subjects with at least two scans in training and \
                 validation, found {} and {}",
                train.len(),
                val.len()
            );
        }
        let (d, h) = (width(data.n_nodes()), settings.sizes.latent_dim);
        let line = format!(
            "vector-lstm fold {fold}: {} train / {} val sequences ({} / {} subjects), D = {d}, \
             H = {h}, {test_subjects} test subjects",
            train.len(),
            val.len(),
            split.train.len(),
            split.val.len(),
        );
        Ok((train, line))
    }

    fn loss_sum<B: AutodiffBackend>(
        net: &VectorLstm<B>,
        data: &FoldData,
        subjects: &[usize],
        device: &B::Device,
    ) -> Tensor<B, 1> {
        let p = pad::<B>(data, subjects, device);
        masked_sq_sum(net.forward(p.x), p.y, p.mask)
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
    let d = width(n);
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
            x[at..at + d].copy_from_slice(scans[v].a_raw.upper());
            y[at..at + d].copy_from_slice(scans[v + 1].a_raw.upper());
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
        total += crate::host_reads::scalar(sum) / (steps(data, chunk) * d) as f64;
        batches += 1;
    }
    total / batches as f64
}

/// Visit 1 of every subject of `subjects` predicted from its scan 0 as a one-step sequence,
/// clipped at 0, as N×N matrices.
fn predict<B: Backend>(
    model: &VectorLstm<B>,
    data: &FoldData,
    subjects: &[usize],
    batch: usize,
    device: &B::Device,
) -> Vec<Array2<f32>> {
    let n = data.n_nodes();
    let d = width(n);
    let mut out = Vec::with_capacity(subjects.len());
    for chunk in subjects.chunks(batch.max(1)) {
        let mut x = Vec::with_capacity(chunk.len() * d);
        for &s in chunk {
            x.extend_from_slice(data.scans(s)[0].a_raw.upper());
        }
        let x = Tensor::<B, 3>::from_data(TensorData::new(x, [chunk.len(), 1, d]), device);
        let y = crate::host_reads::data(model.forward(x).clamp_min(0.0))
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

#[cfg(test)]
mod golden;

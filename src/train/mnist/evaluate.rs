//! Evaluation of the MNIST CNN: mean loss, accuracy and confusion matrix, on one rank or
//! sharded over several.

use std::path::Path;

use anyhow::{Result, bail};
use burn::prelude::*;
use burn::tensor::TensorData;
use serde::Serialize;

use crate::data::mnist::{CLASSES, MnistSplit};
use crate::models::cnn::MnistCnn;
use crate::toolbox::checkpoint::Checkpoint;
use crate::toolbox::params;

#[derive(Debug, Clone, Serialize)]
pub(crate) struct EvalResult {
    pub examples: usize,
    pub loss: f64,
    pub accuracy: f64,
    /// `confusion[true][predicted]`.
    pub confusion: Vec<Vec<u64>>,
}

/// Mean cross-entropy, accuracy and confusion matrix of `model` over `data`.
pub(crate) fn evaluate<B: Backend>(
    model: &MnistCnn<B>,
    data: &MnistSplit,
    batch_size: usize,
    device: &B::Device,
) -> EvalResult {
    let indices: Vec<usize> = (0..data.len()).collect();
    let (loss_sum, confusion) = eval_sums(model, data, &indices, batch_size, device);
    finish(loss_sum, confusion)
}

/// [`evaluate`] with the examples split across the ranks of `comm` and the sums reduced.
pub(crate) fn evaluate_sharded<B: Backend>(
    model: &MnistCnn<B>,
    data: &MnistSplit,
    batch_size: usize,
    device: &B::Device,
    comm: &dyn crate::dist::Collective,
) -> Result<EvalResult> {
    let (lo, hi) = crate::toolbox::ddp::shard(0, data.len(), comm.rank(), comm.size());
    let indices: Vec<usize> = (lo..hi).collect();
    let (loss_sum, confusion) = eval_sums(model, data, &indices, batch_size, device);
    let mut buf: Vec<f64> = std::iter::once(loss_sum)
        .chain(confusion.iter().flatten().map(|&c| c as f64))
        .collect();
    comm.all_reduce_sum_f64(&mut buf)?;
    let confusion = buf[1..]
        .chunks(CLASSES)
        .map(|r| r.iter().map(|&c| c as u64).collect())
        .collect();
    Ok(finish(buf[0], confusion))
}

fn finish(loss_sum: f64, confusion: Vec<Vec<u64>>) -> EvalResult {
    let n: u64 = confusion.iter().flatten().sum();
    let correct: u64 = (0..CLASSES).map(|i| confusion[i][i]).sum();
    EvalResult {
        examples: n as usize,
        loss: loss_sum / n.max(1) as f64,
        accuracy: correct as f64 / n.max(1) as f64,
        confusion,
    }
}

/// Summed loss and confusion counts over `indices`.
fn eval_sums<B: Backend>(
    model: &MnistCnn<B>,
    data: &MnistSplit,
    indices: &[usize],
    batch_size: usize,
    device: &B::Device,
) -> (f64, Vec<Vec<u64>>) {
    let mut confusion = vec![vec![0u64; CLASSES]; CLASSES];
    let mut loss_sum = 0.0f64;
    for chunk in indices.chunks(batch_size.max(1)) {
        let (x, y) = data.batch(chunk);
        let len = chunk.len();
        let x = Tensor::<B, 4>::from_data(TensorData::new(x, [len, 1, 28, 28]), device);
        let yt = Tensor::<B, 1, Int>::from_data(TensorData::new(y.clone(), [len]), device);
        let logits = model.forward_with(x, &crate::launch::BackendKernels);
        let loss: f64 = crate::host_reads::data(crate::launch::cross_entropy(logits.clone(), yt))
            .convert::<f64>()
            .to_vec::<f64>()
            .map(|v| v[0])
            .unwrap_or(f64::NAN);
        loss_sum += loss * len as f64;
        let pred = crate::host_reads::data(logits.argmax(1))
            .convert::<i64>()
            .to_vec::<i64>()
            .unwrap_or_default();
        for (t, p) in y.iter().zip(pred) {
            confusion[*t as usize][(p as usize).min(CLASSES - 1)] += 1;
        }
    }
    (loss_sum, confusion)
}

/// Loads an MNIST CNN from a checkpoint onto `device`.
pub(crate) fn load_model<B: Backend>(
    ck: &Checkpoint,
    path: &Path,
    device: &B::Device,
) -> Result<MnistCnn<B>> {
    if ck.model_name() != Some(MODEL_NAME) {
        bail!(
            "{}: not an MNIST CNN checkpoint (model = {:?})",
            path.display(),
            ck.model_name()
        );
    }
    params::load(MnistCnn::<B>::new(device, false), &ck.model(), device)
}

/// Metadata value naming the model in its checkpoints.
pub(crate) const MODEL_NAME: &str = "mnist_cnn";

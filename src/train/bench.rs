//! `trainer bench mnist`: training and inference throughput of the MNIST CNN on every compiled
//! backend and usable device, in one run, warm-up excluded.

use std::time::Instant;

use anyhow::Result;
use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLoss;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use serde::Serialize;

use crate::backend::{self, BackendJob, Placement};
use crate::cli::BenchArgs;
use crate::data::mnist::{self, MnistSplit, PIXELS, Split};
use crate::models::cnn::MnistCnn;

use super::optim::{Adam, Grads};
use super::rundir::write_json;

#[derive(Debug, Clone, Serialize)]
pub struct BenchRow {
    pub backend: String,
    pub device: String,
    pub batch_size: usize,
    pub steps: usize,
    pub train_img_per_s: f64,
    pub infer_img_per_s: f64,
    pub error: Option<String>,
}

struct BenchJob<'a> {
    data: &'a MnistSplit,
    args: &'a BenchArgs,
}

fn batch<B: Backend>(
    data: &MnistSplit,
    step: usize,
    bs: usize,
    device: &B::Device,
) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
    let n = data.len();
    let idx: Vec<usize> = (0..bs).map(|i| (step * bs + i) % n).collect();
    let (x, y) = data.batch(&idx);
    (
        Tensor::from_data(TensorData::new(x, [bs, 1, 28, 28]), device),
        Tensor::from_data(TensorData::new(y, [bs]), device),
    )
}

impl BackendJob for BenchJob<'_> {
    type Output = (f64, f64);
    fn run<B: AutodiffBackend>(self, device: B::Device, _p: Placement) -> Result<(f64, f64)> {
        let (bs, steps, warmup) = (self.args.batch_size, self.args.steps, self.args.warmup);
        B::seed(&device, 1);
        let mut model = MnistCnn::<B>::new(&device, true);
        crate::train::params::materialize(&model);
        let mut adam = Adam::<B::InnerBackend>::default();
        let loss_fn = CrossEntropyLoss::new(None, &device);
        let mut timed = None;
        for step in 0..warmup + steps {
            if step == warmup {
                timed = Some(Instant::now());
            }
            let (x, y) = batch::<B>(self.data, step, bs, &device);
            let loss = loss_fn.forward(model.forward(x), y);
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = adam.step(1e-3, model, Grads::Params(grads));
        }
        // Reading a value waits for queued device work.
        let _ = crate::train::params::collect(&model);
        let train =
            (bs * steps) as f64 / timed.map(|t| t.elapsed().as_secs_f64()).unwrap_or(f64::NAN);

        let eval = model.valid();
        let mut timed = None;
        for step in 0..warmup + steps {
            if step == warmup {
                timed = Some(Instant::now());
            }
            let (x, _) = batch::<B::InnerBackend>(self.data, step, bs, &device);
            let _ = eval.forward(x).argmax(1).into_data();
        }
        let infer =
            (bs * steps) as f64 / timed.map(|t| t.elapsed().as_secs_f64()).unwrap_or(f64::NAN);
        Ok((train, infer))
    }
}

/// Deterministic synthetic digits when no data directory is given.
fn synthetic(n: usize) -> MnistSplit {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let images = (0..n * PIXELS)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 56) as u8
        })
        .collect();
    MnistSplit {
        images,
        labels: (0..n).map(|i| (i % 10) as u8).collect(),
    }
}

pub fn run(args: BenchArgs) -> Result<()> {
    if args.target == crate::cli::BenchTarget::Gnn {
        return super::bench_gnn::run(&args);
    }
    let data = match &args.data_dir {
        Some(d) => mnist::load_split(d, Split::Train)?,
        None => synthetic(4096),
    };
    let mut rows = Vec::new();
    for placement in backend::available_placements() {
        eprintln!(
            "[bench] {} on {} ...",
            placement.backend.name(),
            placement.device
        );
        let result = backend::dispatch(
            placement,
            BenchJob {
                data: &data,
                args: &args,
            },
        );
        let (train, infer, error) = match result {
            Ok((t, i)) => (t, i, None),
            Err(e) => (f64::NAN, f64::NAN, Some(format!("{e:#}"))),
        };
        rows.push(BenchRow {
            backend: placement.backend.name().into(),
            device: placement.device.to_string(),
            batch_size: args.batch_size,
            steps: args.steps,
            train_img_per_s: train,
            infer_img_per_s: infer,
            error,
        });
    }
    println!(
        "{:<8} {:<8} {:>6} {:>14} {:>14}",
        "backend", "device", "batch", "train img/s", "infer img/s"
    );
    for r in &rows {
        println!(
            "{:<8} {:<8} {:>6} {:>14.1} {:>14.1}{}",
            r.backend,
            r.device,
            r.batch_size,
            r.train_img_per_s,
            r.infer_img_per_s,
            r.error
                .as_deref()
                .map(|e| format!("  error: {e}"))
                .unwrap_or_default()
        );
    }
    let json = serde_json::json!({ "target": "mnist", "rows": rows });
    println!("{}", serde_json::to_string(&json)?);
    if let Some(path) = &args.json {
        write_json(path, &json)?;
    }
    Ok(())
}

//! `trainer train-mnist`: the MNIST CNN as a job of the training engine.
//!
//! Determinism: weights are initialised from `B::seed(seed)`; epoch `e` shuffles with a ChaCha8
//! generator seeded from `(seed, e)`; dropout draws from the backend generator re-seeded from
//! `(seed, global step, rank)` before every step. The whole random state is therefore
//! `(seed, epoch, step)`, which the checkpoint stores, and a resumed run continues exactly.

pub mod evaluate;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Result, bail};
use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLoss;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use serde::Serialize;
use serde_json::{Value, json};

use crate::backend::{self, BackendJob, Placement};
use crate::cli::MnistArgs;
use crate::data::mnist::{self, MnistSplit, PIXELS, Split};
use crate::engine::seed::mix;
use crate::engine::{
    self, Batch, EvalCtx, Evaluation, Job, JobSpec, Monitor, Row, RunInfo, Stage, StepOut,
};
use crate::models::cnn::MnistCnn;
use crate::outputs::curves::Panel;

use self::evaluate::{MODEL_NAME, evaluate_sharded};

/// The resolved configuration, saved as `args.json`.
#[derive(Debug, Clone, Serialize)]
pub struct MnistConfig {
    pub data_dir: PathBuf,
    pub epochs: usize,
    pub batch_size: usize,
    pub lr: f64,
    pub lr_gamma: f64,
    pub optimizer: &'static str,
    pub seed: u64,
    pub limit_train: Option<usize>,
    pub limit_test: Option<usize>,
    pub test_batch_size: usize,
    pub dropout: bool,
    pub monitor: Option<Monitor>,
    pub backend: String,
    pub device: String,
    pub run_dir: PathBuf,
    pub resume: Option<String>,
    pub checkpoint_every: u64,
    pub world_size: usize,
    /// Per-rank batch × world size.
    pub effective_batch_size: usize,
}

/// The MNIST CNN's part of training: data, step and evaluation.
struct MnistJob<B: AutodiffBackend> {
    args: MnistArgs,
    train: MnistSplit,
    test: MnistSplit,
    loss_fn: CrossEntropyLoss<B>,
    spec: JobSpec,
}

fn load_data(args: &MnistArgs) -> Result<(MnistSplit, MnistSplit)> {
    let mut train = mnist::load_split(&args.data_dir, Split::Train)?;
    let mut test = mnist::load_split(&args.data_dir, Split::Test)?;
    if let Some(n) = args.limit_train {
        train.truncate(n);
    }
    if let Some(n) = args.limit_test {
        test.truncate(n);
    }
    Ok((train, test))
}

fn to_tensors<B: Backend>(
    data: &MnistSplit,
    idx: &[usize],
    device: &B::Device,
) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
    let (x, y) = data.batch(idx);
    let n = idx.len();
    debug_assert_eq!(x.len(), n * PIXELS);
    (
        Tensor::from_data(TensorData::new(x, [n, 1, 28, 28]), device),
        Tensor::from_data(TensorData::new(y, [n]), device),
    )
}

fn scalar<B: Backend>(t: Tensor<B, 1>) -> f64 {
    t.into_data()
        .convert::<f64>()
        .to_vec::<f64>()
        .map(|v| v[0])
        .unwrap_or(f64::NAN)
}

impl<B: AutodiffBackend> Job<B> for MnistJob<B> {
    type Model = MnistCnn<B>;

    fn spec(&self) -> &JobSpec {
        &self.spec
    }

    fn config(&self, run: &RunInfo) -> Result<Value> {
        let a = &self.args;
        Ok(serde_json::to_value(MnistConfig {
            data_dir: a.data_dir.clone(),
            epochs: a.epochs,
            batch_size: a.batch_size,
            lr: a.lr,
            lr_gamma: a.lr_gamma,
            optimizer: "adam(beta1=0.9, beta2=0.999, eps=1e-8), lr x lr_gamma per epoch",
            seed: a.seed,
            limit_train: a.limit_train,
            limit_test: a.limit_test,
            test_batch_size: a.test_batch_size,
            dropout: !a.no_dropout,
            monitor: self.spec.monitor.clone(),
            backend: run.placement.backend.name().into(),
            device: run.placement.device.to_string(),
            run_dir: run.run_dir.clone(),
            resume: a.run.resume.clone(),
            checkpoint_every: a.run.checkpoint_every,
            world_size: run.world_size,
            effective_batch_size: a.batch_size * run.world_size,
        })?)
    }

    fn fingerprint(&self) -> Value {
        json!({ "seed": self.args.seed })
    }

    fn begin_stage(&mut self, _stage: usize, _resumed: bool) -> Result<Stage> {
        Ok(Stage {
            items: self.train.len(),
            shuffle_seed: self.args.seed,
            label: String::new(),
            columns: Row::new(),
        })
    }

    fn init_model(&self, _stage: usize, device: &B::Device) -> Result<MnistCnn<B>> {
        B::seed(device, self.args.seed);
        Ok(MnistCnn::new(device, !self.args.no_dropout))
    }

    fn lr(&self, epoch: usize) -> f64 {
        self.args.lr * self.args.lr_gamma.powi(epoch as i32)
    }

    fn step(&mut self, model: &MnistCnn<B>, b: &Batch<'_, B>) -> Result<StepOut> {
        let idx = &b.order[b.lo..b.hi];
        B::seed(
            b.device,
            mix(
                mix(self.args.seed, 0x5eed_0000 + b.global_step),
                b.comm.rank() as u64,
            ),
        );
        if idx.is_empty() {
            return Ok(StepOut {
                grads: GradientsParams::new(),
                grad_weight: 0.0,
                sums: vec![0.0, 0.0],
            });
        }
        let (x, y) = to_tensors::<B>(&self.train, idx, b.device);
        let loss = self.loss_fn.forward(model.forward(x), y);
        let n = idx.len() as f64;
        let sums = vec![scalar(loss.clone()) * n, n];
        Ok(StepOut {
            grads: GradientsParams::from_grads(loss.backward(), model),
            grad_weight: idx.len() as f32 / (b.end - b.start) as f32,
            sums,
        })
    }

    fn step_loss(&mut self, sums: &[f64]) -> (f64, Vec<f64>) {
        (sums[0] / sums[1].max(1.0), sums.to_vec())
    }

    fn train_columns(&mut self, acc: &[f64]) -> (f64, Row) {
        let loss = match acc {
            [sum, n, ..] => sum / n.max(1.0),
            _ => f64::NAN,
        };
        (loss, Row::new())
    }

    fn evaluate(
        &mut self,
        model: &<MnistCnn<B> as AutodiffModule<B>>::InnerModule,
        ctx: &EvalCtx<'_, B>,
    ) -> Result<Evaluation> {
        let e = evaluate_sharded(
            model,
            &self.test,
            self.args.test_batch_size,
            ctx.device,
            ctx.comm,
        )?;
        let mut head = Row::new();
        head.insert("test_loss".into(), json!(e.loss));
        head.insert("test_accuracy".into(), json!(e.accuracy));
        Ok(Evaluation {
            head,
            detail: Row::new(),
            summary: format!(
                "test loss {:.4}, test accuracy {:.2}%",
                e.loss,
                100.0 * e.accuracy
            ),
        })
    }
}

struct Launch(MnistArgs);

impl BackendJob for Launch {
    type Output = ExitCode;
    fn run<B: AutodiffBackend>(self, device: B::Device, placement: Placement) -> Result<ExitCode> {
        let args = self.0;
        let comm = crate::dist::init()?;
        if comm.size() > 1 && args.device.device.is_cuda() {
            // One GPU per rank: `cuda` means this rank's device (CUDA_VISIBLE_DEVICES per task).
            eprintln!(
                "[train-mnist] rank {}/{} on {}",
                comm.rank(),
                comm.size(),
                placement.device
            );
        }
        let (train, test) = load_data(&args)?;
        let spec = JobSpec {
            name: "train-mnist",
            model_name: MODEL_NAME,
            epochs: args.epochs,
            batch_size: args.batch_size,
            seed: args.seed,
            stages: 1,
            monitor: args.early_stop.monitor(None),
            unit: "img",
            cpu_columns: false,
            epoch_checkpoints: true,
            plot: vec![
                Panel::new("loss", &["train_loss", "test_loss"], &[]),
                Panel::new("test accuracy", &["test_accuracy"], &[]),
            ],
        };
        let run = args.run.clone();
        let job = MnistJob::<B> {
            loss_fn: CrossEntropyLoss::new(None, &device),
            args,
            train,
            test,
            spec,
        };
        engine::train(
            job,
            comm.as_ref(),
            &run,
            Path::new("runs"),
            device,
            placement,
        )
    }
}

/// `trainer train-mnist`.
pub fn run(args: MnistArgs) -> Result<ExitCode> {
    if args.batch_size == 0 || args.test_batch_size == 0 {
        bail!("--batch-size and --test-batch-size must be at least 1");
    }
    if args.early_stop.patience.is_some() && args.early_stop.early_stop_metric.is_none() {
        bail!("--patience needs --early-stop-metric (e.g. test_accuracy)");
    }
    if let Some(m) = args.early_stop.monitor(None) {
        m.check(&["test_loss", "test_accuracy"])?;
    }
    let placement = backend::resolve(args.device.backend, args.device.device)?;
    backend::dispatch(placement, Launch(args))
}

//! `trainer train-mnist`: the training loop of the MNIST CNN.
//!
//! Determinism: weights are initialised from `B::seed(seed)`; epoch `e` shuffles with a ChaCha8
//! generator seeded from `(seed, e)`; dropout draws from the backend generator re-seeded from
//! `(seed, global step)` before every step. The whole random state is therefore
//! `(seed, epoch, step)`, which the checkpoint stores, and a resumed run continues exactly.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Result, bail};
use burn::module::AutodiffModule;
use burn::nn::loss::CrossEntropyLoss;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::backend::{self, BackendJob, Placement};
use crate::cli::MnistArgs;
use crate::data::mnist::{self, MnistSplit, PIXELS, Split};
use crate::models::cnn::MnistCnn;

use super::checkpoint::Checkpoint;
use super::eval::{MODEL_NAME, evaluate};
use super::metrics::MetricsFiles;
use super::optim::{Adam, Grads};
use super::progress::{Progress, fmt_secs};
use super::rundir::{self, RunMeta};
use super::{params, stop};

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
    pub backend: String,
    pub device: String,
    pub run_dir: PathBuf,
    pub resume: Option<String>,
    pub checkpoint_every: u64,
}

/// Position in training: everything besides weights and optimiser state needed to resume.
#[derive(Debug, Clone, Default, PartialEq)]
struct Position {
    /// Epochs fully done.
    epoch: u64,
    /// Steps done inside the current epoch.
    step_in_epoch: u64,
    global_step: u64,
    loss_sum: f64,
    seen: u64,
}

impl Position {
    fn save_into(&self, ck: &mut Checkpoint, seed: u64) {
        ck.counters.insert("train.epoch".into(), self.epoch as i64);
        ck.counters
            .insert("train.step_in_epoch".into(), self.step_in_epoch as i64);
        ck.counters
            .insert("train.global_step".into(), self.global_step as i64);
        ck.counters.insert("train.seen".into(), self.seen as i64);
        ck.counters.insert("rng.seed".into(), seed as i64);
        ck.reals.insert("train.loss_sum".into(), self.loss_sum);
    }

    fn load(ck: &Checkpoint) -> Result<Self> {
        Ok(Self {
            epoch: ck.counter("train.epoch")? as u64,
            step_in_epoch: ck.counter("train.step_in_epoch")? as u64,
            global_step: ck.counter("train.global_step")? as u64,
            seen: ck.counter("train.seen")? as u64,
            loss_sum: ck.real("train.loss_sum")?,
        })
    }
}

/// A 64-bit mix of two numbers (SplitMix64 finaliser), for derived seeds.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b
        .wrapping_add(0x9e37_79b9_7f4a_7c15)
        .wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The shuffled order of epoch `epoch`.
pub fn epoch_order(n: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(mix(seed, epoch));
    order.shuffle(&mut rng);
    order
}

/// The checkpoint to resume from, if any.
fn resume_source(resume: Option<&str>, run_dir: &Path) -> Result<Option<PathBuf>> {
    match resume {
        None => Ok(None),
        Some("auto") => {
            let last = run_dir.join("checkpoints").join("last.safetensors");
            Ok(last.is_file().then_some(last))
        }
        Some(p) => {
            let p = PathBuf::from(p);
            if !p.is_file() {
                bail!("--resume {}: no such checkpoint file", p.display());
            }
            Ok(Some(p))
        }
    }
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

struct MnistJob(MnistArgs);

impl BackendJob for MnistJob {
    type Output = ExitCode;
    fn run<B: AutodiffBackend>(self, device: B::Device, placement: Placement) -> Result<ExitCode> {
        train::<B>(&self.0, device, placement)
    }
}

/// `trainer train-mnist`.
pub fn run(args: MnistArgs) -> Result<ExitCode> {
    if args.batch_size == 0 || args.test_batch_size == 0 {
        bail!("--batch-size and --test-batch-size must be at least 1");
    }
    let placement = backend::resolve(args.device.backend, args.device.device)?;
    backend::dispatch(placement, MnistJob(args))
}

fn train<B: AutodiffBackend>(
    args: &MnistArgs,
    device: B::Device,
    placement: Placement,
) -> Result<ExitCode> {
    let requeue = stop::RequeuePolicy::from_args(&args.run)?;
    let (train, test) = load_data(args)?;
    let run_dir = rundir::resolve(&args.run, Path::new("runs"))?;
    rundir::create(&run_dir)?;
    stop::install()?;
    let resume = resume_source(args.run.resume.as_deref(), &run_dir)?;

    let config = MnistConfig {
        data_dir: args.data_dir.clone(),
        epochs: args.epochs,
        batch_size: args.batch_size,
        lr: args.lr,
        lr_gamma: args.lr_gamma,
        optimizer: "adam(beta1=0.9, beta2=0.999, eps=1e-8), lr x lr_gamma per epoch",
        seed: args.seed,
        limit_train: args.limit_train,
        limit_test: args.limit_test,
        test_batch_size: args.test_batch_size,
        dropout: !args.no_dropout,
        backend: placement.backend.name().into(),
        device: placement.device.to_string(),
        run_dir: run_dir.clone(),
        resume: args.run.resume.clone(),
        checkpoint_every: args.run.checkpoint_every,
    };

    B::seed(&device, args.seed);
    let mut model = MnistCnn::<B>::new(&device, config.dropout);
    let names = params::names(&model);
    let mut adam = Adam::<B::InnerBackend>::default();
    let mut pos = Position::default();
    let mut resumed_row: Option<String> = None;
    if let Some(path) = &resume {
        let ck = Checkpoint::load(path)?;
        if ck.metadata.get("model").map(String::as_str) != Some(MODEL_NAME) {
            bail!("{}: not an MNIST CNN checkpoint", path.display());
        }
        model = params::load(model, &ck.with_prefix("model"), &device)?;
        adam.load_from(&names, &ck, &device)?;
        pos = Position::load(&ck)?;
        resumed_row = ck.metadata.get("metrics_row").cloned();
        if ck.counter("rng.seed")? as u64 != args.seed {
            bail!(
                "{}: checkpoint was trained with another --seed",
                path.display()
            );
        }
        eprintln!(
            "resuming from {} at epoch {} step {}",
            path.display(),
            pos.epoch + 1,
            pos.step_in_epoch
        );
    }

    rundir::write_json(&run_dir.join("args.json"), &config)?;
    let mut meta = RunMeta::new(
        &run_dir,
        placement.backend.name(),
        &placement.device.to_string(),
    );
    meta.extra
        .insert("effective_batch_size".into(), json!(args.batch_size));
    meta.extra.insert(
        "resumed_from".into(),
        json!(resume.as_ref().map(|p| p.display().to_string())),
    );
    rundir::write_json(&run_dir.join("run_meta.json"), &meta)?;
    let metrics = MetricsFiles::new(&run_dir);
    if let Some(row) = resumed_row {
        // The process may have died between the epoch checkpoint and its metrics row.
        let row: Map<String, Value> = serde_json::from_str(&row)?;
        let written = metrics
            .rows()?
            .iter()
            .filter_map(|r| r.get("epoch")?.as_u64())
            .max();
        if written < row.get("epoch").and_then(Value::as_u64) {
            metrics.append(&row)?;
        }
    }

    let n = train.len();
    let bs = args.batch_size;
    let steps_per_epoch = n.div_ceil(bs) as u64;
    let loss_fn = CrossEntropyLoss::new(None, &device);
    let ckpt_dir = run_dir.join("checkpoints");
    let save = |model: &MnistCnn<B>,
                adam: &Adam<B::InnerBackend>,
                pos: &Position,
                row: Option<&Map<String, Value>>|
     -> Result<()> {
        let mut ck = Checkpoint::default();
        for (name, t) in params::collect(model) {
            ck.floats.insert(format!("model.{name}"), t);
        }
        adam.save_into(&names, &mut ck);
        pos.save_into(&mut ck, args.seed);
        ck.metadata.insert("model".into(), MODEL_NAME.into());
        ck.metadata
            .insert("config".into(), serde_json::to_string(&config)?);
        if let Some(row) = row {
            ck.metadata
                .insert("metrics_row".into(), serde_json::to_string(row)?);
            let epoch = row.get("epoch").and_then(Value::as_u64).unwrap_or(0);
            ck.save(&ckpt_dir.join(format!("epoch_{epoch:03}.safetensors")))?;
        }
        ck.save(&ckpt_dir.join("last.safetensors"))
    };

    let mut steps_here = 0u64;
    let started = Instant::now();
    for epoch in pos.epoch..args.epochs as u64 {
        let order = epoch_order(n, args.seed, epoch);
        let lr = args.lr * args.lr_gamma.powi(epoch as i32);
        let mut progress = Progress::new(
            format!("[train-mnist] epoch {}/{}", epoch + 1, args.epochs),
            steps_per_epoch,
            pos.step_in_epoch,
            args.run.log_every_secs,
            true,
        );
        let t0 = Instant::now();
        let mut images_here = 0usize;
        for step in pos.step_in_epoch..steps_per_epoch {
            if let Some(reason) = stop::check(steps_here, args.run.stop_after_steps) {
                progress.finish();
                save(&model, &adam, &pos, None)?;
                eprintln!(
                    "[train-mnist] stopping at epoch {} step {step} ({}): checkpoint written to {}; \
                     resume with --resume auto",
                    epoch + 1,
                    reason.describe(),
                    ckpt_dir.join("last.safetensors").display(),
                );
                return Ok(requeue.finish(reason, "[train-mnist]"));
            }
            let lo = step as usize * bs;
            let idx = &order[lo..(lo + bs).min(n)];
            B::seed(&device, mix(args.seed, 0x5eed_0000 + pos.global_step));
            let (x, y) = to_tensors::<B>(&train, idx, &device);
            let loss = loss_fn.forward(model.forward(x), y);
            let loss_value = scalar(loss.clone());
            if !loss_value.is_finite() {
                bail!(
                    "training diverged at epoch {} step {step}: loss is {loss_value}",
                    epoch + 1
                );
            }
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = adam.step(lr, model, Grads::Params(grads));
            pos.loss_sum += loss_value * idx.len() as f64;
            pos.seen += idx.len() as u64;
            pos.step_in_epoch = step + 1;
            pos.global_step += 1;
            steps_here += 1;
            images_here += idx.len();
            let rate = images_here as f64 / t0.elapsed().as_secs_f64().max(1e-9);
            progress.update(step + 1, loss_value, rate);
            if args.run.checkpoint_every > 0 && pos.global_step % args.run.checkpoint_every == 0 {
                save(&model, &adam, &pos, None)?;
            }
        }
        progress.finish();
        let seconds = t0.elapsed().as_secs_f64();
        let img_per_s = images_here as f64 / seconds.max(1e-9);
        let eval = evaluate(&model.valid(), &test, args.test_batch_size, &device);
        let mut row = Map::new();
        row.insert("epoch".into(), json!(epoch + 1));
        row.insert(
            "train_loss".into(),
            json!(pos.loss_sum / pos.seen.max(1) as f64),
        );
        row.insert("test_loss".into(), json!(eval.loss));
        row.insert("test_accuracy".into(), json!(eval.accuracy));
        row.insert("lr".into(), json!(lr));
        row.insert("steps".into(), json!(pos.global_step));
        row.insert("img_per_s".into(), json!(img_per_s));
        row.insert("seconds".into(), json!(seconds));
        pos = Position {
            epoch: epoch + 1,
            global_step: pos.global_step,
            ..Default::default()
        };
        save(&model, &adam, &pos, Some(&row))?;
        metrics.append(&row)?;
        eprintln!(
            "[train-mnist] epoch {}/{}: train loss {:.4}, test loss {:.4}, test accuracy {:.2}%, {:.0} img/s, {}",
            epoch + 1,
            args.epochs,
            row["train_loss"].as_f64().unwrap_or(f64::NAN),
            eval.loss,
            100.0 * eval.accuracy,
            img_per_s,
            fmt_secs(seconds)
        );
    }
    eprintln!(
        "[train-mnist] done in {}; run directory {}",
        fmt_secs(started.elapsed().as_secs_f64()),
        run_dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

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

use crate::engine::checkpoint::Checkpoint;
use crate::engine::optim::{Adam, Grads};
use crate::engine::progress::{Progress, fmt_secs};
use crate::engine::{ddp, params, stop};
use crate::eval::{MODEL_NAME, evaluate_sharded};
use crate::files::write_json;
use crate::outputs::metrics::MetricsFiles;
use crate::outputs::rundir::{self, RunMeta};

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
    pub world_size: usize,
    /// Per-rank batch × world size.
    pub effective_batch_size: usize,
}

/// Position in training: everything besides weights and optimiser state needed to resume.
#[derive(Debug, Clone, Default, PartialEq)]
struct Position {
    /// Epochs fully done.
    epoch: u64,
    /// Samples of the current epoch's order already consumed (by all ranks together), so
    /// that a checkpoint resumes on any world size.
    epoch_samples: u64,
    global_step: u64,
    loss_sum: f64,
    seen: u64,
}

impl Position {
    fn save_into(&self, ck: &mut Checkpoint, seed: u64) {
        ck.counters.insert("train.epoch".into(), self.epoch as i64);
        ck.counters
            .insert("train.epoch_samples".into(), self.epoch_samples as i64);
        ck.counters
            .insert("train.global_step".into(), self.global_step as i64);
        ck.counters.insert("train.seen".into(), self.seen as i64);
        ck.counters.insert("rng.seed".into(), seed as i64);
        ck.reals.insert("train.loss_sum".into(), self.loss_sum);
    }

    fn load(ck: &Checkpoint) -> Result<Self> {
        Ok(Self {
            epoch: ck.counter("train.epoch")? as u64,
            epoch_samples: ck.counter("train.epoch_samples")? as u64,
            global_step: ck.counter("train.global_step")? as u64,
            seen: ck.counter("train.seen")? as u64,
            loss_sum: ck.real("train.loss_sum")?,
        })
    }
}

/// Appends one line to `steps.csv` (a log: plain append, header on creation).
fn append_step(dir: &Path, step: u64, epoch: u64, loss: f64, lr: f64) -> Result<()> {
    use std::io::Write;
    let path = dir.join("steps.csv");
    let new = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)?;
    if new {
        writeln!(f, "step,epoch,loss,lr")?;
    }
    writeln!(f, "{step},{epoch},{loss},{lr}")?;
    Ok(())
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
    let comm = crate::dist::init()?;
    let (rank, world) = (comm.rank(), comm.size());
    let main = rank == 0;
    if world > 1 && args.device.device.is_cuda() {
        // One GPU per rank: `cuda` means this rank's device (CUDA_VISIBLE_DEVICES per task).
        eprintln!("[train-mnist] rank {rank}/{world} on {}", placement.device);
    }
    let (train, test) = load_data(args)?;
    let run_dir = rundir::shared(comm.as_ref(), &args.run, Path::new("runs"))?;
    stop::install()?;
    let resume = rundir::resume_source(args.run.resume.as_deref(), &run_dir)?;

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
        world_size: world,
        effective_batch_size: args.batch_size * world,
    };

    B::seed(&device, args.seed);
    let mut model = MnistCnn::<B>::new(&device, config.dropout);
    params::materialize(&model);
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
        if main {
            eprintln!(
                "resuming from {} at epoch {} sample {}",
                path.display(),
                pos.epoch + 1,
                pos.epoch_samples
            );
        }
    } else {
        model = ddp::broadcast_params(comm.as_ref(), model, &device)?;
    }

    let metrics = MetricsFiles::new(&run_dir);
    if main {
        write_json(&run_dir.join("args.json"), &config)?;
        let mut meta = RunMeta::new(
            &run_dir,
            placement.backend.name(),
            &placement.device.to_string(),
        );
        meta.world_size = world;
        meta.extra.insert(
            "effective_batch_size".into(),
            json!(config.effective_batch_size),
        );
        meta.extra
            .insert("per_rank_batch_size".into(), json!(args.batch_size));
        meta.extra.insert("collective".into(), json!(comm.name()));
        meta.extra.insert(
            "resumed_from".into(),
            json!(resume.as_ref().map(|p| p.display().to_string())),
        );
        write_json(&run_dir.join("run_meta.json"), &meta)?;
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
    }

    let n = train.len();
    let global_batch = args.batch_size * world;
    let steps_per_epoch = n.div_ceil(global_batch) as u64;
    let loss_fn = CrossEntropyLoss::new(None, &device);
    let ckpt_dir = run_dir.join("checkpoints");
    let save = |model: &MnistCnn<B>,
                adam: &Adam<B::InnerBackend>,
                pos: &Position,
                row: Option<&Map<String, Value>>|
     -> Result<()> {
        if !main {
            return Ok(());
        }
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

    let mut comm_stats = ddp::CommStats::default();
    let mut steps_here = 0u64;
    let started = Instant::now();
    for epoch in pos.epoch..args.epochs as u64 {
        let order = epoch_order(n, args.seed, epoch);
        let lr = args.lr * args.lr_gamma.powi(epoch as i32);
        let first_step = (pos.epoch_samples as usize).div_ceil(global_batch) as u64;
        let mut progress = Progress::new(
            format!("[train-mnist] epoch {}/{}", epoch + 1, args.epochs),
            steps_per_epoch,
            first_step,
            args.run.log_every_secs,
            main,
        );
        let t0 = Instant::now();
        let comm_before = comm_stats.time;
        let mut images_here = 0usize;
        while (pos.epoch_samples as usize) < n {
            let start = pos.epoch_samples as usize;
            let end = (start + global_batch).min(n);
            let (lo, hi) = ddp::shard(start, end, rank, world);
            let idx = &order[lo..hi];
            B::seed(
                &device,
                mix(mix(args.seed, 0x5eed_0000 + pos.global_step), rank as u64),
            );
            let mut sums = vec![0.0f64; 2];
            let grads = if idx.is_empty() {
                GradientsParams::new()
            } else {
                let (x, y) = to_tensors::<B>(&train, idx, &device);
                let loss = loss_fn.forward(model.forward(x), y);
                sums[0] = scalar(loss.clone()) * idx.len() as f64;
                GradientsParams::from_grads(loss.backward(), &model)
            };
            let grads = if world == 1 {
                Grads::Params(grads)
            } else {
                let weight = idx.len() as f32 / (end - start) as f32;
                ddp::all_reduce_grads(
                    comm.as_ref(),
                    &model,
                    grads,
                    weight,
                    &device,
                    &mut comm_stats,
                )?
            };
            model = adam.step(lr, model, grads);
            // One small reduction carries the loss and any pending stop request, so that every
            // rank stops at the same step.
            sums[1] = idx.len() as f64;
            let stop_reason = ddp::sum_with_stop(
                comm.as_ref(),
                &mut sums,
                steps_here + 1,
                args.run.stop_after_steps,
            )?;
            let loss_value = sums[0] / sums[1].max(1.0);
            if !loss_value.is_finite() {
                bail!(
                    "training diverged at epoch {} step {}: loss is {loss_value}",
                    epoch + 1,
                    pos.global_step + 1
                );
            }
            pos.loss_sum += sums[0];
            pos.seen += sums[1] as u64;
            pos.epoch_samples = end as u64;
            pos.global_step += 1;
            steps_here += 1;
            images_here += end - start;
            if main && args.log_steps {
                append_step(&run_dir, pos.global_step, epoch + 1, loss_value, lr)?;
            }
            let rate = images_here as f64 / t0.elapsed().as_secs_f64().max(1e-9);
            let step_in_epoch = (end as u64).div_ceil(global_batch as u64);
            progress.update(step_in_epoch, loss_value, rate);
            if let Some(reason) = stop_reason {
                progress.finish();
                save(&model, &adam, &pos, None)?;
                if main {
                    eprintln!(
                        "[train-mnist] stopping at epoch {} step {step_in_epoch} ({}): checkpoint written to {}; \
                         resume with --resume auto",
                        epoch + 1,
                        reason.describe(),
                        ckpt_dir.join("last.safetensors").display(),
                    );
                }
                return Ok(if main {
                    requeue.finish(reason, "[train-mnist]")
                } else {
                    requeue.exit_code(reason)
                });
            }
            if args.run.checkpoint_every > 0 && pos.global_step % args.run.checkpoint_every == 0 {
                save(&model, &adam, &pos, None)?;
            }
        }
        progress.finish();
        let seconds = t0.elapsed().as_secs_f64();
        let img_per_s = images_here as f64 / seconds.max(1e-9);
        let eval = evaluate_sharded(
            &model.valid(),
            &test,
            args.test_batch_size,
            &device,
            comm.as_ref(),
        )?;
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
        row.insert(
            "allreduce_seconds".into(),
            json!((comm_stats.time - comm_before).as_secs_f64()),
        );
        pos = Position {
            epoch: epoch + 1,
            global_step: pos.global_step,
            ..Default::default()
        };
        save(&model, &adam, &pos, Some(&row))?;
        if main {
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
    }
    ddp::log_digest("[train-mnist]", "", comm.as_ref(), &model);
    comm_stats.log("[train-mnist]", comm.as_ref());
    if main {
        eprintln!(
            "[train-mnist] done in {}; run directory {}",
            fmt_secs(started.elapsed().as_secs_f64()),
            run_dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

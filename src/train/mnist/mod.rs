//! `trainer train-mnist`: the MNIST CNN as a job of the training engine.
//!
//! Determinism: weights are initialised from the seed on the CPU, for every backend alike
//! ([`params::init_seeded`](crate::toolbox::params::init_seeded)); epoch `e` shuffles with a ChaCha8
//! generator seeded from `(seed, e)`; dropout draws from the backend generator re-seeded from
//! `(seed, global step, rank)` before every step. The whole random state is therefore
//! `(seed, epoch, step)`, which the checkpoint stores, and a resumed run continues exactly.

pub(crate) mod evaluate;
mod resident;
mod settings;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;
use serde::Serialize;
use serde_json::json;

use crate::data::mnist::{self, MnistSplit, PIXELS, Split};
use crate::engine::{
    Batch, DeviceStepOut, DeviceSums, Drawn, EpochCtx, EpochReport, Job, JobMetric, JobSpec,
    LossSums, LrSchedule, Mode, Monitor, OptimizerSpec, Outputs, Row, RunContext, Stage, StepOut,
    TRAIN_LOSS, TrainPlan, Valid, panels,
};
use crate::launch::{self, JobFactory, Launch};
use crate::models::cnn::MnistCnn;
use crate::toolbox::seed::mix;

use self::evaluate::{MODEL_NAME, evaluate_sharded};
use self::resident::Resident;
pub(crate) use self::settings::MnistSettings;

/// The metrics of a `train-mnist` run: the engine's training loss, the test split's loss and
/// accuracy (the two a monitor may name). `curves.svg` draws both losses in one panel beside the
/// accuracy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MnistMetric {
    TrainLoss,
    TestLoss,
    TestAccuracy,
}

impl JobMetric for MnistMetric {
    const ALL: &'static [Self] = &[
        MnistMetric::TrainLoss,
        MnistMetric::TestLoss,
        MnistMetric::TestAccuracy,
    ];

    fn name(self) -> &'static str {
        match self {
            MnistMetric::TrainLoss => TRAIN_LOSS,
            MnistMetric::TestLoss => "test_loss",
            MnistMetric::TestAccuracy => "test_accuracy",
        }
    }

    fn mode(self) -> Mode {
        match self {
            MnistMetric::TrainLoss | MnistMetric::TestLoss => Mode::Min,
            MnistMetric::TestAccuracy => Mode::Max,
        }
    }

    fn monitorable(self) -> bool {
        self != MnistMetric::TrainLoss
    }

    fn drawn(self) -> Option<Drawn> {
        match self {
            MnistMetric::TrainLoss | MnistMetric::TestLoss => Drawn::line("loss"),
            MnistMetric::TestAccuracy => Drawn::line("test accuracy"),
        }
    }
}

/// A resolved `train-mnist` run.
#[derive(Debug, Clone)]
pub(crate) struct MnistRun {
    pub settings: MnistSettings,
    pub monitor: Option<Monitor>,
    pub launch: Launch,
}

/// The resolved configuration, saved as `args.json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MnistConfig {
    pub data_dir: PathBuf,
    pub epochs: usize,
    pub batch_size: usize,
    pub lr: f64,
    pub lr_gamma: f64,
    pub optimizer: String,
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
    /// Micro-batches per step on each rank (`--grad-accum`).
    pub grad_accum: usize,
    /// Per-rank batch × micro-batches × world size.
    pub effective_batch_size: usize,
}

/// The MNIST CNN's part of training: data, step and evaluation.
struct MnistJob<B: AutodiffBackend> {
    settings: MnistSettings,
    train: MnistSplit,
    /// The training split on the device, uploaded at the first step (`None` before it, or
    /// for a split too large to hold there: then each step uploads its shard).
    resident: Option<Option<Resident<B>>>,
    test: MnistSplit,
    spec: JobSpec,
}

fn load_data(args: &MnistSettings) -> Result<(MnistSplit, MnistSplit)> {
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

/// The resolved configuration (`args.json`).
fn config<B: AutodiffBackend>(
    a: &MnistSettings,
    optimizer: OptimizerSpec,
    monitor: Option<Monitor>,
    ctx: &RunContext<B>,
) -> MnistConfig {
    MnistConfig {
        data_dir: a.data_dir.clone(),
        epochs: a.epochs,
        batch_size: a.batch_size,
        lr: a.lr,
        lr_gamma: a.lr_gamma,
        optimizer: format!("{optimizer}, lr x lr_gamma per epoch"),
        seed: a.seed,
        limit_train: a.limit_train,
        limit_test: a.limit_test,
        test_batch_size: a.test_batch_size,
        dropout: !a.no_dropout,
        monitor,
        backend: ctx.placement.backend.name().into(),
        device: ctx.placement.device.to_string(),
        run_dir: ctx.run_dir.clone(),
        resume: ctx.run.resume.clone(),
        checkpoint_every: ctx.run.checkpoint_every,
        world_size: ctx.world_size(),
        grad_accum: a.grad_accum,
        effective_batch_size: a.batch_size * a.grad_accum * ctx.world_size(),
    }
}

/// The settings a resumed run must share with its checkpoint: every one that changes what is
/// computed (`--epochs` may grow: the epochs done do not depend on it).
fn fingerprint(a: &MnistSettings, c: &MnistConfig) -> serde_json::Value {
    json!({
        "data_dir": a.data_dir, "limit_train": a.limit_train, "limit_test": a.limit_test,
        "dropout": !a.no_dropout, "effective_batch_size": c.effective_batch_size, "lr": a.lr,
        "lr_gamma": a.lr_gamma, "seed": a.seed, "test_batch_size": a.test_batch_size,
        "monitor": c.monitor,
    })
}

impl<B: AutodiffBackend> MnistJob<B> {
    /// Dropout's generator seeded for step `b` (from the seed, the global step and the shard).
    fn seed_step(&self, b: &Batch<'_, B>) {
        B::seed(
            b.device,
            mix(
                mix(self.settings.seed, 0x5eed_0000 + b.global_step),
                b.shard as u64,
            ),
        );
    }

    /// The training split on the device (uploaded at the first call), or `None` when it is too
    /// large to hold there.
    fn resident(&mut self, device: &B::Device) -> Option<&mut Resident<B>> {
        self.resident
            .get_or_insert_with(|| Resident::upload(&self.train, device))
            .as_mut()
    }
}

impl<B: AutodiffBackend> Job<B> for MnistJob<B> {
    type Model = MnistCnn<B>;
    type Step = LossSums;
    type Epoch = LossSums;
    type State = ();

    fn spec(&self) -> &JobSpec {
        &self.spec
    }

    fn begin_stage(&mut self, _stage: usize, _resumed: bool) -> Result<Stage> {
        Ok(Stage {
            items: self.train.len(),
            shuffle_seed: self.settings.seed,
            label: String::new(),
            columns: Row::new(),
            model_file: None,
            monitor: None,
        })
    }

    fn init_model(&self, _stage: usize, device: &B::Device) -> Result<MnistCnn<B>> {
        let dropout = !self.settings.no_dropout;
        crate::toolbox::params::init_seeded(
            self.settings.seed,
            device,
            || MnistCnn::new(device, dropout),
            |cpu| MnistCnn::new(cpu, dropout),
        )
    }

    fn step(&mut self, model: &MnistCnn<B>, b: &Batch<'_, B>) -> Result<StepOut<LossSums>> {
        Ok(match self.step_on_device(model, b)? {
            Some(out) => StepOut {
                grads: out.grads,
                sums: out.sums.read_now(),
            },
            None => StepOut {
                grads: GradientsParams::new(),
                sums: LossSums::default(),
            },
        })
    }

    /// The step, its loss left on the device (`None` for an empty shard: no gradient, no
    /// sums). The sums are the mean loss read as f64, times the shard's items.
    fn step_on_device(
        &mut self,
        model: &MnistCnn<B>,
        b: &Batch<'_, B>,
    ) -> Result<Option<DeviceStepOut<B::InnerBackend, LossSums>>> {
        let idx = &b.order[b.lo..b.hi];
        let fixed = match b.fixed_inputs {
            // Seeded and filled by `fill_graph_inputs` (a recorded step does no host work).
            true => self
                .resident
                .as_ref()
                .and_then(|r| r.as_ref()?.fixed_shard()),
            false => {
                self.seed_step(b);
                None
            }
        };
        if idx.is_empty() {
            return Ok(None);
        }
        let (x, y) = match fixed {
            Some(xy) => xy,
            None => match self.resident(b.device) {
                Some(r) => r.shard((b.stage, b.epoch), b.order, (b.lo, b.hi)),
                None => to_tensors::<B>(&self.train, idx, b.device),
            },
        };
        let loss = launch::cross_entropy(model.forward_with(x, &launch::BackendKernels), y);
        let n = idx.len() as f64;
        let sums = DeviceSums {
            values: loss.clone().inner(),
            finish: std::rc::Rc::new(move |v: &[f64]| LossSums {
                sum: v.first().copied().unwrap_or(f64::NAN) * n,
                count: n,
            }),
        };
        // The shard's share of the global batch's mean loss (1 on a single shard: the same
        // bits as the mean itself; 1/2 on two equal shards: an exact power of two).
        let share = idx.len() as f64 / (b.end - b.start) as f64;
        let loss = if share == 1.0 { loss } else { loss * share };
        Ok(Some(DeviceStepOut {
            grads: GradientsParams::from_grads(loss.backward(), model),
            sums,
        }))
    }

    fn fill_graph_inputs(&mut self, b: &Batch<'_, B>) -> Result<bool> {
        self.seed_step(b);
        Ok(match self.resident(b.device) {
            Some(r) => r.fill_fixed((b.stage, b.epoch), b.order, (b.lo, b.hi)),
            None => false,
        })
    }

    fn end_epoch(
        &mut self,
        model: &Valid<B, Self>,
        sums: &LossSums,
        ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport> {
        let e = evaluate_sharded(
            model,
            &self.test,
            self.settings.test_batch_size,
            ctx.device,
            ctx.comm,
        )?;
        let mut head = Row::new();
        head.insert(MnistMetric::TestLoss.name().into(), json!(e.loss));
        head.insert(MnistMetric::TestAccuracy.name().into(), json!(e.accuracy));
        Ok(EpochReport {
            train_loss: sums.mean(),
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

struct Factory(MnistSettings, Option<Monitor>);

impl JobFactory for Factory {
    type Job<B: AutodiffBackend> = MnistJob<B>;

    fn name(&self) -> &'static str {
        "train-mnist"
    }

    fn runs_root(&self) -> PathBuf {
        Path::new("runs").to_path_buf()
    }

    fn graph_capturable(&self) -> Result<()> {
        if self.0.grad_accum > 1 {
            anyhow::bail!(
                "one micro-batch per step (not --grad-accum {})",
                self.0.grad_accum
            );
        }
        if !matches!(self.0.optimizer.spec()?, OptimizerSpec::Adam { .. }) {
            anyhow::bail!("it replays the fused Adam: it needs --optimizer adam");
        }
        Ok(())
    }

    fn build<B: AutodiffBackend>(self, ctx: &RunContext<B>) -> Result<MnistJob<B>> {
        let Factory(settings, monitor) = self;
        let (train, test) = load_data(&settings)?;
        let optimizer = settings.optimizer.spec()?;
        let config = config(&settings, optimizer, monitor.clone(), ctx);
        let spec = JobSpec {
            name: "train-mnist",
            model_name: MODEL_NAME,
            plan: TrainPlan {
                epochs: settings.epochs,
                batch_size: settings.batch_size,
                micro_batches: settings.grad_accum,
                stages: 1,
                lr: LrSchedule::StepDecay {
                    lr: settings.lr,
                    gamma: settings.lr_gamma,
                },
                optimizer,
                seed: settings.seed,
            },
            outputs: Outputs {
                unit: "img",
                cpu_columns: false,
                panels: panels(MnistMetric::ALL),
                meta: Row::new(),
            },
            monitor,
            validate_initial: None,
            phases: Vec::new(),
            fingerprint: fingerprint(&settings, &config),
            config: serde_json::to_value(config)?,
            settled: toml::Table::new(),
        };
        Ok(MnistJob {
            settings,
            train,
            resident: None,
            test,
            spec,
        })
    }
}

/// `trainer train-mnist`.
pub(crate) fn run(run: MnistRun) -> Result<ExitCode> {
    launch::run(run.launch, Factory(run.settings, run.monitor))
}

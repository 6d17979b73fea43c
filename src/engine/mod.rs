//! The training engine: the one loop every job runs through.
//!
//! A job ([`Job`]) brings what is its own: its model and how to initialise it, one training
//! step on a shard of a batch returning typed sums, and an epoch-end hook that turns the epoch's
//! sums into a training loss and evaluates. The engine ([`train`]) brings everything else:
//! epochs and steps, the shuffled order of each epoch, progress, stop signals → checkpoint →
//! exit codes, `--resume`, `--checkpoint-every`, the metrics rows (CSV + JSONL) and
//! `curves.svg`, checkpoint files (last and best; per epoch with `--keep-checkpoints all`), early stopping on a named monitor,
//! rank-0-only output and the data-parallel all-reduce of gradients and sums. Jobs with
//! cross-validation folds run one *stage* per fold, each with fresh weights and optimiser.
//! The tools the loop uses (weights, Adam, checkpoint format, all-reduce, seeds) are in
//! [`crate::toolbox`].

mod context;
pub(crate) mod degeneracy;
mod epoch;
mod epoch_ctx;
mod epoch_end;
pub mod graph;
pub(crate) mod metric;
pub(crate) mod monitor;
pub(crate) mod pending;
mod persist;
pub(crate) mod progress;
mod resume_file;
mod retention;
mod run;
mod settings;
pub(crate) mod state;
mod step;
mod sums;

use std::collections::BTreeMap;

use anyhow::Result;
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::dist::Collective;
pub(crate) use crate::outputs::curves::Panel;
pub(crate) use crate::outputs::metrics::Row;
pub(crate) use crate::toolbox::optim::OptimizerSpec;

pub(crate) use context::RunContext;
pub(crate) use metric::{Drawn, JobMetric, Mode, TRAIN_LOSS, panels};
pub(crate) use monitor::Monitor;
pub(crate) use pending::{DeviceStepOut, DeviceSums};
pub(crate) use run::train;
pub(crate) use settings::{KeepCheckpoints, RunSettings};
pub(crate) use state::StageResult;
pub(crate) use sums::{EpochSums, LossSums, StepSums};

/// The learning rate of each epoch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) enum LrSchedule {
    Constant(f64),
    /// `lr × gamma^epoch` (PyTorch's StepLR with step 1).
    StepDecay {
        lr: f64,
        gamma: f64,
    },
}

impl LrSchedule {
    /// Learning rate of 0-based epoch `epoch`.
    pub(crate) fn at(&self, epoch: usize) -> f64 {
        match *self {
            LrSchedule::Constant(lr) => lr,
            LrSchedule::StepDecay { lr, gamma } => lr * gamma.powi(epoch as i32),
        }
    }
}

/// What the engine needs to know about a job before it starts: its names, how it trains
/// ([`TrainPlan`]), what it writes ([`Outputs`]), how the best epoch is picked, and what a run
/// records and a resume must match.
#[derive(Debug, Clone)]
pub(crate) struct JobSpec {
    /// Command name for logs (`train-mnist`).
    pub name: &'static str,
    /// Model name in checkpoint metadata (`mnist_cnn`).
    pub model_name: &'static str,
    pub plan: TrainPlan,
    pub outputs: Outputs,
    /// Picks the best epoch (best model file) and stops a stage early.
    pub monitor: Option<Monitor>,
    /// For a model that starts at a fitted baseline: that baseline, named
    /// (`the closed-form eb-drift forecast`). The model as initialised is evaluated before each
    /// stage's first epoch and kept as the best unless training beats it; a run that kept it in
    /// every stage is warned about (its forecast is the baseline's).
    pub validate_initial: Option<String>,
    /// Phases of the schedule that end during training (warm-ups, terms switched on later): a
    /// best epoch before one is a degeneracy warning ([`degeneracy`]).
    pub phases: Vec<degeneracy::Phase>,
    /// The resolved configuration, written to `args.json` and into every checkpoint.
    pub config: Value,
    /// The settings a resumed run must share with its checkpoint.
    pub fingerprint: Value,
    /// Values the job settled at run time that the command line left open (`train-gnn`'s batch
    /// on a GPU), by section as in `config.toml`: written there beside the flags, so a run
    /// started from the file repeats this one.
    pub settled: toml::Table,
}

/// How a job trains: epochs, batches, stages, learning rate, seed and optimiser.
#[derive(Debug, Clone)]
pub(crate) struct TrainPlan {
    /// Epochs per stage.
    pub epochs: usize,
    /// Items per forward pass on each rank (the global batch is this × `micro_batches` ×
    /// ranks).
    pub batch_size: usize,
    /// Micro-batches per step on each rank (gradient accumulation; 1 = none). Only for jobs
    /// whose step calls no collective of its own: the micro-batches of a rank run one after
    /// the other.
    pub micro_batches: usize,
    /// Stages run one after the other with fresh weights (cross-validation folds; usually 1).
    pub stages: usize,
    pub lr: LrSchedule,
    /// The optimiser the job chose (Adam unless it says otherwise).
    pub optimizer: OptimizerSpec,
    /// Seed written into checkpoints (the job derives its own seeds from it).
    pub seed: u64,
}

impl Default for TrainPlan {
    /// One stage, one epoch, batch 1 without accumulation, Adam at a constant learning rate of
    /// 1e-3, seed 0.
    fn default() -> Self {
        TrainPlan {
            epochs: 1,
            batch_size: 1,
            micro_batches: 1,
            stages: 1,
            lr: LrSchedule::Constant(1e-3),
            optimizer: OptimizerSpec::default(),
            seed: 0,
        }
    }
}

impl TrainPlan {
    /// Items per optimiser step over all ranks.
    pub(crate) fn global_batch(&self, ranks: usize) -> usize {
        self.batch_size * self.micro_batches.max(1) * ranks
    }
}

/// What a job's run writes beside the engine's own files: its throughput unit, extra columns,
/// the panels of `curves.svg` and extra fields of `run_meta.json`.
#[derive(Debug, Clone)]
pub(crate) struct Outputs {
    /// What a training item is called in the throughput column `<unit>_per_s` and the log
    /// (`img`, `subjects`).
    pub unit: &'static str,
    /// Also write `epoch_steps` and the CPU-time and evaluation-time columns.
    pub cpu_columns: bool,
    /// The panels of `curves.svg`.
    pub panels: Vec<Panel>,
    /// Extra fields of `run_meta.json`.
    pub meta: Row,
}

impl Default for Outputs {
    /// Items called `items`, no extra columns, panels or fields.
    fn default() -> Self {
        Outputs {
            unit: "items",
            cpu_columns: false,
            panels: Vec::new(),
            meta: Row::new(),
        }
    }
}

impl Default for JobSpec {
    /// The default plan and outputs, no monitor, nothing recorded: a job states what differs
    /// (`JobSpec { name, model_name, plan, .., ..JobSpec::default() }`).
    fn default() -> Self {
        JobSpec {
            name: "train",
            model_name: "model",
            plan: TrainPlan::default(),
            outputs: Outputs::default(),
            monitor: None,
            validate_initial: None,
            phases: Vec::new(),
            config: Value::Null,
            fingerprint: Value::Null,
            settled: toml::Table::new(),
        }
    }
}

/// One stage as the job sets it up.
#[derive(Debug, Clone)]
pub(crate) struct Stage {
    /// Training items; each epoch trains on a permutation of `0..items`.
    pub items: usize,
    /// Seed of the epoch orders of this stage.
    pub shuffle_seed: u64,
    /// Label in logs, e.g. `fold 3` (empty for a single-stage job).
    pub label: String,
    /// Columns that name the stage in metrics rows (e.g. `fold`).
    pub columns: Row,
    /// The model-only files the engine writes for the stage (best and last epoch), if any.
    pub model_file: Option<ModelFile>,
    /// This stage's monitor when it is not the run's (e.g. a fold whose validation subjects
    /// have no follow-up scan, so that only `val_loss` is defined); `None`: the run's.
    pub monitor: Option<Monitor>,
}

/// One training step's global batch and this rank's shard of it.
pub(crate) struct Batch<'a, B: AutodiffBackend> {
    pub stage: usize,
    /// 0-based epoch of the stage.
    pub epoch: usize,
    /// Steps done before this one, over the whole run.
    pub global_step: u64,
    /// The epoch's order of training items.
    pub order: &'a [usize],
    /// The global batch is `order[start..end]`; this shard is `order[lo..hi]`.
    pub start: usize,
    pub end: usize,
    pub lo: usize,
    pub hi: usize,
    /// This shard's index among `shards` = ranks × micro-batches (rank `r`'s micro-batch `k`
    /// is shard `r × micro_batches + k`; with one micro-batch, the rank). Anything drawn per
    /// shard (dropout masks) is seeded by it, so K ranks and one rank over K micro-batches
    /// draw the same.
    pub shard: usize,
    #[allow(dead_code)] // part of what a job is given; no job reads it yet
    pub shards: usize,
    /// `--cuda-graph`: the job filled this batch's inputs into its fixed buffers and drew its
    /// seed ([`Job::fill_graph_inputs`]): the step reads them there and does no host work.
    pub fixed_inputs: bool,
    pub device: &'a B::Device,
    pub comm: &'a dyn Collective,
}

/// What a step returns: the gradients of this shard's share of the global batch's loss, and
/// sums that add up over shards. See [`Job::step`] for the convention.
pub(crate) struct StepOut<S> {
    pub grads: GradientsParams,
    pub sums: S,
}

/// What the end of an epoch reports: the training loss, then columns.
#[derive(Debug, Clone, Default)]
pub(crate) struct EpochReport {
    pub train_loss: f64,
    /// Columns right after `train_loss` (e.g. `test_loss, test_accuracy` or `val_loss`).
    pub head: Row,
    /// Columns after the monitor's (training detail, evaluation detail, settings in force).
    pub detail: Row,
    /// The end-of-epoch log line's part about the evaluation.
    pub summary: String,
}

impl EpochReport {
    /// A metric by name from either group.
    pub(crate) fn get(&self, name: &str) -> Option<f64> {
        self.head
            .get(name)
            .or_else(|| self.detail.get(name))
            .and_then(Value::as_f64)
    }
}

/// Where an epoch ends.
pub(crate) struct EpochCtx<'a, B: AutodiffBackend> {
    #[allow(dead_code)] // part of what a job is given; no job reads it yet
    pub stage: usize,
    /// 0-based epoch of the stage.
    pub epoch: usize,
    pub device: &'a B::Device,
    pub comm: &'a dyn Collective,
}

/// What a job gets when every stage is done.
pub(crate) struct Done<'a, B: AutodiffBackend> {
    pub run_dir: &'a std::path::Path,
    pub stages: &'a [StageResult],
    pub device: &'a B::Device,
    pub comm: &'a dyn Collective,
}

/// A model-only file the engine writes for a stage (best and last epoch).
#[derive(Debug, Clone)]
pub(crate) struct ModelFile {
    /// File stem under `checkpoints/`: `<stem>_best.safetensors`, `<stem>_last.safetensors`.
    pub stem: String,
    /// Metadata stored with the weights (configuration, normalisation, …).
    pub metadata: BTreeMap<String, String>,
}

/// The validation-mode model of a job.
pub(crate) type Valid<B, J> = <<J as Job<B>>::Model as AutodiffModule<B>>::InnerModule;

/// A training job. Everything not listed here is the engine's.
pub(crate) trait Job<B: AutodiffBackend> {
    type Model: AutodiffModule<B>;
    /// What a step adds up over ranks.
    type Step: StepSums;
    /// What an epoch adds up over its steps (kept in resume checkpoints).
    type Epoch: EpochSums<Self::Step>;
    /// The job's own state, kept in resume checkpoints.
    type State: Serialize + DeserializeOwned + Default;

    fn spec(&self) -> &JobSpec;
    /// Sets up stage `stage` (e.g. a fold's normalisation); `resumed`: the run resumes inside
    /// this stage from a checkpoint (whose job state was restored already).
    fn begin_stage(&mut self, stage: usize, resumed: bool) -> Result<Stage>;
    /// A freshly initialised model for the stage, drawn from the job's seed.
    fn init_model(&self, stage: usize, device: &B::Device) -> Result<Self::Model>;
    /// Forward and backward on one shard of the global batch (`batch.lo..batch.hi` of
    /// `batch.start..batch.end`; a shard is a rank's part, or a micro-batch of it).
    ///
    /// The one convention every job follows:
    /// * **Gradients** are of the shard's *share* of the global batch's loss, so that the
    ///   engine only adds them (over micro-batches, then over ranks): if the loss is a mean
    ///   over the global batch's `n` items, the shard differentiates `Σ_shard loss_i / n`
    ///   (MNIST: the shard's mean × `n_shard / n`; CLG-ODE: its sums divided by global counts
    ///   it all-reduces itself). An empty shard returns no gradient.
    /// * **Sums** (`Self::Step`) are plain sums and counts over the shard's items; the engine
    ///   adds them over shards, and `StepSums::loss` of the total is the global batch's loss.
    fn step(&mut self, model: &Self::Model, batch: &Batch<'_, B>) -> Result<StepOut<Self::Step>>;
    /// [`Job::step`] with the sums left on the device ([`DeviceStepOut`]), asked when the
    /// shard is the whole global batch (one rank, one micro-batch) and no per-step log is
    /// written: the engine then reads many steps' sums at once, at its progress intervals,
    /// checkpoints, stops and the epoch's end, so that a GPU never waits on a read inside a
    /// step ([`pending`]). `None` (the default): the engine calls [`Job::step`].
    fn step_on_device(
        &mut self,
        _model: &Self::Model,
        _batch: &Batch<'_, B>,
    ) -> Result<Option<DeviceStepOut<B::InnerBackend, Self::Step>>> {
        Ok(None)
    }
    /// `--cuda-graph`: fills this full batch's inputs (one rank, one micro-batch) into device
    /// buffers of fixed address and shape, and draws what is drawn per step (the dropout seed),
    /// so that the next [`Job::step_on_device`] reads them there and stays free of host work: a
    /// CUDA graph can then record it once and replay it. `Ok(false)` (the default): the job
    /// cannot (the run is refused before it starts; [`crate::launch::JobFactory::graph_capturable`]).
    fn fill_graph_inputs(&mut self, _batch: &Batch<'_, B>) -> Result<bool> {
        Ok(false)
    }
    /// After an epoch's steps, before the evaluation: a closed-form model's weights fitted from
    /// the epoch's sums (the default keeps the weights the steps' gradients trained).
    fn refit(
        &mut self,
        model: Self::Model,
        _sums: &Self::Epoch,
        _device: &B::Device,
    ) -> Result<Self::Model> {
        Ok(model)
    }
    /// After an epoch's steps: the training loss from the epoch's sums, the evaluation, and
    /// the columns of the epoch's metrics row.
    fn end_epoch(
        &mut self,
        model: &Valid<B, Self>,
        sums: &Self::Epoch,
        ctx: &EpochCtx<'_, B>,
    ) -> Result<EpochReport>;
    /// The job's state, for a resume checkpoint (default: the empty state).
    fn state(&self) -> Self::State {
        Self::State::default()
    }
    /// Restores the state of a resume checkpoint (default: nothing to restore).
    fn restore(&mut self, _state: Self::State) {}
    /// After the last stage (e.g. scoring the test set). Runs on every rank.
    fn finish(&mut self, _done: &Done<'_, B>) -> Result<()> {
        Ok(())
    }
}

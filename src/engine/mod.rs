//! The training engine: the one loop every job runs through, and its machinery.
//!
//! A job ([`Job`]) brings what is its own: its model and how to initialise it, one training
//! step on a shard of a batch, an evaluation that returns named metrics, its configuration and
//! its extra state. The engine ([`train`]) brings everything else: epochs and steps, the
//! shuffled order of each epoch, progress, stop signals → checkpoint → exit codes, `--resume`,
//! `--checkpoint-every`, the metrics rows (CSV + JSONL) and `curves.svg`, checkpoint files
//! (last, per epoch, best), early stopping on a named monitor, rank-0-only output and the
//! data-parallel gradient all-reduce. Jobs with cross-validation folds run one *stage* per fold,
//! each with fresh weights and optimiser.

pub mod checkpoint;
pub mod ddp;
mod epoch;
mod epoch_end;
pub mod monitor;
pub mod optim;
pub mod params;
pub mod progress;
mod run;
pub mod seed;
pub mod state;
pub mod stop;
pub mod usage;

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Result;
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use serde_json::{Map, Value};

use crate::backend::Placement;
use crate::dist::Collective;
use crate::outputs::curves::Panel;

pub use monitor::{Mode, Monitor};
pub use run::train;
pub use state::StageResult;

/// A metrics row (or part of one): named values, in column order.
pub type Row = Map<String, Value>;

/// What the engine needs to know about a job before it starts.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// Command name for logs (`train-mnist`).
    pub name: &'static str,
    /// Model name in checkpoint metadata (`mnist_cnn`).
    pub model_name: &'static str,
    /// Epochs per stage.
    pub epochs: usize,
    /// Items per step on each rank (the global batch is this × ranks).
    pub batch_size: usize,
    /// Seed written into checkpoints (the job derives its own seeds from it).
    pub seed: u64,
    /// Stages run one after the other with fresh weights (cross-validation folds; usually 1).
    pub stages: usize,
    /// Picks the best epoch (best model file) and stops a stage early.
    pub monitor: Option<Monitor>,
    /// What a training item is called in the throughput column `<unit>_per_s` and the log
    /// (`img`, `subjects`).
    pub unit: &'static str,
    /// Also write `epoch_steps` and the CPU-time and evaluation-time columns.
    pub cpu_columns: bool,
    /// Keep a full checkpoint of every epoch (`checkpoints/epoch_NNN.safetensors`).
    pub epoch_checkpoints: bool,
    /// The panels of `curves.svg`.
    pub plot: Vec<Panel>,
}

/// Facts about the run that the job's configuration records.
#[derive(Debug, Clone)]
pub struct RunInfo {
    pub run_dir: PathBuf,
    pub world_size: usize,
    pub placement: Placement,
    pub resumed_from: Option<PathBuf>,
    pub collective: &'static str,
}

/// One stage as the job sets it up.
#[derive(Debug, Clone)]
pub struct Stage {
    /// Training items; each epoch trains on a permutation of `0..items`.
    pub items: usize,
    /// Seed of the epoch orders of this stage.
    pub shuffle_seed: u64,
    /// Label in logs, e.g. `fold 3` (empty for a single-stage job).
    pub label: String,
    /// Columns that name the stage in metrics rows (e.g. `fold`).
    pub columns: Row,
}

/// One training step's global batch and this rank's shard of it.
pub struct Batch<'a, B: AutodiffBackend> {
    pub stage: usize,
    /// 0-based epoch of the stage.
    pub epoch: usize,
    /// Steps done before this one, over the whole run.
    pub global_step: u64,
    /// The epoch's order of training items.
    pub order: &'a [usize],
    /// The global batch is `order[start..end]`; this rank trains on `order[lo..hi]`.
    pub start: usize,
    pub end: usize,
    pub lo: usize,
    pub hi: usize,
    pub device: &'a B::Device,
    pub comm: &'a dyn Collective,
}

/// What a step returns: gradients of this rank's shard, and values that add up over ranks.
pub struct StepOut {
    pub grads: GradientsParams,
    /// The all-reduce sums `grad_weight × gradient` over ranks.
    pub grad_weight: f32,
    /// Summed over ranks and handed to [`Job::step_loss`].
    pub sums: Vec<f64>,
}

/// What an evaluation returns.
#[derive(Debug, Clone, Default)]
pub struct Evaluation {
    /// Columns right after `train_loss` (e.g. `test_loss, test_accuracy` or `val_loss`).
    pub head: Row,
    /// Columns after the training detail columns.
    pub detail: Row,
    /// The end-of-epoch log line's part about this evaluation.
    pub summary: String,
}

impl Evaluation {
    /// A metric by name from either group.
    pub fn get(&self, name: &str) -> Option<f64> {
        self.head
            .get(name)
            .or_else(|| self.detail.get(name))
            .and_then(Value::as_f64)
    }
}

/// Where an evaluation runs.
pub struct EvalCtx<'a, B: AutodiffBackend> {
    pub stage: usize,
    pub epoch: usize,
    pub device: &'a B::Device,
    pub comm: &'a dyn Collective,
}

/// What a job gets when every stage is done.
pub struct Done<'a, B: AutodiffBackend> {
    pub run_dir: &'a std::path::Path,
    pub stages: &'a [StageResult],
    pub device: &'a B::Device,
    pub comm: &'a dyn Collective,
}

/// A model-only file the engine writes for a stage (best and last epoch).
pub struct ModelFile {
    /// File stem under `checkpoints/`: `<stem>_best.safetensors`, `<stem>_last.safetensors`.
    pub stem: String,
    /// Metadata stored with the weights (configuration, normalisation, …).
    pub metadata: BTreeMap<String, String>,
}

/// A training job. Everything not listed here is the engine's.
pub trait Job<B: AutodiffBackend> {
    type Model: AutodiffModule<B>;

    fn spec(&self) -> &JobSpec;
    /// The resolved configuration, written to `args.json`.
    fn config(&self, run: &RunInfo) -> Result<Value>;
    /// The settings a resumed run must share with its checkpoint.
    fn fingerprint(&self) -> Value;
    /// Extra fields of `run_meta.json`.
    fn meta(&self, _run: &RunInfo) -> Row {
        Row::new()
    }
    /// Sets up stage `stage` (e.g. a fold's normalisation); `resumed`: the run resumes inside
    /// this stage from a checkpoint (whose job state was loaded already).
    fn begin_stage(&mut self, stage: usize, resumed: bool) -> Result<Stage>;
    /// A freshly initialised model for the stage, drawn from the job's seed.
    fn init_model(&self, stage: usize, device: &B::Device) -> Result<Self::Model>;
    /// Learning rate of 0-based epoch `epoch`.
    fn lr(&self, epoch: usize) -> f64;
    /// Forward and backward on this rank's shard of the batch.
    fn step(&mut self, model: &Self::Model, batch: &Batch<'_, B>) -> Result<StepOut>;
    /// From the step's sums over ranks: the step's loss (shown, checked for divergence) and
    /// what to add to the epoch's running sums.
    fn step_loss(&mut self, sums: &[f64]) -> (f64, Vec<f64>);
    /// From the epoch's running sums: the training loss and the training detail columns.
    fn train_columns(&mut self, acc: &[f64]) -> (f64, Row);
    /// Evaluation at the end of an epoch.
    fn evaluate(
        &mut self,
        model: &<Self::Model as AutodiffModule<B>>::InnerModule,
        ctx: &EvalCtx<'_, B>,
    ) -> Result<Evaluation>;
    /// Columns after the evaluation (settings in force this epoch, …).
    fn epoch_columns(&self, _epoch: usize) -> Row {
        Row::new()
    }
    /// Called after each epoch's training steps, before the evaluation (e.g. to update
    /// statistics gathered over the epoch); `acc` holds the epoch's running sums.
    fn end_epoch(&mut self, _epoch: usize, _acc: &[f64]) {}
    /// The model-only files of a stage, if the job wants them.
    fn model_file(&self, _stage: usize) -> Result<Option<ModelFile>> {
        Ok(None)
    }
    /// The job's own state, saved in resume checkpoints.
    fn save_state(&self) -> Value {
        Value::Null
    }
    fn load_state(&mut self, _state: &Value) -> Result<()> {
        Ok(())
    }
    /// After the last stage (e.g. scoring the test set). Runs on every rank.
    fn finish(&mut self, _done: &Done<'_, B>) -> Result<()> {
        Ok(())
    }
}

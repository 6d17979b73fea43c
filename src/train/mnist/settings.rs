//! The MNIST recipe, each field with its flag (PyTorch's examples/mnist defaults). The CLI
//! flattens it into `trainer train-mnist`; below the CLI it is plain data.

use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::settings::{DATA, MODEL, OPTIM, at_least_one, positive};
use crate::toolbox::optim::OptimizerChoice;

/// `trainer train-mnist`'s own settings.
#[derive(Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct MnistSettings {
    /// Directory holding the four IDX files (raw or .gz; `train-images-idx3-ubyte` or
    /// `train-images.idx3-ubyte` spellings).
    #[arg(long, help_heading = DATA)]
    pub data_dir: PathBuf,
    /// Use only the first N training images.
    #[arg(long, value_parser = at_least_one, help_heading = DATA)]
    pub limit_train: Option<usize>,
    /// Use only the first N test images.
    #[arg(long, value_parser = at_least_one, help_heading = DATA)]
    pub limit_test: Option<usize>,
    /// Turn dropout off (used to compare data-parallel runs with single-process runs).
    #[arg(long, help_heading = MODEL)]
    pub no_dropout: bool,
    /// Training epochs.
    #[arg(long, default_value_t = 1, value_parser = at_least_one, help_heading = OPTIM)]
    pub epochs: usize,
    /// Training batch size of one forward pass (per rank when data-parallel; the global batch
    /// is this × `--grad-accum` × ranks).
    #[arg(long, default_value_t = 64, value_parser = at_least_one, help_heading = OPTIM)]
    pub batch_size: usize,
    /// Gradient accumulation: micro-batches of `--batch-size` per optimiser step on each rank.
    /// One rank with `--grad-accum K` computes what K ranks compute, bit for bit (dropout
    /// included): the same global batch in 1/K of the activation memory.
    #[arg(long, alias = "gradient_accumulation_steps", default_value_t = 1,
          value_parser = at_least_one, help_heading = OPTIM)]
    pub grad_accum: usize,
    #[command(flatten)]
    #[serde(flatten)]
    pub optimizer: OptimizerChoice,
    /// Learning rate of the first epoch; multiplied by `--lr-gamma` after every epoch.
    #[arg(long, default_value_t = 1e-3, value_parser = positive, help_heading = OPTIM)]
    pub lr: f64,
    /// Per-epoch learning-rate decay (StepLR with step 1, as PyTorch's examples/mnist).
    #[arg(long, default_value_t = 0.7, value_parser = positive, help_heading = OPTIM)]
    pub lr_gamma: f64,
    /// Seed of weight init, shuffling and dropout.
    #[arg(long, default_value_t = 1, help_heading = OPTIM)]
    pub seed: u64,
    /// Batch size for evaluation.
    #[arg(long, default_value_t = 1000, value_parser = at_least_one, help_heading = OPTIM)]
    pub test_batch_size: usize,
}

//! Arguments of the training commands, grouped under `--help` headings (data, model,
//! optimisation, run, cluster) that are also the sections of `config.toml`.

use std::path::PathBuf;

use clap::Args;

use super::common::{DATA, DeviceArgs, EarlyStopArgs, MODEL, OPTIM, RUN, RunArgs};

/// `trainer train-mnist`.
#[derive(Args, Debug, Clone)]
pub struct MnistArgs {
    /// Directory holding the four IDX files (raw or .gz; `train-images-idx3-ubyte` or
    /// `train-images.idx3-ubyte` spellings).
    #[arg(long, help_heading = DATA)]
    pub data_dir: PathBuf,
    /// Use only the first N training images.
    #[arg(long, help_heading = DATA)]
    pub limit_train: Option<usize>,
    /// Use only the first N test images.
    #[arg(long, help_heading = DATA)]
    pub limit_test: Option<usize>,
    /// Turn dropout off (used to compare data-parallel runs with single-process runs).
    #[arg(long, help_heading = MODEL)]
    pub no_dropout: bool,
    #[arg(long, default_value_t = 1, help_heading = OPTIM)]
    pub epochs: usize,
    /// Training batch size (per rank when data-parallel).
    #[arg(long, default_value_t = 64, help_heading = OPTIM)]
    pub batch_size: usize,
    /// Adam learning rate of the first epoch; multiplied by `--lr-gamma` after every epoch.
    #[arg(long, default_value_t = 1e-3, help_heading = OPTIM)]
    pub lr: f64,
    /// Per-epoch learning-rate decay (StepLR with step 1, as PyTorch's examples/mnist).
    #[arg(long, default_value_t = 0.7, help_heading = OPTIM)]
    pub lr_gamma: f64,
    /// Seed of weight init, shuffling and dropout.
    #[arg(long, default_value_t = 1, help_heading = OPTIM)]
    pub seed: u64,
    /// Batch size for evaluation.
    #[arg(long, default_value_t = 1000, help_heading = OPTIM)]
    pub test_batch_size: usize,
    #[command(flatten)]
    pub early_stop: EarlyStopArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

/// `trainer train-gnn`: the reference's flags, in kebab case, with the reference's underscore
/// spellings accepted as aliases.
#[derive(Args, Debug, Clone)]
#[command(
    mut_arg("early_stop_metric", |a| a.default_value("val_loss")),
    mut_arg("patience", |a| a.default_value("20"))
)]
pub struct GnnArgs {
    /// Directory of SC matrices, one `<subject>_<session>.csv` (dense N×N, no header) per scan.
    #[arg(long, alias = "sc_dir", help_heading = DATA)]
    pub sc_dir: PathBuf,
    /// Root of the morphology tree (`Schaefer400_Morphology_<subject>.csv`, session in the path).
    #[arg(long, alias = "morph_root", help_heading = DATA)]
    pub morph_root: PathBuf,
    /// Subject table with `scanid`, `age`, `sex`, `siteid` columns.
    #[arg(long, alias = "subject_info_csv", help_heading = DATA)]
    pub subject_info_csv: PathBuf,
    /// Cross-validation fold to train (0–4), or -1 for all five folds in turn.
    #[arg(
        long,
        alias = "cv_fold",
        default_value_t = 0,
        allow_negative_numbers = true,
        help_heading = DATA
    )]
    pub cv_fold: i64,
    #[arg(long, alias = "latent_dim", default_value_t = 64, help_heading = MODEL)]
    pub latent_dim: usize,
    #[arg(long, alias = "hidden_dim", default_value_t = 128, help_heading = MODEL)]
    pub hidden_dim: usize,
    /// RK4 steps per forecast interval.
    #[arg(long, alias = "solver_steps", default_value_t = 12, help_heading = MODEL)]
    pub solver_steps: usize,
    #[arg(long, alias = "max_epochs", default_value_t = 120, help_heading = OPTIM)]
    pub max_epochs: usize,
    /// Subjects per optimiser step (per rank when data-parallel).
    #[arg(long, alias = "batch_size", default_value_t = 2, help_heading = OPTIM)]
    pub batch_size: usize,
    /// Adam learning rate (constant).
    #[arg(long, alias = "learning_rate", default_value_t = 5e-5, help_heading = OPTIM)]
    pub learning_rate: f64,
    #[arg(long, alias = "lambda_kl", default_value_t = 1e-4, help_heading = OPTIM)]
    pub lambda_kl: f64,
    /// Seed of weight init, shuffling, visit sampling and augmentation.
    #[arg(long, default_value_t = 42, help_heading = OPTIM)]
    pub seed: u64,
    #[command(flatten)]
    pub early_stop: EarlyStopArgs,
    /// Results root: the run directory is `<results-dir>/runs/<run name>/`.
    #[arg(long, alias = "results_dir", help_heading = RUN)]
    pub results_dir: PathBuf,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

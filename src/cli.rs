//! Command-line interface: one clap struct per sub-command. Flags are documented where they are
//! defined, so `trainer <cmd> --help` answers the common questions.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::backend::{BackendKind, DeviceSpec};

#[derive(Parser, Debug)]
#[command(
    name = "trainer",
    version,
    about = "Train deep-learning models on shared GPU clusters, from one binary"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Train the classic MNIST CNN on MNIST-format IDX data (MNIST, Fashion-MNIST).
    TrainMnist(MnistArgs),
    /// Accuracy and confusion matrix of an MNIST checkpoint on the test split.
    Eval(EvalArgs),
    /// Throughput benchmarks over every compiled backend and usable device.
    Bench(BenchArgs),
    /// Print the scheduler environment: ranks, hosts, rendezvous address/port, job ids, devices.
    Env {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Check the NVIDIA driver, GPUs, CUDA runtime and container before spending a queue slot.
    /// Each failure has its own exit code (see README, "Exit codes").
    Doctor {
        /// Fail (non-zero exit) when no usable GPU is found.
        #[arg(long)]
        require_gpu: bool,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Print the UUID of a free MIG instance, for `export CUDA_VISIBLE_DEVICES=$(trainer mig-pick)`.
    MigPick,
    /// Train CLG-ODE (coupled latent graph ODE) on a structural-connectome cohort.
    TrainGnn(GnnArgs),
    /// Write a synthetic connectome cohort (SC CSVs, morphology, subject table) for tests.
    SynthConnectome(SynthArgs),
    /// Dataset utilities.
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
}

/// Where a job runs: backend and device, chosen at run time among what was compiled in.
#[derive(Args, Debug, Clone)]
pub struct DeviceArgs {
    /// Tensor backend: flex (pure-Rust CPU, always built), tch (LibTorch, cargo feature `tch`),
    /// cuda (CubeCL CUDA, cargo feature `cuda`). Default: flex on CPU, cuda (else tch) on a GPU.
    #[arg(long, value_enum)]
    pub backend: Option<BackendKind>,
    /// Device: `cpu`, `cuda` (= `cuda:0`) or `cuda:N` (index among CUDA_VISIBLE_DEVICES).
    #[arg(long, default_value = "cpu")]
    pub device: DeviceSpec,
}

/// Run directory, resume and stop behaviour shared by the training commands.
#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// Run directory. Default: `runs/<run name>`, the run name being
    /// `<YYYYmmdd_HHMMSS>_<job id or "local">` unless `--run-name` is given.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Name of the run directory under `runs/` (used when `--out` is not given).
    #[arg(long)]
    pub run_name: Option<String>,
    /// Resume from a checkpoint file, or `auto`: the latest checkpoint of this run directory
    /// (`--out`, `--run-name`, or the directory of the same scheduler job id). `auto` starts fresh
    /// when there is none.
    #[arg(long)]
    pub resume: Option<String>,
    /// Also write a checkpoint every N optimiser steps (0: only at the end of each epoch).
    #[arg(long, default_value_t = 0)]
    pub checkpoint_every: u64,
    /// Seconds between plain progress lines when stderr is not a terminal (a Slurm log).
    #[arg(long, default_value_t = 10.0)]
    pub log_every_secs: f64,
    /// Stop (checkpoint, exit as if interrupted) after this many optimiser steps in this
    /// process. For tests and for splitting long runs into queue-sized pieces.
    #[arg(long)]
    pub stop_after_steps: Option<u64>,
    /// Signals that mean "checkpoint and requeue" (exit 75); other handled signals (of TERM,
    /// INT, USR1, USR2) checkpoint and exit with 128 + the signal number.
    #[arg(long, value_delimiter = ',', default_value = "USR1,USR2")]
    pub requeue_signal: Vec<String>,
    /// On a requeue signal under Slurm, also run `scontrol requeue <job>` (`<array job>_<task>`
    /// for array tasks). Without `scontrol` (inside a container) only exit 75, so that the batch
    /// script requeues.
    #[arg(long)]
    pub requeue: bool,
}

#[derive(Args, Debug, Clone)]
pub struct MnistArgs {
    /// Directory holding the four IDX files (raw or .gz; `train-images-idx3-ubyte` or
    /// `train-images.idx3-ubyte` spellings).
    #[arg(long)]
    pub data_dir: PathBuf,
    #[arg(long, default_value_t = 1)]
    pub epochs: usize,
    /// Training batch size (per rank when data-parallel).
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// Adam learning rate of the first epoch; multiplied by `--lr-gamma` after every epoch.
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Per-epoch learning-rate decay (StepLR with step 1, as PyTorch's examples/mnist).
    #[arg(long, default_value_t = 0.7)]
    pub lr_gamma: f64,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Use only the first N training images.
    #[arg(long)]
    pub limit_train: Option<usize>,
    /// Use only the first N test images.
    #[arg(long)]
    pub limit_test: Option<usize>,
    /// Batch size for evaluation.
    #[arg(long, default_value_t = 1000)]
    pub test_batch_size: usize,
    /// Turn dropout off (used to compare data-parallel runs with single-process runs).
    #[arg(long)]
    pub no_dropout: bool,
    /// Also append every step's global loss to `steps.csv` (step, epoch, loss, lr).
    #[arg(long)]
    pub log_steps: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Args, Debug, Clone)]
pub struct EvalArgs {
    /// A checkpoint written by `train-mnist` (`*.safetensors`).
    #[arg(long)]
    pub checkpoint: PathBuf,
    /// Directory with the IDX files; the test split is used.
    #[arg(long)]
    pub data_dir: PathBuf,
    #[arg(long)]
    pub limit_test: Option<usize>,
    #[arg(long, default_value_t = 1000)]
    pub batch_size: usize,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub device: DeviceArgs,
}

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// What to benchmark.
    #[arg(value_enum)]
    pub target: BenchTarget,
    /// MNIST-format data; synthetic images of the right shape are used when absent.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// gnn: subjects of the synthetic cohort generated for the benchmark.
    #[arg(long, default_value_t = 60)]
    pub subjects: usize,
    /// gnn: nodes per connectome of the synthetic cohort.
    #[arg(long, default_value_t = 400)]
    pub nodes: usize,
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// mnist: timed steps per backend (after the warm-up).
    #[arg(long, default_value_t = 30)]
    pub steps: usize,
    /// Warm-up steps, excluded from the timing.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// mnist: rounds over all backends, interleaved; each figure is the median of its rounds
    /// (a shared machine's load then hits every backend alike).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// mnist: also time PyTorch's own examples/mnist CNN with this Python interpreter (one
    /// with torch installed, e.g. the venv of scripts/setup-torch.sh), in the same rounds, with
    /// the same data, batch, steps and as many threads as this process's backends.
    #[arg(long, value_name = "PYTHON")]
    pub pytorch: Option<PathBuf>,
    /// Only these of our backends, comma-separated (e.g. `flex,tch`; `flex-plain` is
    /// Flex with its own kernels, for comparison). Default: every compiled backend and device.
    #[arg(long, value_delimiter = ',')]
    pub backends: Vec<BackendKind>,
    /// Also write the JSON result to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchTarget {
    /// MNIST CNN: training and inference img/s.
    Mnist,
    /// CLG-ODE on a synthetic cohort: seconds per epoch, CPU seconds per training subject,
    /// peak memory (reference defaults, batch 2).
    Gnn,
}

#[derive(Subcommand, Debug)]
pub enum DataCommand {
    /// Download a dataset from its usual public mirrors and verify checksums (for login nodes
    /// with internet; compute nodes should never download).
    Fetch(FetchArgs),
}

#[derive(Args, Debug, Clone)]
pub struct FetchArgs {
    #[arg(value_enum)]
    pub dataset: crate::data::fetch::Dataset,
    #[arg(long)]
    pub out: PathBuf,
    /// Base URL to download from instead of the built-in mirrors (only this one is tried).
    #[arg(long)]
    pub mirror: Option<String>,
}

/// `trainer train-gnn`: the reference's flags, in kebab case, with the reference's underscore
/// spellings accepted as aliases.
#[derive(Args, Debug, Clone)]
#[command(mut_arg("run_name", |a| a.alias("run_name")))]
pub struct GnnArgs {
    /// Directory of SC matrices, one `<subject>_<session>.csv` (dense N×N, no header) per scan.
    #[arg(long, alias = "sc_dir")]
    pub sc_dir: PathBuf,
    /// Root of the morphology tree (`Schaefer400_Morphology_<subject>.csv`, session in the path).
    #[arg(long, alias = "morph_root")]
    pub morph_root: PathBuf,
    /// Subject table with `scanid`, `age`, `sex`, `siteid` columns.
    #[arg(long, alias = "subject_info_csv")]
    pub subject_info_csv: PathBuf,
    /// Results root: the run directory is `<results-dir>/runs/<run name>/`.
    #[arg(long, alias = "results_dir")]
    pub results_dir: PathBuf,
    /// Cross-validation fold to train (0–4), or -1 for all five folds in turn.
    #[arg(
        long,
        alias = "cv_fold",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pub cv_fold: i64,
    #[arg(long, alias = "max_epochs", default_value_t = 120)]
    pub max_epochs: usize,
    /// Subjects per optimiser step.
    #[arg(long, alias = "batch_size", default_value_t = 2)]
    pub batch_size: usize,
    /// Adam learning rate (constant).
    #[arg(long, alias = "learning_rate", default_value_t = 5e-5)]
    pub learning_rate: f64,
    #[arg(long, alias = "latent_dim", default_value_t = 64)]
    pub latent_dim: usize,
    #[arg(long, alias = "hidden_dim", default_value_t = 128)]
    pub hidden_dim: usize,
    /// RK4 steps per forecast interval.
    #[arg(long, alias = "solver_steps", default_value_t = 12)]
    pub solver_steps: usize,
    #[arg(long, alias = "lambda_kl", default_value_t = 1e-4)]
    pub lambda_kl: f64,
    /// Early-stopping patience in epochs (on the validation loss).
    #[arg(long, default_value_t = 20)]
    pub patience: usize,
    /// Seed of weight init, shuffling, visit sampling and augmentation.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Run directory (`--run-name`, alias `--run_name`: its name under `<results-dir>/runs/`),
    /// resume and stop behaviour.
    #[command(flatten)]
    pub run: RunArgs,
}

/// `trainer synth-connectome`.
#[derive(Args, Debug, Clone)]
pub struct SynthArgs {
    #[arg(long, default_value_t = 60)]
    pub subjects: usize,
    #[arg(long, default_value_t = 400)]
    pub nodes: usize,
    /// Output directory (gets `sc/`, `morph/`, `subject_info_sc.csv`).
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
}

//! Arguments of the commands that are not training: evaluation, benchmarks, plots, synthetic
//! data, downloads, shell completions.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::common::DeviceArgs;
use crate::backend::BackendKind;

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
    /// Only these of our backends, comma-separated (e.g. `flex,tch`; `flex-plain` is Flex with
    /// its own kernels, `tch-plain` burn-tch without our convolution gradients, for
    /// comparison). Default: every compiled backend and usable device.
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
    /// Signal-to-noise ratio of the two-year change of an edge against the scan noise (larger:
    /// cleaner scans, higher best skill ≈ snr/(1 + snr)).
    #[arg(long, default_value_t = crate::data::connectome::SynthOptions::DEFAULT_SNR)]
    pub snr: f64,
}

impl SynthArgs {
    /// The generator's options.
    pub fn options(&self) -> crate::data::connectome::SynthOptions {
        crate::data::connectome::SynthOptions {
            subjects: self.subjects,
            nodes: self.nodes,
            seed: self.seed,
            snr: self.snr,
        }
    }
}

/// `trainer compare`.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// Run directories of `trainer train-gnn` (each with its `clg_ode_results.json`).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the validation skill per epoch of every run to this `.svg` or `.png`.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

/// `trainer plot`.
#[derive(Args, Debug, Clone)]
pub struct PlotArgs {
    /// Run directories (each with its `metrics.jsonl`).
    #[arg(required = true)]
    pub runs: Vec<PathBuf>,
    /// Output image: `.svg` or `.png`.
    #[arg(long, default_value = "plot.svg")]
    pub out: PathBuf,
    /// Metric columns to plot, one chart each (repeatable). Default: `train_loss` and the
    /// validation or test loss.
    #[arg(long)]
    pub metric: Vec<String>,
}

/// `trainer completions`.
#[derive(Args, Debug, Clone)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

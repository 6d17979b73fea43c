//! `trainer bench`'s settings, each field with its flag.

use std::path::PathBuf;

use clap::Args;

use crate::backend::BackendKind;

/// `trainer bench`.
#[derive(Args, Debug, Clone)]
pub struct BenchSettings {
    /// What to benchmark.
    #[arg(value_enum)]
    pub target: BenchTarget,
    /// MNIST-format data; synthetic images of the right shape are used when absent.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// gnn: subjects of the synthetic cohort generated for the benchmark; several,
    /// comma-separated (e.g. `200,1000`), bench one cohort each, side by side.
    #[arg(long, value_delimiter = ',', default_value = "60", value_parser = crate::settings::at_least_one)]
    pub subjects: Vec<usize>,
    /// gnn: nodes per connectome of the synthetic cohort.
    #[arg(long, default_value_t = 400)]
    pub nodes: usize,
    #[arg(long, default_value_t = 64)]
    pub batch_size: usize,
    /// Timed steps per backend, after the warm-up. gnn: at most this many steps of the epoch are
    /// timed and the epoch's seconds extrapolated from them (an epoch of a 1000-subject cohort
    /// has 320 steps of 2 subjects).
    #[arg(long, default_value_t = 30)]
    pub steps: usize,
    /// Warm-up steps, excluded from the timing (a GPU compiles its kernels in the first ones).
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

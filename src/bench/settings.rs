//! `trainer bench`'s settings, each field with its flag.

use std::path::PathBuf;

use clap::Args;

use crate::backend::BackendKind;

/// `trainer bench`.
#[derive(Args, Debug, Clone)]
pub(crate) struct BenchSettings {
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
    /// Images (mnist) or subjects (gnn) per training step. mnist: one (default 64); gnn: one or
    /// several, comma-separated (e.g. `2,16`), benched side by side (default 2, the reference's
    /// `--batch_size`).
    #[arg(long = "batch-size", value_delimiter = ',', value_parser = crate::settings::at_least_one)]
    pub batch_sizes: Vec<usize>,
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
    /// gnn: subjects of the study the plan under the table projects (default 4566, the
    /// authors' cohort).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(10..=10_000_000))]
    pub plan_subjects: Option<usize>,
    /// gnn: cross-validation folds of the planned study (default 5).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(2..=100))]
    pub plan_folds: Option<usize>,
    /// gnn: epochs per fold of the planned study (default 120, the reference's --max_epochs).
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=100_000))]
    pub plan_epochs: Option<usize>,
}

impl BenchSettings {
    /// mnist's batch: the one `--batch-size` (64 without it).
    pub(crate) fn mnist_batch(&self) -> anyhow::Result<usize> {
        match self.batch_sizes.as_slice() {
            [] => Ok(64),
            [b] => Ok(*b),
            more => anyhow::bail!(
                "--batch-size: bench mnist takes one batch size, got {more:?} (several are for \
                 bench gnn)"
            ),
        }
    }

    /// gnn's planned study: `(subjects, folds, epochs)`, the authors' by default.
    pub(crate) fn plan_shape(&self) -> (usize, usize, usize) {
        (
            self.plan_subjects.unwrap_or(4566),
            self.plan_folds.unwrap_or(5),
            self.plan_epochs.unwrap_or(120),
        )
    }

    /// The `--plan-*` flags given (they apply to bench gnn only).
    pub(crate) fn plan_flags_given(&self) -> bool {
        self.plan_subjects.is_some() || self.plan_folds.is_some() || self.plan_epochs.is_some()
    }

    /// gnn's batches, in the order given (the reference's 2 without `--batch-size`).
    pub(crate) fn gnn_batches(&self) -> Vec<usize> {
        if self.batch_sizes.is_empty() {
            vec![2]
        } else {
            self.batch_sizes.clone()
        }
    }
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BenchTarget {
    /// MNIST CNN: training and inference img/s.
    Mnist,
    /// CLG-ODE on a synthetic cohort: seconds per epoch, CPU seconds per training subject,
    /// peak memory (reference defaults; batch 2 unless `--batch-size`).
    Gnn,
}

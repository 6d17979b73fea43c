//! Command-line interface: one clap struct per sub-command, flags documented where they are
//! defined, so `trainer <cmd> --help` answers the common questions. Training commands flatten
//! their job's settings structs (which own their flags) and are converted once, here, into
//! plain settings ([`train`]); [`config`] layers a TOML file and presets under the flags.

pub(crate) mod common;
pub mod config;
mod paths;
mod presets;
pub(crate) mod sweep;
pub(crate) mod tools;
pub(crate) mod train;

use clap::{Parser, Subcommand};

pub(crate) use common::RunArgs;
pub(crate) use tools::{CompareArgs, CompletionsArgs, DataCommand, PlotArgs, SynthArgs};
pub(crate) use train::{GnnArgs, MnistArgs};

#[derive(Parser, Debug)]
#[command(
    name = "trainer",
    version,
    about = "Train deep-learning models on shared GPU clusters, from one binary"
)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Train the classic MNIST CNN on MNIST-format IDX data (MNIST, Fashion-MNIST).
    TrainMnist(Box<MnistArgs>),
    /// Train CLG-ODE (coupled latent graph ODE) on a structural-connectome cohort.
    TrainGnn(Box<GnnArgs>),
    /// Accuracy and confusion matrix of an MNIST checkpoint on the test split.
    Eval(crate::eval::EvalSettings),
    /// Re-score a train-gnn run without retraining: its model and a checkpoint on the test (or
    /// validation) subjects; writes metrics.json, per_subject.csv and strata.json.
    EvalGnn(crate::train::gnn::saved::eval_gnn::EvalGnnSettings),
    /// Predicted connectomes of a train-gnn run's model as CSV matrices (the input format) with
    /// an index predictions.csv: the next visit, an age, a Δt or a trajectory of ages.
    Predict(crate::train::gnn::saved::predict::PredictSettings),
    /// Heatmaps of a subject's truth, prediction, identity and errors of a train-gnn run; or
    /// the skill per Δt/horizon stratum of several runs (--strata), precision–recall of the
    /// edges that appear (--new-edges), subjects' trajectories over age (--trajectories). PNG
    /// or SVG.
    PlotSc(crate::train::gnn::saved::plot_sc::PlotScSettings),
    /// Throughput benchmarks over every compiled backend and usable device.
    Bench(crate::bench::BenchSettings),
    /// Overlay the curves of runs and of a sweep's tasks (metrics.jsonl) in one SVG or PNG
    /// image, labelled by the sweep's varied settings.
    Plot(PlotArgs),
    /// Test results of CLG-ODE runs side by side, each against the identity forecast; with
    /// --plot, the validation skill per epoch of every run.
    Compare(CompareArgs),
    /// Print the scheduler environment: ranks, hosts, rendezvous address/port, job ids, devices.
    Env {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Check the NVIDIA driver, GPUs, CUDA runtime and container before spending a queue slot.
    /// Each failure has its own exit code (see docs/reference/exit-codes.md).
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
    /// A connectome cohort before training, loaded and split as train-gnn does: subjects,
    /// scans per subject and tiers, ages and Δt, defects, what the test split and each fold get.
    Cohort(crate::train::gnn::cohort::CohortSettings),
    /// Write a synthetic connectome cohort (SC CSVs, morphology, subject table) for tests.
    SynthConnectome(SynthArgs),
    /// Campaigns of many runs: plan a sweep (grid, variants, folds, seeds) as a Slurm array or a
    /// local plan, run its tasks, see their status.
    Sweep {
        #[command(subcommand)]
        command: sweep::SweepCommand,
    },
    /// Dataset utilities.
    Data {
        #[command(subcommand)]
        command: DataCommand,
    },
    /// Print a shell completion script: `source <(trainer completions bash)`.
    Completions(CompletionsArgs),
}

impl Command {
    /// The training command this is (`train-gnn`, `train-mnist`), if it is one.
    pub(crate) fn training(&self) -> Option<crate::training_command::TrainingCommand> {
        use crate::training_command::TrainingCommand;
        match self {
            Command::TrainGnn(_) => Some(TrainingCommand::TrainGnn),
            Command::TrainMnist(_) => Some(TrainingCommand::TrainMnist),
            _ => None,
        }
    }
}

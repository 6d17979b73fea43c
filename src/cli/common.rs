//! Flag groups shared by the training commands: where a job runs (cluster), and the run
//! directory, resume, stop and early-stopping behaviour (run).

use std::path::PathBuf;

use clap::Args;

pub(crate) use crate::backend::DeviceSettings as DeviceArgs;
use crate::engine::metric::metric_named;
use crate::engine::{JobMetric, KeepCheckpoints, Mode, Monitor, RunSettings};
pub(crate) use crate::settings::{CLUSTER, OPTIM, RUN};
use crate::toolbox::stop::RequeuePolicy;

/// Run directory, configuration file, resume and stop behaviour shared by the training
/// commands.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = RUN)]
pub(crate) struct RunArgs {
    /// Read flags from a TOML file (keys are flag names, e.g. `batch_size = 32`, at the top
    /// level or under `[data]`, `[model]`, `[optimisation]`, `[run]`, `[cluster]`). Flags
    /// given on the command line override it. Every run directory gets the resolved
    /// `config.toml`, which repeats the run when passed back here.
    #[arg(long, value_name = "FILE.toml")]
    pub config: Option<PathBuf>,
    /// Print the resolved configuration (defaults, file and flags) as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Run directory. Default: `<root>/<run name>` (root `runs/`, or `<results-dir>/runs/`), the
    /// run name being `<YYYYmmdd_HHMMSS>_<ms>_p<pid>_<job id or "local">` unless `--run-name`
    /// is given. A run owns its directory: a second run into it is refused unless it resumes.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Name of the run directory under the root (instead of `--out`).
    #[arg(long, alias = "run_name", conflicts_with = "out")]
    pub run_name: Option<String>,
    /// Resume from a checkpoint file, or `auto`: the latest checkpoint of this run directory
    /// (`--out`, `--run-name`, or the directory of the same scheduler job id). `auto` starts fresh
    /// when there is none.
    #[arg(long)]
    pub resume: Option<String>,
    /// Also write a checkpoint every N optimiser steps (0: only at the end of each epoch).
    #[arg(long, default_value_t = 0)]
    pub checkpoint_every: u64,
    /// Which checkpoints stay in `checkpoints/`: `best-last` keeps the best and the last
    /// weights, removes epoch files an earlier part of the run left, and keeps the resume
    /// checkpoint `last.safetensors` (optimiser state included) only while the run can continue:
    /// a finished run removes it (train-gnn: the last weights are `<model>_fold<k>_last`) or
    /// reduces it to the last weights (train-mnist); `resume` also keeps it whole at the end;
    /// `all` also keeps one file per epoch and the resume checkpoint. The sizes, and what was
    /// removed, are logged at the end.
    #[arg(long, alias = "keep_checkpoints", value_enum, default_value_t = KeepCheckpoints::BestLast)]
    pub keep_checkpoints: KeepCheckpoints,
    /// Seconds between plain progress lines when stderr is not a terminal (a Slurm log).
    #[arg(long, default_value_t = 10.0)]
    pub log_every_secs: f64,
    /// Stop (checkpoint, exit as if interrupted) after this many optimiser steps in this
    /// process. For tests and for splitting long runs into queue-sized pieces.
    #[arg(long)]
    pub stop_after_steps: Option<u64>,
    /// Also append every step's global loss to `steps.csv` (step, epoch, loss, lr).
    #[arg(long)]
    pub log_steps: bool,
    /// Capture the training step as a CUDA graph once per epoch and replay it for every full
    /// batch (one launch instead of about forty; the last, shorter batch runs as usual):
    /// `--backend tch` on a CUDA device, one process, Adam, one micro-batch, `train-mnist`.
    /// Refused elsewhere. Adam's bias corrections then run in its kernel (within f32 rounding
    /// of a run without the flag).
    #[arg(long, alias = "cuda_graph")]
    pub cuda_graph: bool,
    /// Signals that mean "checkpoint and requeue" (exit 75); other handled signals (of TERM,
    /// INT, USR1, USR2) checkpoint and exit with 128 + the signal number.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "USR1,USR2",
        help_heading = CLUSTER
    )]
    pub requeue_signal: Vec<String>,
    /// On a requeue signal under Slurm, also run `scontrol requeue <job>` (`<array job>_<task>`
    /// for array tasks). Without `scontrol` (inside a container) only exit 75, so that the batch
    /// script requeues.
    #[arg(long, help_heading = CLUSTER)]
    pub requeue: bool,
    /// The resolved configuration as TOML (filled in after parsing; written to `config.toml`).
    #[arg(skip)]
    pub resolved_config: Option<String>,
}

impl RunArgs {
    /// The run's plain settings.
    pub(crate) fn settings(self) -> anyhow::Result<RunSettings> {
        Ok(RunSettings {
            requeue: RequeuePolicy::new(&self.requeue_signal, self.requeue)?,
            out: self.out,
            run_name: self.run_name,
            resume: self.resume,
            checkpoint_every: self.checkpoint_every,
            keep_checkpoints: self.keep_checkpoints,
            log_every_secs: self.log_every_secs,
            stop_after_steps: self.stop_after_steps,
            log_steps: self.log_steps,
            cuda_graph: self.cuda_graph,
            resolved_config: self.resolved_config,
        })
    }
}

/// Early stopping and best-checkpoint selection.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = OPTIM)]
pub(crate) struct EarlyStopArgs {
    /// Metric that picks the best epoch (written as the best checkpoint) and, with
    /// `--patience`, stops training early: a column of the evaluation (`test_accuracy`,
    /// `val_loss`, …).
    #[arg(long, alias = "early_stop_metric")]
    pub early_stop_metric: Option<String>,
    /// Whether lower (min) or higher (max) values of that metric are better. Default: max for
    /// accuracy, Pearson and skill metrics, else min.
    #[arg(long, value_enum, alias = "early_stop_mode")]
    pub early_stop_mode: Option<Mode>,
    /// Epochs without a strict improvement of the metric before training stops.
    #[arg(long)]
    pub patience: Option<usize>,
    /// Improvements of the metric by this much or less do not count (for the best epoch and
    /// the patience), so that a noisy plateau ends the run.
    #[arg(long, alias = "min_delta", default_value_t = 0.0, value_parser = crate::settings::non_negative)]
    pub min_delta: f64,
}

impl EarlyStopArgs {
    /// The monitor these flags ask for, if any (`default` when no metric is given): one of the
    /// job's metrics `M` (an error naming them otherwise), in its own mode unless
    /// `--early-stop-mode` says otherwise.
    pub(crate) fn monitor<M: JobMetric>(
        &self,
        default: Option<M>,
    ) -> anyhow::Result<Option<Monitor>> {
        let metric = match (self.early_stop_metric.as_deref(), default) {
            (Some(name), _) => metric_named::<M>(name)?,
            (None, Some(m)) => m,
            (None, None) => return Ok(None),
        };
        Ok(Some(Monitor::of(
            metric,
            self.early_stop_mode,
            self.patience,
            self.min_delta,
        )))
    }
}

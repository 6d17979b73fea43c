//! The run's own settings, as the engine and the launcher use them: where the run directory
//! is, resume, checkpoint cadence and retention, stop and requeue behaviour. The CLI fills them from
//! the CLI's run flags; nothing below the CLI sees a clap struct.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::toolbox::stop::RequeuePolicy;

/// Which checkpoints a run keeps in `checkpoints/` (`--keep-checkpoints`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum KeepCheckpoints {
    /// The best and the last weights. The resume checkpoint `last.safetensors` (weights,
    /// optimiser state, the best weights so far, the loop's position) stays while the run can
    /// continue (stopped, requeued, interrupted) and goes when it finishes: removed where the
    /// last weights have their own files (train-gnn's `<model>_fold<k>_last`), reduced to the
    /// last weights where it is their only file (train-mnist). Epoch files an earlier part of
    /// the run left are removed.
    #[default]
    BestLast,
    /// As `best-last`, and a finished run keeps its resume checkpoint whole.
    Resume,
    /// Also one file per epoch: `epoch_NNN.safetensors` (a full resume checkpoint), or
    /// `<stem>_epoch_NNN.safetensors` (model weights) for a job with model files; a finished
    /// run keeps its resume checkpoint whole.
    All,
}

impl KeepCheckpoints {
    /// The flag's value (`best-last`, `resume`, `all`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::BestLast => "best-last",
            Self::Resume => "resume",
            Self::All => "all",
        }
    }
}

/// How a run is placed on disk, resumed, logged and stopped.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunSettings {
    /// The run directory, when given (`--out`).
    pub out: Option<PathBuf>,
    /// The run directory's name under the runs root (`--run-name`).
    pub run_name: Option<String>,
    /// A checkpoint file, or `auto` (`--resume`).
    pub resume: Option<String>,
    /// Also checkpoint every N optimiser steps (0: only at epoch ends).
    pub checkpoint_every: u64,
    /// Which checkpoints stay in `checkpoints/`.
    pub keep_checkpoints: KeepCheckpoints,
    /// Seconds between plain progress lines when stderr is not a terminal.
    pub log_every_secs: f64,
    /// Stop (checkpoint, exit 75) after this many optimiser steps in this process.
    pub stop_after_steps: Option<u64>,
    /// Append every step's loss to `steps.csv`.
    pub log_steps: bool,
    /// Capture the fixed-shape training step as a CUDA graph and replay it (`--cuda-graph`).
    pub cuda_graph: bool,
    /// Which signals ask for a requeue, and whether to call `scontrol requeue`.
    pub requeue: RequeuePolicy,
    /// The resolved configuration as TOML, written to `config.toml`.
    pub resolved_config: Option<String>,
}

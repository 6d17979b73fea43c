//! The training commands a sweep runs (`train-gnn`, `train-mnist`), named once: the command
//! line's sub-commands (`cli::Command::training`), a spec's `command` and a manifest's.

use serde::{Deserialize, Serialize};

/// A training command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TrainingCommand {
    #[serde(rename = "train-gnn")]
    TrainGnn,
    #[serde(rename = "train-mnist")]
    TrainMnist,
}

impl TrainingCommand {
    /// Every training command, in the order messages list them.
    pub const ALL: [TrainingCommand; 2] = [TrainingCommand::TrainGnn, TrainingCommand::TrainMnist];

    /// Its sub-command name (`train-gnn`).
    pub fn name(self) -> &'static str {
        match self {
            TrainingCommand::TrainGnn => "train-gnn",
            TrainingCommand::TrainMnist => "train-mnist",
        }
    }

    /// The command named `name`, if it is a training command.
    pub fn from_name(name: &str) -> Option<TrainingCommand> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The names, for messages: `train-gnn or train-mnist`.
    pub fn expected() -> String {
        Self::ALL.map(Self::name).join(" or ")
    }

    /// Whether it trains cross-validation folds (`--cv-fold`) and writes its results beside the
    /// run (`--results-dir`), reads a paths file (`--config FILE.yaml`): train-gnn's.
    pub fn is_gnn(self) -> bool {
        self == TrainingCommand::TrainGnn
    }
}

impl std::fmt::Display for TrainingCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

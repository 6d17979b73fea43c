//! Where a run stands: the position in the loop, with the epoch's running sums and the
//! finished stages (carried by the resume checkpoint, [`super::resume_file`]). A checkpoint
//! resumes on any number of ranks: positions are counted in items of the epoch's order, not in
//! per-rank steps.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::monitor::MonitorState;

/// Position in the loop: everything besides weights and optimiser state needed to resume.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Position {
    /// Index of the stage in progress (the number of stages once all are done).
    pub stage: usize,
    /// Epochs done in this stage.
    pub epoch: usize,
    /// Items of this epoch's order already trained on, by all ranks together.
    pub epoch_items: usize,
    pub global_step: u64,
    /// Running sums of this epoch's steps (the job's [`super::EpochSums`], as JSON; set when a
    /// checkpoint is written).
    pub acc: Value,
    pub monitor: MonitorState,
    pub finished: Vec<StageResult>,
}

impl Position {
    /// Epochs done over all stages.
    pub(crate) fn total_epochs(&self) -> usize {
        self.finished.iter().map(|s| s.epochs_run).sum::<usize>() + self.epoch
    }

    /// Whether a run of `stages` stages of `epochs` epochs each can stand here: the stage in
    /// progress at an epoch below `epochs` (or all stages done, at epoch 0), one finished
    /// stage before it per index, none with more epochs than `epochs` or a best epoch after its
    /// last. The reason when it cannot.
    pub(crate) fn check(&self, stages: usize, epochs: usize) -> std::result::Result<(), String> {
        let per_stage = format!("this run has {stages} stage(s) of at most {epochs} epoch(s)");
        if self.stage > stages {
            return Err(format!("at stage {} but {per_stage}", self.stage + 1));
        }
        if self.stage < stages && self.epoch >= epochs {
            return Err(format!(
                "{} epoch(s) done in stage {} but {per_stage}",
                self.epoch,
                self.stage + 1
            ));
        }
        if self.stage == stages && (self.epoch, self.epoch_items) != (0, 0) {
            return Err(format!(
                "every stage is finished yet {} epoch(s) and {} item(s) are in progress",
                self.epoch, self.epoch_items
            ));
        }
        if self.finished.len() != self.stage {
            return Err(format!(
                "at stage {} with {} finished stage(s) recorded",
                self.stage + 1,
                self.finished.len()
            ));
        }
        for (i, f) in self.finished.iter().enumerate() {
            if f.stage != i || f.epochs_run > epochs || f.best_epoch > f.epochs_run {
                return Err(format!(
                    "finished stage {} (recorded as stage {}) ran {} epoch(s) with its best at \
                     epoch {}, but {per_stage}",
                    i + 1,
                    f.stage + 1,
                    f.epochs_run,
                    f.best_epoch
                ));
            }
        }
        Ok(())
    }

    /// Closes the stage in progress and moves to the next one.
    pub(crate) fn finish_stage(&mut self, result: StageResult) {
        self.finished.push(result);
        *self = Position {
            stage: self.stage + 1,
            global_step: self.global_step,
            finished: std::mem::take(&mut self.finished),
            ..Default::default()
        };
    }
}

/// One finished stage (a cross-validation fold, or the whole run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StageResult {
    pub stage: usize,
    /// Best value of the monitored metric (`None` without a monitor or a finite value).
    pub best_value: Option<f64>,
    /// 1-based epoch of the best value (0: none).
    pub best_epoch: usize,
    pub epochs_run: usize,
    pub stopped_early: bool,
    /// The best epoch's model file, when the job names one.
    pub best_checkpoint: Option<PathBuf>,
    pub last_checkpoint: Option<PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn impossible_positions_are_named() {
        let stage = |stage, epochs_run, best_epoch| StageResult {
            stage,
            best_value: None,
            best_epoch,
            epochs_run,
            stopped_early: false,
            best_checkpoint: None,
            last_checkpoint: None,
        };
        let ok = |p: &Position| p.check(2, 10);
        let mut p = Position {
            epoch: 9,
            ..Default::default()
        };
        assert_eq!(ok(&p), Ok(()));
        p.epoch = 1_000_000;
        assert!(
            ok(&p)
                .unwrap_err()
                .contains("1000000 epoch(s) done in stage 1")
        );
        p.epoch = 0;
        p.stage = 1;
        assert!(ok(&p).unwrap_err().contains("0 finished stage(s)"));
        p.finished = vec![stage(0, 10, 4)];
        assert_eq!(ok(&p), Ok(()));
        p.finished = vec![stage(0, 11, 4)];
        assert!(ok(&p).unwrap_err().contains("ran 11 epoch(s)"));
        p.finished = vec![stage(0, 3, 4)];
        assert!(ok(&p).unwrap_err().contains("best at epoch 4"));
        p.stage = 3;
        assert!(ok(&p).unwrap_err().contains("at stage 4"));
        p.stage = 2;
        p.finished = vec![stage(0, 3, 1), stage(1, 10, 2)];
        assert_eq!(ok(&p), Ok(()));
        p.epoch_items = 5;
        assert!(ok(&p).unwrap_err().contains("every stage is finished"));
    }

    #[test]
    fn finishing_a_stage_keeps_the_step_count_and_results() {
        let mut p = Position {
            epoch: 3,
            global_step: 12,
            acc: json!([1.0]),
            ..Default::default()
        };
        p.finish_stage(StageResult {
            stage: 0,
            best_value: Some(1.0),
            best_epoch: 2,
            epochs_run: 3,
            stopped_early: false,
            best_checkpoint: None,
            last_checkpoint: None,
        });
        assert_eq!((p.stage, p.epoch, p.global_step), (1, 0, 12));
        assert!(p.acc.is_null());
        assert_eq!(p.total_epochs(), 3);
    }
}

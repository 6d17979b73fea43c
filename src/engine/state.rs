//! Where a run stands, and the resume checkpoint that carries it: weights, optimiser state, the
//! best weights of the stage in progress, the position in the loop, the epoch's running sums and
//! the job's own state. A checkpoint resumes on any number of ranks: positions are counted in
//! items of the epoch's order, not in per-rank steps.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::monitor::MonitorState;
use super::{JobSpec, Row};
use crate::toolbox::checkpoint::Checkpoint;
use crate::toolbox::params::HostTensor;

/// Position in the loop: everything besides weights and optimiser state needed to resume.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Position {
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
    pub fn total_epochs(&self) -> usize {
        self.finished.iter().map(|s| s.epochs_run).sum::<usize>() + self.epoch
    }

    /// Whether a run of `stages` stages of `epochs` epochs each can stand here: the stage in
    /// progress at an epoch below `epochs` (or all stages done, at epoch 0), one finished
    /// stage before it per index, none with more epochs than `epochs` or a best epoch after its
    /// last. The reason when it cannot.
    pub fn check(&self, stages: usize, epochs: usize) -> std::result::Result<(), String> {
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
    pub fn finish_stage(&mut self, result: StageResult) {
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
pub struct StageResult {
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

/// Everything a resume checkpoint holds besides weights and optimiser state.
#[derive(Debug)]
pub struct Saved {
    pub position: Position,
    pub job_state: Value,
    /// The metrics row of the epoch that ended with this checkpoint, if it did.
    pub row: Option<Row>,
    pub best: Option<Vec<(String, HostTensor)>>,
}

/// Each key (dotted path) whose value differs between the checkpoint's settings and this
/// run's, as `key: checkpoint A, this run B`.
fn differences(path: &str, saved: &Value, now: &Value, out: &mut Vec<String>) {
    match (saved, now) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                let missing = Value::String("(not set)".into());
                differences(
                    &sub,
                    a.get(k).unwrap_or(&missing),
                    b.get(k).unwrap_or(&missing),
                    out,
                );
            }
        }
        (a, b) if a != b => out.push(format!("{path}: checkpoint {a}, this run {b}")),
        _ => {}
    }
}

/// Metadata keys of a resume checkpoint.
const RUN_STATE: &str = "run_state";
const JOB_STATE: &str = "job_state";
const FINGERPRINT: &str = "fingerprint";
const METRICS_ROW: &str = "metrics_row";

impl Saved {
    /// Writes the engine's part into `ck` (weights and optimiser state are added by the caller).
    pub fn write_into(&self, ck: &mut Checkpoint, fingerprint: &Value, seed: u64) -> Result<()> {
        let p = &self.position;
        ck.counters
            .insert("train.epoch".into(), p.total_epochs() as i64);
        ck.counters
            .insert("train.epoch_samples".into(), p.epoch_items as i64);
        ck.counters
            .insert("train.global_step".into(), p.global_step as i64);
        ck.counters.insert("rng.seed".into(), seed as i64);
        if let Some(best) = &self.best {
            for (name, t) in best {
                ck.floats.insert(format!("best.{name}"), t.clone());
            }
        }
        ck.metadata
            .insert(RUN_STATE.into(), serde_json::to_string(p)?);
        ck.metadata
            .insert(JOB_STATE.into(), serde_json::to_string(&self.job_state)?);
        ck.metadata
            .insert(FINGERPRINT.into(), fingerprint.to_string());
        if let Some(row) = &self.row {
            ck.metadata
                .insert(METRICS_ROW.into(), serde_json::to_string(row)?);
        }
        Ok(())
    }

    /// Reads the engine's part of a resume checkpoint written for the job of `spec` (its model
    /// name and settings fingerprint; a position it cannot reach, such as an epoch beyond its
    /// epochs, is refused); `order` lists the parameter names (for the best weights).
    pub fn read(ck: &Checkpoint, path: &Path, spec: &JobSpec, order: &[String]) -> Result<Self> {
        let (model, fingerprint) = (spec.model_name, &spec.fingerprint);
        let name = path.display();
        match ck.metadata.get("model") {
            Some(m) if m == model => {}
            other => bail!(
                "{name}: not a checkpoint of this job's model (model is {other:?}, expected \
                 \"{model}\")"
            ),
        }
        let state = ck
            .metadata
            .get(RUN_STATE)
            .with_context(|| format!("{name}: not a resume checkpoint (no run state)"))?;
        let saved: Value = match ck.metadata.get(FINGERPRINT) {
            Some(f) => serde_json::from_str(f)
                .with_context(|| format!("{name}: unreadable settings fingerprint"))?,
            None => bail!("{name}: the checkpoint has no settings fingerprint"),
        };
        if &saved != fingerprint {
            let mut differ = Vec::new();
            differences("", &saved, fingerprint, &mut differ);
            bail!(
                "{name}: the checkpoint was written with other settings: {}; resume with the \
                 checkpoint's settings (its run directory's config.toml) or start a new run",
                differ.join("; ")
            );
        }
        let position: Position =
            serde_json::from_str(state).with_context(|| format!("{name}: unreadable run state"))?;
        let impossible = |why: String| {
            anyhow::anyhow!(
                "{name}: impossible run state: {why}; the file is damaged or was edited: resume \
                 from another checkpoint or start a new run"
            )
        };
        position
            .check(spec.plan.stages, spec.plan.epochs)
            .map_err(&impossible)?;
        if let Some(&counted) = ck.counters.get("train.epoch")
            && usize::try_from(counted).ok() != Some(position.total_epochs())
        {
            return Err(impossible(format!(
                "counter train.epoch is {counted} but the run state has {} epoch(s) done",
                position.total_epochs()
            )));
        }
        let job_state = match ck.metadata.get(JOB_STATE) {
            Some(s) => {
                serde_json::from_str(s).with_context(|| format!("{name}: unreadable job state"))?
            }
            None => Value::Null,
        };
        let row = match ck.metadata.get(METRICS_ROW) {
            Some(s) => Some(
                serde_json::from_str(s)
                    .with_context(|| format!("{name}: unreadable metrics row"))?,
            ),
            None => None,
        };
        let b = ck.with_prefix("best");
        let best = (!b.is_empty()).then(|| {
            order
                .iter()
                .filter_map(|n| b.get(n).cloned().map(|t| (n.clone(), t)))
                .collect()
        });
        Ok(Self {
            position,
            job_state,
            row,
            best,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::TrainPlan;
    use serde_json::json;

    #[test]
    fn resume_state_round_trips_and_checks_its_settings() {
        let mut position = Position {
            epoch: 2,
            epoch_items: 64,
            global_step: 30,
            ..Default::default()
        };
        position.acc = json!({"sum": 2.0, "count": 3.0});
        let best = vec![(
            "w".to_string(),
            HostTensor {
                shape: vec![1],
                data: vec![4.0],
            },
        )];
        let mut row = Row::new();
        row.insert("epoch".into(), json!(2));
        let saved = Saved {
            position: position.clone(),
            job_state: json!({"scale": 1.25}),
            row: Some(row.clone()),
            best: Some(best.clone()),
        };
        let mut ck = Checkpoint::default();
        ck.metadata.insert("model".into(), "m".into());
        let fp = json!({"seed": 1});
        saved.write_into(&mut ck, &fp, 1).unwrap();
        let bytes = ck.to_bytes().unwrap();
        let ck = Checkpoint::from_bytes(&bytes, Path::new("c")).unwrap();
        assert_eq!(ck.counter("train.epoch").unwrap(), 2);
        let spec = |model_name: &'static str, fingerprint: Value| JobSpec {
            model_name,
            fingerprint,
            plan: TrainPlan {
                epochs: 3,
                ..TrainPlan::default()
            },
            ..JobSpec::default()
        };
        let back = Saved::read(&ck, Path::new("c"), &spec("m", fp.clone()), &["w".into()]).unwrap();
        assert_eq!(back.position, position);
        assert_eq!(back.job_state, json!({"scale": 1.25}));
        assert_eq!(back.row, Some(row));
        assert_eq!(back.best, Some(best));
        let err =
            Saved::read(&ck, Path::new("c"), &spec("m", json!({"seed": 2})), &[]).unwrap_err();
        assert!(
            err.to_string().contains("seed: checkpoint 1, this run 2"),
            "{err}"
        );
        let err = Saved::read(&ck, Path::new("c"), &spec("other", fp.clone()), &[]).unwrap_err();
        assert!(err.to_string().contains("expected \"other\""), "{err}");
        // Two epochs done of a stage of two: impossible (the stage would have finished).
        let mut short = spec("m", fp.clone());
        short.plan.epochs = 2;
        let err = Saved::read(&ck, Path::new("dir/last.safetensors"), &short, &[]).unwrap_err();
        let err = err.to_string();
        assert!(
            err.contains("dir/last.safetensors: impossible run state")
                && err.contains("2 epoch(s) done in stage 1")
                && err.contains("at most 2 epoch(s)"),
            "{err}"
        );
        // The epoch counter disagreeing with the run state.
        let mut edited = ck.clone();
        edited.counters.insert("train.epoch".into(), 1_000_000);
        let err = Saved::read(&edited, Path::new("c"), &spec("m", fp), &[]).unwrap_err();
        assert!(err.to_string().contains("train.epoch is 1000000"), "{err}");
    }

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

//! The resume checkpoint (`checkpoints/last.safetensors`, and `epoch_NNN.safetensors` of a job
//! without model files with `--keep-checkpoints all`): its whole schema, written and read here.
//!
//! | key | kind | what |
//! | --- | --- | --- |
//! | `model.<parameter>` | F32 | the model's weights ([`Checkpoint::put_model`]) |
//! | `optim.<optimiser>.<state>.<parameter>` | F32, I64 | the optimiser's state by parameter name, laid out by the optimiser ([`Optimizer::save_into`]: Adam's `moment_1`, `moment_2`, `time`; SGD's `momentum_buffer`) |
//! | `best.<parameter>` | F32 | the best weights of the stage in progress, when it has them |
//! | `train.epoch`, `train.epoch_samples`, `train.global_step`, `rng.seed` | I64 | epochs done over all stages, items of this epoch done, steps taken, the plan's seed |
//! | metadata `model` | text | the job's model name (checked on resume) |
//! | metadata `optimizer` | text | the optimiser with its constants (checked on resume) |
//! | metadata `config` | JSON | the resolved configuration (as `args.json`) |
//! | metadata `run_state` | JSON | the [`Position`] in the loop, with the epoch's running sums |
//! | metadata `job_state` | JSON | the job's own state ([`super::Job::state`]) |
//! | metadata `fingerprint` | JSON | the settings a resume must match ([`JobSpec::fingerprint`]) |
//! | metadata `metrics_row` | JSON | the metrics row of the epoch that ended with this checkpoint, if one did |
//! | metadata `format` | text | the checkpoint format ([`crate::toolbox::checkpoint::FORMAT`]) |

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result, bail};
use burn::module::Module;
use burn::prelude::Backend;
use serde_json::Value;

use super::JobSpec;
use super::state::Position;
use crate::outputs::metrics_row::MetricsRow;
use crate::toolbox::checkpoint::Checkpoint;
use crate::toolbox::optim::Optimizer;
use crate::toolbox::params::{self, HostTensor};

/// Everything a resume checkpoint holds besides weights and optimiser state.
#[derive(Debug)]
pub(super) struct Saved {
    pub position: Position,
    pub job_state: Value,
    /// The metrics row of the epoch that ended with this checkpoint, if it did.
    pub row: Option<MetricsRow>,
    pub best: Option<Vec<(String, HostTensor)>>,
}

/// What a resume checkpoint is written from.
pub(super) struct Contents<'a, B: Backend> {
    /// The model's weights (`params::collect`).
    pub weights: Vec<(String, HostTensor)>,
    pub optimizer: &'a Optimizer<B>,
    /// The parameters' names in visiting order (the optimiser's state is saved under them).
    pub names: &'a [String],
    pub saved: Saved,
}

/// A resume checkpoint: its file's contents, and the engine's part of them read and checked.
pub(super) struct ResumeFile {
    ck: Checkpoint,
    pub saved: Saved,
}

/// Counters.
const EPOCH: &str = "train.epoch";
const EPOCH_SAMPLES: &str = "train.epoch_samples";
const GLOBAL_STEP: &str = "train.global_step";
const SEED: &str = "rng.seed";
/// The prefix of the best weights.
const BEST: &str = "best";
/// Metadata keys.
const CONFIG: &str = "config";
const RUN_STATE: &str = "run_state";
const JOB_STATE: &str = "job_state";
const FINGERPRINT: &str = "fingerprint";
const METRICS_ROW: &str = "metrics_row";
/// The optimiser's metadata key ([`Optimizer::save_into`]).
const OPTIMIZER: &str = "optimizer";

impl ResumeFile {
    /// The resume checkpoint of the job of `spec` (`config`: its resolved configuration as
    /// JSON text) holding `contents`.
    pub(super) fn new<B: Backend>(
        spec: &JobSpec,
        config: &str,
        contents: Contents<'_, B>,
    ) -> Result<Self> {
        let mut ck = Checkpoint::default();
        ck.put_model(contents.weights);
        contents.optimizer.save_into(contents.names, &mut ck);
        ck.set_model_name(spec.model_name);
        ck.metadata.insert(CONFIG.into(), config.into());
        let saved = contents.saved;
        write_saved(&saved, &mut ck, &spec.fingerprint, spec.plan.seed)?;
        Ok(Self { ck, saved })
    }

    /// Writes the file atomically.
    pub(super) fn save(&self, path: &Path) -> Result<()> {
        self.ck.save(path)
    }

    /// Reads the resume checkpoint at `path` written for the job of `spec` (its model name and
    /// settings fingerprint; a position it cannot reach, such as an epoch beyond its epochs, is
    /// refused); `order` gives the parameter names (for the best weights), asked for once the
    /// file is read.
    pub(super) fn load(
        path: &Path,
        spec: &JobSpec,
        order: impl FnOnce() -> Result<Vec<String>>,
    ) -> Result<Self> {
        let ck = Checkpoint::load(path)?;
        let saved = read_saved(&ck, path, spec, &order()?)?;
        Ok(Self { ck, saved })
    }

    /// `model` with the checkpoint's weights.
    pub(super) fn model<B: Backend, M: Module<B>>(
        &self,
        model: M,
        device: &B::Device,
    ) -> Result<M> {
        params::load(model, &self.ck.model(), device)
    }

    /// Restores the optimiser's state (saved under the parameter names `names`); a checkpoint
    /// of another optimiser is refused.
    pub(super) fn restore_optimizer<B: Backend>(
        &self,
        optimizer: &mut Optimizer<B>,
        names: &[String],
        device: &B::Device,
    ) -> Result<()> {
        optimizer.load_from(names, &self.ck, device)
    }
}

/// The job state (`job_state`, `Null` without one) of a resume checkpoint's metadata `meta`
/// when it is the end of the run of `spec`: the settings fingerprint is `spec`'s and the run
/// state has every stage done. Why not otherwise.
pub(super) fn finished_job_state(
    meta: &BTreeMap<String, String>,
    spec: &JobSpec,
) -> std::result::Result<Value, String> {
    let fingerprint: Option<Value> = meta
        .get(FINGERPRINT)
        .and_then(|f| serde_json::from_str(f).ok());
    if fingerprint.as_ref() != Some(&spec.fingerprint) {
        return Err("written with other settings".into());
    }
    let position: Option<Position> = meta
        .get(RUN_STATE)
        .and_then(|s| serde_json::from_str(s).ok());
    match position {
        Some(p) if p.stage >= spec.plan.stages => {}
        Some(_) => return Err("written before the run's end".into()),
        None => return Err("no readable run state".into()),
    }
    Ok(meta
        .get(JOB_STATE)
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or(Value::Null))
}

/// The model's weights alone of the resume checkpoint `ck` (a finished run's last weights under
/// `--keep-checkpoints best-last`): `model.*` and the metadata but the run state, the
/// fingerprint and the optimiser's; no optimiser state, best weights nor counters. `trainer
/// eval` reads it; a resume refuses it (no run state).
pub(super) fn weights_only(ck: &Checkpoint) -> Checkpoint {
    let mut out = Checkpoint::default();
    out.put_model(ck.model());
    out.metadata = ck.metadata.clone();
    for key in [RUN_STATE, FINGERPRINT, OPTIMIZER, METRICS_ROW] {
        out.metadata.remove(key);
    }
    out
}

/// Writes the engine's part of a resume checkpoint into `ck`.
fn write_saved(saved: &Saved, ck: &mut Checkpoint, fingerprint: &Value, seed: u64) -> Result<()> {
    let p = &saved.position;
    ck.counters.insert(EPOCH.into(), p.total_epochs() as i64);
    ck.counters
        .insert(EPOCH_SAMPLES.into(), p.epoch_items as i64);
    ck.counters.insert(GLOBAL_STEP.into(), p.global_step as i64);
    ck.counters.insert(SEED.into(), seed as i64);
    if let Some(best) = &saved.best {
        for (name, t) in best {
            ck.floats.insert(format!("{BEST}.{name}"), t.clone());
        }
    }
    ck.metadata
        .insert(RUN_STATE.into(), serde_json::to_string(p)?);
    ck.metadata
        .insert(JOB_STATE.into(), serde_json::to_string(&saved.job_state)?);
    ck.metadata
        .insert(FINGERPRINT.into(), fingerprint.to_string());
    if let Some(row) = &saved.row {
        ck.metadata
            .insert(METRICS_ROW.into(), serde_json::to_string(row)?);
    }
    Ok(())
}

/// Reads the engine's part of a resume checkpoint (see [`ResumeFile::load`]).
fn read_saved(ck: &Checkpoint, path: &Path, spec: &JobSpec, order: &[String]) -> Result<Saved> {
    let (model, fingerprint) = (spec.model_name, &spec.fingerprint);
    let name = path.display();
    match ck.model_name() {
        Some(m) if m == model => {}
        other => bail!(
            "{name}: not a checkpoint of this job's model (model is {other:?}, expected \
             \"{model}\")"
        ),
    }
    let state = ck.metadata.get(RUN_STATE).with_context(|| {
        format!(
            "{name}: not a resume checkpoint (no run state): model weights only, such as a \
                 model file or the last weights of a finished run (whose resume state is dropped \
                 at its end unless --keep-checkpoints resume); evaluate it, or resume another \
                 checkpoint"
        )
    })?;
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
    if let Some(&counted) = ck.counters.get(EPOCH)
        && usize::try_from(counted).ok() != Some(position.total_epochs())
    {
        return Err(impossible(format!(
            "counter {EPOCH} is {counted} but the run state has {} epoch(s) done",
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
            serde_json::from_str(s).with_context(|| format!("{name}: unreadable metrics row"))?,
        ),
        None => None,
    };
    let b = ck.with_prefix(BEST);
    let best = (!b.is_empty()).then(|| {
        order
            .iter()
            .filter_map(|n| b.get(n).cloned().map(|t| (n.clone(), t)))
            .collect()
    });
    Ok(Saved {
        position,
        job_state,
        row,
        best,
    })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::TrainPlan;
    use crate::toolbox::optim::OptimizerSpec;
    use burn_flex::Flex;
    use serde_json::json;

    type B = Flex;

    fn spec(model_name: &'static str, fingerprint: Value, epochs: usize) -> JobSpec {
        JobSpec {
            model_name,
            fingerprint,
            plan: TrainPlan {
                epochs,
                seed: 1,
                ..TrainPlan::default()
            },
            ..JobSpec::default()
        }
    }

    fn tensor(x: f32) -> HostTensor {
        HostTensor {
            shape: vec![1],
            data: vec![x],
        }
    }

    #[test]
    fn resume_file_round_trips_and_checks_its_settings() {
        let mut position = Position {
            epoch: 2,
            epoch_items: 64,
            global_step: 30,
            ..Default::default()
        };
        position.acc = json!({"sum": 2.0, "count": 3.0});
        let best = vec![("w".to_string(), tensor(4.0))];
        let mut row = crate::outputs::metrics::Row::new();
        row.insert("epoch".into(), json!(2));
        let row = MetricsRow::from(row);
        let fp = json!({"seed": 1});
        let optimizer = Optimizer::<B>::new(OptimizerSpec::Sgd { momentum: 0.5 }, None);
        let names = ["w".to_string()];
        let file = ResumeFile::new(
            &spec("m", fp.clone(), 3),
            "{\"lr\":1}",
            Contents {
                weights: vec![("w".into(), tensor(2.0))],
                optimizer: &optimizer,
                names: &names,
                saved: Saved {
                    position: position.clone(),
                    job_state: json!({"scale": 1.25}),
                    row: Some(row.clone()),
                    best: Some(best.clone()),
                },
            },
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("last.safetensors");
        file.save(&path).unwrap();
        let ck = Checkpoint::load(&path).unwrap();
        assert_eq!(ck.counter(EPOCH).unwrap(), 2);
        assert_eq!(ck.counter(GLOBAL_STEP).unwrap(), 30);
        assert_eq!(ck.model_name(), Some("m"));
        assert_eq!(ck.metadata[CONFIG], "{\"lr\":1}");
        assert_eq!(ck.model()["w"], tensor(2.0));
        assert_eq!(ck.metadata["optimizer"], "sgd(momentum=0.5)");

        let back =
            ResumeFile::load(&path, &spec("m", fp.clone(), 3), || Ok(names.to_vec())).unwrap();
        assert_eq!(back.saved.position, position);
        assert_eq!(back.saved.job_state, json!({"scale": 1.25}));
        assert_eq!(back.saved.row, Some(row));
        assert_eq!(back.saved.best, Some(best));
        let err = ResumeFile::load(&path, &spec("m", json!({"seed": 2}), 3), || Ok(vec![]))
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("seed: checkpoint 1, this run 2"),
            "{err}"
        );
        let err = ResumeFile::load(&path, &spec("other", fp.clone(), 3), || Ok(vec![]))
            .err()
            .unwrap();
        assert!(err.to_string().contains("expected \"other\""), "{err}");
        // Two epochs done of a stage of two: impossible (the stage would have finished).
        let err = read_saved(
            &ck,
            Path::new("dir/last.safetensors"),
            &spec("m", fp.clone(), 2),
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("dir/last.safetensors: impossible run state")
                && err.contains("2 epoch(s) done in stage 1")
                && err.contains("at most 2 epoch(s)"),
            "{err}"
        );
        // The epoch counter disagreeing with the run state.
        let mut edited = ck.clone();
        edited.counters.insert(EPOCH.into(), 1_000_000);
        let err = read_saved(&edited, Path::new("c"), &spec("m", fp, 3), &[]).unwrap_err();
        assert!(err.to_string().contains("train.epoch is 1000000"), "{err}");
    }
}

//! The end of an epoch: evaluation, monitor, model files (best, last, per epoch), the metrics
//! row, the resume checkpoint, the removal of epoch files (`--keep-checkpoints`) and the curves.

use std::time::Instant;

use anyhow::{Result, bail};
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use serde_json::json;

use super::epoch::{StageRun, Trained, Weights};
use super::epoch_ctx::Ctx;
use super::progress::fmt_secs;
use super::state::{Position, StageResult};
use super::{EpochCtx, Job, JobSpec, KeepCheckpoints, TRAIN_LOSS, retention};
use crate::outputs::{RunDir, curves, tensorboard};
use crate::toolbox::checkpoint::Checkpoint;
use crate::toolbox::params;

impl<B: AutodiffBackend, J: Job<B>> StageRun<'_, B, J> {
    /// Evaluation, monitor, model files, metrics row, checkpoint and curves of the epoch that
    /// just finished training.
    pub(super) fn end_epoch(
        &mut self,
        ctx: &mut Ctx<'_, B>,
        pos: &mut Position,
        model: &J::Model,
        trained: Trained,
    ) -> Result<()> {
        let spec = self.stage_spec(ctx);
        let (epoch, stage_index) = (pos.epoch, pos.stage);
        let t_eval = Instant::now();
        let valid = model.valid();
        let eval = self.job.end_epoch(
            &valid,
            &self.sums,
            &EpochCtx {
                stage: stage_index,
                epoch,
                device: ctx.device,
                comm: ctx.comm,
            },
        )?;
        let train_loss = eval.train_loss;
        let eval_seconds = t_eval.elapsed().as_secs_f64();

        let mut improved = false;
        let mut monitored = None;
        if let Some(m) = &spec.monitor {
            match eval.get(&m.metric) {
                Some(value) => {
                    improved = pos.monitor.record(m, value, epoch + 1);
                    monitored = Some(value);
                }
                // A stage of one epoch has one candidate: it is the best, measured or not
                // (a closed-form fit whose validation subjects have no follow-up scan).
                None if spec.plan.epochs == 1 => improved = true,
                None => bail!(
                    "early-stopping metric `{}` is not one this job evaluates; choose one of: {}",
                    m.metric,
                    evaluated(&eval).join(", ")
                ),
            }
        }
        let files = self.stage.model_file.clone();
        let run_files = RunDir::new(&ctx.run_dir);
        let best_path = match (&files, &spec.monitor) {
            (Some(f), _) => Some(run_files.best_model(&f.stem)),
            (None, Some(_)) => Some(run_files.best_checkpoint()),
            (None, None) => None,
        };
        let last_path = files.as_ref().map(|f| run_files.last_model(&f.stem));
        if ctx.main() {
            let weights = params::collect(&valid);
            let model_file = |path: &std::path::Path, weights: &Weights| -> Result<()> {
                self.model_file(&spec, path, weights, epoch + 1, monitored)
            };
            if improved && let Some(p) = &best_path {
                model_file(p, &weights)?;
            }
            if let Some(p) = &last_path {
                model_file(p, &weights)?;
            }
            if ctx.run.keep_checkpoints == KeepCheckpoints::All
                && let Some(f) = &files
            {
                let path = run_files.epoch_model(&f.stem, epoch as u64 + 1);
                model_file(&path, &weights)?;
                retention::record(&run_files, &path, &ctx.tag)?;
            }
            if improved {
                self.best = Some(weights);
            }
        }

        let mut row = self.stage.columns.clone();
        row.insert("epoch".into(), json!(epoch + 1));
        row.insert(TRAIN_LOSS.into(), json!(train_loss));
        row.extend(eval.head.clone());
        if let (Some(m), Some(v)) = (&spec.monitor, monitored) {
            row.insert("monitor_metric".into(), json!(m.metric));
            row.insert("monitor_value".into(), json!(v));
        }
        row.extend(eval.detail.clone());
        // The column keeps the run's metric name (every row has the same columns); a stage
        // monitored otherwise says so in `monitor_metric`.
        if let Some(m) = &ctx.spec.monitor {
            row.insert(format!("best_{}", m.metric), json!(pos.monitor.best));
            row.insert("is_best".into(), json!(improved));
        }
        let per_s = trained.items as f64 / trained.seconds.max(1e-9);
        row.insert("lr".into(), json!(spec.plan.lr.at(epoch)));
        row.insert("steps".into(), json!(pos.global_step));
        row.insert(format!("{}_per_s", spec.outputs.unit), json!(per_s));
        row.insert("seconds".into(), json!(trained.seconds));
        row.insert("allreduce_seconds".into(), json!(trained.allreduce_seconds));
        if spec.outputs.cpu_columns {
            let global_batch = spec.plan.global_batch(ctx.comm.size());
            row.insert(
                "epoch_steps".into(),
                json!(self.stage.items.div_ceil(global_batch)),
            );
            row.insert("train_cpu_seconds".into(), json!(trained.cpu_seconds));
            row.insert(
                "train_cpu_seconds_per_item".into(),
                json!(trained.cpu_seconds / trained.items.max(1) as f64),
            );
            row.insert("eval_seconds".into(), json!(eval_seconds));
        }

        pos.epoch = epoch + 1;
        pos.epoch_items = 0;
        pos.acc = serde_json::Value::Null;
        self.sums = J::Epoch::default();
        let stopped_early = spec
            .monitor
            .as_ref()
            .is_some_and(|m| pos.monitor.exhausted(m));
        let stage_done = stopped_early || pos.epoch >= spec.plan.epochs;
        if stage_done {
            pos.finish_stage(StageResult {
                stage: stage_index,
                best_value: pos.monitor.best,
                best_epoch: pos.monitor.best_epoch,
                epochs_run: pos.epoch,
                stopped_early,
                best_checkpoint: best_path.filter(|_| pos.monitor.best.is_some()),
                last_checkpoint: last_path,
            });
        }
        self.save(ctx, pos, model, Some(&row))?;
        if ctx.main() && ctx.run.keep_checkpoints == KeepCheckpoints::BestLast {
            // After the new resume checkpoint is in place.
            let from = ctx.resumed_from.clone();
            retention::prune(&run_files, from.as_deref(), &mut ctx.removed, &ctx.tag);
        }
        if ctx.main() {
            ctx.metrics.append(&row)?;
            let rows = ctx.metrics.rows()?;
            // A figure that cannot be drawn (a column beyond plotting range) is said, not fatal.
            if let Err(e) = curves::write(&ctx.run_dir, &rows, &spec.outputs.panels) {
                eprintln!("{} warning: curves.svg not drawn: {e:#}", ctx.tag);
            }
            tensorboard::write(&ctx.run_dir, &rows)?;
            eprintln!(
                "{} {}epoch {}/{}: train loss {train_loss:.4}, {}{}, {per_s:.0} {}/s, {}, {}",
                ctx.tag,
                self.label(),
                epoch + 1,
                spec.plan.epochs,
                eval.summary,
                if improved { " (best)" } else { "" },
                spec.outputs.unit,
                trained.counts.describe(),
                fmt_secs(trained.seconds)
            );
            if stopped_early {
                eprintln!(
                    "{} {}early stop after {} epochs without improvement",
                    ctx.tag,
                    self.label(),
                    pos.finished
                        .last()
                        .map_or(0, |s| s.epochs_run - s.best_epoch)
                );
            }
        }
        Ok(())
    }

    /// Writes a model-only file: `weights`, the stage's metadata, the model name, the 1-based
    /// `epoch` (0: before training) and the monitored value.
    fn model_file(
        &self,
        spec: &JobSpec,
        path: &std::path::Path,
        weights: &Weights,
        epoch: usize,
        monitored: Option<f64>,
    ) -> Result<()> {
        let mut ck = Checkpoint::default();
        for (name, t) in weights {
            ck.floats.insert(format!("model.{name}"), t.clone());
        }
        if let Some(f) = &self.stage.model_file {
            ck.metadata.extend(f.metadata.clone());
        }
        ck.metadata.insert("model".into(), spec.model_name.into());
        ck.metadata.insert("epoch".into(), epoch.to_string());
        if let (Some(m), Some(v)) = (&spec.monitor, monitored) {
            ck.metadata.insert(m.metric.clone(), v.to_string());
        }
        ck.save(path)
    }

    /// With [`JobSpec::validate_initial`]: the model as initialised is evaluated before the
    /// stage's first epoch and is the first candidate for the best model (epoch 0), so that
    /// training keeps only what beats the starting point (no metrics row: it trained nothing).
    pub(super) fn validate_initial(
        &mut self,
        ctx: &mut Ctx<'_, B>,
        pos: &mut Position,
        model: &J::Model,
    ) -> Result<()> {
        let spec = self.stage_spec(ctx);
        let Some(m) = &spec.monitor else {
            return Ok(());
        };
        let valid = model.valid();
        let eval = self.job.end_epoch(
            &valid,
            &J::Epoch::default(),
            &EpochCtx {
                stage: pos.stage,
                epoch: 0,
                device: ctx.device,
                comm: ctx.comm,
            },
        )?;
        let Some(value) = eval.get(&m.metric) else {
            anyhow::bail!(
                "early-stopping metric `{}` is not one this job evaluates",
                m.metric
            );
        };
        pos.monitor.record(m, value, 0);
        if ctx.main() {
            let weights = params::collect(&valid);
            if let Some(f) = &self.stage.model_file {
                let path = RunDir::new(&ctx.run_dir).best_model(&f.stem);
                self.model_file(&spec, &path, &weights, 0, Some(value))?;
            }
            self.best = Some(weights);
            eprintln!(
                "{} {}before training: {} (best)",
                ctx.tag,
                self.label(),
                eval.summary
            );
        }
        Ok(())
    }
}

impl<B: AutodiffBackend, J: Job<B>> StageRun<'_, B, J> {
    /// The run's spec with this stage's monitor (see [`super::Stage::monitor`]).
    fn stage_spec(&self, ctx: &Ctx<'_, B>) -> JobSpec {
        let mut spec = ctx.spec.clone();
        if let Some(m) = &self.stage.monitor {
            spec.monitor = Some(m.clone());
        }
        spec
    }
}

/// The metrics an epoch's evaluation gave a value (the choices of an early-stopping metric).
fn evaluated(eval: &super::EpochReport) -> Vec<&str> {
    eval.head
        .iter()
        .chain(eval.detail.iter())
        .filter(|(_, v)| v.as_f64().is_some())
        .map(|(k, _)| k.as_str())
        .collect()
}

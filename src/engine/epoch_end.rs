//! The end of an epoch, one concern each: the evaluation and what the monitor makes of it, the
//! metrics row, the files (model files, resume checkpoint, the removal of epoch files under
//! `--keep-checkpoints`; [`super::persist`]) and the report (metrics files, curves, log line).

use std::time::Instant;

use anyhow::{Result, bail};
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;

use super::epoch::{StageRun, Trained};
use super::epoch_ctx::Ctx;
use super::persist::ModelPaths;
use super::progress::fmt_secs;
use super::state::{Position, StageResult};
use super::{EpochCtx, EpochReport, Job, KeepCheckpoints, Monitor, Valid, retention};
use crate::outputs::metrics_row::{Best, CpuColumns, EpochColumns, MetricsRow};
use crate::outputs::{RunDir, curves, tensorboard};
use crate::toolbox::params;

/// An epoch's evaluation, and what the stage's monitor made of it.
struct Evaluation {
    report: EpochReport,
    seconds: f64,
    /// The monitored metric's value, when the evaluation measured it.
    monitored: Option<f64>,
    /// Whether the model is the stage's best so far.
    improved: bool,
}

impl Evaluation {
    /// The monitored metric's name and value, when measured.
    fn monitored<'m>(&self, monitor: Option<&'m Monitor>) -> Option<(&'m str, f64)> {
        monitor
            .zip(self.monitored)
            .map(|(m, v)| (m.metric.as_str(), v))
    }
}

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
        let monitor = self.monitor(ctx);
        let monitor = monitor.as_ref();
        let epoch = pos.epoch;
        let valid = model.valid();
        let eval = self.evaluate(ctx, pos, &valid, monitor)?;
        let paths = self.model_paths(ctx, monitor);
        if ctx.main() {
            let scored = (eval.improved, eval.monitored(monitor));
            self.keep_model_files(ctx, &paths, params::collect(&valid), epoch + 1, scored)?;
        }
        let row = self.row(ctx, pos, &eval, &trained, monitor);
        let stopped_early = self.next_epoch(ctx, pos, paths, monitor);
        self.save(ctx, pos, model, Some(&row))?;
        if ctx.main() && ctx.run.keep_checkpoints != KeepCheckpoints::All {
            // After the new resume checkpoint is in place.
            let from = ctx.resumed_from.clone();
            let run_files = RunDir::new(&ctx.run_dir);
            retention::prune(&run_files, from.as_deref(), &mut ctx.removed, &ctx.tag);
        }
        if ctx.main() {
            self.report(ctx, epoch + 1, &row, &eval, &trained, stopped_early)?;
        }
        Ok(())
    }

    /// The stage's monitor: its own, or the run's (see [`super::Stage::monitor`]).
    fn monitor(&self, ctx: &Ctx<'_, B>) -> Option<Monitor> {
        self.stage
            .monitor
            .as_ref()
            .or(ctx.spec.monitor.as_ref())
            .cloned()
    }

    /// The job's evaluation of the epoch `pos.epoch` that just trained, recorded by `monitor`.
    fn evaluate(
        &mut self,
        ctx: &Ctx<'_, B>,
        pos: &mut Position,
        valid: &Valid<B, J>,
        monitor: Option<&Monitor>,
    ) -> Result<Evaluation> {
        let t_eval = Instant::now();
        let report = self.job.end_epoch(
            valid,
            &self.sums,
            &EpochCtx {
                stage: pos.stage,
                epoch: pos.epoch,
                device: ctx.device,
                comm: ctx.comm,
            },
        )?;
        let seconds = t_eval.elapsed().as_secs_f64();
        let mut improved = false;
        let mut monitored = None;
        if let Some(m) = monitor {
            match report.get(&m.metric) {
                Some(value) => {
                    improved = pos.monitor.record(m, value, pos.epoch + 1);
                    monitored = Some(value);
                }
                // A stage of one epoch has one candidate: it is the best, measured or not
                // (a closed-form fit whose validation subjects have no follow-up scan).
                None if ctx.spec.plan.epochs == 1 => improved = true,
                None => bail!(
                    "early-stopping metric `{}` is not one this job evaluates; choose one of: {}",
                    m.metric,
                    evaluated(&report).join(", ")
                ),
            }
        }
        Ok(Evaluation {
            report,
            seconds,
            monitored,
            improved,
        })
    }

    /// The epoch's metrics row.
    fn row(
        &self,
        ctx: &Ctx<'_, B>,
        pos: &Position,
        eval: &Evaluation,
        trained: &Trained,
        monitor: Option<&Monitor>,
    ) -> MetricsRow {
        let (spec, epoch, report) = (&ctx.spec, pos.epoch, &eval.report);
        EpochColumns {
            stage: &self.stage.columns,
            epoch: epoch + 1,
            train_loss: report.train_loss,
            head: &report.head,
            monitored: eval.monitored(monitor),
            detail: &report.detail,
            // The column keeps the run's metric name (every row has the same columns); a stage
            // monitored otherwise says so in `monitor_metric`.
            best: spec.monitor.as_ref().map(|m| Best {
                metric: &m.metric,
                value: pos.monitor.best,
                is_best: eval.improved,
            }),
            lr: spec.plan.lr.at(epoch),
            steps: pos.global_step,
            per_s: (spec.outputs.unit, per_s(trained)),
            seconds: trained.seconds,
            allreduce_seconds: trained.allreduce_seconds,
            cpu: spec.outputs.cpu_columns.then(|| CpuColumns {
                epoch_steps: self
                    .stage
                    .items
                    .div_ceil(spec.plan.global_batch(ctx.comm.size())),
                train_cpu_seconds: trained.cpu_seconds,
                train_cpu_seconds_per_item: trained.cpu_seconds / trained.items.max(1) as f64,
                eval_seconds: eval.seconds,
            }),
        }
        .row()
    }

    /// Moves `pos` past the epoch that ended, closing the stage after its last epoch or when
    /// `monitor` stops it early: then the epochs since the best one.
    fn next_epoch(
        &mut self,
        ctx: &Ctx<'_, B>,
        pos: &mut Position,
        paths: ModelPaths,
        monitor: Option<&Monitor>,
    ) -> Option<usize> {
        pos.epoch += 1;
        pos.epoch_items = 0;
        pos.acc = serde_json::Value::Null;
        self.sums = J::Epoch::default();
        let stopped_early = monitor.is_some_and(|m| pos.monitor.exhausted(m));
        if stopped_early || pos.epoch >= ctx.spec.plan.epochs {
            pos.finish_stage(StageResult {
                stage: pos.stage,
                best_value: pos.monitor.best,
                best_epoch: pos.monitor.best_epoch,
                epochs_run: pos.epoch,
                stopped_early,
                best_checkpoint: paths.best.filter(|_| pos.monitor.best.is_some()),
                last_checkpoint: paths.last,
            });
        }
        stopped_early.then(|| {
            pos.finished
                .last()
                .map_or(0, |s| s.epochs_run - s.best_epoch)
        })
    }

    /// The 1-based `epoch`'s row appended to the metrics files, the curves and TensorBoard
    /// redrawn, the epoch's log line (rank 0); `stopped_early`: the epochs since the best one
    /// when the monitor stopped the stage.
    fn report(
        &self,
        ctx: &Ctx<'_, B>,
        epoch: usize,
        row: &MetricsRow,
        eval: &Evaluation,
        trained: &Trained,
        stopped_early: Option<usize>,
    ) -> Result<()> {
        let spec = &ctx.spec;
        ctx.metrics.append(row)?;
        let rows = ctx.metrics.rows()?;
        // A figure that cannot be drawn (a column beyond plotting range) is said, not fatal.
        if let Err(e) = curves::write(&ctx.run_dir, &rows, &spec.outputs.panels) {
            eprintln!("{} warning: curves.svg not drawn: {e:#}", ctx.tag);
        }
        tensorboard::write(&ctx.run_dir, &rows)?;
        eprintln!(
            "{} {}epoch {}/{}: train loss {:.4}, {}{}, {:.0} {}/s, {}, {}",
            ctx.tag,
            self.label(),
            epoch,
            spec.plan.epochs,
            eval.report.train_loss,
            eval.report.summary,
            if eval.improved { " (best)" } else { "" },
            per_s(trained),
            spec.outputs.unit,
            trained.counts.describe(),
            fmt_secs(trained.seconds)
        );
        if let Some(since_best) = stopped_early {
            eprintln!(
                "{} {}early stop after {since_best} epochs without improvement",
                ctx.tag,
                self.label(),
            );
        }
        Ok(())
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
        let Some(m) = self.monitor(ctx) else {
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
        pos.monitor.record(&m, value, 0);
        if ctx.main() {
            let weights = params::collect(&valid);
            if let Some(f) = &self.stage.model_file {
                let path = RunDir::new(&ctx.run_dir).best_model(&f.stem);
                self.model_file(ctx, &path, &weights, 0, Some((&m.metric, value)))?;
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

/// Items trained per second.
fn per_s(trained: &Trained) -> f64 {
    trained.items as f64 / trained.seconds.max(1e-9)
}

/// The metrics an epoch's evaluation gave a value (the choices of an early-stopping metric).
fn evaluated(eval: &EpochReport) -> Vec<&str> {
    eval.head
        .iter()
        .chain(eval.detail.iter())
        .filter(|(_, v)| v.as_f64().is_some())
        .map(|(k, _)| k.as_str())
        .collect()
}

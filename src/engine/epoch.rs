//! The epochs of one stage: training steps (shard, step, all-reduce, optimiser, stop votes),
//! then the epoch's end ([`super::epoch_end`]).

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use burn::tensor::backend::AutodiffBackend;

use super::epoch_ctx::Ctx;
use super::graph::StepGraph;
use super::pending::{Queue, StepAt, StepSumsOf};
use super::progress::Progress;
use super::state::Position;
use super::{EpochSums, Job, Stage, StepSums};
use crate::host_reads::{Counts, PerStep};
use crate::toolbox::ddp;
use crate::toolbox::optim::Optimizer;
use crate::toolbox::params::HostTensor;
use crate::toolbox::seed::epoch_order;
use crate::toolbox::stop::StopReason;

pub(super) type Weights = Vec<(String, HostTensor)>;

/// One stage in progress: its job, set-up, optimiser and best weights so far.
pub(super) struct StageRun<'j, B: AutodiffBackend, J: Job<B>> {
    pub job: &'j mut J,
    pub stage: Stage,
    pub names: Vec<String>,
    pub optimizer: Optimizer<B::InnerBackend>,
    pub best: Option<Weights>,
    /// The running sums of the epoch in progress.
    pub sums: J::Epoch,
    /// The loss of the newest step whose sums were read (for the progress line).
    pub last_loss: f64,
}

/// How the steps of an epoch ended: trained through, or stopped by a request after a step.
enum EpochEnd {
    Trained(Trained),
    /// The reason, and the 1-based epoch and step it came after.
    Stopped(StopReason, usize, usize),
}

/// What the steps of an epoch measured.
pub(super) struct Trained {
    pub seconds: f64,
    pub cpu_seconds: f64,
    pub allreduce_seconds: f64,
    pub items: usize,
    /// Backend operations, uploads and device → host reads per step (each read a sync on a
    /// GPU; [`crate::host_reads`]).
    pub counts: PerStep,
}

impl<B: AutodiffBackend, J: Job<B>> StageRun<'_, B, J> {
    /// Runs the stage's remaining epochs; returns the final model and, when a stop request
    /// ended the run, its exit code.
    pub(super) fn run(
        &mut self,
        ctx: &mut Ctx<'_, B>,
        pos: &mut Position,
        mut model: J::Model,
    ) -> Result<(J::Model, Option<ExitCode>)> {
        let stage_index = pos.stage;
        if ctx.spec.validate_initial.is_some() && pos.epoch == 0 && pos.epoch_items == 0 {
            self.validate_initial(ctx, pos, &model)?;
        }
        while pos.stage == stage_index {
            let (m, end) = self.train_epoch(ctx, pos, model)?;
            model = m;
            match end {
                EpochEnd::Trained(trained) => {
                    model = self.job.refit(model, &self.sums, ctx.device)?;
                    self.end_epoch(ctx, pos, &model, trained)?
                }
                EpochEnd::Stopped(reason, epoch, step) => {
                    return Ok((model, Some(self.stop_code(ctx, reason, epoch, step))));
                }
            }
        }
        Ok((model, None))
    }

    pub(super) fn label(&self) -> String {
        if self.stage.label.is_empty() {
            String::new()
        } else {
            format!("{} ", self.stage.label)
        }
    }

    /// The remaining steps of the current epoch.
    fn train_epoch(
        &mut self,
        ctx: &mut Ctx<'_, B>,
        pos: &mut Position,
        mut model: J::Model,
    ) -> Result<(J::Model, EpochEnd)> {
        let spec = &ctx.spec;
        let items = self.stage.items;
        let epoch = pos.epoch;
        // A resumed position this data cannot hold (a damaged or hand-edited run state) is
        // refused, not trained from: items beyond the epoch, or more steps than the epochs done
        // could have taken (a step takes at least one item; folds differ by a few items, hence
        // the factor 2), which would also overflow the step counter.
        let steps_cap = (pos.total_epochs() as u64 + 1)
            .saturating_mul(items as u64)
            .saturating_mul(2);
        if pos.epoch_items > items || pos.global_step > steps_cap {
            anyhow::bail!(
                "impossible run state: {} item(s) of this epoch done and step {} reached, but an \
                 epoch here has {items} item(s) and {} epoch(s) are done; the resume checkpoint \
                 is damaged or was edited: resume from another checkpoint or start a new run",
                pos.epoch_items,
                pos.global_step,
                pos.total_epochs()
            );
        }
        let order = epoch_order(items, self.stage.shuffle_seed, epoch as u64);
        let lr = spec.plan.lr.at(epoch);
        let global_batch = spec.plan.global_batch(ctx.comm.size());
        let mut progress = Progress::new(
            format!(
                "{} {}epoch {}/{}",
                ctx.tag,
                self.label(),
                epoch + 1,
                spec.plan.epochs
            ),
            items.div_ceil(global_batch) as u64,
            pos.epoch_items.div_ceil(global_batch) as u64,
            ctx.run.log_every_secs,
            ctx.main(),
        );
        let t0 = Instant::now();
        let cpu0 = crate::toolbox::usage::cpu_seconds();
        let comm0 = ctx.comm_stats.time;
        let mut items_here = 0usize;
        let (mut counts, mut steps) = (Counts::default(), 0u64);
        // Sums left on the device by the job (one rank, one micro-batch, no per-step log):
        // read at the progress intervals, before a checkpoint, at a stop and at the end.
        let defer = ctx.comm.size() * spec.plan.micro_batches.max(1) == 1 && !ctx.run.log_steps;
        let mut queue = Queue::default();
        // `--cuda-graph`: this epoch's step recorded once and replayed (`super::graph`).
        let mut graph = match ctx.capture {
            Some(make) => Some(StepGraph::new(make(ctx.device_inner(), self.adam_eps()?)?)),
            None => None,
        };
        while pos.epoch_items < items {
            let start = pos.epoch_items;
            let end = (start + global_batch).min(items);
            let counts0 = Counts::now();
            let (m, step_sums) = match graph.as_mut() {
                Some(g) => {
                    self.graph_step(ctx, pos, model, &order, (start, end), (lr, defer), g)?
                }
                None => {
                    let (grads, sums) =
                        self.step_shards(ctx, pos, &model, &order, (start, end), (defer, false))?;
                    (self.optimizer.step(lr, model, grads), sums)
                }
            };
            model = m;
            counts = counts.plus(counts0.elapsed());
            steps += 1;
            crate::toolbox::stop::test_pause(pos.global_step + 1, &ctx.tag);
            pos.epoch_items = end;
            pos.global_step += 1;
            ctx.steps_here += 1;
            items_here += end - start;
            let at = StepAt {
                step_in_epoch: end.div_ceil(global_batch),
                global_step: pos.global_step,
                rate: items_here as f64 / t0.elapsed().as_secs_f64().max(1e-9),
            };
            let stop = match step_sums {
                StepSumsOf::Read(step_sums) => {
                    // One small reduction carries the step's sums and any pending stop
                    // request, so that every rank stops after the same step.
                    let mut flat = step_sums.flat();
                    let stop = ddp::sum_with_stop(
                        ctx.comm,
                        &mut flat,
                        ctx.steps_here,
                        ctx.run.stop_after_steps,
                    )?;
                    self.take_step(ctx, step_sums.with_flat(&flat), at, epoch, lr)?;
                    progress.update(at.step_in_epoch as u64, self.last_loss, at.rate);
                    stop
                }
                StepSumsOf::OnDevice(sums) => {
                    // One rank: the stop request alone, nothing to sum.
                    let stop = ddp::sum_with_stop(
                        ctx.comm,
                        &mut Vec::new(),
                        ctx.steps_here,
                        ctx.run.stop_after_steps,
                    )?;
                    queue.push(sums, at);
                    progress.advance(at.step_in_epoch as u64);
                    let saving = ctx.run.checkpoint_every > 0
                        && pos.global_step.is_multiple_of(ctx.run.checkpoint_every);
                    if stop.is_some()
                        || saving
                        || queue.is_full()
                        || progress.due(at.step_in_epoch as u64)
                    {
                        let counts0 = Counts::now();
                        let settled = queue.settle();
                        counts = counts.plus(counts0.elapsed());
                        for (sums, at) in settled {
                            self.take_step(ctx, sums, at, epoch, lr)?;
                        }
                        progress.update(at.step_in_epoch as u64, self.last_loss, at.rate);
                    }
                    stop
                }
            };
            if let Some(reason) = stop {
                progress.finish();
                self.save(ctx, pos, &model, None)?;
                return Ok((
                    model,
                    EpochEnd::Stopped(reason, epoch + 1, at.step_in_epoch),
                ));
            }
            if ctx.run.checkpoint_every > 0
                && pos.global_step.is_multiple_of(ctx.run.checkpoint_every)
            {
                self.save(ctx, pos, &model, None)?;
            }
        }
        // The last step settled (its progress line is always due); anything still queued would
        // be taken all the same, never dropped.
        for (sums, at) in queue.settle() {
            self.take_step(ctx, sums, at, epoch, lr)?;
        }
        progress.finish();
        let seconds = t0.elapsed().as_secs_f64();
        // CPU time of all ranks together.
        let mut cpu = [crate::toolbox::usage::cpu_seconds() - cpu0];
        ctx.comm.all_reduce_sum_f64(&mut cpu)?;
        Ok((
            model,
            EpochEnd::Trained(Trained {
                seconds,
                cpu_seconds: cpu[0],
                allreduce_seconds: (ctx.comm_stats.time - comm0).as_secs_f64(),
                items: items_here,
                // A backend that counts no operation (CubeCL's) reports none.
                counts: counts.per_step(steps, counts.ops > 0),
            }),
        ))
    }

    /// A step's global sums, read: the divergence check, the epoch's running sums and the
    /// per-step log (`--log-steps`); the loss is kept for the progress line.
    fn take_step(
        &mut self,
        ctx: &Ctx<'_, B>,
        sums: J::Step,
        at: StepAt,
        epoch: usize,
        lr: f64,
    ) -> Result<()> {
        let loss = sums.loss();
        if !loss.is_finite() {
            bail!(
                "training diverged at {}epoch {} step {}: loss is {loss}",
                self.label(),
                epoch + 1,
                at.step_in_epoch
            );
        }
        self.sums.add(&sums);
        self.last_loss = loss;
        if ctx.main() && ctx.run.log_steps {
            append_step(ctx, at.global_step, epoch + 1, loss, lr)?;
        }
        Ok(())
    }

    /// After a stop request: the checkpoint is written; logs and returns the exit code.
    fn stop_code(
        &self,
        ctx: &Ctx<'_, B>,
        reason: StopReason,
        epoch: usize,
        step: usize,
    ) -> ExitCode {
        if !ctx.main() {
            return ctx.run.requeue.exit_code(reason);
        }
        eprintln!(
            "{} stopping at {}epoch {epoch} step {step} ({}): checkpoint written to {}; resume \
             with --resume auto",
            ctx.tag,
            self.label(),
            reason.describe(),
            crate::outputs::RunDir::new(&ctx.run_dir)
                .last_checkpoint()
                .display(),
        );
        ctx.run.requeue.finish(reason, &ctx.tag)
    }
}

/// Appends one line to `steps.csv` (a log: plain append, header on creation).
fn append_step<B: AutodiffBackend>(
    ctx: &Ctx<'_, B>,
    step: u64,
    epoch: usize,
    loss: f64,
    lr: f64,
) -> Result<()> {
    use std::io::Write;
    let path = crate::outputs::RunDir::new(&ctx.run_dir).steps_csv();
    let new = !path.exists();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot append to {}", path.display()))?;
    if new {
        writeln!(f, "step,epoch,loss,lr")?;
    }
    writeln!(f, "{step},{epoch},{loss},{lr}")?;
    Ok(())
}

//! One training step of a stage: this rank's shards of the global batch (micro-batches, the
//! gradients' all-reduce), or with `--cuda-graph` the step recorded once and replayed
//! ([`super::graph`]). Called by the epoch's loop ([`super::epoch`]).

use anyhow::{Context, Result, bail};
use burn::tensor::backend::AutodiffBackend;

use super::epoch::StageRun;
use super::epoch_ctx::Ctx;
use super::graph::{Plan, StepGraph};
use super::pending::{StepResult, StepSumsOf};
use super::state::Position;
use super::{Batch, Job, StepSums};
use crate::toolbox::ddp;
use crate::toolbox::optim::Grads;

/// The model after a step, and the step's sums.
type Stepped<B, J> = (
    <J as Job<B>>::Model,
    StepSumsOf<<B as AutodiffBackend>::InnerBackend, <J as Job<B>>::Step>,
);

impl<B: AutodiffBackend, J: Job<B>> StageRun<'_, B, J> {
    /// This rank's part of one step: its shard of the global batch `order[start..end]`, cut
    /// into `spec.plan.micro_batches` micro-batches that run one after the other (gradient
    /// accumulation), then the gradients summed over ranks. Shard `r × K + k` of `ranks × K`
    /// is rank `r`'s micro-batch `k`, so one rank over K micro-batches computes what K ranks
    /// compute, summed in the same order. Returns the gradients and this rank's step sums
    /// (summed over ranks by the caller, together with the stop votes).
    pub(super) fn step_shards(
        &mut self,
        ctx: &mut Ctx<'_, B>,
        pos: &Position,
        model: &J::Model,
        order: &[usize],
        (start, end): (usize, usize),
        (defer, fixed_inputs): (bool, bool),
    ) -> Result<StepResult<B, J::Step>> {
        let (rank, world) = (ctx.comm.rank(), ctx.comm.size());
        let micro = ctx.spec.plan.micro_batches.max(1);
        let shards = world * micro;
        let mut acc: Option<(ddp::ShardGrads, J::Step)> = None;
        for k in 0..micro {
            let shard = rank * micro + k;
            let (lo, hi) = ddp::shard(start, end, shard, shards);
            let batch = Batch {
                stage: pos.stage,
                epoch: pos.epoch,
                global_step: pos.global_step,
                order,
                start,
                end,
                lo,
                hi,
                shard,
                shards,
                fixed_inputs,
                device: ctx.device,
                comm: ctx.comm,
            };
            if shards == 1
                && defer
                && let Some(out) = self.job.step_on_device(model, &batch)?
            {
                return Ok((Grads::Params(out.grads), StepSumsOf::OnDevice(out.sums)));
            }
            let out = self.job.step(model, &batch)?;
            if shards == 1 {
                return Ok((Grads::Params(out.grads), StepSumsOf::Read(out.sums)));
            }
            let grads = ddp::ShardGrads::new(model, &out.grads);
            acc = Some(match acc {
                None => (grads, out.sums),
                Some((mut sum, sums)) => {
                    sum.add(&grads)?;
                    let total: Vec<f64> = sums
                        .flat()
                        .iter()
                        .zip(out.sums.flat())
                        .map(|(a, b)| a + b)
                        .collect();
                    (sum, sums.with_flat(&total))
                }
            });
        }
        let Some((grads, sums)) = acc else {
            bail!("a step with no micro-batch");
        };
        let grads = if world > 1 {
            grads.all_reduce(ctx.comm, &mut ctx.comm_stats)?
        } else {
            grads
        };
        Ok((grads.into_grads(ctx.device)?, StepSumsOf::Read(sums)))
    }

    /// One step of an epoch with a CUDA graph (`--cuda-graph`, one rank, one micro-batch): a
    /// full batch's inputs filled into the job's fixed buffers, then warmed up, recorded or
    /// replayed ([`StepGraph::plan`]); a batch of another size runs as without a graph. The
    /// sums are read when `defer` is off (`--log-steps`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn graph_step(
        &mut self,
        ctx: &mut Ctx<'_, B>,
        pos: &Position,
        model: J::Model,
        order: &[usize],
        (start, end): (usize, usize),
        (lr, defer): (f64, bool),
        g: &mut StepGraph<B::InnerBackend, J::Step>,
    ) -> Result<Stepped<B, J>> {
        let time = self.optimizer.adam_mut().and_then(|a| a.next_time());
        let time =
            time.context("--cuda-graph: the optimiser's parameters are at different steps")?;
        let full = ctx.spec.plan.global_batch(1);
        let plan = g.plan(end - start, full, time, lr);
        let eager = |sr: &mut Self, ctx: &mut Ctx<'_, B>, model: J::Model, how: (bool, bool)| {
            let (grads, sums) = sr.step_shards(ctx, pos, &model, order, (start, end), how)?;
            Ok::<_, anyhow::Error>((sr.optimizer.step(lr, model, grads), sums))
        };
        if let Plan::Eager { side_stream: false } = plan {
            let (model, sums) = eager(self, ctx, model, (defer, false))?;
            g.after_eager(&model);
            return Ok((model, sums));
        }
        let batch = Batch {
            stage: pos.stage,
            epoch: pos.epoch,
            global_step: pos.global_step,
            order,
            start,
            end,
            lo: start,
            hi: end,
            shard: 0,
            shards: 1,
            fixed_inputs: false,
            device: ctx.device,
            comm: ctx.comm,
        };
        if !self.job.fill_graph_inputs(&batch)? {
            bail!(
                "--cuda-graph: {} cannot fill fixed input buffers",
                ctx.spec.name
            );
        }
        let (model, sums) = match plan {
            Plan::Replay => {
                let sums = g.replay()?;
                if let Some(adam) = self.optimizer.adam_mut() {
                    adam.count_replayed_step();
                }
                (model, sums)
            }
            Plan::Capture => {
                g.begin(&model)?;
                let (model, sums) = match eager(self, ctx, model, (true, true)) {
                    Ok(done) => done,
                    Err(e) => {
                        g.abort();
                        return Err(e);
                    }
                };
                let sums = g.end(&model, sums, end - start)?;
                (model, sums)
            }
            Plan::Eager { .. } => {
                g.side_stream(true)?;
                let done = eager(self, ctx, model, (true, true));
                g.side_stream(false)?;
                let (model, sums) = done?;
                g.after_eager(&model);
                let StepSumsOf::OnDevice(sums) = sums else {
                    return Ok((model, sums));
                };
                (model, sums)
            }
        };
        Ok(if defer {
            (model, StepSumsOf::OnDevice(sums))
        } else {
            (model, StepSumsOf::Read(sums.read_now()))
        })
    }

    /// Adam's ε, for a step whose update a CUDA graph replays (other optimisers are refused
    /// before the run).
    pub(super) fn adam_eps(&mut self) -> Result<f64> {
        match self.optimizer.adam_mut() {
            Some(a) => Ok(f64::from(a.eps)),
            None => bail!("--cuda-graph needs --optimizer adam"),
        }
    }
}

//! One CLG-ODE training step's gradients and the validation loss, on one rank or
//! data-parallel over several.
//!
//! Randomness belongs to subjects, not batches: the subject at position `p` of epoch `e`'s order
//! draws its visits and augmentation from a generator seeded by (seed, fold, e, p). A global
//! batch therefore scores the same inputs whatever the batch size per rank and the number of
//! ranks. Every term of the objective is a sum over this shard's items divided by the item count
//! of the global batch (summed over ranks before the forward), so the gradients summed over
//! ranks are the global batch's. GradNorm needs the norms of the manifold and topology
//! gradients of the global batch, and Burn's backward consumes the graph: its step scores three
//! parts of the objective in passes of their own ([`Objective::forward_part`]: the manifold
//! term, the topology term, the rest), each term built once, the first two parts' gradients
//! summed over ranks for their norms, and the step's gradient is their weighted sum
//! (`gradnorm_step.rs`).

use anyhow::Result;
use burn::module::{AutodiffModule, ParamId};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use rand_chacha::ChaCha8Rng;

use super::super::protocol::fold_data::FoldData;
use super::super::settings::Sampling;
use super::batch::{Mode, build};
use super::shard::{Piece, pieces, topo_slots};
pub(crate) use super::shard::{Pieces, StepResult};
use crate::dist::Collective;
use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::objective::staged;
use crate::models::clg_ode::objective::{Objective, PerTerm, Stats};
use crate::toolbox::{ddp, host_parallel};

/// The global item counts of the objective's terms for this shard's pieces.
fn global_counts(
    obj: &Objective,
    pieces: &[Piece],
    epoch: usize,
    comm: &dyn Collective,
) -> Result<PerTerm<f64>> {
    let mut counts = PerTerm::<f64>::default();
    for p in pieces {
        for (term, n) in obj.counts(&p.x, epoch).iter() {
            counts[term] += n;
        }
    }
    comm.all_reduce_sum_f64(counts.as_mut_slice())?;
    Ok(counts)
}

/// The four new-edge scalars: the only parameters trained once the backbone is frozen.
fn innovation_params<B: Backend>(model: &ClgOde<B>) -> [ParamId; 4] {
    let d = &model.conn_decoder;
    [
        d.alpha_new.id,
        d.delta_new.id,
        d.gamma_new.id,
        d.beta_new.id,
    ]
}

/// Gradients of this rank's shard `order[lo..hi]` (subject indices) of the global batch that
/// starts at `order[start]`, at `epoch`, cut into passes by `cut`, with GradNorm (updating the
/// objective's weights) when the topology term is on.
#[allow(clippy::too_many_arguments)]
pub(crate) fn grads<B: AutodiffBackend>(
    model: &ClgOde<B>,
    obj: &mut Objective,
    data: &FoldData,
    sampling: &Sampling,
    (seed, fold, epoch): (u64, usize, usize),
    order: &[usize],
    start: usize,
    (lo, hi): (usize, usize),
    cut: Pieces,
    device: &B::Device,
    comm: &dyn Collective,
) -> Result<StepResult> {
    let run = (seed, fold, epoch);
    let pieces = pieces(data, obj, sampling, run, order, start, (lo, hi), cut);
    for p in &pieces {
        staged::stage::<B>(obj, &p.x, device);
    }
    let counts = global_counts(obj, &pieces, epoch, comm)?;
    let frozen = obj.cfg.innovation.frozen(epoch);
    if obj.cfg.gradnorm_on() && !frozen {
        return super::gradnorm_step::gradnorm_step(
            model, obj, &pieces, &counts, epoch, cut, device, comm,
        );
    }
    if pieces.is_empty() {
        return Ok(StepResult {
            grads: GradientsParams::new(),
            stats: Stats::default(),
            topo_raw: Vec::new(),
        });
    }
    let coefs = obj.coefficients(epoch, obj.state.gradnorm.weights);
    let objective: &Objective = obj;
    let (mut grads, scored) = host_parallel::backward_pieces(model, &pieces, |m, p| {
        let fwd = objective.forward(m, &p.x, epoch, device);
        let loss = objective.combine(&fwd.sums, &coefs, &counts, device);
        let slots = topo_slots(&p.x, p.first);
        let topo: Vec<(usize, f64)> = slots.into_iter().zip(fwd.topo_raw).collect();
        (loss, (fwd.stats, topo))
    });
    if frozen {
        let mut kept = GradientsParams::new();
        for id in innovation_params(model) {
            if let Some(g) = grads.remove::<B::InnerBackend, 1>(id) {
                kept.register::<B::InnerBackend, 1>(id, g);
            }
        }
        grads = kept;
    }
    let mut stats = Stats::default();
    let mut topo_raw = Vec::new();
    for (s, topo) in scored {
        stats.merge(&s);
        topo_raw.extend(topo);
    }
    Ok(StepResult {
        grads,
        stats,
        topo_raw,
    })
}

/// Validation/test statistics and mean batch total over `subjects` (clean inputs, visits
/// 0/1/2) at `epoch`. Each batch of `batch_size × ranks` subjects is shared out over the ranks
/// and its statistics reduced, so every rank returns the same values.
#[allow(clippy::too_many_arguments)]
pub(crate) fn eval_loss<B: Backend>(
    model: &ClgOde<B>,
    obj: &Objective,
    data: &FoldData,
    sampling: &Sampling,
    subjects: &[usize],
    batch_size: usize,
    epoch: usize,
    device: &B::Device,
    comm: &dyn Collective,
) -> Result<(Stats, f64)> {
    let (rank, world) = (comm.rank(), comm.size());
    let mut sums = Stats::default();
    let (mut total, mut batches) = (0.0, 0usize);
    for part in subjects.chunks(batch_size.max(1) * world) {
        let (lo, hi) = ddp::shard(0, part.len(), rank, world);
        let mut v = if lo < hi {
            let x = build::<ChaCha8Rng>(data, &part[lo..hi], Mode::Eval, epoch, &obj.cfg, sampling);
            obj.forward(model, &x, epoch, device).stats.v
        } else {
            Stats::default().v
        };
        comm.all_reduce_sum_f64(&mut v)?;
        let stats = Stats::from_slice(&v);
        total += obj.total(&stats, epoch, obj.state.gradnorm.weights);
        batches += 1;
        sums.merge(&stats);
    }
    Ok((sums, total / batches.max(1) as f64))
}

/// The model's inner module, for evaluation (re-exported for the job).
pub(crate) type Valid<B> = <ClgOde<B> as AutodiffModule<B>>::InnerModule;

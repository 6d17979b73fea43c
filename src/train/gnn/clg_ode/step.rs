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
//! ([`gradnorm_step`]).

use anyhow::Result;
use burn::module::{AutodiffModule, ParamId};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::super::protocol::fold_data::FoldData;
use super::super::seeds::subject_rng;
use super::super::settings::Sampling;
use super::batch::{Mode, build};
use crate::backend::BackendKind;
use crate::dist::Collective;
use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::objective::{Objective, ObjectiveInput, Part, PerTerm, Stats, Term};
use crate::models::clg_ode::shared_ode::SharedOde;
use crate::toolbox::{ddp, host_parallel};

/// The two terms GradNorm balances, in the order of its weights.
const GRADNORM_TERMS: [Term; 2] = [Term::Manifold, Term::Topo];

/// What a step produced on this rank.
pub(crate) struct StepResult {
    pub grads: GradientsParams,
    /// This shard's statistics (sums and counts; they add up over ranks).
    pub stats: Stats,
    /// This shard's weighted raw topology values, by slot `3·(position − start) + kind`
    /// (reconstruction, forecast j, forecast k).
    pub topo_raw: Vec<(usize, f64)>,
}

/// Where a step's predictions sit among the global batch's topology slots.
fn topo_slots(x: &ObjectiveInput, first: usize) -> Vec<usize> {
    let mut forecasts = vec![0usize; x.nb];
    x.preds
        .iter()
        .map(|p| {
            let kind = if p.forecast {
                forecasts[p.b] += 1;
                forecasts[p.b]
            } else {
                0
            };
            3 * (first + p.b) + kind
        })
        .collect()
}

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

/// L2 norm of gradients summed over ranks. One process sums the squares on the device (one
/// read); several ranks must add their gradients first, so they read them all.
fn global_norm<B: AutodiffBackend>(
    model: &ClgOde<B>,
    grads: &GradientsParams,
    comm: &dyn Collective,
) -> Result<f64> {
    if comm.size() == 1 {
        return Ok(ddp::grad_square_sums(model, grads)
            .iter()
            .sum::<f64>()
            .sqrt());
    }
    let mut flat = ddp::flatten_grads(model, grads).flat;
    comm.all_reduce_sum_f32(&mut flat)?;
    Ok(flat
        .iter()
        .map(|&g| (g as f64) * (g as f64))
        .sum::<f64>()
        .sqrt())
}

/// How a rank's shard is cut into forward/backward passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pieces {
    /// One pass over the whole shard: the device parallelises each operation (GPUs, LibTorch).
    Whole,
    /// One pass per subject, the subjects in parallel over the host's cores
    /// ([`host_parallel`]): the pure-Rust CPU backend, whose operations on one subject's few
    /// hundred nodes are too small to share out.
    PerSubject,
}

impl Pieces {
    /// The cut for a backend: per subject where it shares items out itself
    /// ([`BackendKind::host_parallel`]).
    pub(crate) fn for_backend(kind: BackendKind) -> Self {
        match kind.host_parallel() {
            true => Pieces::PerSubject,
            false => Pieces::Whole,
        }
    }
}

/// One pass's subjects: the input built for `order[lo..hi]`, and where its predictions sit
/// among the global batch's topology slots (`lo − start`).
struct Piece {
    x: ObjectiveInput,
    first: usize,
}

/// The pieces of this rank's shard `order[lo..hi]` of the global batch that starts at
/// `order[start]`, built in parallel (each subject draws from its own generator).
#[allow(clippy::too_many_arguments)]
fn pieces(
    data: &FoldData,
    obj: &Objective,
    sampling: &Sampling,
    (seed, fold, epoch): (u64, usize, usize),
    order: &[usize],
    start: usize,
    (lo, hi): (usize, usize),
    cut: Pieces,
) -> Vec<Piece> {
    let ranges: Vec<(usize, usize)> = match cut {
        _ if lo >= hi => Vec::new(),
        Pieces::Whole => vec![(lo, hi)],
        Pieces::PerSubject => (lo..hi).map(|p| (p, p + 1)).collect(),
    };
    ranges
        .into_par_iter()
        .map(|(a, b)| {
            let mut rngs: Vec<ChaCha8Rng> = (a..b)
                .map(|pos| subject_rng(seed, fold, epoch, pos))
                .collect();
            let x = build(
                data,
                &order[a..b],
                Mode::Train(&mut rngs),
                epoch,
                &obj.cfg,
                sampling,
            );
            Piece {
                x,
                first: a - start,
            }
        })
        .collect()
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
    let counts = global_counts(obj, &pieces, epoch, comm)?;
    let frozen = obj.cfg.innovation.frozen(epoch);
    if obj.cfg.gradnorm_on() && !frozen {
        return gradnorm_step(model, obj, &pieces, &counts, epoch, cut, device, comm);
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

/// A step with GradNorm: every piece's three parts ([`Part::GRADNORM`]: the manifold term, the
/// topology term, the rest), all scored at once (on `flex`, six passes of two subjects shared
/// over the cores). GradNorm's weights come from the first two parts' losses and gradient
/// norms, as from two passes of their own; the step's gradient is
/// c_manifold·∇manifold + c_topology·∇topology + ∇rest, each of the terms built and
/// differentiated once (the topology loss was built twice: once for its norm, once in the
/// total). The statistics are the full forward's, bit for bit (each part makes its own
/// terms' by the same operations); the gradient equals the total's up to rounding.
#[allow(clippy::too_many_arguments)]
fn gradnorm_step<B: AutodiffBackend>(
    model: &ClgOde<B>,
    obj: &mut Objective,
    pieces: &[Piece],
    counts: &PerTerm<f64>,
    epoch: usize,
    cut: Pieces,
    device: &B::Device,
    comm: &dyn Collective,
) -> Result<StepResult> {
    // The rest's coefficients do not depend on GradNorm's weights.
    let mut rest = obj.coefficients(epoch, obj.state.gradnorm.weights);
    for t in GRADNORM_TERMS {
        rest[t] = 0.0;
    }
    let rest_on = Term::ALL
        .into_iter()
        .any(|t| rest[t] != 0.0 && counts[t] > 0.0);
    let jobs: Vec<(usize, usize)> = (0..pieces.len())
        .flat_map(|p| (0..Part::GRADNORM.len()).map(move |k| (p, k)))
        .collect();
    let objective: &Objective = obj;
    // Each piece's forecasts integrated once, for its three parts' graphs to replay.
    let inner = model.valid();
    let kept: Vec<Option<SharedOde>> = pieces
        .par_iter()
        .map(|p| objective.ode_kept(&inner, &p.x, device))
        .collect();
    let (mut grads, scored) = host_parallel::backward_groups(
        model,
        &jobs,
        (Part::GRADNORM.len(), |&(_, k): &(usize, usize)| k),
        cut == Pieces::PerSubject,
        |m, &(p, k)| {
            let piece = &pieces[p];
            let part = Part::GRADNORM[k];
            let fwd = objective.forward_part(m, &piece.x, part, epoch, device, kept[p].as_ref());
            let loss = match GRADNORM_TERMS.get(k) {
                Some(&t) => Some(fwd.sums[t].clone().div_scalar(counts[t].max(1.0))),
                None => rest_on.then(|| objective.combine(&fwd.sums, &rest, counts, device)),
            };
            let slots = topo_slots(&piece.x, piece.first);
            let topo: Vec<(usize, f64)> = match part {
                Part::Topo => slots.into_iter().zip(fwd.topo_raw).collect(),
                _ => Vec::new(),
            };
            (loss, (fwd.stats, topo))
        },
    );
    // Losses and gradient norms of the manifold and topology terms of the global batch.
    let mut ln = [0.0f64; 2];
    for (k, term) in GRADNORM_TERMS.into_iter().enumerate() {
        let values: Vec<f64> = scored
            .iter()
            .skip(k)
            .step_by(Part::GRADNORM.len())
            .map(|(s, _)| s.sum(term))
            .collect();
        ln[k] = values.iter().sum();
    }
    let g = [
        global_norm(model, &grads[0], comm)?,
        global_norm(model, &grads[1], comm)?,
    ];
    comm.all_reduce_sum_f64(&mut ln)?;
    let l = GRADNORM_TERMS.map(|t| counts[t].max(1.0));
    let l = [ln[0] / l[0], ln[1] / l[1]];
    let weights = obj.state.gradnorm.update(l, g, obj.cfg.gradnorm_lambdas());
    let coefs = obj.coefficients(epoch, weights);
    // As `Objective::combine`: a term without items or coefficient adds nothing.
    let weight = |t: Term| match coefs[t] != 0.0 && counts[t] > 0.0 {
        true => coefs[t],
        false => 0.0,
    };
    let rest_grads = grads.pop().unwrap_or_default();
    let topo_grads = grads.pop().unwrap_or_default();
    let manifold_grads = grads.pop().unwrap_or_default();
    let grads = host_parallel::weighted_sum(
        model,
        vec![
            (manifold_grads, weight(Term::Manifold)),
            (topo_grads, weight(Term::Topo)),
            (rest_grads, 1.0),
        ],
    );
    let mut stats = Stats::default();
    let mut topo_raw = Vec::new();
    for piece in scored.chunks(Part::GRADNORM.len()) {
        let mut whole = Stats::default();
        for (s, topo) in piece {
            whole.merge(s);
            topo_raw.extend(topo.iter().copied());
        }
        stats.merge(&whole);
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

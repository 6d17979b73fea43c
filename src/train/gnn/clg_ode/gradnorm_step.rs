//! A CLG-ODE training step with GradNorm ([`gradnorm_step`]): the objective scored in three
//! parts (the manifold term, the topology term, the rest), each part's gradients kept apart,
//! GradNorm's weights from the first two parts' losses and gradient norms, the step's gradient
//! their weighted sum. The passes' host values and the gradient norms are read together, once
//! a step on one rank.

use anyhow::Result;
use burn::module::AutodiffModule;
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use rayon::prelude::*;

use super::shard::{Piece, Pieces, StepResult, topo_slots};
use crate::dist::Collective;
use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::objective::{Objective, Part, PerTerm, Stats, Term};
use crate::models::clg_ode::shared_ode::SharedOde;
use crate::toolbox::{ddp, host_parallel};

/// The two terms GradNorm balances, in the order of its weights.
const GRADNORM_TERMS: [Term; 2] = [Term::Manifold, Term::Topo];

/// L2 norm of gradients summed over ranks (several: each rank's gradients read and added; one
/// process reads the squares with its step's other values instead).
fn global_norm<B: AutodiffBackend>(
    model: &ClgOde<B>,
    grads: &GradientsParams,
    comm: &dyn Collective,
) -> Result<f64> {
    let mut flat = ddp::flatten_grads(model, grads).flat;
    comm.all_reduce_sum_f32(&mut flat)?;
    Ok(flat
        .iter()
        .map(|&g| (g as f64) * (g as f64))
        .sum::<f64>()
        .sqrt())
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
pub(super) fn gradnorm_step<B: AutodiffBackend>(
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
    let (mut grads, unread) = host_parallel::backward_groups(
        model,
        &jobs,
        (Part::GRADNORM.len(), |&(_, k): &(usize, usize)| k),
        cut == Pieces::PerSubject,
        |m, &(p, k)| {
            let piece = &pieces[p];
            let part = Part::GRADNORM[k];
            let fwd = objective.forward_unread(m, &piece.x, part, epoch, device, kept[p].as_ref());
            let loss = match GRADNORM_TERMS.get(k) {
                Some(&t) => Some(fwd.sums[t].clone().div_scalar(counts[t].max(1.0))),
                None => rest_on.then(|| objective.combine(&fwd.sums, &rest, counts, device)),
            };
            (loss, (fwd.values.inner(), fwd.finish))
        },
    );
    // Every pass's host values and, on one rank, the two gradients' squares: one read.
    let squares: Vec<_> = match comm.size() {
        1 => grads[..2]
            .iter()
            .map(|g| ddp::grad_squares(model, g))
            .collect(),
        _ => Vec::new(),
    };
    let values: Vec<_> = unread.iter().map(|(v, _)| v.clone()).collect();
    let lens: Vec<usize> = values
        .iter()
        .chain(squares.iter().flatten())
        .map(|t| t.dims()[0])
        .collect();
    let read: Vec<_> = values
        .into_iter()
        .chain(squares.iter().flatten().cloned())
        .collect();
    // A rank whose shard of the global batch is empty has nothing to read.
    let all = match read.is_empty() {
        true => Vec::new(),
        false => crate::host_reads::f32s(Tensor::cat(read, 0)),
    };
    let mut at = 0;
    let slices: Vec<&[f32]> = lens
        .iter()
        .map(|&len| {
            at += len;
            &all[at - len..at]
        })
        .collect();
    let (passes, norms) = slices.split_at(unread.len());
    // The statistics of each pass (the mask diagnostics sort every prediction's logits), the
    // passes in parallel as they were scored, collected in order.
    let scored: Vec<(Stats, Vec<(usize, f64)>)> = unread
        .par_iter()
        .zip(&jobs)
        .zip(passes)
        .map(|(((_, finish), &(p, k)), values)| {
            let piece = &pieces[p];
            let (stats, raw) = finish.stats(&piece.x, values);
            let topo = match Part::GRADNORM[k] {
                Part::Topo => topo_slots(&piece.x, piece.first)
                    .into_iter()
                    .zip(raw)
                    .collect(),
                _ => Vec::new(),
            };
            (stats, topo)
        })
        .collect();
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
    let norm = |squares: &[f32]| squares.iter().map(|&v| f64::from(v)).sum::<f64>().sqrt();
    let g = match comm.size() {
        1 => {
            let mut norms = norms.iter();
            [0, 1].map(|k| match &squares[k] {
                Some(_) => norm(norms.next().copied().unwrap_or_default()),
                None => 0.0,
            })
        }
        _ => [
            global_norm(model, &grads[0], comm)?,
            global_norm(model, &grads[1], comm)?,
        ],
    };
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

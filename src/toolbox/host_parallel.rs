//! One rank's batch over the host's cores: every piece of the batch (a subject, say) runs its
//! forward and backward pass on its own copy of the model, in parallel on rayon's pool, and the
//! pieces' gradients are added in piece order.
//!
//! A model whose pieces are small (CLG-ODE: a few hundred nodes per subject) spends its step in
//! thousands of small operations that one core runs faster than two; pieces in parallel keep
//! every core busy the way ranks do, without a second process. Each copy holds fresh autodiff
//! leaves ([`AutodiffModule::from_inner`] of [`AutodiffModule::valid`]): Burn keeps one graph
//! per piece, where shared leaves would merge the pieces into one graph under one lock. The
//! copies share the parameters' storage and [`ParamId`](burn::module::ParamId)s, so the
//! gradients are keyed as the model's own.
//!
//! A pass that runs alone (one piece, or the passes one after another) takes a copy too: Burn
//! 0.21's autodiff, after every backward anywhere in the process, frees the roots no tensor
//! references of every graph (`burn-autodiff` `runtime/graph.rs`, `GraphCleaner`). A second
//! pass on the same model builds its first nodes in a graph without the model's leaves (the
//! first backward took them out of the graph locator), so a backward on another thread could
//! free such a node between its tensor's last use and its child's registration, and that
//! parameter's gradient would be lost (seen as rare failures of tests that compare two
//! passes bit for bit while other tests train). A copy's fresh leaves are in every graph its
//! nodes join, and they stay referenced, so no other thread frees anything of it.
//!
//! Host reads, operations and uploads made in the pieces count as the calling thread's
//! ([`Counts::add_here`]).
//!
//! Reproducibility: a piece's gradient does not depend on the thread that computed it, and the
//! sum is taken in piece order after all pieces are done, so a run gives the same weights
//! whatever the number of threads.

use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::backend::AutodiffBackend;
use rayon::prelude::*;

use crate::host_reads::Counts;

/// The gradients of Σ loss over `pieces`, where `pass` scores one piece with a model and
/// returns its loss (`[1]`) and anything else the caller keeps (returned in piece order).
/// One piece runs on the calling thread (on a copy of `model`, as every pass).
pub(crate) fn backward_pieces<B, M, I, T, F>(
    model: &M,
    pieces: &[I],
    pass: F,
) -> (GradientsParams, Vec<T>)
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + Sync,
    I: Sync,
    T: Send,
    F: Fn(&M, &I) -> (Tensor<B, 1>, T) + Sync,
{
    if let [piece] = pieces {
        let copy = M::from_inner(model.valid());
        let (loss, kept) = pass(&copy, piece);
        return (
            GradientsParams::from_grads(loss.backward(), &copy),
            vec![kept],
        );
    }
    let done: Vec<(GradientsParams, T, Counts)> = pieces
        .par_iter()
        .map(|piece| {
            let ((grads, kept), counts) = Counts::isolated(|| {
                let copy = M::from_inner(model.valid());
                let (loss, kept) = pass(&copy, piece);
                (GradientsParams::from_grads(loss.backward(), &copy), kept)
            });
            (grads, kept, counts)
        })
        .collect();
    let mut grads = Vec::with_capacity(done.len());
    let mut kept = Vec::with_capacity(done.len());
    for (g, k, counts) in done {
        counts.add_here();
        grads.push(g);
        kept.push(k);
    }
    (sum_in_order(model, &mut grads), kept)
}

/// Σ of the pieces' gradients, parameter by parameter, added in piece order (a parameter no
/// piece reached has no gradient, as in one pass over the whole batch).
pub(crate) fn sum_in_order<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    parts: &mut [GradientsParams],
) -> GradientsParams {
    add_up(model, parts.iter_mut().map(|p| (p, None)).collect())
}

/// Σ (weight ×) gradients over `parts`, parameter by parameter, in their order; a part without
/// a weight is added as it is. A parameter no part reached has no gradient.
fn add_up<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    parts: Vec<(&mut GradientsParams, Option<f64>)>,
) -> GradientsParams {
    struct Sum<'a> {
        parts: Vec<(&'a mut GradientsParams, Option<f64>)>,
        out: GradientsParams,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Sum<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let total = self
                .parts
                .iter_mut()
                .filter_map(|(p, w)| {
                    let g = p.remove::<B::InnerBackend, D>(param.id)?;
                    Some(match *w {
                        Some(w) => g.mul_scalar(w),
                        None => g,
                    })
                })
                .reduce(|a, b| a + b);
            if let Some(total) = total {
                self.out.register::<B::InnerBackend, D>(param.id, total);
            }
        }
    }
    let mut sum = Sum {
        parts,
        out: GradientsParams::new(),
    };
    model.visit(&mut sum);
    sum.out
}

/// [`backward_pieces`] for items that fall into `groups` groups (`group(item)` < `groups`):
/// the gradients summed per group, each in item order, and what each pass kept, in item order.
/// A pass may return no loss (nothing to differentiate: no backward). The items run in
/// parallel on rayon's pool when `parallel`, else one after another on the calling thread;
/// each on its own copy of the model.
pub(crate) fn backward_groups<B, M, I, T, F>(
    model: &M,
    items: &[I],
    (groups, group): (usize, impl Fn(&I) -> usize + Sync),
    parallel: bool,
    pass: F,
) -> (Vec<GradientsParams>, Vec<T>)
where
    B: AutodiffBackend,
    M: AutodiffModule<B> + Sync,
    I: Sync,
    T: Send,
    F: Fn(&M, &I) -> (Option<Tensor<B, 1>>, T) + Sync,
{
    let run = |m: &M, item: &I| {
        let (loss, kept) = pass(m, item);
        let grads = loss.map_or_else(GradientsParams::new, |l| {
            GradientsParams::from_grads(l.backward(), m)
        });
        (grads, kept)
    };
    let done: Vec<(GradientsParams, T, Option<Counts>)> = match parallel {
        true => items
            .par_iter()
            .map(|item| {
                let ((grads, kept), counts) =
                    Counts::isolated(|| run(&M::from_inner(model.valid()), item));
                (grads, kept, Some(counts))
            })
            .collect(),
        false => items
            .iter()
            .map(|item| {
                let (grads, kept) = run(&M::from_inner(model.valid()), item);
                (grads, kept, None)
            })
            .collect(),
    };
    let mut by_group: Vec<Vec<GradientsParams>> = (0..groups).map(|_| Vec::new()).collect();
    let mut kept = Vec::with_capacity(done.len());
    for (item, (g, k, counts)) in items.iter().zip(done) {
        if let Some(counts) = counts {
            counts.add_here();
        }
        by_group[group(item)].push(g);
        kept.push(k);
    }
    let sums = by_group
        .iter_mut()
        .map(|parts| sum_in_order(model, parts))
        .collect();
    (sums, kept)
}

/// Σ weight × gradients over `parts`, parameter by parameter, in the order of `parts` (a
/// parameter no part reached has no gradient).
pub(crate) fn weighted_sum<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    mut parts: Vec<(GradientsParams, f64)>,
) -> GradientsParams {
    add_up(
        model,
        parts.iter_mut().map(|(p, w)| (p, Some(*w))).collect(),
    )
}

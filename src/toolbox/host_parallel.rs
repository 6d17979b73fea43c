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
/// One piece runs on `model` itself, on the calling thread.
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
        let (loss, kept) = pass(model, piece);
        return (
            GradientsParams::from_grads(loss.backward(), model),
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
    struct Sum<'a> {
        parts: &'a mut [GradientsParams],
        out: GradientsParams,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Sum<'_> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let total = self
                .parts
                .iter_mut()
                .filter_map(|p| p.remove::<B::InnerBackend, D>(param.id))
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

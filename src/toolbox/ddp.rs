//! Data-parallel glue between a Burn model and a [`Collective`]: identical initial weights on
//! every rank, and gradients averaged in one fused host buffer per step. Parameters are paired
//! across ranks by their visiting order (Burn's `ParamId`s are random per process).

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::prelude::*;
use burn::tensor::TensorData;
use burn::tensor::backend::AutodiffBackend;

use super::optim::Grads;
use super::params;
use super::stop::{self, StopReason};
use crate::dist::Collective;

/// Time and bytes spent in gradient all-reduces (for benchmarks and logs).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct CommStats {
    pub calls: u64,
    pub bytes: u64,
    pub time: Duration,
}

impl CommStats {
    /// On rank 0 of a multi-rank world: one log line with the all-reduces' count, size and time.
    pub(crate) fn log(&self, tag: &str, comm: &dyn Collective) {
        if comm.rank() == 0 && comm.size() > 1 && self.calls > 0 {
            eprintln!(
                "{tag} {} ranks ({}): {} all-reduces of {} bytes, {:.1} s in all-reduce",
                comm.size(),
                comm.name(),
                self.calls,
                self.bytes / self.calls,
                self.time.as_secs_f64()
            );
        }
    }
}

/// In a multi-rank world, every rank logs a digest of its parameters, so that a launcher (and
/// the tests) can check that all ranks hold the same weights. `what` names the model.
pub(crate) fn log_digest<B: Backend, M: Module<B>>(
    tag: &str,
    what: &str,
    comm: &dyn Collective,
    model: &M,
) {
    if comm.size() > 1 {
        eprintln!(
            "{tag} {what}rank {} parameter digest {:016x}",
            comm.rank(),
            params::digest(model)
        );
    }
}

/// Copies rank 0's parameters to every rank.
pub(crate) fn broadcast_params<B: Backend, M: Module<B>>(
    comm: &dyn Collective,
    model: M,
    device: &B::Device,
) -> Result<M> {
    if comm.size() == 1 {
        return Ok(model);
    }
    let mut named = params::collect(&model);
    let mut flat: Vec<f32> = named
        .iter()
        .flat_map(|(_, t)| t.data.iter().copied())
        .collect();
    comm.broadcast_f32(&mut flat, 0)?;
    let mut offset = 0;
    for (_, t) in named.iter_mut() {
        let n = t.data.len();
        t.data.copy_from_slice(&flat[offset..offset + n]);
        offset += n;
    }
    params::load(model, &named.into_iter().collect(), device)
}

struct FlattenGrads<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    flat: Vec<f32>,
    lens: Vec<usize>,
    present: Vec<bool>,
    _b: std::marker::PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for FlattenGrads<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let n: usize = param.val().dims().iter().product();
        let grad = self.grads.get::<B::InnerBackend, D>(param.id);
        self.present.push(grad.is_some());
        match grad {
            Some(g) => {
                let v = crate::host_reads::data(g)
                    .convert::<f32>()
                    .to_vec::<f32>()
                    .unwrap_or_default();
                self.flat.extend_from_slice(&v);
            }
            // A parameter without gradient on this rank still takes its place in the buffer.
            None => self.flat.extend(std::iter::repeat_n(0.0, n)),
        }
        self.lens.push(n);
    }
}

/// A model's gradients as one flat buffer in visiting order (zeros for a parameter without
/// one), with each parameter's size and whether it had a gradient.
pub(crate) struct FlatGrads {
    pub flat: Vec<f32>,
    pub lens: Vec<usize>,
    pub present: Vec<bool>,
}

/// Σ g² of each parameter's gradient, computed on the device and left there, in visiting
/// order (parameters without a gradient are left out; `None` without any). Read in one
/// transfer (one sync on a GPU), alone or with a step's other values: the single-process
/// gradient norm; [`flatten_grads`] would read every gradient, one sync each.
pub(crate) fn grad_squares<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    grads: &GradientsParams,
) -> Option<Tensor<B::InnerBackend, 1>> {
    struct Squares<'a, B: AutodiffBackend> {
        grads: &'a GradientsParams,
        sums: Vec<Tensor<B::InnerBackend, 1>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Squares<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            if let Some(g) = self.grads.get::<B::InnerBackend, D>(param.id) {
                self.sums.push(g.powi_scalar(2).sum());
            }
        }
    }
    let mut v = Squares::<B> {
        grads,
        sums: Vec::new(),
    };
    model.visit(&mut v);
    (!v.sums.is_empty()).then(|| Tensor::cat(v.sums, 0))
}

/// Every parameter's gradient in visiting order, concatenated.
pub(crate) fn flatten_grads<B: AutodiffBackend, M: AutodiffModule<B>>(
    model: &M,
    grads: &GradientsParams,
) -> FlatGrads {
    let mut v = FlattenGrads::<B> {
        grads,
        flat: Vec::new(),
        lens: Vec::new(),
        present: Vec::new(),
        _b: Default::default(),
    };
    model.visit(&mut v);
    FlatGrads {
        flat: v.flat,
        lens: v.lens,
        present: v.present,
    }
}

/// One shard's gradients, flat in visiting order, with one presence value per
/// parameter (1 where this shard computed a gradient). Shards of a step add up by [`add`]
/// (micro-batches of one rank, in order) and [`all_reduce`] (ranks): both are plain `f32` sums
/// of the same operands, so one rank over micro-batches `a, b` and two ranks holding `a` and
/// `b` produce the same bits (two-operand IEEE addition is commutative).
///
/// [`add`]: ShardGrads::add
/// [`all_reduce`]: ShardGrads::all_reduce
pub(crate) struct ShardGrads {
    flat: Vec<f32>,
    lens: Vec<usize>,
    present: Vec<f32>,
}

impl ShardGrads {
    /// The gradients of one shard (of its share of the global batch's loss: see
    /// `engine::Job::step`), so that their sum over shards is the global batch's gradient.
    pub(crate) fn new<B: AutodiffBackend, M: AutodiffModule<B>>(
        model: &M,
        grads: &GradientsParams,
    ) -> Self {
        let FlatGrads {
            flat,
            lens,
            present,
        } = flatten_grads(model, grads);
        let present = present.iter().map(|&p| if p { 1.0 } else { 0.0 }).collect();
        ShardGrads {
            flat,
            lens,
            present,
        }
    }

    /// Adds another shard of the same model (element by element, `self + other`).
    pub(crate) fn add(&mut self, other: &ShardGrads) -> Result<()> {
        if self.lens != other.lens {
            bail!("gradient shards of different models");
        }
        self.flat
            .iter_mut()
            .zip(&other.flat)
            .for_each(|(a, b)| *a += b);
        self.present
            .iter_mut()
            .zip(&other.present)
            .for_each(|(a, b)| *a += b);
        Ok(())
    }

    /// Sums over ranks in one fused all-reduce (values and presence together).
    pub(crate) fn all_reduce(
        mut self,
        comm: &dyn Collective,
        stats: &mut CommStats,
    ) -> Result<Self> {
        let n_values = self.flat.len();
        self.flat.extend_from_slice(&self.present);
        let t0 = Instant::now();
        comm.all_reduce_sum_f32(&mut self.flat)?;
        stats.time += t0.elapsed();
        stats.calls += 1;
        stats.bytes += (self.flat.len() * 4) as u64;
        self.present = self.flat.split_off(n_values);
        Ok(self)
    }

    /// Per-parameter gradients for the optimiser. A parameter that had a gradient on no shard
    /// (outside this step's graph everywhere) gets none, so the optimiser leaves it alone
    /// exactly as a single process would.
    pub(crate) fn into_grads<B: AutodiffBackend>(self, device: &B::Device) -> Result<Grads<B>> {
        let mut out = Vec::with_capacity(self.lens.len());
        let mut offset = 0;
        for (&n, &any) in self.lens.iter().zip(&self.present) {
            let slice = self.flat[offset..offset + n].to_vec();
            out.push((any > 0.0).then(|| {
                Tensor::<B::InnerBackend, 1>::from_data(TensorData::new(slice, [n]), device)
            }));
            offset += n;
        }
        if offset != self.flat.len() {
            bail!("gradient buffer size mismatch");
        }
        Ok(Grads::Flat(out))
    }
}

/// Stop requests in the order one is chosen when ranks disagree.
const STOP_SIGNALS: [i32; 4] = [
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGUSR1,
    signal_hook::consts::SIGUSR2,
];

/// Sums `values` over ranks in one small all-reduce that also carries every rank's pending stop
/// request (a signal, or `steps_done` reaching `budget`), so that all ranks stop after the same
/// step. Returns the stop reason they agree on: a signal any rank received (SIGTERM first), else
/// the step budget.
pub(crate) fn sum_with_stop(
    comm: &dyn Collective,
    values: &mut Vec<f64>,
    steps_done: u64,
    budget: Option<u64>,
) -> Result<Option<StopReason>> {
    let n = values.len();
    let mut votes = [0.0f64; STOP_SIGNALS.len() + 1];
    match stop::check(steps_done, budget) {
        Some(StopReason::Signal(s)) => {
            let i = STOP_SIGNALS.iter().position(|&x| x == s).unwrap_or(0);
            votes[i] = 1.0;
        }
        Some(StopReason::StepBudget) => votes[STOP_SIGNALS.len()] = 1.0,
        None => {}
    }
    values.extend_from_slice(&votes);
    comm.all_reduce_sum_f64(values)?;
    let votes = values.split_off(n);
    Ok(match votes.iter().position(|&v| v > 0.0) {
        Some(i) if i < STOP_SIGNALS.len() => Some(StopReason::Signal(STOP_SIGNALS[i])),
        Some(_) => Some(StopReason::StepBudget),
        None => None,
    })
}

/// The half-open range of positions `[lo, hi)` of a global batch `[start, end)` that `rank`
/// of `size` takes: contiguous, as equal as possible, lower ranks first.
pub(crate) fn shard(start: usize, end: usize, rank: usize, size: usize) -> (usize, usize) {
    let n = end - start;
    let base = n / size;
    let extra = n % size;
    let lo = start + rank * base + rank.min(extra);
    let hi = lo + base + usize::from(rank < extra);
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::{shard, sum_with_stop};
    use crate::dist::Single;

    #[test]
    fn stop_votes_ride_along_and_are_removed() {
        let mut v = vec![1.5, 2.0];
        assert_eq!(sum_with_stop(&Single, &mut v, 3, Some(5)).unwrap(), None);
        assert_eq!(v, [1.5, 2.0]);
        let r = sum_with_stop(&Single, &mut v, 5, Some(5)).unwrap();
        assert_eq!(r, Some(super::StopReason::StepBudget));
        assert_eq!(v, [1.5, 2.0]);
    }

    #[test]
    fn shards_cover_the_batch_once() {
        for (n, size) in [(64, 2), (7, 2), (1, 2), (10, 3), (5, 1)] {
            let mut covered = vec![];
            for r in 0..size {
                let (lo, hi) = shard(100, 100 + n, r, size);
                covered.extend(lo..hi);
            }
            assert_eq!(covered, (100..100 + n).collect::<Vec<_>>());
        }
    }
}

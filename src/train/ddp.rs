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
use crate::dist::Collective;

/// Time and bytes spent in gradient all-reduces (for benchmarks and logs).
#[derive(Debug, Default, Clone, Copy)]
pub struct CommStats {
    pub calls: u64,
    pub bytes: u64,
    pub time: Duration,
}

/// Copies rank 0's parameters to every rank.
pub fn broadcast_params<B: Backend, M: Module<B>>(
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
    _b: std::marker::PhantomData<B>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for FlattenGrads<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let n: usize = param.val().dims().iter().product();
        match self.grads.get::<B::InnerBackend, D>(param.id) {
            Some(g) => {
                let v = g
                    .into_data()
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

/// Sums `weight × gradient` over ranks in one fused all-reduce and returns the result as flat
/// per-parameter gradients. With weights `n_rank / n_global` this is the gradient of the mean
/// loss over the global batch, whatever the shard sizes.
pub fn all_reduce_grads<B: AutodiffBackend, M: AutodiffModule<B>>(
    comm: &dyn Collective,
    model: &M,
    grads: GradientsParams,
    weight: f32,
    device: &B::Device,
    stats: &mut CommStats,
) -> Result<Grads<B>> {
    let mut v = FlattenGrads::<B> {
        grads: &grads,
        flat: Vec::new(),
        lens: Vec::new(),
        _b: Default::default(),
    };
    model.visit(&mut v);
    let (mut flat, lens) = (v.flat, v.lens);
    if weight != 1.0 {
        flat.iter_mut().for_each(|x| *x *= weight);
    }
    let t0 = Instant::now();
    comm.all_reduce_sum_f32(&mut flat)?;
    stats.time += t0.elapsed();
    stats.calls += 1;
    stats.bytes += (flat.len() * 4) as u64;
    let mut out = Vec::with_capacity(lens.len());
    let mut offset = 0;
    for n in lens {
        let slice = flat[offset..offset + n].to_vec();
        out.push(Tensor::<B::InnerBackend, 1>::from_data(
            TensorData::new(slice, [n]),
            device,
        ));
        offset += n;
    }
    if offset != flat.len() {
        bail!("gradient buffer size mismatch");
    }
    Ok(Grads::Flat(out))
}

/// The half-open range of positions `[lo, hi)` of a global batch `[start, end)` that `rank`
/// of `size` takes: contiguous, as equal as possible, lower ranks first.
pub fn shard(start: usize, end: usize, rank: usize, size: usize) -> (usize, usize) {
    let n = end - start;
    let base = n / size;
    let extra = n % size;
    let lo = start + rank * base + rank.min(extra);
    let hi = lo + base + usize::from(rank < extra);
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use super::shard;

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

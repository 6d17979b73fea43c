//! A rank's shard of a training step: how it is cut into passes ([`Pieces`]), the passes'
//! inputs ([`pieces`]), where their predictions sit among the batch's topology slots, and
//! what a step returns ([`StepResult`]).

use burn::optim::GradientsParams;
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use super::super::protocol::fold_data::FoldData;
use super::super::seeds::subject_rng;
use super::super::settings::Sampling;
use super::batch::{HostRows, Mode, build_rows};
use crate::backend::BackendKind;
use crate::models::clg_ode::objective::{Objective, ObjectiveInput, Stats};

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
pub(super) fn topo_slots(x: &ObjectiveInput, first: usize) -> Vec<usize> {
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
pub(super) struct Piece {
    pub x: ObjectiveInput,
    pub first: usize,
}

/// The pieces of this rank's shard `order[lo..hi]` of the global batch that starts at
/// `order[start]`, built in parallel (each subject draws from its own generator).
#[allow(clippy::too_many_arguments)]
pub(super) fn pieces(
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
    // Staged from the scans on the device: their logs not computed on the host.
    let rows = if obj.targets_on_device && obj.resident.is_some() {
        HostRows::ByScan
    } else {
        HostRows::All
    };
    ranges
        .into_par_iter()
        .map(|(a, b)| {
            let mut rngs: Vec<ChaCha8Rng> = (a..b)
                .map(|pos| subject_rng(seed, fold, epoch, pos))
                .collect();
            let x = build_rows(
                data,
                &order[a..b],
                Mode::Train(&mut rngs),
                epoch,
                &obj.cfg,
                sampling,
                rows,
            );
            Piece {
                x,
                first: a - start,
            }
        })
        .collect()
}

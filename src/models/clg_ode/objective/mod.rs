//! The CLG-ODE objective (docs/clg-ode-model.md §3.6 and porting note §2): everything a batch of subjects is
//! scored with. The batch's encoder calls, forecasts and decodings run at once; then each term
//! is one small piece: the reconstructions ([`terms`]), KL, velocity and acceleration
//! ([`dynamics`]), the topology loss ([`topology`]), the new-edge module ([`innovation`]) and the
//! diagnostics ([`diagnostics`]). GradNorm's weights and the topology scale are the objective's
//! state ([`ObjectiveState`]), saved in checkpoints.
//!
//! Every term is a mean over its items (subjects, predictions, velocity items, …). A forward
//! returns each term's *sum* over this shard's items; the loss divides by the item counts of the
//! whole (global) batch, so the gradients of the shards of a data-parallel batch add up to the
//! batch's, and the statistics ([`stats::Stats`]) add up over ranks, batches and epochs.

pub(crate) mod config;
mod device_targets;
#[cfg(test)]
mod device_targets_tests;
pub(crate) mod diagnostics;
pub(crate) mod dynamics;
mod forward;
pub(crate) mod gradnorm;
mod indexed;
pub(crate) mod innovation;
pub(crate) mod input;
pub(crate) mod predict;
pub(crate) mod resident;
mod series;
pub(crate) mod staged;
pub(crate) mod stats;
pub(crate) mod target_sides;
#[cfg(test)]
mod taylor_tests;
pub(crate) mod term;
pub(crate) mod terms;
pub(crate) mod topology;
#[cfg(test)]
mod topology_batch_tests;
pub(crate) mod unread;

use burn::prelude::*;
use serde::{Deserialize, Serialize};

pub(crate) use config::{GradNormScope, ObjectiveConfig, TopologyConfig};
pub(crate) use gradnorm::GradNorm;
pub(crate) use input::{AccItem, ObjectiveInput, Pred, VelItem};
pub(crate) use stats::{Stat, Stats};
pub(crate) use term::{Part, PerTerm, Term};

use crate::models::clg_ode::ClgOde;
use crate::models::clg_ode::shared_ode::SharedOde;

/// Σ coefficient × mean over the terms with a coefficient (host side, from statistics).
pub(crate) fn total_of(coefs: &PerTerm<f64>, stats: &Stats) -> f64 {
    coefs
        .iter()
        .filter(|(_, c)| **c != 0.0)
        .map(|(t, c)| c * stats.mean(t))
        .sum()
}

/// What the objective carries from batch to batch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ObjectiveState {
    pub gradnorm: GradNorm,
    /// The topology scale S (starts at 1, updated after every training epoch).
    pub topo_scale: f64,
}

impl Default for ObjectiveState {
    fn default() -> Self {
        Self {
            gradnorm: GradNorm::default(),
            topo_scale: 1.0,
        }
    }
}

/// Weight of the i→k forecast in a training example (the reference's 0.5).
pub(crate) const FORECAST_K_WEIGHT: f64 = 0.5;

/// The objective: settings, the run facts it depends on, state and the topology probes.
#[derive(Debug, Clone)]
pub(crate) struct Objective {
    pub cfg: ObjectiveConfig,
    /// The decoder predicts on the start visit's support: a support-only weight loss and no
    /// edge loss (the model's `--fixed-support`).
    pub fixed_support: bool,
    /// Epochs of the run (the topology warm-up length and the epoch of test-time losses).
    pub max_epochs: usize,
    pub state: ObjectiveState,
    /// Seed of the topology probes.
    pub seed: u64,
    /// Probe vectors to use instead of drawing them (`[V, N]` row-major; for comparisons with
    /// the reference's own probes).
    pub fixed_probes: Option<Vec<f32>>,
    /// The fold's population drift per year (row-major N×N) the decoder's residual starts from
    /// (`--drift-head`), or none.
    pub population_drift: Option<Vec<f32>>,
    /// The fold's empirical-Bayes forecaster the decoder's residual starts from
    /// (`--eb-head`), or none.
    pub eb_forecaster: Option<std::sync::Arc<crate::models::eb_drift::EbParams>>,
    /// The topology loss's target sides computed so far (each target's once per run).
    pub target_sides: target_sides::TargetSides,
    /// The keep masks, edge indicators and log targets computed on the device
    /// ([`device_targets`]: no read of the predictions, one upload instead of three) rather
    /// than on the host; equal values. For backends that run a batch as one pass.
    pub targets_on_device: bool,
    /// The fold's scans held on the device, the staged batches' encoder inputs, start visits
    /// and targets gathered from them by index ([`resident`]); with `targets_on_device` only.
    pub resident: Option<std::sync::Arc<resident::Resident>>,
}

/// One forward pass over a batch shard.
pub(crate) struct Forward<B: Backend> {
    /// Per term, the sum over this shard's items `[1]`.
    pub sums: PerTerm<Tensor<B, 1>>,
    /// Host values and item counts of every statistic.
    pub stats: Stats,
    /// Weighted raw topology value of every prediction (for the scale update).
    pub topo_raw: Vec<f64>,
}

impl Objective {
    pub(crate) fn new(
        cfg: ObjectiveConfig,
        fixed_support: bool,
        max_epochs: usize,
        seed: u64,
    ) -> Self {
        Self {
            cfg,
            fixed_support,
            max_epochs,
            state: ObjectiveState::default(),
            seed,
            fixed_probes: None,
            population_drift: None,
            eb_forecaster: None,
            target_sides: Default::default(),
            targets_on_device: false,
            resident: None,
        }
    }

    /// Σ coefficient × sum / count over the terms (a term without items adds nothing).
    pub(crate) fn combine<B: Backend>(
        &self,
        sums: &PerTerm<Tensor<B, 1>>,
        coefs: &PerTerm<f64>,
        counts: &PerTerm<f64>,
        device: &B::Device,
    ) -> Tensor<B, 1> {
        let mut total = Tensor::<B, 1>::zeros([1], device);
        for (t, s) in sums.iter() {
            let (c, n) = (coefs[t], counts[t]);
            if c != 0.0 && n > 0.0 {
                total = total + s.clone().mul_scalar(c / n);
            }
        }
        total
    }

    /// The batch total on the host from (global) statistics.
    pub(crate) fn total(&self, stats: &Stats, epoch: usize, w: [f64; 2]) -> f64 {
        total_of(&self.coefficients(epoch, w), stats)
    }

    /// Whether the innovation module acts at epoch `e`.
    pub(crate) fn innovation_on(&self, epoch: usize) -> bool {
        let i = &self.cfg.innovation;
        self.fixed_support && i.enabled && i.k_new > 0 && epoch >= i.new_sparse_warmup_epochs
    }

    /// Scores a batch shard with `model` at `epoch` (0-based; evaluation uses `max_epochs`).
    pub(crate) fn forward<B: Backend>(
        &self,
        model: &ClgOde<B>,
        x: &ObjectiveInput,
        epoch: usize,
        device: &B::Device,
    ) -> Forward<B> {
        forward::forward_part(self, model, x, Part::All, epoch, device, None)
    }

    /// The terms of `part` only ([`Part`]): their sums and statistics, each built by the
    /// operations of [`Objective::forward`] (so bit for bit its values and gradients), the
    /// statistics that belong to them (the reconstruction's parts and the mask diagnostics to
    /// the manifold part, the raw topology values to the topology part). The three parts of
    /// [`Part::GRADNORM`] together make every statistic of the full forward once. With
    /// `shared` (from [`Objective::ode_kept`] of the same batch), the part's graph replays that
    /// integration instead of running its own, where the backend shares one.
    #[cfg(test)]
    pub(crate) fn forward_part<B: Backend>(
        &self,
        model: &ClgOde<B>,
        x: &ObjectiveInput,
        part: Part,
        epoch: usize,
        device: &B::Device,
        shared: Option<&SharedOde>,
    ) -> Forward<B> {
        forward::forward_part(self, model, x, part, epoch, device, shared)
    }

    /// [`Objective::forward_part`] with its host values left on the device, for a step to
    /// read with its others ([`unread`]).
    pub(crate) fn forward_unread<B: Backend>(
        &self,
        model: &ClgOde<B>,
        x: &ObjectiveInput,
        part: Part,
        epoch: usize,
        device: &B::Device,
        shared: Option<&SharedOde>,
    ) -> unread::Unread<B> {
        forward::forward_unread(self, model, x, part, epoch, device, shared)
    }

    /// The forecasts' integration of `x` run once by `model` (the inner module of the one
    /// trained) with its stages kept, for the parts' graphs to replay
    /// ([`crate::models::clg_ode::shared_ode`]); `None` without forecasts.
    pub(crate) fn ode_kept<B: Backend>(
        &self,
        model: &ClgOde<B>,
        x: &ObjectiveInput,
        device: &B::Device,
    ) -> Option<SharedOde> {
        predict::ode_kept(model, x, device)
    }
}

//! A forward's host values still on the device: the part's sums, the reconstruction's parts,
//! the topology's raw values and the edge logits, in one tensor, and how its statistics are
//! made of them once read ([`Finish`]). A forward reads them at once ([`Unread::read_now`]); a
//! training step leaves its passes' values unread and reads them together with its gradient
//! norms, one read a step (`train/gnn/clg_ode/step.rs`). The statistics are the same numbers
//! either way: the same f32 values, converted and added in the same order.

use burn::prelude::*;

use super::Forward;
use super::diagnostics::diagnostics_into;
use super::input::{ObjectiveInput, host};
use super::stats::{Stat, Stats};
use super::term::{PerTerm, Term};

/// A forward whose host values are not read yet.
pub(crate) struct Unread<B: Backend> {
    /// Per term, the sum over this shard's items `[1]`.
    pub sums: PerTerm<Tensor<B, 1>>,
    /// The host values, detached, in [`Finish`]'s order.
    pub values: Tensor<B, 1>,
    pub finish: Finish,
}

/// What the statistics of a forward are made of besides its host values.
pub(crate) struct Finish {
    /// The terms the part owns, in order: their sums come first.
    pub owned: Vec<Term>,
    /// The item counts of every term in this shard.
    pub counts: PerTerm<f64>,
    /// Whether the reconstruction's three parts follow.
    pub recon: bool,
    /// Whether the part owns the topology term.
    pub topo: bool,
    /// The predictions with a raw topology value, whose values follow.
    pub raw_rows: Vec<usize>,
    /// The edge logits' count (last), for the mask diagnostics.
    pub logit_len: usize,
    /// The innovation module's mean probability and kept edges per forecast it acted on.
    pub q_means: Vec<(f64, usize)>,
    /// The targets' upper-triangle edge indicators, for the diagnostics (manifold part).
    pub y: Option<Vec<f32>>,
    pub auprc: bool,
}

impl<B: Backend> Unread<B> {
    /// Reads the host values now (one read) and makes the statistics.
    pub(crate) fn read_now(self, x: &ObjectiveInput) -> Forward<B> {
        let all = host(self.values);
        let (stats, topo_raw) = self.finish.stats(x, &all);
        Forward {
            sums: self.sums,
            stats,
            topo_raw,
        }
    }
}

impl Finish {
    /// The statistics and the weighted raw topology value of every prediction, from the host
    /// values `all` (as read).
    pub(crate) fn stats(&self, x: &ObjectiveInput, all: &[f32]) -> (Stats, Vec<f64>) {
        let (head, logit) = all.split_at(all.len() - self.logit_len);
        let (head, raw) = head.split_at(head.len() - self.raw_rows.len());
        let values: Vec<f64> = head.iter().map(|&v| f64::from(v)).collect();
        let p = x.n_preds() as f64;
        let mut stats = Stats::default();
        for (i, &term) in self.owned.iter().enumerate() {
            stats.add(term, values[i], self.counts[term]);
        }
        if self.recon {
            let parts = [Stat::ReconMorph, Stat::ReconEdge, Stat::ReconWeight];
            for (k, part) in parts.into_iter().enumerate() {
                stats.add(part, values[self.owned.len() + k], p);
            }
        }
        let mut topo_raw = vec![0.0f64; x.n_preds()];
        for (&q, &v) in self.raw_rows.iter().zip(raw) {
            topo_raw[q] = v as f64;
        }
        if self.topo {
            stats.add(Stat::TopoRaw, topo_raw.iter().sum(), p);
        }
        for &(qm, kept) in &self.q_means {
            stats.add(Stat::NewQMean, qm, 1.0);
            stats.add(Stat::NewKeptMean, kept as f64, 1.0);
        }
        if let Some(y) = &self.y {
            diagnostics_into(&mut stats, x, logit, y, self.auprc);
        }
        (stats, topo_raw)
    }
}

//! What a CLG-ODE step adds up over ranks and an epoch over its steps: the objective's
//! statistics, the raw topology values (for the scale update at the epoch's end) and the
//! batch totals.

use serde::{Deserialize, Serialize};

use crate::engine::{EpochSums, StepSums};
use crate::models::clg_ode::objective::{PerTerm, Stats, total_of};

/// One step's sums. The topology values sit in one slot per prediction of the global batch
/// (3 per subject) with a presence flag: summed over ranks, every slot holds its one value.
#[derive(Debug, Clone, Default)]
pub(crate) struct GnnStep {
    pub stats: Stats,
    pub topo_values: Vec<f64>,
    pub topo_present: Vec<f64>,
    /// The coefficient of each loss term in this step's total (the same on every rank; not
    /// summed).
    pub coefficients: PerTerm<f64>,
}

impl GnnStep {
    /// Sums for a global batch of `subjects`, with the raw topology values of this rank's
    /// predictions by slot.
    pub(crate) fn new(
        stats: Stats,
        subjects: usize,
        topo: &[(usize, f64)],
        coefficients: PerTerm<f64>,
    ) -> Self {
        let slots = 3 * subjects;
        let mut topo_values = vec![0.0; slots];
        let mut topo_present = vec![0.0; slots];
        for &(slot, v) in topo {
            topo_values[slot] = v;
            topo_present[slot] = 1.0;
        }
        Self {
            stats,
            topo_values,
            topo_present,
            coefficients,
        }
    }
}

impl StepSums for GnnStep {
    fn flat(&self) -> Vec<f64> {
        let mut v = self.stats.v.clone();
        v.extend(&self.topo_values);
        v.extend(&self.topo_present);
        v
    }

    fn with_flat(self, global: &[f64]) -> Self {
        let (stats, rest) = global.split_at(Stats::LEN);
        let (values, present) = rest.split_at(rest.len() / 2);
        Self {
            stats: Stats::from_slice(stats),
            topo_values: values.to_vec(),
            topo_present: present.to_vec(),
            coefficients: self.coefficients,
        }
    }

    fn loss(&self) -> f64 {
        total_of(&self.coefficients, &self.stats)
    }
}

/// An epoch's sums.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct GnnEpoch {
    pub stats: Stats,
    /// Σ of the steps' totals, and the number of steps.
    pub total: f64,
    pub steps: f64,
    /// Raw topology values of the epoch's predictions.
    pub topo: Vec<f64>,
}

impl GnnEpoch {
    /// The mean step total (NaN without steps).
    pub(crate) fn train_loss(&self) -> f64 {
        if self.steps > 0.0 {
            self.total / self.steps
        } else {
            f64::NAN
        }
    }
}

impl EpochSums<GnnStep> for GnnEpoch {
    fn add(&mut self, step: &GnnStep) {
        self.stats.merge(&step.stats);
        self.total += step.loss();
        self.steps += 1.0;
        self.topo.extend(
            step.topo_values
                .iter()
                .zip(&step.topo_present)
                .filter(|(_, p)| **p > 0.0)
                .map(|(v, _)| *v),
        );
    }
}

//! The typed values a step adds up over ranks and an epoch over its steps. The engine sums a
//! step's values over ranks through their flat form and hands the global sums back to the
//! epoch's running sums, without knowing their layout.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// What one step adds up over the ranks of a data-parallel batch.
pub(crate) trait StepSums: Sized {
    /// The values that are summed over ranks, flat (the same length on every rank).
    fn flat(&self) -> Vec<f64>;
    /// These sums with their summed values replaced by `global` (the all-reduced [`flat`]).
    ///
    /// [`flat`]: StepSums::flat
    fn with_flat(self, global: &[f64]) -> Self;
    /// The step's loss from its global sums (shown, and checked for divergence).
    fn loss(&self) -> f64;
}

/// What an epoch adds up over its steps.
pub(crate) trait EpochSums<S>: Default + Clone + Serialize + DeserializeOwned {
    /// Adds a step's global sums.
    fn add(&mut self, step: &S);
}

/// A mean loss as a sum and a count: the step sums and epoch sums of a job whose only
/// statistic is its loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize)]
pub(crate) struct LossSums {
    pub sum: f64,
    pub count: f64,
}

impl LossSums {
    /// sum / count (the sum itself when nothing was counted).
    pub(crate) fn mean(&self) -> f64 {
        self.sum / self.count.max(1.0)
    }
}

impl StepSums for LossSums {
    fn flat(&self) -> Vec<f64> {
        vec![self.sum, self.count]
    }
    fn with_flat(self, global: &[f64]) -> Self {
        Self {
            sum: global[0],
            count: global[1],
        }
    }
    fn loss(&self) -> f64 {
        self.mean()
    }
}

impl EpochSums<LossSums> for LossSums {
    fn add(&mut self, step: &LossSums) {
        self.sum += step.sum;
        self.count += step.count;
    }
}

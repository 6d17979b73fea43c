//! The loss terms of the objective ([`Term`]), a value per term ([`PerTerm`]), and each
//! term's rule in one place ([`Objective::rule`]): its coefficient in the batch total at an
//! epoch and the items its mean is over.

use std::ops::{Index, IndexMut};

use super::Objective;
use super::indexed::indexed_enum;
use super::input::ObjectiveInput;
use super::stats::Stat;

indexed_enum! {
    /// A term of the batch total, its statistic beside it (its name and columns).
    ///
    /// The declaration is the list: [`Term::ALL`] (the reference's order, which is the order
    /// the total is summed in) and the size of [`PerTerm`] follow from it. Adding a loss term
    /// is one variant here with its [`Stat`] (a variant of that enum too), its rule in
    /// [`Objective::rule`] (the compiler asks for both) and its value in its family's function
    /// in `objective/forward.rs` (`sums[Term::X] = …`); see "Add a CLG-ODE loss term" in
    /// docs/architecture.md.
    pub(crate) enum Term => fn stat(self) -> Stat {
        /// Reconstruction of the start visits (morphology, edges, weights).
        Manifold => Stat::Manifold,
        Kl => Stat::Kl,
        Vel => Stat::Vel,
        Acc => Stat::Acc,
        /// Betti-curve topology loss.
        Topo => Stat::Topo,
        FullLog => Stat::FullLog,
        ZeroLog => Stat::ZeroLog,
        DeltaLog => Stat::DeltaLog,
        Density => Stat::Density,
        NewEdge => Stat::NewEdge,
        NewSparse => Stat::NewSparse,
        NewReg => Stat::NewReg,
    }
}

impl Term {
    /// The term's name in statistics and metrics columns (`train_<name>`): its statistic's.
    #[cfg(test)]
    pub(crate) const fn name(self) -> &'static str {
        self.stat().name()
    }
}

/// Which terms a forward pass builds: all of them, or one of the three parts GradNorm's step
/// scores separately (its two balanced terms, then everything else), whose gradients it adds
/// with their coefficients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    All,
    Manifold,
    Topo,
    /// Every term but the manifold and topology ones.
    Rest,
}

impl Part {
    /// GradNorm's parts, in the order of its weights, then the rest.
    pub(crate) const GRADNORM: [Part; 3] = [Part::Manifold, Part::Topo, Part::Rest];

    /// Whether this part builds term `t`.
    pub(crate) fn owns(self, t: Term) -> bool {
        match self {
            Part::All => true,
            Part::Manifold => t == Term::Manifold,
            Part::Topo => t == Term::Topo,
            Part::Rest => !matches!(t, Term::Manifold | Term::Topo),
        }
    }
}

impl From<Term> for Stat {
    fn from(t: Term) -> Stat {
        t.stat()
    }
}

/// One value per term, indexed by [`Term`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct PerTerm<T>([T; Term::COUNT]);

impl<T> PerTerm<T> {
    /// The value of every term from `f`.
    pub(crate) fn from_fn(mut f: impl FnMut(Term) -> T) -> Self {
        Self(Term::ALL.map(&mut f))
    }

    /// The values in [`Term::ALL`] order, for element-wise reductions (an all-reduce).
    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.0
    }

    /// Every term with its value, in [`Term::ALL`] order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Term, &T)> {
        Term::ALL.into_iter().zip(self.0.iter())
    }
}

impl<T: Default> Default for PerTerm<T> {
    fn default() -> Self {
        Self::from_fn(|_| T::default())
    }
}

impl<T> Index<Term> for PerTerm<T> {
    type Output = T;
    fn index(&self, t: Term) -> &T {
        &self.0[t.index()]
    }
}

impl<T> IndexMut<Term> for PerTerm<T> {
    fn index_mut(&mut self, t: Term) -> &mut T {
        &mut self.0[t.index()]
    }
}

/// What a term's mean is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Items {
    Subjects,
    Velocities,
    Accelerations,
    Predictions,
    /// The forecasts the innovation module acts on.
    Innovations,
}

/// A term's place in the total at an epoch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Rule {
    /// The coefficient of the term's mean.
    pub coefficient: f64,
    /// The items of the mean; `None`: the term is off (no items, not computed).
    pub items: Option<Items>,
}

impl Objective {
    /// The rule of `term` at `epoch` with GradNorm weights `w` (manifold, topology): each
    /// term's schedule, coefficient and items, in one place.
    pub(crate) fn rule(&self, term: Term, epoch: usize, w: [f64; 2]) -> Rule {
        let c = &self.cfg;
        let rule = |coefficient: f64, items: Option<Items>| Rule { coefficient, items };
        let predictions_if = |on: bool| on.then_some(Items::Predictions);
        match term {
            Term::Manifold => rule(c.lambda_manifold * w[0], Some(Items::Subjects)),
            Term::Kl => rule(c.lambda_kl.max(0.0), Some(Items::Subjects)),
            Term::Vel => rule(
                if c.vel_on(epoch) { c.lambda_vel } else { 0.0 },
                Some(Items::Velocities),
            ),
            Term::Acc => rule(
                if c.acc_on(epoch) { c.lambda_acc } else { 0.0 },
                Some(Items::Accelerations),
            ),
            Term::Topo => rule(
                c.topology.coefficient(epoch, self.max_epochs, w[1]),
                Some(Items::Predictions),
            ),
            Term::FullLog => rule(
                c.lambda_full_log_mse,
                predictions_if(c.lambda_full_log_mse > 0.0),
            ),
            Term::ZeroLog => {
                let factor = c.zero_log_factor(epoch);
                rule(
                    c.lambda_zero_log * factor,
                    predictions_if(c.lambda_zero_log > 0.0 && factor > 0.0),
                )
            }
            Term::DeltaLog => rule(c.lambda_delta_log, predictions_if(c.lambda_delta_log > 0.0)),
            Term::Density => rule(
                c.density_coefficient(epoch),
                predictions_if(c.density_on(epoch)),
            ),
            Term::NewEdge | Term::NewSparse | Term::NewReg => rule(1.0, Some(Items::Innovations)),
        }
    }

    /// The item count of every term for this shard (known before the forward, so that a
    /// data-parallel step can sum them over ranks first).
    pub(crate) fn counts(&self, x: &ObjectiveInput, epoch: usize) -> PerTerm<f64> {
        let innovations = super::predict::innovation_plans_possible(self, x, epoch);
        PerTerm::from_fn(|t| match self.rule(t, epoch, [1.0, 1.0]).items {
            None => 0.0,
            Some(Items::Subjects) => x.nb as f64,
            Some(Items::Velocities) => x.vel.len() as f64,
            Some(Items::Accelerations) => x.acc.len() as f64,
            Some(Items::Predictions) => x.n_preds() as f64,
            Some(Items::Innovations) => innovations as f64,
        })
    }

    /// The coefficient of each term's mean in the total at `epoch`, with GradNorm weights `w`
    /// (manifold, topology).
    pub(crate) fn coefficients(&self, epoch: usize, w: [f64; 2]) -> PerTerm<f64> {
        PerTerm::from_fn(|t| self.rule(t, epoch, w).coefficient)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_index_their_own_slot() {
        let mut v = PerTerm::from_fn(|t| t.name().len());
        assert_eq!(v[Term::Manifold], "manifold".len());
        v[Term::NewReg] = 0;
        assert_eq!(v.iter().last(), Some((Term::NewReg, &0)));
        let names: Vec<&str> = Term::ALL.iter().map(|t| t.name()).collect();
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(names.len(), unique.len());
    }
}

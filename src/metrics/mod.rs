//! Evaluation metrics, one file per family.
//!
//! * [`sc`]: the CLG-ODE test metrics on structural-connectivity predictions (docs/clg-ode-model.md §5.2).
//! * [`pr`]: precision–recall of a ranking (new edges scored by a forecast).
//! * [`skill`]: a forecast against the identity forecast.
//! * [`topology`]: exact Betti curves, degree and strength correlations.

pub(crate) mod absent;
pub mod paired;
pub mod pr;
pub(crate) mod sc;
pub(crate) mod skill;
pub(crate) mod topology;

pub(crate) use sc::ScKey;
#[cfg(test)]
pub(crate) use sc::ScMetrics;
pub(crate) use skill::Skill;
